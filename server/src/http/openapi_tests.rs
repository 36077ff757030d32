//! The OpenAPI document against the code: checked in up to date, routes and document in agreement
//! (each documented operation answered by its handler with exactly its documented query parameters,
//! no `/api` route registered around the document), and a structurally valid OpenAPI 3.1 document.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use serde_json::Value;
use tower::ServiceExt;

use super::openapi::{REGENERATE, document_json};
use crate::config::{Config, IngestConfig, IngestSecret};

const INGEST_SECRET: &str = "openapi-test-secret-0123456789";
/// A staff user named by the proxy header: staff need no database lookup to be scoped.
const STAFF_USER: &str = "root";

/// Every `/api/v1` operation. A route added to the router must be added here, and so to the document.
const EXPECTED_OPERATIONS: &[(&str, &str)] = &[
    ("GET", "/api/v1/gpus/busy"),
    ("GET", "/api/v1/gpus/held"),
    ("GET", "/api/v1/gpus/values"),
    ("GET", "/api/v1/health"),
    ("GET", "/api/v1/clusters"),
    ("GET", "/api/v1/jobs"),
    ("GET", "/api/v1/jobs/export"),
    ("GET", "/api/v1/jobs/{job_id}"),
    ("GET", "/api/v1/jobs/{job_id}/gpus"),
    ("GET", "/api/v1/jobs/{job_id}/logs"),
    ("GET", "/api/v1/jobs/{job_id}/profile"),
    ("GET", "/api/v1/jobs/{job_id}/report"),
    ("GET", "/api/v1/jobs/{job_id}/script"),
    ("GET", "/api/v1/jobs/{job_id}/output"),
    ("GET", "/api/v1/jobs/{job_id}/traces"),
    ("GET", "/api/v1/node_events"),
    ("GET", "/api/v1/nodes"),
    ("GET", "/api/v1/nodes/{name}"),
    ("GET", "/api/v1/node_health"),
    ("GET", "/api/v1/openapi.json"),
    ("GET", "/api/v1/tokens"),
    ("POST", "/api/v1/tokens"),
    ("DELETE", "/api/v1/tokens/{id}"),
    ("GET", "/api/v1/tokens/{id}/uses"),
    ("POST", "/api/v1/jobs/{job_id}/shares"),
    ("GET", "/api/v1/jobs/{job_id}/shares"),
    ("DELETE", "/api/v1/shares/{id}"),
    ("GET", "/api/v1/shared/{secret}"),
    ("POST", "/api/v1/gpu_allocations"),
    ("POST", "/api/v1/otlp/v1/logs"),
    ("POST", "/api/v1/traces"),
    ("POST", "/api/v1/traces/nsys"),
    ("POST", "/api/v1/jobs/{job_id}/traces/nsys"),
    ("GET", "/api/v1/me/notifications"),
    ("PUT", "/api/v1/me/notifications/rules/{rule}"),
    ("GET", "/api/v1/usage"),
    ("GET", "/api/v1/stats"),
    ("GET", "/api/v1/jobs/{job_id}/tags"),
    ("PUT", "/api/v1/jobs/{job_id}/tags/{tag}"),
    ("DELETE", "/api/v1/jobs/{job_id}/tags/{tag}"),
    ("GET", "/api/v1/jobs/{job_id}/previous"),
    ("GET", "/api/v1/compare"),
    ("GET", "/api/v1/advice"),
    ("GET", "/api/v1/me/advice"),
    ("PUT", "/api/v1/me/advice"),
];

const METHODS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch", "trace"];

fn repository_root() -> PathBuf {
    let server = Path::new(env!("CARGO_MANIFEST_DIR"));
    server.parent().unwrap_or(server).to_path_buf()
}

fn generated() -> Value {
    serde_json::from_str(&document_json()).expect("the generated document is JSON")
}

/// `(METHOD, path, operation)` for every operation of `document`.
fn operations(document: &Value) -> Vec<(String, String, Value)> {
    let paths = document["paths"].as_object().expect("`paths` is an object");
    let mut found = Vec::new();
    for (path, item) in paths {
        for method in METHODS {
            if let Some(operation) = item.get(*method) {
                found.push((method.to_uppercase(), path.clone(), operation.clone()));
            }
        }
    }
    found
}

/// The names of an operation's parameters in `location` (`query`, `path`).
fn parameters(operation: &Value, location: &str) -> BTreeSet<String> {
    operation["parameters"]
        .as_array()
        .map(|parameters| {
            parameters
                .iter()
                .filter(|parameter| parameter["in"] == location)
                .map(|parameter| parameter["name"].as_str().expect("a parameter has a name").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn checked_in_document_is_current() {
    let path = repository_root().join("docs/openapi.json");
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    let current = document_json();
    assert!(
        checked_in == current,
        "docs/openapi.json is not the document the code generates; regenerate it with `{REGENERATE}` and commit it"
    );
}

#[test]
fn documents_exactly_the_expected_operations() {
    let documented: BTreeSet<(String, String)> =
        operations(&generated()).into_iter().map(|(method, path, _)| (method, path)).collect();
    let expected: BTreeSet<(String, String)> =
        EXPECTED_OPERATIONS.iter().map(|(method, path)| (method.to_string(), path.to_string())).collect();
    assert_eq!(documented, expected, "documented operations differ from the API's routes");
}

/// The app with a lazy slurmdbd pool on a closed port (no request here waits on a database), an ingest
/// secret for the `lab` cluster and a staff user named by the proxy header.
fn app() -> axum::Router {
    let mut config = Config::default();
    config.slurmdbd.url = "mysql://reader:readerpw@127.0.0.1:1/slurm_acct_db".into();
    config.slurmdbd.acquire_timeout_ms = 300;
    config.access.user_header = Some("X-Remote-User".into());
    config.access.trusted_proxies = vec!["127.0.0.1".to_string().try_into().expect("an address")];
    config.access.staff_users = vec![STAFF_USER.into()];
    config.ingest = IngestConfig {
        secrets: [(config.clusters[0].as_str().to_string(), IngestSecret(INGEST_SECRET.into()))].into(),
        node_secrets: Vec::new(),
    };
    super::router(crate::serve::http_state(&config).expect("the test configuration is valid"))
}

/// Each documented operation reaches its handler (not the "no such route" fallback, not a 405), and
/// a handler that parses a query string knows exactly the query parameters its operation documents:
/// an unknown parameter's 400 lists the ones it accepts.
#[tokio::test]
async fn every_documented_operation_is_routed_with_its_parameters() {
    let app = app();
    for (method, path, operation) in operations(&generated()) {
        let mut uri = path.clone();
        for name in parameters(&operation, "path") {
            uri = uri.replace(&format!("{{{name}}}"), "1");
        }
        // Each operation gets the identity its security asks for, so it reaches its parameter parsing.
        let ingest = operation["security"].as_array().into_iter().flatten().any(|s| s.get("ingest_secret").is_some());
        let identity = if ingest {
            (header::AUTHORIZATION.as_str(), format!("Bearer {INGEST_SECRET}"))
        } else {
            ("X-Remote-User", STAFF_USER.to_string())
        };
        let request = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).expect("an HTTP method"))
            .uri(format!("{uri}?zz_undocumented=1"))
            .header(identity.0, identity.1)
            .body(Body::empty())
            .expect("a request");
        let mut request = request;
        // As if through the trusted proxy on loopback (`oneshot` has no peer address of its own).
        request.extensions_mut().insert(axum::extract::ConnectInfo(crate::http::peer::Peer::Tcp(
            std::net::SocketAddr::from(([127, 0, 0, 1], 40_000)),
        )));
        let response = app.clone().oneshot(request).await.expect("the router answers");
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("a body");
        let text = String::from_utf8_lossy(&body);
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path} is documented but not routed");
        assert!(
            !(status == StatusCode::NOT_FOUND && text.contains("no such route")),
            "{method} {path} is documented but not routed"
        );
        if path == "/api/v1/openapi.json" {
            assert_eq!(status, StatusCode::OK);
            assert!(text == document_json(), "the served document is not the generated one");
        }
        let documented = parameters(&operation, "query");
        if documented.is_empty() {
            continue;
        }
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {path} accepted an unknown parameter: {text}");
        let envelope: slurmlens_wire::ErrorEnvelope = serde_json::from_slice(&body).expect("the error envelope");
        assert_eq!(envelope.error.parameter.as_deref(), Some("zz_undocumented"), "{method} {path}: {text}");
        let (_, known) = envelope.error.message.split_once("known: ").expect("the 400 lists the known parameters");
        let accepted: BTreeSet<String> = known.split(", ").map(String::from).collect();
        assert_eq!(accepted, documented, "{method} {path}: accepted query parameters differ from the documented");
    }
}

/// Every `.rs` file under `folder`, recursively.
fn sources(folder: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).expect("a source folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            out.push(path);
        }
    }
}

/// `routes!` in `api_routes` is the only way an `/api` route is registered: a plain `.route(…)` with
/// an `/api` path (on an axum `Router` or passed through `OpenApiRouter`) would answer undocumented.
#[test]
fn no_api_route_bypasses_the_document() {
    let mut files = Vec::new();
    sources(&repository_root().join("server/src"), &mut files);
    sources(&repository_root().join("web/src"), &mut files);
    let needles: Vec<String> =
        ["route", "route_service", "nest", "nest_service"].iter().map(|call| format!(".{call}(\"{}", "/api")).collect();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a readable source file");
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        for needle in &needles {
            assert!(
                !compact.contains(needle.as_str()),
                "{} registers an /api route with `{needle}…`; declare it with `routes!` in http::api_routes",
                file.display()
            );
        }
    }
}

/// Every `"$ref"` string in `value`.
fn references(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child) {
                    ("$ref", Value::String(target)) => out.push(target.clone()),
                    _ => references(child, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| references(item, out)),
        _ => {}
    }
}

fn assert_valid_openapi_3_1(document: &Value) {
    // The document is what utoipa's model of OpenAPI 3.1 reads back, field for field.
    let typed: utoipa::openapi::OpenApi = serde_json::from_value(document.clone()).expect("an OpenAPI document");
    assert_eq!(&serde_json::to_value(&typed).expect("serialises"), document, "round trip through utoipa's model");
    assert_eq!(document["openapi"], "3.1.0");
    assert_eq!(document["info"]["title"], "slurmlens");
    assert_eq!(document["info"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(document["info"]["description"].as_str().is_some_and(|text| text.contains("Who sees what")));

    let schemas = document["components"]["schemas"].as_object().expect("component schemas");
    let mut targets = Vec::new();
    references(document, &mut targets);
    assert!(!targets.is_empty());
    for target in targets {
        let name = target.strip_prefix("#/components/schemas/").unwrap_or_else(|| panic!("`{target}` is not local"));
        assert!(schemas.contains_key(name), "`{target}` does not resolve");
    }

    let schemes = document["components"]["securitySchemes"].as_object().expect("security schemes");
    let tags: BTreeSet<&str> = document["tags"]
        .as_array()
        .expect("tags")
        .iter()
        .map(|tag| tag["name"].as_str().expect("a tag name"))
        .collect();
    let mut operation_ids = BTreeMap::new();
    for (method, path, operation) in operations(document) {
        let id = operation["operationId"].as_str().expect("an operationId").to_string();
        if let Some(other) = operation_ids.insert(id.clone(), format!("{method} {path}")) {
            panic!("operationId `{id}` of {method} {path} is also {other}'s");
        }
        let mut declared = parameters(&operation, "path");
        for segment in path.split('/').filter(|segment| segment.starts_with('{')) {
            let name = segment.trim_start_matches('{').trim_end_matches('}');
            assert!(declared.remove(name), "{method} {path} does not declare its path parameter `{name}`");
        }
        assert!(declared.is_empty(), "{method} {path} declares path parameters not in its path: {declared:?}");
        for parameter in operation["parameters"].as_array().into_iter().flatten() {
            if parameter["in"] == "path" {
                assert_eq!(parameter["required"], true, "{method} {path}: path parameters are required");
            }
            assert!(parameter["schema"].is_object(), "{method} {path}: parameter without a schema");
        }
        let responses = operation["responses"].as_object().expect("responses");
        let success = responses.keys().filter(|status| status.starts_with('2')).count();
        assert_eq!(success, 1, "{method} {path} documents {success} success answers, not one");
        for (status, response) in responses {
            assert!(response["description"].is_string(), "{method} {path} {status}: no description");
            if !status.starts_with('2') {
                let schema = &response["content"]["application/json"]["schema"]["$ref"];
                assert_eq!(schema, "#/components/schemas/ErrorEnvelope", "{method} {path} {status}: not the envelope");
            }
        }
        for requirement in operation["security"].as_array().expect("every operation states its security") {
            for name in requirement.as_object().expect("a security requirement").keys() {
                assert!(schemes.contains_key(name), "{method} {path}: unknown security scheme `{name}`");
            }
        }
        for tag in operation["tags"].as_array().expect("tags") {
            assert!(tags.contains(tag.as_str().expect("a tag")), "{method} {path}: undeclared tag {tag}");
        }
    }
}

#[test]
fn generated_document_is_valid_openapi_3_1() {
    assert_valid_openapi_3_1(&generated());
}

#[test]
fn checked_in_document_is_valid_openapi_3_1() {
    let text = std::fs::read_to_string(repository_root().join("docs/openapi.json")).expect("docs/openapi.json");
    assert_valid_openapi_3_1(&serde_json::from_str(&text).expect("docs/openapi.json is JSON"));
}

//! The OpenAPI 3.1 document of `/api/v1`: made from the same `routes!` declarations that register the
//! handlers ([`super::api_routes`]), served at `GET /api/v1/openapi.json`, printed by
//! `slurmlens openapi` and checked in as `docs/openapi.json`.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, LicenseBuilder, OpenApi, OpenApiBuilder, Ref, RefOr,
    ResponseBuilder,
};

/// The command that rewrites the checked-in document.
pub const REGENERATE: &str = "cargo run -q -p slurmlens-server -- openapi > docs/openapi.json";

const DESCRIPTION: &str = "\
Jobs of Slurm GPU clusters as `sacct` shows them, joined with their GPUs' and links' metrics and trace \
summaries. Times are RFC 3339 UTC; every failure is one envelope `{\"error\": {\"code\", \"message\", \
\"parameter\"}}`.

Who sees what: a user sees their own jobs and every job of the accounts they coordinate (sub-accounts \
included); staff (`access.staff_users`, `access.staff_groups`) see every job. The identity is a personal \
token (`Authorization: Bearer slt_…`, read-only, rate-limited, audited) or the user named by the site's \
SSO proxy in `access.user_header`, believed only from `access.trusted_proxies`. A request without an \
identity gets 401 everywhere but `/api/v1/health` and this document (where the site's \
`access.anonymous` is `staff`, as in a lab or demo, it sees everything). A job the viewer may not see is \
a 404, like a missing one. The ingest routes (`POST`) take the cluster's ingest secret instead of a \
person's identity; it reads nothing.";

/// The document, built once.
static DOCUMENT_JSON: LazyLock<String> = LazyLock::new(document_json);

/// Info, tags and security schemes; the paths and their schemas come from the routes.
pub(super) fn base() -> OpenApi {
    let info = InfoBuilder::new()
        .title("slurmlens")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(DESCRIPTION))
        .license(Some(LicenseBuilder::new().name("Apache-2.0").identifier(Some("Apache-2.0")).build()))
        .build();
    let tag = |name: &str, description: &str| TagBuilder::new().name(name).description(Some(description)).build();
    let components = ComponentsBuilder::new()
        .security_scheme(
            "token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("slt_…")
                    .description(Some(
                        "A personal API token: `Authorization: Bearer slt_…`. The viewer is the token's owner.",
                    ))
                    .build(),
            ),
        )
        .security_scheme(
            "user_header",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Remote-User",
                "The signed-in user's name, set by a trusted reverse proxy. The header is the site's \
                 `access.user_header` (the example configuration's is `X-Remote-User`).",
            ))),
        )
        .security_scheme(
            "munge",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Munge-Credential",
                "A MUNGE credential (`MUNGE:…:`) made as the submitting user with payload `slurmlens:advice`, \
                 verified by the site's munged (`[advice] munge_socket`): single-use and short-lived.",
            ))),
        )
        .security_scheme(
            "ingest_secret",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The cluster's ingest secret (`[ingest.secrets]`), shared with that cluster's Slurm \
                         plugin and trace collectors: `Authorization: Bearer <secret>`.",
                    ))
                    .build(),
            ),
        )
        .build();
    OpenApiBuilder::new()
        .info(info)
        .components(Some(components))
        .tags(Some([
            tag("jobs", "Jobs as slurmdbd records them, their reports, GPUs and traces; scoped to the viewer."),
            tag("nodes", "Nodes and their events; every signed-in viewer sees them."),
            tag("gpus", "GPUs at a moment: readings (every viewer) and holders (scoped to the viewer)."),
            tag("ingest", "Records sent by the Slurm plugin and trace collectors, with the cluster's ingest secret."),
            tag("tokens", "Personal API tokens: made and revoked through the site's sign-in, read-only, audited."),
            tag("shares", "Read-only links to one job's report: made by its owner, expiring, revocable, audited."),
            tag("notifications", "A signed-in user's notifications about their own jobs, and their opt-outs."),
            tag("usage", "Showback and statistics of a window: GPU-hours allocated and idle per account or user; scoped to the viewer."),
            tag("tags", "Job tags: set by a job's owner or staff, and by rules from the job's script and traces."),
            tag("advice", "Advice at submission from the user's own history, and the user's opt-out."),
            tag("service", "Health and this document; no identity needed."),
        ]))
        .build()
}

/// The whole document: the routes' operations, each also answering 500 with the envelope, and each
/// that a person's identity may call also 401 and 429 (the answers of [`super::auth::identify`]).
pub fn document() -> OpenApi {
    let mut document = super::api_routes().into_openapi();
    let envelope = |description: &str| {
        ResponseBuilder::new().description(description).content(
            "application/json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorEnvelope"))).build(),
        )
    };
    let internal = envelope("An internal error (`internal`); the body is opaque, the cause is logged").build();
    let unauthorized = envelope(
        "No identity (where the site's anonymous access is `nobody`), or a token that is unknown, expired or \
         revoked (`unauthorized`)",
    )
    .build();
    let retry_after = HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)))
        .description(Some("Seconds until the token may ask again"))
        .build();
    let rate_limited =
        envelope("The token is over its request rate (`rate_limited`)").header("Retry-After", retry_after).build();
    for item in document.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
            &mut item.trace,
        ];
        for operation in operations.into_iter().flatten() {
            let responses = &mut operation.responses.responses;
            responses.entry("500".into()).or_insert_with(|| RefOr::T(internal.clone()));
            let personal =
                operation.security.iter().flatten().any(|requirement| {
                    serde_json::to_value(requirement).is_ok_and(|value| value.get("token").is_some())
                });
            if personal {
                responses.entry("401".into()).or_insert_with(|| RefOr::T(unauthorized.clone()));
                responses.entry("429".into()).or_insert_with(|| RefOr::T(rate_limited.clone()));
            }
        }
    }
    document
}

/// The document as `docs/openapi.json` holds it: pretty-printed, keys in a stable order, a final newline.
pub fn document_json() -> String {
    // Serialising a document of plain maps and strings cannot fail.
    let mut json = document().to_pretty_json().expect("the OpenAPI document serialises to JSON");
    json.push('\n');
    json
}

/// `GET /api/v1/openapi.json`: this document.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "service",
    operation_id = "openapi",
    summary = "This OpenAPI document",
    responses((status = 200, description = "The OpenAPI 3.1 document of `/api/v1`", body = Object, content_type = "application/json")),
    security(()),
)]
pub(super) async fn serve_document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT_JSON.as_str())
}

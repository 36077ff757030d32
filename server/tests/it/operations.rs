//! The server's own operation (issue 17, part 6): `/metrics` parses as OpenMetrics text and carries the
//! route counters under their templates, the sources' latencies and the pools; only staff and the
//! scraper read it; JSON log lines carry each request's id.

use std::collections::BTreeMap;

use slurmlens::config::{AnonymousAccess, IngestSecret, TelemetryConfig, VictoriaMetricsConfig};

use crate::support::{TestApp, database_shared, fresh_database, lab, repo_root, spawn_app, test_config};

const TOKEN: &str = "it-scrape-token-0123456789";

/// One sample line: its name, labels and value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses `text` as OpenMetrics exposition and panics at the first line that is not: every sample
/// belongs to a family declared by `# TYPE` with a suffix its type allows, label values are quoted
/// and escaped, values are numbers, the text ends with `# EOF`, and each histogram's buckets rise
/// to its `+Inf` bucket, which equals its `_count`.
fn parse_exposition(text: &str) -> Vec<Sample> {
    let sample_line = regex::Regex::new(r#"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$"#).expect("a regex");
    let label_pair =
        regex::Regex::new(r#"^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"(,|$)"#).expect("a regex");
    let mut families: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last().copied(), Some("# EOF"), "the exposition ends with # EOF");
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.splitn(3, ' ');
            let (keyword, name, tail) = (words.next(), words.next(), words.next());
            match (keyword, name, tail) {
                (Some("TYPE"), Some(name), Some(kind)) => {
                    let known = ["counter", "gauge", "histogram", "info", "summary", "unknown", "stateset"];
                    assert!(known.contains(&kind), "unknown type in `{line}`");
                    assert!(families.insert(name.to_string(), kind.to_string()).is_none(), "{name} declared twice");
                }
                (Some("HELP" | "UNIT"), Some(_), _) => {}
                _ => panic!("not a metadata line: `{line}`"),
            }
            continue;
        }
        let captures = sample_line.captures(line).unwrap_or_else(|| panic!("not a sample line: `{line}`"));
        let name = captures[1].to_string();
        let family_type = families
            .iter()
            .filter(|(family, kind)| {
                let suffixes: &[&str] = match kind.as_str() {
                    "counter" => &["_total", "_created"],
                    "histogram" => &["_bucket", "_sum", "_count", "_created"],
                    "info" => &["_info"],
                    _ => &[""],
                };
                suffixes.iter().any(|suffix| name == format!("{family}{suffix}"))
            })
            .map(|(_, kind)| kind.clone())
            .next();
        assert!(family_type.is_some(), "sample `{name}` belongs to no declared family");
        let mut labels = BTreeMap::new();
        let mut rest = captures.get(3).map_or("", |m| m.as_str());
        while !rest.is_empty() {
            let pair = label_pair.captures(rest).unwrap_or_else(|| panic!("bad labels in `{line}`"));
            labels.insert(pair[1].to_string(), pair[2].replace("\\\"", "\"").replace("\\\\", "\\"));
            rest = &rest[pair[0].len()..];
        }
        let value = match &captures[4] {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            number => number.parse().unwrap_or_else(|_| panic!("not a number in `{line}`")),
        };
        samples.push(Sample { name, labels, value });
    }
    check_histograms(&families, &samples);
    samples
}

/// One histogram series' buckets: `(le, count)`.
type Buckets = Vec<(f64, f64)>;

/// Each histogram series: buckets never fall, and the `+Inf` bucket is the count.
fn check_histograms(families: &BTreeMap<String, String>, samples: &[Sample]) {
    for (family, _) in families.iter().filter(|(_, kind)| kind.as_str() == "histogram") {
        let mut series: BTreeMap<Vec<(String, String)>, Buckets> = BTreeMap::new();
        for sample in samples.iter().filter(|sample| sample.name == format!("{family}_bucket")) {
            let le: f64 = match sample.labels["le"].as_str() {
                "+Inf" => f64::INFINITY,
                bound => bound.parse().expect("a numeric le"),
            };
            let key = sample.labels.iter().filter(|(name, _)| *name != "le").map(|(k, v)| (k.clone(), v.clone()));
            series.entry(key.collect()).or_default().push((le, sample.value));
        }
        for (key, buckets) in series {
            assert!(buckets.windows(2).all(|pair| pair[0].0 < pair[1].0 && pair[0].1 <= pair[1].1), "{family} {key:?}");
            let count = samples
                .iter()
                .find(|s| {
                    s.name == format!("{family}_count")
                        && s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).eq(key.clone())
                })
                .unwrap_or_else(|| panic!("{family} {key:?} has no _count"));
            assert_eq!(buckets.last().map(|bucket| (bucket.0, bucket.1)), Some((f64::INFINITY, count.value)));
        }
    }
}

/// The value of the sample `name` whose labels include `labels`, if there is one.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|sample| {
            sample.name == name && labels.iter().all(|(k, v)| sample.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|sample| sample.value)
}

async fn scrape(app: &TestApp) -> Vec<Sample> {
    let response =
        app.client.get(format!("{}/metrics", app.base_url)).bearer_auth(TOKEN).send().await.expect("a scrape");
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().expect("ASCII").to_string();
    assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
    parse_exposition(&response.text().await.expect("a body"))
}

async fn operations_app(anonymous: AnonymousAccess) -> TestApp {
    let mut config = test_config(anonymous);
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: lab().var("SLURMLENS_VM_URL").to_string(),
        bearer_token: None,
        timeout_ms: 5000,
        readings_max_age_s: 3600,
    });
    config.database = Some(slurmlens::config::DatabaseConfig { url: fresh_database("operations").await });
    config.telemetry = TelemetryConfig { token: Some(IngestSecret(TOKEN.into())), listen: None };
    spawn_app(config).await
}

#[tokio::test]
async fn metrics_count_requests_by_route_template_and_time_every_source() {
    let _db = database_shared().await;
    let app = operations_app(AnonymousAccess::Nobody).await;
    let route = [("method", "GET"), ("route", "/api/v1/jobs/{job_id}"), ("status", "404")];
    let before = value(&scrape(&app).await, "slurmlens_http_requests_total", &route).unwrap_or(0.0);
    let slurmdbd_before =
        value(&scrape(&app).await, "slurmlens_source_request_duration_seconds_count", &[("source", "slurmdbd")]);

    for path in ["/api/v1/jobs/987654321?cluster=lab", "/api/v1/jobs/987654322?cluster=lab"] {
        assert_eq!(app.get_as("root", path).await.status(), 404, "{path}");
    }
    assert_eq!(app.get_as("root", "/api/v1/gpus/values?cluster=lab&metric=gpu_util").await.status(), 200);
    assert_eq!(app.get_as("root", "/no/such/page-of-alice").await.status(), 404);

    let samples = scrape(&app).await;
    let after = value(&samples, "slurmlens_http_requests_total", &route).expect("the route's counter");
    assert!(after >= before + 2.0, "two 404s of one template counted: {before} → {after}");
    assert!(value(&samples, "slurmlens_http_requests_total", &[("route", "unmatched"), ("status", "404")]).is_some());
    let latency = [("method", "GET"), ("route", "/api/v1/jobs/{job_id}"), ("le", "+Inf")];
    assert!(value(&samples, "slurmlens_http_request_duration_seconds_bucket", &latency).is_some_and(|n| n >= 2.0));
    // The template, never the path: no label holds a job id, a user's name or an unknown path.
    for sample in &samples {
        for text in sample.labels.values() {
            assert!(!text.contains("98765432") && !text.contains("alice") && !text.contains("/no/such"), "{sample:?}");
        }
    }
    let slurmdbd = value(&samples, "slurmlens_source_request_duration_seconds_count", &[("source", "slurmdbd")]);
    assert!(slurmdbd > slurmdbd_before, "slurmdbd's statements are timed: {slurmdbd_before:?} → {slurmdbd:?}");
    let vm = [("source", "victoriametrics"), ("le", "+Inf")];
    assert!(value(&samples, "slurmlens_source_request_duration_seconds_bucket", &vm).is_some_and(|n| n >= 1.0));
    for cluster in ["lab", "sakura"] {
        let pool = [("pool", "slurmdbd"), ("cluster", cluster)];
        assert_eq!(value(&samples, "slurmlens_db_pool_max_connections", &pool), Some(4.0), "{cluster}");
        let open = value(&samples, "slurmlens_db_pool_connections", &pool).expect("open connections");
        let idle = value(&samples, "slurmlens_db_pool_idle_connections", &pool).expect("idle connections");
        assert!(idle <= open && open <= 4.0, "{cluster}: {idle} idle of {open}");
    }
    assert_eq!(value(&samples, "slurmlens_db_pool_max_connections", &[("pool", "store")]), Some(8.0));
    assert_eq!(value(&samples, "slurmlens_heavy_requests_limit", &[]), Some(32.0));
    assert_eq!(value(&samples, "slurmlens_build_info", &[]), Some(1.0));
}

#[tokio::test]
async fn only_staff_and_the_scraper_read_metrics() {
    let _db = database_shared().await;
    let app = operations_app(AnonymousAccess::Nobody).await;
    let metrics = format!("{}/metrics", app.base_url);
    let anonymous = app.client.get(&metrics).send().await.expect("a response");
    assert_eq!(anonymous.status(), 401);
    let envelope: serde_json::Value = anonymous.json().await.expect("the error envelope");
    assert_eq!(envelope["error"]["code"], "unauthorized");
    assert_eq!(app.get_as("alice", "/metrics").await.status(), 403, "a user who is not staff");
    let wrong = app.client.get(&metrics).bearer_auth("it-scrape-token-012345678X").send().await.expect("a response");
    assert_eq!(wrong.status(), 401, "a wrong token");
    assert_eq!(app.get_as("root", "/metrics").await.status(), 200, "staff");
    scrape(&app).await;
    // Where anonymous viewers are staff (a lab, a demo), so is /metrics.
    let open = operations_app(AnonymousAccess::Staff).await;
    assert_eq!(open.get("/metrics").await.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn json_log_lines_carry_the_request_id_given_or_made() {
    // A process of its own, so its log is exactly what it writes, whatever other tests log meanwhile.
    let json = [
        ("SLURMLENS_ACCESS__ANONYMOUS", "staff"),
        ("SLURMLENS_LOG__FORMAT", "json"),
        ("SLURMLENS_LOG", "info,sqlx=warn,tower_http=debug"),
    ];
    let (mut child, address) = crate::support::serve_child(&json, true).await;
    let base_url = format!("http://{address}");
    let app = TestApp { base_url, client: reqwest::Client::new() };

    let given = "it-operations-4bf92f35";
    let response = app
        .client
        .get(format!("{}/api/v1/jobs/987654321?cluster=lab", app.base_url))
        .header("x-request-id", given)
        .send()
        .await
        .expect("a response");
    assert_eq!(response.status(), 404);
    assert_eq!(response.headers()["x-request-id"], given, "a well-formed id comes back");
    let forged = app
        .client
        .get(format!("{}/api/v1/health", app.base_url))
        .header("x-request-id", "forged id {\"level\":\"ERROR\"}")
        .send()
        .await
        .expect("a response");
    let made = forged.headers()["x-request-id"].to_str().expect("ASCII").to_string();
    assert!(
        made.len() == 32 && made.bytes().all(|b| b.is_ascii_hexdigit()),
        "a new id replaces a malformed one: {made}"
    );

    // The server's whole log, once it has stopped.
    child.start_kill().expect("stopping the server");
    let output = child.wait_with_output().await.expect("the server's output");
    let text = String::from_utf8(output.stderr).expect("UTF-8 log");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}")))
        .collect();
    let of = |id: &str| -> Vec<&serde_json::Value> {
        lines.iter().filter(|line| line["span"]["request_id"] == id).collect()
    };
    let given_lines = of(given);
    assert!(given_lines.len() >= 2, "the request's lines carry its id: {text}");
    for line in &given_lines {
        assert_eq!(line["span"]["route"], "/api/v1/jobs/{job_id}", "{line}");
        assert!(line["timestamp"].is_string() && line["level"].is_string() && line["message"].is_string(), "{line}");
    }
    assert!(given_lines.iter().any(|line| line["status"] == 404), "the response's line: {given_lines:?}");
    assert!(!of(&made).is_empty(), "the made id is logged too");
    assert!(!text.contains("forged"), "a malformed id never reaches the log");
}

/// The dashboard in the repository (`docs/grafana/slurmlens.json`) stays true: every metric its queries
/// name is one `/metrics` declares, and VictoriaMetrics accepts every query.
#[tokio::test]
async fn the_grafana_dashboard_queries_our_metrics_and_victoriametrics_reads_each() {
    let path = repo_root().join("docs/grafana/slurmlens.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("the dashboard")).expect("dashboard JSON");
    let mut queries: Vec<String> = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            queries.push(target["expr"].as_str().expect("a PromQL expr").to_string());
        }
    }
    for variable in dashboard["templating"]["list"].as_array().expect("variables") {
        if let Some(definition) = variable["definition"].as_str() {
            queries.push(definition.to_string());
        }
    }
    assert!(queries.len() >= 15, "the dashboard's queries: {queries:?}");

    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    // A request that reads slurmdbd: the families with per-route and per-source series then have one.
    assert_eq!(app.get("/api/v1/jobs?cluster=lab&limit=1").await.status(), 200);
    let text = app.get("/metrics").await.text().await.expect("the exposition");
    let families: Vec<(String, String)> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_once(' '))
        .map(|(name, kind)| (name.to_string(), kind.to_string()))
        .collect();
    let declared = |name: &str| {
        families.iter().any(|(family, kind)| {
            let suffixes: &[&str] = match kind.as_str() {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                "info" => &["_info"],
                _ => &[""],
            };
            suffixes.iter().any(|suffix| name == format!("{family}{suffix}"))
        })
    };
    let metric_name = regex::Regex::new(r"slurmlens_[a-z_]+").expect("a regex");
    let vm = lab().var("SLURMLENS_VM_URL");
    for query in &queries {
        for name in metric_name.find_iter(query) {
            assert!(declared(name.as_str()), "`{}` in `{query}` is not a metric /metrics serves", name.as_str());
        }
        let promql = query.replace("$__rate_interval", "1m").replace("$job", ".*").replace("$instance", ".*");
        let promql = match promql.strip_prefix("label_values(") {
            Some(rest) => rest.split_once(',').map_or(rest, |(selector, _)| selector).to_string(),
            None => promql,
        };
        let answer: serde_json::Value = app
            .client
            .post(format!("{vm}/api/v1/query"))
            .form(&[("query", promql.as_str())])
            .send()
            .await
            .expect("VictoriaMetrics answers")
            .json()
            .await
            .expect("JSON");
        assert_eq!(answer["status"], "success", "`{promql}`: {answer}");
    }
}

/// Ingested records are counted by kind (stored, and replayed duplicates), and a source that does not
/// answer is counted as `unavailable`.
#[tokio::test]
async fn ingest_and_source_failures_are_counted() {
    let _db = database_shared().await;
    let secret = "operations-ingest-secret-0123456789";
    let (app, _pool) = crate::support::ingest_app("operations_ingest", secret).await;
    let kind = |samples: &[Sample], kind: &str| value(samples, "slurmlens_ingested_records_total", &[("kind", kind)]);
    let before = scrape(&app).await;
    let record = |name: &str| {
        serde_json::json!({"interval_start": "2026-01-02T03:04:00Z", "interval_s": 10, "gpu": 0, "pid": 4242,
            "job_id": 7, "category": "kernel", "name": name, "count": 3, "total_ns": 3000, "max_ns": 1500})
    };
    let batch =
        serde_json::json!({"cluster": "lab", "node": "n1", "records": [record("k_one"), record("k_two")]}).to_string();
    for _ in 0..2 {
        let response = app
            .client
            .post(format!("{}/api/v1/traces", app.base_url))
            .bearer_auth(secret)
            .body(batch.clone())
            .send()
            .await
            .expect("a response");
        assert_eq!(response.status(), 200);
    }
    let after = scrape(&app).await;
    let grew = |name: &str| kind(&after, name).unwrap_or(0.0) - kind(&before, name).unwrap_or(0.0);
    assert!(grew("traces") >= 2.0, "two summaries stored: {}", grew("traces"));
    assert!(grew("trace_duplicates") >= 2.0, "a replay of two: {}", grew("trace_duplicates"));

    // Nothing listens on the discard port: VictoriaMetrics is unavailable, the grid degrades.
    let mut config = test_config(AnonymousAccess::Staff);
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: "http://127.0.0.1:9".into(),
        bearer_token: None,
        timeout_ms: 2000,
        readings_max_age_s: 3600,
    });
    let down = spawn_app(config).await;
    let unavailable = [("source", "victoriametrics"), ("kind", "unavailable")];
    let failures_before = value(&scrape(&down).await, "slurmlens_source_errors_total", &unavailable);
    down.get("/api/v1/gpus/values?cluster=lab&metric=gpu_util").await;
    let failures = value(&scrape(&down).await, "slurmlens_source_errors_total", &unavailable);
    assert!(failures > failures_before, "VictoriaMetrics' failure is counted: {failures_before:?} → {failures:?}");
}

/// `[telemetry] listen`'s router: `/metrics` without sign-in, and nothing else.
#[tokio::test]
async fn the_metrics_listener_serves_metrics_alone() {
    let config = test_config(AnonymousAccess::Nobody);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("port 0");
    let address = listener.local_addr().expect("an address");
    let router = slurmlens::http::metrics_router(slurmlens::serve::http_state(&config).expect("state"));
    let limits = slurmlens::serve::ConnectionLimits::from_config(&config);
    tokio::spawn(slurmlens::serve::serve_router(listener.into(), router, limits, std::future::pending()));
    let client = reqwest::Client::new();
    let metrics = client.get(format!("http://{address}/metrics")).send().await.expect("a response");
    assert_eq!(metrics.status(), 200);
    assert!(metrics.headers().contains_key("x-request-id"));
    parse_exposition(&metrics.text().await.expect("a body"));
    let other = client.get(format!("http://{address}/api/v1/jobs")).send().await.expect("a response");
    assert_eq!(other.status(), 404, "the API is not served there");
}

/// `serve` never alters slurmlens's schema (its database user needs no right to): on a database
/// behind this release it refuses to start, naming the migrations and `slurmlens migrate`, and
/// creates nothing; once `slurmlens migrate` ran, the same server starts.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_on_a_database_behind_its_release_names_the_migrations_and_starts_after_migrate() {
    let url = crate::support::empty_database("ops_schema_behind").await;
    let run = |command: &str| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_slurmlens"));
        for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("SLURMLENS_")) {
            child.env_remove(name);
        }
        child
            .arg(command)
            .env("SLURMLENS_LISTEN", "127.0.0.1:0")
            .env("SLURMLENS_CLUSTERS", "lab")
            .env("SLURMLENS_SLURMDBD__URL", lab().var("SLURMLENS_SLURMDBD_URL"))
            .env("SLURMLENS_DATABASE__URL", &url)
            .env("SLURMLENS_REPORT__ARCHIVE_INTERVAL_S", "0")
            .output()
            .unwrap_or_else(|e| panic!("slurmlens {command}: {e}"))
    };
    let tables = || async {
        let pool = sqlx::MySqlPool::connect(&url).await.expect("the test database");
        let (count,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()")
                .fetch_one(&pool)
                .await
                .expect("counting tables");
        pool.close().await;
        count
    };

    let refused = run("serve");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "serve started on an empty schema: {stderr}");
    assert!(stderr.contains("run `slurmlens migrate`"), "{stderr}");
    assert!(stderr.contains("0001_gpu_allocations") && stderr.contains("0015_report_measured_share"), "{stderr}");
    assert_eq!(tables().await, 0, "serve created nothing");

    let migrated = run("migrate");
    assert!(migrated.status.success(), "{}", String::from_utf8_lossy(&migrated.stderr));
    assert!(tables().await > 0);
    let (_child, address) = crate::support::serve_child(&[("SLURMLENS_DATABASE__URL", &url)], false).await;
    let health = reqwest::get(format!("http://{address}/api/v1/health")).await.expect("health");
    assert_eq!(health.status(), 200, "{:?}", health.text().await);
}

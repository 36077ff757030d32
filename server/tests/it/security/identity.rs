//! Who the server believes: nothing by default, a proxy only from where the site says and with its
//! secret when the site set one, identity headers once each; tokens limited per user and per peer,
//! made only from JSON, revocable by staff; the configuration printed without its passwords; on a Unix
//! socket, whoever its mode lets connect is the proxy.

use std::io::Write;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use slurmlens::config::{AnonymousAccess, Config, DatabaseConfig, ListenAddress};
use slurmlens::store::Store;
use slurmlens_wire::{CreatedToken, TokenInfo};

use crate::support::{TestApp, database_shared, fresh_database, lab, spawn_app, test_config};

/// A configuration file with `access` as its `[access]` table, on the lab's slurmdbd and an ephemeral
/// port (the default 8080 may be the demo's), loaded as `slurmlens serve` loads it.
fn load_with_access(access: &str) -> Result<Config, String> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("slurmlens-identity-{}-{n}.toml", std::process::id()));
    let mut file = std::fs::File::create(&path).expect("a temporary file");
    let slurmdbd = lab().var("SLURMLENS_SLURMDBD_URL");
    write!(
        file,
        "clusters = [\"lab\"]\nlisten = \"127.0.0.1:0\"\n[slurmdbd]\nurl = \"{slurmdbd}\"\nmax_connections = 4\nacquire_timeout_ms = 1500\n\
         [access]\nanonymous = \"nobody\"\nstaff_users = [\"root\"]\n{access}\n"
    )
    .expect("writing it");
    let loaded = Config::load(Some(&path)).map_err(|error| error.to_string());
    let _ = std::fs::remove_file(&path);
    loaded
}

/// `path` asked from loopback with these headers (each pair sent as written, repeats included).
async fn get_with(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> u16 {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).expect("name"),
            HeaderValue::from_str(value).expect("value"),
        );
    }
    let response = app.client.get(format!("{}{path}", app.base_url)).headers(map).send().await.expect("request");
    response.status().as_u16()
}

const STAFF_ONLY: &str = "/api/v1/jobs?cluster=lab&user=nobody-at-all&limit=1";

#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_trusted_by_default_so_a_local_user_cannot_pose_as_the_proxy() {
    // The site names its user header and nothing else: on a shared host any local user could send it
    // from loopback. The server refuses to start so, rather than believing them.
    let refused = load_with_access("user_header = \"X-Remote-User\"").expect_err("loopback is not trusted by default");
    assert!(refused.contains("trusted_proxies"), "{refused}");
    // Trusting another address: root's header from loopback is an anonymous request (401).
    let config = load_with_access("user_header = \"X-Remote-User\"\ntrusted_proxies = \"10.9.9.9\"").expect("loads");
    let app = spawn_app(config).await;
    assert_eq!(get_with(&app, STAFF_ONLY, &[("X-Remote-User", "root")]).await, 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_proxy_secret_the_headers_count_only_beside_it() {
    let config = load_with_access(
        "user_header = \"X-Remote-User\"\ngroups_header = \"X-Remote-Groups\"\ntrusted_proxies = [\"127.0.0.1\"]\n\
         proxy_secret_header = \"X-Proxy-Secret\"\nproxy_secret = \"0123456789abcdef-proxy\"",
    )
    .expect("loads");
    let app = spawn_app(config).await;
    let secret = ("X-Proxy-Secret", "0123456789abcdef-proxy");
    assert_eq!(get_with(&app, STAFF_ONLY, &[("X-Remote-User", "root")]).await, 401, "no secret: anonymous");
    let wrong = ("X-Proxy-Secret", "0123456789abcdef-prox");
    assert_eq!(get_with(&app, STAFF_ONLY, &[("X-Remote-User", "root"), wrong]).await, 401, "a wrong secret");
    assert_eq!(get_with(&app, STAFF_ONLY, &[("X-Remote-User", "root"), secret, secret]).await, 401, "sent twice");
    assert_eq!(get_with(&app, STAFF_ONLY, &[("X-Remote-User", "root"), secret]).await, 200, "the proxy itself");
}

#[tokio::test(flavor = "multi_thread")]
async fn identity_headers_sent_twice_are_refused_and_groups_alone_name_nobody() {
    let app = spawn_app(test_config(AnonymousAccess::Nobody)).await;
    // A proxy that appends leaves the client's copy first: never pick one.
    assert_eq!(get_with(&app, STAFF_ONLY, &[("X-Remote-User", "root"), ("X-Remote-User", "alice")]).await, 400);
    let twice = [("X-Remote-User", "alice"), ("X-Remote-Groups", "hpc-staff"), ("X-Remote-Groups", "users")];
    assert_eq!(get_with(&app, STAFF_ONLY, &twice).await, 400);
    // A groups header the proxy did not strip names nobody without the user header beside it.
    assert_eq!(get_with(&app, STAFF_ONLY, &[("X-Remote-Groups", "hpc-staff")]).await, 401);
    assert_eq!(get_with(&app, STAFF_ONLY, &[("X-Remote-User", "alice"), ("X-Remote-Groups", "hpc-staff")]).await, 200);
}

/// `path` asked over the Unix socket at `socket` (curl: reqwest speaks TCP only), with `headers`: the
/// status.
fn get_on_socket(socket: &std::path::Path, path: &str, headers: &[(&str, &str)]) -> u16 {
    let mut curl = std::process::Command::new("curl");
    curl.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20", "--unix-socket"]).arg(socket);
    for (name, value) in headers {
        curl.arg("-H").arg(format!("{name}: {value}"));
    }
    let out = curl.arg(format!("http://slurmlens{path}")).output().expect("curl runs");
    String::from_utf8_lossy(&out.stdout).parse().unwrap_or_else(|_| panic!("no status: {out:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_unix_socket_the_proxy_is_whoever_its_mode_lets_connect() {
    use std::os::unix::fs::PermissionsExt;
    let socket = std::env::temp_dir().join(format!("slurmlens-identity-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    // No trusted proxy: over TCP the headers would be dropped.
    let mut config = test_config(AnonymousAccess::Nobody);
    config.access.trusted_proxies.clear();
    config.listen = ListenAddress::Unix(socket.clone());
    // A socket an earlier run left behind is replaced.
    drop(std::os::unix::net::UnixListener::bind(&socket).expect("a stale socket"));
    let listener = slurmlens::serve::bind(&config).await.expect("binding the socket");
    let mode = std::fs::metadata(&socket).expect("the socket").permissions().mode() & 0o777;
    assert_eq!(mode, 0o660, "the server's user and group only");
    let another = slurmlens::serve::bind(&config).await.err().map(|error| format!("{error:#}"));
    assert!(another.is_some_and(|error| error.contains("another server listens")), "a live socket stays");

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let limits = slurmlens::serve::ConnectionLimits::from_config(&config);
    let router = slurmlens::http::router(slurmlens::serve::http_state(&config).expect("app state"));
    let server = tokio::spawn(slurmlens::serve::serve_router(listener, router, limits, async {
        let _ = stopped.await;
    }));
    let path = "/api/v1/jobs?cluster=lab&limit=1";
    let socket_at = socket.clone();
    let statuses = tokio::task::spawn_blocking(move || {
        [
            get_on_socket(&socket_at, path, &[]),
            get_on_socket(&socket_at, path, &[("X-Remote-User", "alice")]),
            get_on_socket(&socket_at, path, &[("X-Remote-User", "alice"), ("X-Remote-User", "root")]),
        ]
    })
    .await
    .expect("curl");
    assert_eq!(statuses, [401, 200, 400], "anonymous, the proxy's user, a header sent twice");

    let _ = stop.send(());
    server.await.expect("the server task").expect("the server stops cleanly");
    assert!(!socket.exists(), "the socket goes with the server");
    // Anything else at the path is left as it is.
    std::fs::write(&socket, b"not a socket").expect("a file");
    let refused = slurmlens::serve::bind(&config).await.err().map(|error| format!("{error:#}"));
    assert!(refused.is_some_and(|error| error.contains("not a socket")));
    assert_eq!(std::fs::read(&socket).expect("the file"), b"not a socket");
    std::fs::remove_file(&socket).expect("cleaning up");
}

async fn app_with_tokens(name: &str, per_minute: u32, max_live: u32) -> (TestApp, Store) {
    let url = fresh_database(name).await;
    let mut config = test_config(AnonymousAccess::Nobody);
    config.database = Some(DatabaseConfig { url: url.clone() });
    config.access.tokens.per_minute = per_minute;
    config.access.tokens.max_live_per_user = max_live;
    let store = Store::new(&url, std::time::Duration::from_secs(5)).expect("store");
    (spawn_app(config).await, store)
}

async fn make_token(app: &TestApp, user: &str, name: &str) -> reqwest::Response {
    app.client
        .post(format!("{}/api/v1/tokens", app.base_url))
        .header("X-Remote-User", user)
        .json(&serde_json::json!({"name": name, "expires_in_days": 7}))
        .send()
        .await
        .expect("create token")
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_tokens_are_limited_by_peer_before_any_lookup() {
    let _db = database_shared().await;
    let (app, _store) = app_with_tokens("peer_rate", 3, 20).await;
    // Three a minute per user, so twelve per peer: the thirteenth unknown token is a 429 that the
    // database never sees.
    let unknown = format!("slt_{}", "0".repeat(64));
    let mut statuses = Vec::new();
    for _ in 0..13 {
        statuses.push(
            app.client
                .get(format!("{}/api/v1/nodes?cluster=lab", app.base_url))
                .bearer_auth(&unknown)
                .send()
                .await
                .expect("request")
                .status()
                .as_u16(),
        );
    }
    assert_eq!(&statuses[..12], &[401; 12]);
    assert_eq!(statuses[12], 429, "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_are_made_from_json_only_and_a_user_holds_a_bounded_number() {
    let _db = database_shared().await;
    let (app, store) = app_with_tokens("token_cap", 600, 2).await;
    // A cross-site HTML form can send text/plain without a preflight; it makes nothing.
    let form = app
        .client
        .post(format!("{}/api/v1/tokens", app.base_url))
        .header("X-Remote-User", "carol")
        .header("content-type", "text/plain")
        .body(r#"{"name": "planted"}"#)
        .send()
        .await
        .expect("post");
    assert_eq!(form.status(), 400);
    assert_eq!(make_token(&app, "carol", "one").await.status(), 201);
    assert_eq!(make_token(&app, "carol", "two").await.status(), 201);
    let third = make_token(&app, "carol", "three").await;
    assert_eq!(third.status(), 400);
    assert!(third.text().await.expect("body").contains("revoke one first"));
    assert_eq!(store.tokens_of("carol").await.expect("tokens").len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn staff_list_and_revoke_anyones_token_and_nobody_else_can() {
    let _db = database_shared().await;
    let (app, _store) = app_with_tokens("staff_tokens", 600, 20).await;
    let dave: CreatedToken = make_token(&app, "dave", "leaked").await.json().await.expect("created");
    let as_user = |user: &'static str, method: reqwest::Method, path: String| {
        app.client.request(method, format!("{}{path}", app.base_url)).header("X-Remote-User", user).send()
    };
    let all = as_user("erin", reqwest::Method::GET, "/api/v1/tokens?all=true".into()).await.expect("list");
    assert_eq!(all.status(), 403, "only staff see everyone's tokens");
    let listed: Vec<TokenInfo> = as_user("root", reqwest::Method::GET, "/api/v1/tokens?all=true".into())
        .await
        .expect("list")
        .json()
        .await
        .expect("tokens");
    assert!(listed.iter().any(|token| token.id == dave.id && token.user == "dave"), "{listed:?}");
    let by_erin =
        as_user("erin", reqwest::Method::DELETE, format!("/api/v1/tokens/{}", dave.id)).await.expect("revoke");
    assert_eq!(by_erin.status(), 404);
    let uses = as_user("root", reqwest::Method::GET, format!("/api/v1/tokens/{}/uses", dave.id)).await.expect("uses");
    assert_eq!(uses.status(), 200, "staff read anyone's audit log");
    let by_staff =
        as_user("root", reqwest::Method::DELETE, format!("/api/v1/tokens/{}", dave.id)).await.expect("revoke");
    assert_eq!(by_staff.status(), 204);
    let after = app
        .client
        .get(format!("{}/api/v1/nodes?cluster=lab", app.base_url))
        .bearer_auth(&dave.token)
        .send()
        .await
        .expect("request");
    assert_eq!(after.status(), 401, "the revoked token is dead");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_audit_log_keeps_its_configured_days() {
    let _db = database_shared().await;
    let url = fresh_database("audit_retention").await;
    let store = Store::new(&url, std::time::Duration::from_secs(5)).expect("store");
    let pool = sqlx::MySqlPool::connect(&url).await.expect("pool");
    let now = chrono::Utc::now();
    for days in [1, 10, 500] {
        sqlx::query("INSERT INTO api_token_uses (token_id, used_at, method, path, status, peer) VALUES (1, ?, 'GET', '/', 200, '')")
            .bind(now - chrono::Duration::days(days))
            .execute(&pool)
            .await
            .expect("insert");
    }
    let gone = store.prune_token_uses(now - chrono::Duration::days(400)).await.expect("prune");
    assert!(gone >= 1);
    let (left,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM api_token_uses WHERE used_at < ?")
        .bind(now - chrono::Duration::days(400))
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(left, 0);
}

#[test]
fn the_configuration_is_printed_without_passwords_or_secrets() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_slurmlens"))
        .arg("config")
        .env("SLURMLENS_SLURMDBD__URL", "mysql://reader:hunter2-db@db.example:3306/slurm_acct_db")
        .env("SLURMLENS_DATABASE__URL", "mysql://slurmlens:hunter3-store@db.example/slurmlens")
        .env("SLURMLENS_VICTORIAMETRICS__URL", "http://vm:hunter4-vm@vm.example:8428")
        .env("SLURMLENS_ACCESS__TRUSTED_PROXIES", "127.0.0.1")
        .env("SLURMLENS_ACCESS__PROXY_SECRET_HEADER", "X-Proxy-Secret")
        .env("SLURMLENS_ACCESS__PROXY_SECRET", "hunter5-proxy-secret")
        .output()
        .expect("running slurmlens config");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(text.contains("mysql://reader:***@db.example"), "{text}");
    assert!(!text.contains("hunter"), "a password or secret printed:\n{text}");
}

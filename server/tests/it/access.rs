//! Who sees what, over every endpoint: own user, same-account user, other-account user, coordinator,
//! staff (by name and by group), anonymous, expired token, revoked token, and an identity header
//! forged from a peer that is not the trusted proxy. Plus tokens' life cycle, audit log and rate limit.

use std::net::{IpAddr, Ipv4Addr};

use chrono::{Duration, SecondsFormat, Utc};
use slurmlens::config::{AnonymousAccess, DatabaseConfig, VictoriaMetricsConfig};
use slurmlens::domain::token::{TokenName, TokenSecret};
use slurmlens::store::Store;
use slurmlens_wire::{CreatedToken, TokenInfo, TokenUse};

use crate::support::{TestApp, database_shared, fresh_database, lab, mix_job, spawn_app, test_config};

/// One way of asking.
#[derive(Debug, Clone)]
enum Who {
    /// Through the trusted proxy (127.0.0.1), with this user and groups header.
    Proxy(&'static str, &'static str),
    Token(String),
    Anonymous,
    /// The proxy's header, sent from 127.0.0.2, which is not a trusted proxy.
    Forged(&'static str),
}

async fn ask(app: &TestApp, who: &Who, method: reqwest::Method, path: &str) -> reqwest::Response {
    let client = match who {
        Who::Forged(_) => reqwest::Client::builder()
            .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))
            .build()
            .expect("client bound to 127.0.0.2"),
        _ => app.client.clone(),
    };
    let mut request = client.request(method, format!("{}{path}", app.base_url));
    request = match who {
        Who::Proxy(user, groups) => request.header("X-Remote-User", *user).header("X-Remote-Groups", *groups),
        Who::Token(token) => request.bearer_auth(token),
        Who::Anonymous => request,
        Who::Forged(user) => request.header("X-Remote-User", *user).header("X-Remote-Groups", "hpc-staff"),
    };
    request.send().await.expect("request reaches the server")
}

async fn get(app: &TestApp, who: &Who, path: &str) -> (u16, String) {
    let response = ask(app, who, reqwest::Method::GET, path).await;
    (response.status().as_u16(), response.text().await.unwrap_or_default())
}

async fn app_with_store(name: &str, per_minute: u32) -> (TestApp, Store) {
    let url = fresh_database(name).await;
    let mut config = test_config(AnonymousAccess::Nobody);
    config.database = Some(DatabaseConfig { url: url.clone() });
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: lab().var("SLURMLENS_VM_URL").to_string(),
        timeout_ms: 3000,
        readings_max_age_s: 1800,
        bearer_token: None,
    });
    config.report.archive_interval_s = 0;
    config.access.trusted_proxies = vec!["127.0.0.1".to_string().try_into().expect("address")];
    config.access.tokens.per_minute = per_minute;
    let store = Store::new(&url, std::time::Duration::from_secs(5)).expect("store");
    (spawn_app(config).await, store)
}

async fn make_token(app: &TestApp, user: &'static str, name: &str) -> CreatedToken {
    let response = app
        .client
        .post(format!("{}/api/v1/tokens", app.base_url))
        .header("X-Remote-User", user)
        .json(&serde_json::json!({"name": name, "expires_in_days": 7}))
        .send()
        .await
        .expect("create token");
    assert_eq!(response.status(), 201);
    response.json().await.expect("created token")
}

#[tokio::test(flavor = "multi_thread")]
async fn every_endpoint_answers_each_viewer_as_scoped_and_leaks_nothing() {
    let _db = database_shared().await;
    let bobs = mix_job("gpu2node"); // bob, account physics
    let alices = mix_job("gpu1node"); // alice, account ml (carol coordinates ml)
    let (app, store) = app_with_store("access", 10_000).await;

    let live = make_token(&app, "bob", "matrix").await;
    let revoked = make_token(&app, "bob", "revoked").await;
    let gone =
        ask(&app, &Who::Proxy("bob", ""), reqwest::Method::DELETE, &format!("/api/v1/tokens/{}", revoked.id)).await;
    assert_eq!(gone.status(), 204);
    let expired = TokenSecret::generate();
    let name: TokenName = "expired".parse().expect("name");
    let past = Utc::now() - Duration::days(2);
    store.create_token("bob", &name, &expired.hash(), past, past + Duration::days(1)).await.expect("expired token");

    // (who, label, sees bob's physics job)
    let viewers: Vec<(Who, &str, Option<bool>)> = vec![
        (Who::Proxy("bob", ""), "own user", Some(true)),
        (Who::Token(live.token.clone()), "own user's token", Some(true)),
        (Who::Proxy("dave", ""), "same-account user", Some(false)),
        (Who::Proxy("alice", ""), "other-account user", Some(false)),
        (Who::Proxy("carol", ""), "coordinator of another account", Some(false)),
        (Who::Proxy("root", ""), "staff by name", Some(true)),
        (Who::Proxy("erin", "users,hpc-staff"), "staff by group", Some(true)),
        (Who::Anonymous, "anonymous", None),
        (Who::Token(expired.reveal().to_string()), "expired token", None),
        (Who::Token(revoked.token.clone()), "revoked token", None),
        (Who::Forged("root"), "forged header from a non-proxy address", None),
    ];
    let now = Utc::now();
    let format = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    let window = format!("start={}&end={}", format(now - Duration::hours(6)), format(now + Duration::minutes(5)));
    let epochs =
        format!("start={}&end={}", (now - Duration::hours(6)).timestamp(), (now + Duration::minutes(5)).timestamp());
    let job = &bobs.job_id;
    // The Gantt packs jobs shorter than a 4,000th of its window: an hour around bob's job draws it whole.
    let started = crate::support::lab_job_start(job.parse().expect("a numeric job id")).await;
    let gantt_hour = format!(
        "start={}&end={}",
        (started - Duration::minutes(30)).timestamp(),
        (started + Duration::minutes(30)).timestamp()
    );
    let per_job = [
        format!("/api/v1/jobs/{job}?cluster=lab"),
        format!("/api/v1/jobs/{job}/report?cluster=lab"),
        format!("/api/v1/jobs/{job}/gpus?cluster=lab"),
        format!("/api/v1/jobs/{job}/traces?cluster=lab"),
    ];
    let cluster_wide = [
        format!("/api/v1/jobs?cluster=lab&{window}&limit=5000"),
        format!("/api/v1/jobs?cluster=lab&{window}&limit=5000&sort=user&order=desc"),
        "/api/v1/nodes?cluster=lab".to_string(),
        "/web/v1/nodes?cluster=lab".to_string(),
        "/api/v1/node_events?cluster=lab".to_string(),
        "/api/v1/gpus/values?cluster=lab&metric=gpu_util".to_string(),
        "/api/v1/gpus/held?cluster=lab".to_string(),
        "/api/v1/tokens".to_string(),
        "/api/v1/clusters".to_string(),
        "/web/v1/clusters".to_string(),
        format!("/web/v1/jobs.csv?cluster=lab&{epochs}"),
        format!("/web/v1/jobs.json?cluster=lab&{epochs}"),
        format!("/web/v1/gantt?cluster=lab&{gantt_hour}"),
    ];
    let job_name = "gpu2node";
    let mut failures = Vec::new();
    for (who, label, sees) in &viewers {
        let (status, _) = get(&app, who, "/api/v1/health").await;
        let expected = match who {
            Who::Token(_) if sees.is_none() => 401,
            _ => 200,
        };
        if status != expected {
            failures.push(format!("{label}: health {status}, expected {expected}"));
        }
        for path in &per_job {
            let (status, body) = get(&app, who, path).await;
            let expected = match sees {
                Some(true) => 200,
                Some(false) => 404,
                None => 401,
            };
            if status != expected {
                failures.push(format!("{label}: {path} {status}, expected {expected}: {body:.200}"));
            }
            if *sees != Some(true) && (body.contains(job_name) || body.contains("\"bob\"") || body.contains("physics"))
            {
                failures.push(format!("{label}: {path} leaks bob's job: {body:.300}"));
            }
        }
        for path in &cluster_wide {
            let (status, body) = get(&app, who, path).await;
            let expected = if sees.is_none() { 401 } else { 200 };
            if status != expected {
                failures.push(format!("{label}: {path} {status}, expected {expected}: {body:.200}"));
            }
            let listing = path.contains("jobs") || path.contains("gantt");
            if listing && status == 200 {
                let listed = body.contains(job_name);
                if Some(listed) != *sees {
                    failures.push(format!("{label}: {path} lists bob's job: {listed}, expected {sees:?}"));
                }
            }
            if *sees != Some(true) && (body.contains(job_name) || body.contains("\"bob\"")) {
                failures.push(format!("{label}: {path} leaks bob's job: {body:.300}"));
            }
        }
        // Before sign-in no cluster is named, not even beside one that is unknown (security review L4).
        for path in ["/api/v1/clusters", "/web/v1/clusters", "/api/v1/jobs?cluster=nope", "/?cluster=nope"] {
            let (status, body) = get(&app, who, path).await;
            let named = ["\"lab\"", "lab\\\"", ">lab<", "`lab`"].iter().any(|name| body.contains(name));
            let lists = path.ends_with("/clusters");
            if if sees.is_none() { named } else { lists && (status != 200 || !named) } {
                failures.push(format!("{label}: {path} {status} names lab: {named}: {body:.200}"));
            }
        }
        // The page: the job for those who may see it; the same "not found" for everyone else.
        let (status, body) = get(&app, who, &format!("/jobs/{job}?cluster=lab")).await;
        let expected = match sees {
            Some(true) => 200,
            Some(false) => 404,
            None => 401,
        };
        if status != expected {
            failures.push(format!("{label}: job page {status}, expected {expected}"));
        }
        if *sees != Some(true) && body.contains(job_name) {
            failures.push(format!("{label}: job page leaks bob's job name"));
        }
    }
    // A coordinator sees the jobs of the account they coordinate.
    let (status, body) =
        get(&app, &Who::Proxy("carol", ""), &format!("/api/v1/jobs/{}?cluster=lab", alices.job_id)).await;
    if status != 200 || !body.contains("\"alice\"") {
        failures.push(format!("coordinator carol: alice's ml job {status}"));
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_are_hashed_read_only_revocable_audited_and_rate_limited() {
    let _db = database_shared().await;
    let alices = mix_job("gpu1node");
    let (app, store) = app_with_store("tokens", 5).await;
    let token = make_token(&app, "alice", "ci").await;
    assert!(token.token.starts_with("slt_"));
    assert!(token.expires > token.created + Duration::days(6));
    let own_job = format!("/api/v1/jobs/{}?cluster=lab", alices.job_id);
    let who = Who::Token(token.token.clone());
    assert_eq!(get(&app, &who, &own_job).await.0, 200, "a created token reads its user's jobs");

    // Only the hash is kept: no column of any row holds the token.
    let rows: Vec<(u64, String, String, String)> = sqlx::query_as(
        "SELECT id, user_name, name, CONCAT_WS('|', token_sha256, created_at, expires_at) FROM api_tokens",
    )
    .fetch_all(&sqlx::MySqlPool::connect(&fresh_database("tokens").await).await.expect("pool"))
    .await
    .expect("rows");
    assert!(!rows.is_empty());
    let secret_digits = &token.token[4..];
    assert!(rows.iter().all(|row| !format!("{row:?}").contains(secret_digits)), "plaintext token stored");

    // Read-only: a token cannot make or revoke tokens.
    let made = ask(&app, &who, reqwest::Method::POST, "/api/v1/tokens").await;
    assert_eq!(made.status(), 403);
    let revoke_with_token = ask(&app, &who, reqwest::Method::DELETE, &format!("/api/v1/tokens/{}", token.id)).await;
    assert_eq!(revoke_with_token.status(), 403);

    // The rate: 5 a minute. The read above used one; refused writes (403) use none.
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for _ in 0..5 {
        let response = ask(&app, &who, reqwest::Method::GET, &own_job).await;
        if response.status() == 429 {
            retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        }
        statuses.push(response.status().as_u16());
    }
    assert!(statuses.contains(&429), "over 5 a minute gets 429: {statuses:?}");
    assert!(retry_after.is_some_and(|seconds| (1..=60).contains(&seconds)), "Retry-After {retry_after:?}");
    // The rate is the user's, not the token's: a second token of alice's is over it too; bob's is not.
    let other = make_token(&app, "alice", "other").await;
    assert_eq!(
        get(&app, &Who::Token(other.token.clone()), &own_job).await.0,
        429,
        "alice's other token shares her rate"
    );
    let bobs = make_token(&app, "bob", "bob").await;
    assert_eq!(
        get(&app, &Who::Token(bobs.token.clone()), "/api/v1/nodes?cluster=lab").await.0,
        200,
        "bob is unaffected"
    );

    // Revoked: 401 from then on; other users cannot revoke it, and listing never shows secrets.
    let by_bob =
        ask(&app, &Who::Proxy("bob", ""), reqwest::Method::DELETE, &format!("/api/v1/tokens/{}", other.id)).await;
    assert_eq!(by_bob.status(), 404, "another user's token is not found");
    let revoked =
        ask(&app, &Who::Proxy("alice", ""), reqwest::Method::DELETE, &format!("/api/v1/tokens/{}", other.id)).await;
    assert_eq!(revoked.status(), 204);
    let (status, body) = get(&app, &Who::Token(other.token.clone()), &own_job).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("revoked"));
    let listed: Vec<TokenInfo> =
        ask(&app, &Who::Proxy("alice", ""), reqwest::Method::GET, "/api/v1/tokens").await.json().await.expect("list");
    assert_eq!(listed.iter().map(|t| t.state.as_str()).collect::<Vec<_>>(), ["revoked", "live"]);
    let listing = serde_json::to_string(&listed).expect("json");
    assert!(!listing.contains(&token.token[4..]) && !listing.contains(&other.token[4..]));

    // Every answered use is in the audit log; refusals (read-only, rate, revoked) are counted, not
    // written one by one, so a flood of them costs the database nothing.
    let uses: Vec<TokenUse> =
        ask(&app, &Who::Proxy("alice", ""), reqwest::Method::GET, &format!("/api/v1/tokens/{}/uses", other.id))
            .await
            .json()
            .await
            .expect("uses");
    assert_eq!(uses.len(), 0, "only refusals: {uses:?}");
    let uses: Vec<TokenUse> =
        ask(&app, &Who::Proxy("alice", ""), reqwest::Method::GET, &format!("/api/v1/tokens/{}/uses", token.id))
            .await
            .json()
            .await
            .expect("uses");
    let answered = 1 + statuses.iter().filter(|&&status| status == 200).count();
    assert_eq!(uses.len(), answered, "{uses:?}");
    assert!(uses.iter().all(|u| u.status == 200), "{uses:?}");
    let by_bob =
        ask(&app, &Who::Proxy("bob", ""), reqwest::Method::GET, &format!("/api/v1/tokens/{}/uses", token.id)).await;
    assert_eq!(by_bob.status(), 404, "another user's audit log is not found");

    // Bad input changes nothing.
    for body in [
        r#"{"name": ""}"#,
        r#"{"name": "x", "expires_in_days": 0}"#,
        r#"{"name": "x", "expires_in_days": 9999}"#,
        "{",
        r#"{"name": "x", "admin": true}"#,
    ] {
        let response = app
            .client
            .post(format!("{}/api/v1/tokens", app.base_url))
            .header("X-Remote-User", "alice")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("post");
        assert_eq!(response.status(), 400, "{body}");
    }
    assert_eq!(store.tokens_of("alice").await.expect("tokens").len(), 2, "bad input made nothing");
    let anonymous = ask(&app, &Who::Anonymous, reqwest::Method::POST, "/api/v1/tokens").await;
    assert_eq!(anonymous.status(), 401);
    let malformed = get(&app, &Who::Token("slt_nothex".into()), &own_job).await;
    assert_eq!(malformed.0, 401);
}

/// Issue #14 (the tokens page): a browser's cross-site request cannot make or revoke a token in the
/// name of a viewer the proxy signs in; the site's own page (same origin) and curl (no origin) can.
#[tokio::test(flavor = "multi_thread")]
async fn cross_site_requests_cannot_make_or_revoke_tokens() {
    let _db = database_shared().await;
    let (app, store) = app_with_store("csrf", 10_000).await;
    let kept = make_token(&app, "alice", "kept").await;
    let body = serde_json::json!({"name": "planted", "expires_in_days": 7});
    let post = |headers: &[(&'static str, String)]| {
        let mut request =
            app.client.post(format!("{}/api/v1/tokens", app.base_url)).header("X-Remote-User", "alice").json(&body);
        for (name, value) in headers {
            request = request.header(*name, value.clone());
        }
        async move { request.send().await.expect("post") }
    };
    let cross_site = post(&[("Sec-Fetch-Site", "cross-site".into()), ("Origin", "https://evil.example".into())]).await;
    assert_eq!(cross_site.status(), 403);
    let text = cross_site.text().await.expect("body");
    assert!(text.contains("cross-site"), "{text}");
    let other_origin = post(&[("Origin", "https://evil.example".into())]).await;
    assert_eq!(other_origin.status(), 403, "an older browser's foreign Origin is refused too");
    let null_origin = post(&[("Origin", "null".into())]).await;
    assert_eq!(null_origin.status(), 403);
    assert_eq!(store.tokens_of("alice").await.expect("tokens").len(), 1, "nothing was made");

    let revoke = app
        .client
        .delete(format!("{}/api/v1/tokens/{}", app.base_url, kept.id))
        .header("X-Remote-User", "alice")
        .header("Sec-Fetch-Site", "same-site")
        .send()
        .await
        .expect("delete");
    assert_eq!(revoke.status(), 403, "a sibling site is another site");
    let listed: Vec<TokenInfo> =
        ask(&app, &Who::Proxy("alice", ""), reqwest::Method::GET, "/api/v1/tokens").await.json().await.expect("list");
    assert!(listed.iter().all(|token| token.revoked.is_none()), "nothing was revoked: {listed:?}");

    let same_origin = post(&[("Sec-Fetch-Site", "same-origin".into()), ("Origin", app.base_url.clone())]).await;
    assert_eq!(same_origin.status(), 201, "the site's own page");
    let origin_only = post(&[("Origin", app.base_url.clone())]).await;
    assert_eq!(origin_only.status(), 201, "an older browser on the site's own page");
    let from_the_page = app
        .client
        .delete(format!("{}/api/v1/tokens/{}", app.base_url, kept.id))
        .header("X-Remote-User", "alice")
        .header("Sec-Fetch-Site", "same-origin")
        .send()
        .await
        .expect("delete");
    assert_eq!(from_the_page.status(), 204);
}

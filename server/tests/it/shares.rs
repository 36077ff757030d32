//! Shared report links (#19 part 5): the owner (or staff) makes an expiring, revocable, read-only link to
//! one job's report; its holder reads that job's facts and report without signing in, nothing else;
//! every opening is logged.

use serde_json::json;
use slurmlens::app::Viewer;
use slurmlens::app::shares::ShareGrant;
use slurmlens::config::{AnonymousAccess, DatabaseConfig, VictoriaMetricsConfig};
use slurmlens_wire::{CreatedShare, JobDetail, JobReport, ShareInfo, TokenState};

use crate::support::{TestApp, fresh_database, lab, sakura_gpu_job, spawn_app, test_config};

async fn post_share(app: &TestApp, user: Option<&str>, job: &str, body: serde_json::Value) -> reqwest::Response {
    let mut request = app.client.post(format!("{}/api/v1/jobs/{job}/shares?cluster=sakura", app.base_url)).json(&body);
    if let Some(user) = user {
        request = request.header("X-Remote-User", user);
    }
    request.send().await.expect("request reaches the server")
}

async fn list(app: &TestApp, user: &str, job: &str) -> Vec<ShareInfo> {
    let response = app.get_as(user, &format!("/api/v1/jobs/{job}/shares?cluster=sakura")).await;
    assert_eq!(response.status(), 200, "the list as {user}");
    response.json().await.expect("links JSON")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shared_link_shows_one_job_to_its_holder_until_revoked_and_each_opening_is_logged() {
    let mut config = test_config(AnonymousAccess::Nobody);
    config.database = Some(DatabaseConfig { url: fresh_database("shares").await });
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: lab().var("SLURMLENS_VM_URL").to_string(),
        timeout_ms: 10_000,
        readings_max_age_s: 1800,
        bearer_token: None,
    });
    let app = spawn_app(config.clone()).await;
    let job = sakura_gpu_job().await.to_string();
    let detail: JobDetail =
        app.get_as("root", &format!("/api/v1/jobs/{job}?cluster=sakura")).await.json().await.expect("job JSON");
    let owner = detail.job.user.clone();

    // Refused, and nothing made: not signed in, someone who cannot see the job, a bad lifetime or note,
    // a browser's cross-site request.
    let asked = json!({"expires_in_days": 2, "note": "ticket 4711"});
    assert_eq!(post_share(&app, None, &job, asked.clone()).await.status(), 401);
    assert_eq!(post_share(&app, Some("nobody-else"), &job, asked.clone()).await.status(), 404);
    assert_eq!(post_share(&app, Some(&owner), &job, json!({"expires_in_days": 0})).await.status(), 400);
    assert_eq!(post_share(&app, Some(&owner), &job, json!({"expires_in_days": 91})).await.status(), 400);
    assert_eq!(post_share(&app, Some(&owner), &job, json!({"note": "a\u{7}b"})).await.status(), 400);
    assert_eq!(post_share(&app, Some(&owner), &job, json!({"days": 2})).await.status(), 400, "unknown field");
    let cross_site = app
        .client
        .post(format!("{}/api/v1/jobs/{job}/shares?cluster=sakura", app.base_url))
        .header("X-Remote-User", &owner)
        .header("Sec-Fetch-Site", "cross-site")
        .json(&asked)
        .send()
        .await
        .expect("request");
    assert_eq!(cross_site.status(), 403);
    assert!(list(&app, &owner, &job).await.is_empty(), "nothing was made");

    // The owner shares; staff may too.
    let response = post_share(&app, Some(&owner), &job, asked.clone()).await;
    assert_eq!(response.status(), 201);
    let made: CreatedShare = response.json().await.expect("link JSON");
    assert!(made.path.starts_with("/shared/sls_") && made.path.len() == "/shared/sls_".len() + 64, "{}", made.path);
    let days = (made.expires - chrono::Utc::now()).num_hours();
    assert!((47..=48).contains(&days), "two days: {days} h");
    assert_eq!(post_share(&app, Some("root"), &job, json!({})).await.status(), 201);

    // Its holder, not signed in: the job's page as its owner sees it, one document, no logs; the JSON report.
    let page = app.client.get(format!("{}{}", app.base_url, made.path)).send().await.expect("shared page");
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["cache-control"], "private, no-store");
    let html = page.text().await.expect("page");
    assert!(
        html.contains("data-testid=\"shared-note\"") && html.contains(&format!("by {owner} (ticket 4711)")),
        "{html:.800}"
    );
    assert!(html.contains(&format!("Job {job}")) && html.contains("<svg"), "the job and its charts");
    assert!(!html.contains("<script"), "a page for reading: nothing runs");
    let secret = made.path.trim_start_matches("/shared/");
    // Its JSON link is one the holder can read; what a link never carries says so.
    assert!(html.contains(&format!("data-testid=\"report-json\" href=\"/api/v1/shared/{secret}\"")), "{html:.400}");
    assert!(!html.contains(&format!("/api/v1/jobs/{job}")), "no signed-in API address on a shared page");
    assert!(html.contains("data-testid=\"logs-status\">not part of a shared report<"), "logs: not shared");
    assert!(!html.contains("logs not available"), "not \"not available\": they are not shared");
    let report = app.client.get(format!("{}/api/v1/shared/{secret}", app.base_url)).send().await.expect("report");
    assert_eq!(report.status(), 200);
    let report: JobReport = report.json().await.expect("report JSON");
    assert_eq!((report.job.job_id.as_str(), report.job.user.as_str()), (job.as_str(), owner.as_str()));

    // What a link grants is that one job's facts and report: not another job, not its logs.
    let grant = ShareGrant {
        share_id: made.id,
        owner: owner.clone(),
        cluster: "sakura".into(),
        id_job: report.job.job_id_raw,
        time_submit: report.job.submit.timestamp(),
    };
    let application = slurmlens::serve::app(&config).expect("the application");
    let viewer = Viewer::Shared(grant);
    assert!(application.job_report(&viewer, Some("sakura"), &job, 60).await.is_ok());
    // Another job of the same owner, which the owner's own sign-in would see.
    let owners: slurmlens_wire::Page<slurmlens_wire::Job> =
        app.get_as(&owner, "/api/v1/jobs?cluster=sakura&limit=5").await.json().await.expect("jobs JSON");
    let other = owners.items.iter().map(|other| other.job_id.clone()).find(|id| *id != job).expect("another job");
    assert!(
        application
            .show_job(
                &Viewer::Signed(slurmlens::app::Identity { user: owner.clone(), groups: vec![], token: None }),
                Some("sakura"),
                &other
            )
            .await
            .is_ok()
    );
    let refused = application.show_job(&viewer, Some("sakura"), &other).await.expect_err("another job");
    assert!(matches!(refused, slurmlens::app::AppError::NotFound(_)), "{refused:?}");
    let logs = application.job_logs(&viewer, Some("sakura"), &job, Default::default()).await;
    assert!(matches!(logs, Err(slurmlens::app::AppError::Forbidden(_))), "{logs:?}");
    let script = application.job_script(&viewer, Some("sakura"), &job).await;
    assert!(matches!(script, Err(slurmlens::app::AppError::Forbidden(_))), "no script: {script:?}");
    let shown = application.show_job(&viewer, Some("sakura"), &job).await.expect("the job's facts");
    assert!(shown.submit_line.is_empty() && !detail.submit_line.is_empty(), "no command line");
    assert!(!html.contains(&detail.submit_line), "the page shows no command line either");

    // The owner lists both links with the openings; someone else cannot, nor revoke.
    let links = list(&app, &owner, &job).await;
    assert_eq!(links.len(), 2, "{links:?}");
    let ours = links.iter().find(|link| link.id == made.id).expect("the owner's link");
    assert_eq!(
        (ours.created_by.as_str(), ours.note.as_str(), ours.uses, ours.state),
        (owner.as_str(), "ticket 4711", 2, TokenState::Live)
    );
    assert_eq!(app.get_as("nobody-else", &format!("/api/v1/jobs/{job}/shares?cluster=sakura")).await.status(), 404);
    let revoke = |user: &str| {
        app.client.delete(format!("{}/api/v1/shares/{}", app.base_url, made.id)).header("X-Remote-User", user).send()
    };
    assert_eq!(revoke("nobody-else").await.expect("request").status(), 404);
    let revoked: ShareInfo = revoke(&owner).await.expect("request").json().await.expect("link JSON");
    assert_eq!(revoked.state, TokenState::Revoked);

    // Revoked: gone for its holder, and the refused opening is in the log too. Unknown and malformed
    // links are answered alike.
    assert_eq!(app.client.get(format!("{}{}", app.base_url, made.path)).send().await.expect("page").status(), 404);
    assert_eq!(list(&app, &owner, &job).await.iter().find(|link| link.id == made.id).map(|link| link.uses), Some(3));
    for path in [format!("/shared/sls_{}", "0".repeat(64)), "/shared/nonsense".into(), "/api/v1/shared/x".into()] {
        let response = app.client.get(format!("{}{path}", app.base_url)).send().await.expect("request");
        assert_eq!(response.status(), 404, "{path}");
    }
}

//! The jobs listing: window, filters, keyset pagination and viewer scope on real slurmdbd data.

use std::collections::BTreeSet;

use chrono::{Duration, SecondsFormat, Utc};
use slurmlens::config::AnonymousAccess;
use slurmlens_wire::{Job, Page};

use crate::support::{TestApp, database_shared, mix, mix_job, spawn_app, test_config};

fn window() -> String {
    let now = Utc::now();
    let format = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    format!("cluster=lab&start={}&end={}", format(now - Duration::hours(6)), format(now + Duration::minutes(5)))
}

/// Every page of the listing for `query`, as `user` (none: anonymous) reads it.
pub(crate) async fn all_pages(app: &TestApp, user: Option<&str>, query: &str) -> Vec<Job> {
    let mut jobs = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(cursor) => format!("/api/v1/jobs?{query}&cursor={cursor}"),
            None => format!("/api/v1/jobs?{query}"),
        };
        let response = match user {
            Some(user) => app.get_as(user, &path).await,
            None => app.get(&path).await,
        };
        assert_eq!(response.status(), 200, "{path}");
        let page: Page<Job> = response.json().await.expect("page JSON");
        jobs.extend(page.items);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return jobs,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn listing_contains_every_mix_job_running_and_pending_included() {
    let mix = mix();
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    let jobs = all_pages(&app, None, &window()).await;
    // An array's own id is the record of the task that started last (`26` is listed as `26_3`).
    let listed: BTreeSet<String> =
        jobs.iter().flat_map(|job| [job.job_id.clone(), job.job_id_raw.to_string()]).collect();
    for job in mix {
        assert!(listed.contains(&job.job_id), "{} ({}) missing from the listing", job.job_id, job.label);
    }
    let held = mix_job("held");
    let held_job = jobs.iter().find(|job| job.job_id == held.job_id).expect("held job listed");
    assert_eq!(held_job.state, "PENDING");
    assert!(held_job.start.is_none());
    assert!(jobs.iter().any(|job| job.state == "RUNNING"), "the running job is listed");
}

#[tokio::test(flavor = "multi_thread")]
async fn keyset_pages_cover_the_window_exactly_once() {
    mix();
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    let whole = all_pages(&app, None, &format!("{}&limit=5000", window())).await;
    let paged = all_pages(&app, None, &format!("{}&limit=3", window())).await;
    let whole_ids: Vec<&str> = whole.iter().map(|job| job.job_id.as_str()).collect();
    let paged_ids: Vec<&str> = paged.iter().map(|job| job.job_id.as_str()).collect();
    assert_eq!(paged_ids, whole_ids, "pages of 3 give the same jobs in the same order");
    assert!(whole.len() >= mix().len());
    let submits: Vec<_> = whole.iter().map(|job| job.submit).collect();
    assert!(submits.windows(2).all(|pair| pair[0] >= pair[1]), "newest submission first");
}

#[tokio::test(flavor = "multi_thread")]
async fn filters_narrow_the_listing() {
    mix();
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Staff)).await;
    let base = window();
    let failed = all_pages(&app, None, &format!("{base}&state=FAILED,timeout")).await;
    assert!(!failed.is_empty());
    assert!(failed.iter().all(|job| job.state == "FAILED" || job.state == "TIMEOUT"), "{failed:?}");
    assert!(failed.iter().any(|job| job.state == "TIMEOUT"));

    let alice = all_pages(&app, None, &format!("{base}&user=alice")).await;
    assert!(!alice.is_empty() && alice.iter().all(|job| job.user == "alice"));

    let physics = all_pages(&app, None, &format!("{base}&account=physics&partition=gpu")).await;
    assert!(!physics.is_empty() && physics.iter().all(|job| job.account == "physics" && job.partition == "gpu"));

    let gpu2node = mix_job("gpu2node");
    let big = all_pages(&app, None, &format!("{base}&min_gpus=8")).await;
    assert!(big.iter().any(|job| job.job_id == gpu2node.job_id));
    assert!(big.iter().all(|job| job.alloc_gpus >= 8));

    let on_n2 = all_pages(&app, None, &format!("{base}&node=n2")).await;
    assert!(!on_n2.is_empty());
    for job in &on_n2 {
        let hosts = slurmlens::domain::hostlist::Hostlist::parse(&job.node_list).expect("node list parses");
        assert!(hosts.contains("n2"), "{} on {}", job.job_id, job.node_list);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn viewers_see_own_and_coordinated_jobs_only() {
    mix();
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Nobody)).await;
    let query = window();
    let as_bob = all_pages(&app, Some("bob"), &query).await;
    assert!(!as_bob.is_empty());
    assert!(as_bob.iter().all(|job| job.user == "bob"), "bob sees only his jobs");

    // carol coordinates `ml`, whose sub-account is `ml-vision`.
    let as_carol = all_pages(&app, Some("carol"), &query).await;
    assert!(as_carol.iter().all(|job| job.user == "carol" || job.account == "ml" || job.account == "ml-vision"));
    assert!(as_carol.iter().any(|job| job.user == "alice" && job.account == "ml"), "coordinator sees alice's ml jobs");
    assert!(!as_carol.iter().any(|job| job.user == "bob"), "but not bob's physics jobs");

    let anonymous = app.get(&format!("/api/v1/jobs?{query}")).await;
    assert_eq!(anonymous.status(), 401, "nobody signed in sees nothing");

    // Another user's job is a 404, exactly like a job that does not exist.
    let alices = mix_job("gpu1node");
    let response = app.get_as("bob", &format!("/api/v1/jobs/{}?cluster=lab", alices.job_id)).await;
    assert_eq!(response.status(), 404);
    let missing = app.get_as("bob", "/api/v1/jobs/99999999?cluster=lab").await;
    assert_eq!(missing.status(), 404);
    let as_root = all_pages(&app, Some("root"), &query).await;
    assert!(as_root.len() >= as_bob.len() + as_carol.len().min(1), "staff see everything");
}

/// Issue #14: the job list's search finds a job by id, name, user or account anywhere in the window
/// asked for (not only in the rows a page loaded), exactly as the viewer's scope allows; bad searches
/// are refused and name `q`.
#[tokio::test(flavor = "multi_thread")]
async fn search_finds_jobs_by_id_name_user_or_account_within_the_scope() {
    mix();
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Nobody)).await;
    let base = window();
    let gpu2node = mix_job("gpu2node"); // bob's, account physics
    let by_id = all_pages(&app, Some("root"), &format!("{base}&q={}", gpu2node.job_id)).await;
    assert_eq!(by_id.iter().map(|job| job.job_id.as_str()).collect::<Vec<_>>(), [gpu2node.job_id.as_str()]);

    // An array's id finds its tasks; a het job's id its components.
    let array = mix_job("array");
    let tasks = all_pages(&app, Some("root"), &format!("{base}&q={}", array.job_id)).await;
    assert!(tasks.len() >= 4, "{tasks:?}");
    assert!(tasks.iter().all(|job| job.job_id.starts_with(&format!("{}_", array.job_id))), "{tasks:?}");
    let het = mix_job("het");
    let parts = all_pages(&app, Some("root"), &format!("{base}&q={}", het.job_id)).await;
    assert!(parts.len() >= 2 && parts.iter().all(|job| job.job_id.starts_with(&format!("{}+", het.job_id))));

    // Text: names, users and accounts, ignoring case; keyset pages cover the matches once.
    let named = all_pages(&app, Some("root"), &format!("{base}&q=GPU2NO")).await;
    assert!(named.iter().any(|job| job.job_id == gpu2node.job_id), "the job name matches");
    let physics = all_pages(&app, Some("root"), &format!("{base}&q=hysic&limit=5000")).await;
    let paged = all_pages(&app, Some("root"), &format!("{base}&q=hysic&limit=1")).await;
    assert!(!physics.is_empty());
    assert!(physics.iter().all(|job| {
        [&job.job_name, &job.user, &job.account].iter().any(|field| field.to_lowercase().contains("hysic"))
    }));
    assert_eq!(
        paged.iter().map(|job| &job.job_id).collect::<Vec<_>>(),
        physics.iter().map(|job| &job.job_id).collect::<Vec<_>>()
    );
    let wildcard = all_pages(&app, Some("root"), &format!("{base}&q=%25")).await;
    assert!(wildcard.is_empty(), "`%` is a character, not a wildcard: {wildcard:?}");

    // The window still applies: a year back finds the job, a window before it does not.
    let now = Utc::now();
    let format = |t: chrono::DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
    let year = format!("cluster=lab&start={}&q={}", format(now - Duration::days(366)), gpu2node.job_id);
    assert_eq!(all_pages(&app, Some("root"), &year).await.len(), 1);
    let before = format!("cluster=lab&start=2020-01-01T00:00:00Z&end=2020-02-01T00:00:00Z&q={}", gpu2node.job_id);
    assert!(all_pages(&app, Some("root"), &before).await.is_empty());

    // Scope: bob finds his own job, but neither alice's by id nor anyone else's by their name.
    let alices = mix_job("gpu1node");
    assert_eq!(all_pages(&app, Some("bob"), &format!("{base}&q={}", gpu2node.job_id)).await.len(), 1);
    assert!(all_pages(&app, Some("bob"), &format!("{base}&q={}", alices.job_id)).await.is_empty());
    let as_bob = all_pages(&app, Some("bob"), &format!("{base}&q=alice")).await;
    assert!(as_bob.iter().all(|job| job.user == "bob"), "{as_bob:?}");
    assert_eq!(app.get(&format!("/api/v1/jobs?{base}&q=alice")).await.status(), 401);

    for bad in ["%C3%A9t%C3%A9", "a%09b", &"x".repeat(65)] {
        let response = app.get_as("root", &format!("/api/v1/jobs?{base}&q={bad}")).await;
        assert_eq!(response.status(), 400, "{bad}");
        let body: serde_json::Value = response.json().await.expect("error JSON");
        assert_eq!(body["error"]["parameter"], "q", "{body}");
    }
}

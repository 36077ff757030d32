//! Job tags (issue #19 part 4): a job's owner tags it, staff tag any job, another tenant gets what a
//! missing job gets and changes nothing; a bad tag is a 400 that changes nothing; `tag=` filters the
//! listing, its export and the Gantt to exactly the tagged jobs, through many chunks of the store; and
//! the rules tag a real lab job from the batch script it was submitted with.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use slurmlens::app::Viewer;
use slurmlens::config::{AnonymousAccess, Config, DatabaseConfig};
use slurmlens::domain::job::{JobFilter, TimeWindow};
use slurmlens_wire::{Job, JobTags, Page, TagOrigin};

use crate::support::{TestApp, fresh_database, lab, sakura_gpu_job, slurm, spawn_app, test_config};

async fn send(app: &TestApp, method: reqwest::Method, user: Option<&str>, path: &str) -> reqwest::Response {
    let mut request = app.client.request(method, format!("{}{path}", app.base_url));
    if let Some(user) = user {
        request = request.header("X-Remote-User", user);
    }
    request.send().await.expect("request reaches the server")
}

async fn tags_of(app: &TestApp, user: &str, job: &str, cluster: &str) -> JobTags {
    let response = app.get_as(user, &format!("/api/v1/jobs/{job}/tags?cluster={cluster}")).await;
    assert_eq!(response.status(), 200, "{job}'s tags as {user}");
    response.json().await.expect("tags JSON")
}

fn names(tags: &JobTags) -> Vec<String> {
    tags.tags.iter().map(|tag| tag.tag.clone()).collect()
}

/// Every job id of the listing `query` as `user`, page after page of `limit`.
async fn listed(app: &TestApp, user: &str, query: &str, limit: usize) -> Vec<Job> {
    let mut jobs = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/api/v1/jobs?{query}&limit={limit}");
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let response = app.get_as(user, &path).await;
        assert_eq!(response.status(), 200, "{path}");
        let page: Page<Job> = response.json().await.expect("page JSON");
        assert!(page.items.len() <= limit);
        jobs.extend(page.items);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return jobs,
        }
    }
}

fn ids(jobs: &[Job]) -> BTreeSet<String> {
    jobs.iter().map(|job| job.job_id.clone()).collect()
}

fn config_with(database: &str) -> Config {
    let mut config = test_config(AnonymousAccess::Nobody);
    config.database = Some(DatabaseConfig { url: database.to_string() });
    config
}

/// Submits a short job of `user` on the lab cluster; its id once slurmdbd records it ended.
async fn finished_job_of(app: &TestApp, user: &str) -> Job {
    let (uid, gid) = (format!("--uid={user}"), format!("--gid={user}"));
    let out = slurm(
        "sbatch",
        &["--parsable", "-J", "tags-test", &uid, &gid, "--time=1", "-o", "/dev/null", "--wrap", "true"],
    );
    let id: u32 = out.trim().split(';').next().and_then(|id| id.parse().ok()).expect("sbatch prints a job id");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let response = app.get_as("root", &format!("/api/v1/jobs/{id}?cluster=lab")).await;
        if response.status() == 200 {
            let detail: slurmlens_wire::JobDetail = response.json().await.expect("job JSON");
            // Ended, on a node: what the Gantt draws.
            if detail.job.end.is_some() && detail.job.start.is_some() && detail.job.alloc_nodes > 0 {
                return detail.job;
            }
        }
        assert!(Instant::now() < deadline, "job {id} never ended in slurmdbd");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn owners_tag_their_jobs_staff_any_and_the_filter_lists_exactly_the_tagged_jobs() {
    let database = fresh_database("tags").await;
    let config = config_with(&database);
    let app = spawn_app(config.clone()).await;
    let (owner, tenant) = ("alice".to_string(), "bob".to_string());
    let (mine, other) = tokio::join!(finished_job_of(&app, &owner), finished_job_of(&app, &tenant));
    let (first, theirs) = (mine.job_id.clone(), other.job_id.clone());
    let start_s = mine.submit.min(other.submit).timestamp() - 60;
    let end_s = Utc::now().timestamp() + 60;
    let window = format!("cluster=lab&start={start_s}&end={end_s}");
    let tag_path = |job: &str, tag: &str| format!("/api/v1/jobs/{job}/tags/{tag}?cluster=lab");

    // Refused, and nothing changed: not signed in, another tenant (as for a missing job), a bad tag.
    assert_eq!(send(&app, reqwest::Method::PUT, None, &tag_path(&first, "ablation-3")).await.status(), 401);
    let refused = send(&app, reqwest::Method::PUT, Some(&tenant), &tag_path(&first, "ablation-3")).await;
    let missing = send(&app, reqwest::Method::PUT, Some(&tenant), &tag_path("99999999", "ablation-3")).await;
    assert_eq!((refused.status(), missing.status()), (reqwest::StatusCode::NOT_FOUND, reqwest::StatusCode::NOT_FOUND));
    assert_eq!(app.get_as(&tenant, &format!("/api/v1/jobs/{first}/tags?cluster=lab")).await.status(), 404);
    for bad in ["Ablation", "a%20b", "-x", "x".repeat(33).as_str(), "caf%C3%A9"] {
        let response = send(&app, reqwest::Method::PUT, Some(&owner), &tag_path(&first, bad)).await;
        assert_eq!(response.status(), 400, "{bad}");
        let body: serde_json::Value = response.json().await.expect("envelope");
        assert_eq!(body["error"]["code"], "invalid_parameter", "{body}");
    }
    assert!(!names(&tags_of(&app, &owner, &first, "lab").await).contains(&"ablation-3".to_string()));
    let bad_filter = app.get_as("root", &format!("/api/v1/jobs?{window}&tag=Not%20A%20Tag")).await;
    assert_eq!(bad_filter.status(), 400);

    // The owner tags their job (twice: once stored); staff tag another tenant's.
    for _ in 0..2 {
        let response = send(&app, reqwest::Method::PUT, Some(&owner), &tag_path(&first, "ablation-3")).await;
        assert_eq!(response.status(), 200);
    }
    let tags = tags_of(&app, &owner, &first, "lab").await;
    let tag = tags.tags.iter().find(|tag| tag.tag == "ablation-3").expect("the tag");
    assert_eq!((tag.origin, tag.set_by.as_deref()), (TagOrigin::User, Some(owner.as_str())));
    assert!(tags.editable, "the owner may change their job's tags");
    assert!(!tags_of(&app, "root", &theirs, "lab").await.tags.iter().any(|tag| tag.tag == "ablation-3"));
    assert_eq!(send(&app, reqwest::Method::PUT, Some("root"), &tag_path(&theirs, "ablation-3")).await.status(), 200);
    let staff_set = tags_of(&app, &tenant, &theirs, "lab").await;
    let by_staff = staff_set.tags.iter().find(|tag| tag.tag == "ablation-3").expect("staff's tag");
    assert_eq!(by_staff.set_by.as_deref(), Some("root"), "the job's owner sees who tagged it");

    // The filter: exactly the tagged jobs, each carrying its tags; the owner sees only theirs.
    let tagged = listed(&app, "root", &format!("{window}&tag=ablation-3"), 1).await;
    assert_eq!(ids(&tagged), BTreeSet::from([first.clone(), theirs.clone()]));
    assert!(tagged.iter().all(|job| job.tags.contains(&"ablation-3".to_string())), "{tagged:?}");
    let untagged = listed(&app, "root", &window, 5000).await;
    let carrying: BTreeSet<String> =
        untagged.iter().filter(|job| job.tags.contains(&"ablation-3".to_string())).map(|j| j.job_id.clone()).collect();
    assert_eq!(carrying, ids(&tagged), "the unfiltered listing carries the same tags");
    let owners = listed(&app, &owner, &format!("{window}&tag=ablation-3"), 50).await;
    assert_eq!(ids(&owners), BTreeSet::from([first.clone()]), "another tenant's tagged job stays theirs");

    // The export and the Gantt take the same filter.
    let export = app.get_as("root", &format!("/api/v1/jobs/export?{window}&tag=ablation-3")).await;
    assert_eq!(export.status(), 200);
    let exported: BTreeSet<String> = export
        .text()
        .await
        .expect("ndjson")
        .lines()
        .map(|line| serde_json::from_str::<Job>(line).expect("a job").job_id)
        .collect();
    assert_eq!(exported, ids(&tagged));
    let application = slurmlens::serve::app(&config).expect("the application");
    let staff = Viewer::Signed(slurmlens::app::Identity { user: "root".into(), groups: vec![], token: None });
    let filter = JobFilter { tag: Some("ablation-3".parse().expect("a tag")), ..JobFilter::default() };
    let time = |s: i64| DateTime::<Utc>::from_timestamp(s, 0).expect("a time");
    let chart_window = TimeWindow::new(time(start_s), time(end_s)).expect("a window");
    let chart = application.chart_window(&staff, Some("lab"), chart_window, &filter, 100_000).await.expect("chart");
    let charted: BTreeSet<String> = chart.jobs.iter().map(|job| job.job_id.to_string()).collect();
    let placed = |job: &&Job| job.start.is_some() && job.alloc_nodes > 0 && job.node_list != "None assigned";
    let started: BTreeSet<String> = tagged.iter().filter(placed).map(|j| j.job_id.clone()).collect();
    let facts: Vec<(&str, Option<DateTime<Utc>>, u32, &str)> =
        tagged.iter().map(|j| (j.job_id.as_str(), j.start, j.alloc_nodes, j.node_list.as_str())).collect();
    assert_eq!(charted, started, "the Gantt draws exactly the tagged jobs that started on nodes: {facts:?}");

    // Removing: another tenant is told the job does not exist; the owner removes theirs.
    assert_eq!(send(&app, reqwest::Method::DELETE, Some(&tenant), &tag_path(&first, "ablation-3")).await.status(), 404);
    let response = send(&app, reqwest::Method::DELETE, Some(&owner), &tag_path(&first, "ablation-3")).await;
    assert_eq!(response.status(), 200);
    let after: JobTags = response.json().await.expect("tags JSON");
    assert!(!names(&after).contains(&"ablation-3".to_string()));
    assert_eq!(send(&app, reqwest::Method::DELETE, Some(&owner), &tag_path(&first, "ablation-3")).await.status(), 404);
    let left = listed(&app, "root", &format!("{window}&tag=ablation-3"), 50).await;
    assert_eq!(ids(&left), BTreeSet::from([theirs.clone()]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tag_on_thousands_of_jobs_lists_them_all_through_bounded_chunks() {
    let database = fresh_database("tags_many").await;
    let config = config_with(&database);
    let app = spawn_app(config.clone()).await;
    let anchor = sakura_gpu_job().await.to_string();
    let detail: slurmlens_wire::JobDetail =
        app.get_as("root", &format!("/api/v1/jobs/{anchor}?cluster=sakura")).await.json().await.expect("job JSON");
    let end = detail.job.end.expect("an ended job").timestamp();
    // A window of sakura's history holding a few thousand jobs, every other one tagged: several of the
    // store's chunks of 1,000, each read from slurmdbd by its keys.
    let window = format!("cluster=sakura&start={}&end={end}", end - 2 * 86_400);
    let everyone = listed(&app, "root", &window, 5000).await;
    assert!(everyone.len() > 2500, "sakura's demo holds thousands of jobs in two days: {}", everyone.len());
    let chosen: Vec<&Job> = everyone.iter().step_by(2).collect();
    let pool = sqlx::MySqlPool::connect(&database).await.expect("the test database");
    for chunk in chosen.chunks(500) {
        let values = vec!["('sakura', ?, ?, 'many', 'root', NOW(3))"; chunk.len()].join(", ");
        let sql = format!("INSERT INTO job_tags (cluster, job_id, time_submit, tag, set_by, set_at) VALUES {values}");
        let mut query = sqlx::query(&sql);
        for job in chunk {
            query = query.bind(job.job_id_raw).bind(job.submit.timestamp());
        }
        query.execute(&pool).await.expect("tagging");
    }
    pool.close().await;
    let expected: BTreeSet<String> = chosen.iter().map(|job| job.job_id.clone()).collect();
    let tagged = listed(&app, "root", &format!("{window}&tag=many"), 700).await;
    // Each tagged job record once: a requeued job keeps its id, so two records may share one.
    let records = |jobs: &mut dyn Iterator<Item = &Job>| -> BTreeSet<(String, i64)> {
        jobs.map(|job| (job.job_id.clone(), job.submit.timestamp())).collect()
    };
    assert_eq!(tagged.len(), chosen.len(), "each tagged job record once");
    assert_eq!(records(&mut tagged.iter()), records(&mut chosen.iter().copied()));
    assert_eq!(ids(&tagged), expected);
    // In the listing's order: newest submission first.
    assert!(tagged.windows(2).all(|pair| pair[0].submit >= pair[1].submit));

    // Usage of the tag: exactly the tagged jobs that held an allocation in the window, their GPU-hours
    // inside it (the listing's facts, counted here by hand).
    let (start, end) = (end - 2 * 86_400, end);
    let held: Vec<&&Job> = chosen.iter().filter(|job| job.start.is_some_and(|at| at.timestamp() < end)).collect();
    let hours: f64 = held
        .iter()
        .map(|job| {
            let from = job.start.map_or(start, |at| at.timestamp()).max(start);
            let to = job.end.map_or(end, |at| at.timestamp()).min(end);
            job.alloc_gpus as f64 * (to - from).max(0) as f64 / 3600.0
        })
        .sum();
    let usage: slurmlens_wire::UsageReport =
        app.get_as("root", &format!("/api/v1/usage?{window}&tag=many&by=user")).await.json().await.expect("usage JSON");
    // A job whose run only touches the window's edge (no second inside it) counts only if it started or
    // failed inside it: the exact count lies between those with a second inside and all of them.
    let overlap = |job: &&&&Job| {
        let from = job.start.map_or(start, |at| at.timestamp()).max(start);
        job.end.map_or(end, |at| at.timestamp()).min(end) > from
    };
    let inside = held.iter().filter(overlap).count() as u64;
    assert!(
        (inside..=held.len() as u64).contains(&usage.total.jobs),
        "{} jobs, {inside} to {}",
        usage.total.jobs,
        held.len()
    );
    assert!((usage.total.gpu_hours - hours).abs() < 0.01, "{} GPU-hours against {hours}", usage.total.gpu_hours);
    let everything: slurmlens_wire::UsageReport =
        app.get_as("root", &format!("/api/v1/usage?{window}&by=user")).await.json().await.expect("usage JSON");
    assert!(everything.total.jobs > usage.total.jobs, "without the tag, every job");
    let stats = app.get_as("root", &format!("/api/v1/stats?{window}&tag=many")).await;
    assert_eq!(stats.status(), 200);
    assert_eq!(app.get_as("root", &format!("/api/v1/usage?{window}&tag=Many")).await.status(), 400);
}

/// Submits, as alice on the lab cluster, a batch script that runs `torchrun` (it fails: the lab has no
/// PyTorch; slurmdbd stores the script either way). Its id.
fn submit_torchrun() -> u32 {
    let dir = lab().dir.join("jobs");
    std::fs::create_dir_all(&dir).expect("the lab's job directory");
    let path = dir.join(format!("tags-torchrun-{}.sh", std::process::id()));
    let script = "#!/bin/sh\n#SBATCH --job-name=tags-torchrun\n# a training run as sites write them\n\
        srun torchrun --nnodes=1 --nproc-per-node=1 train.py --epochs 1 || true\n";
    std::fs::write(&path, script).expect("writing the script");
    let path = path.to_string_lossy();
    let text = slurm("sbatch", &["--parsable", "--uid=alice", "--gid=alice", "--time=1", "-o", "/dev/null", &path]);
    text.trim().split(';').next().and_then(|id| id.parse().ok()).expect("sbatch prints a job id")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rules_tag_a_lab_job_from_its_torchrun_script_and_the_tag_stays() {
    let database = fresh_database("tags_rules").await;
    let app = spawn_app(config_with(&database)).await;
    let job = submit_torchrun().to_string();
    let deadline = Instant::now() + Duration::from_secs(120);
    // slurmdbd holds the script once slurmctld sent the job's first record.
    let tags = loop {
        let response = app.get_as("alice", &format!("/api/v1/jobs/{job}/tags?cluster=lab")).await;
        if response.status() == 200 {
            let tags: JobTags = response.json().await.expect("tags JSON");
            if !tags.tags.is_empty() {
                break tags;
            }
        }
        assert!(Instant::now() < deadline, "job {job} never got its rule tags");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let pytorch = tags.tags.iter().find(|tag| tag.tag == "pytorch").expect("pytorch from `torchrun`");
    assert_eq!((pytorch.origin, pytorch.set_by.as_deref()), (TagOrigin::Rule, None));
    assert_eq!(names(&tags), ["pytorch"], "nothing else in that script");
    // A rule's tag is not removed by hand, not even by its owner.
    let path = format!("/api/v1/jobs/{job}/tags/pytorch?cluster=lab");
    assert_eq!(send(&app, reqwest::Method::DELETE, Some("alice"), &path).await.status(), 403);
    assert_eq!(names(&tags_of(&app, "alice", &job, "lab").await), ["pytorch"]);
    // Another tenant sees nothing of it; the filter finds it.
    assert_eq!(app.get_as("bob", &format!("/api/v1/jobs/{job}/tags?cluster=lab")).await.status(), 404);
    let now = Utc::now().timestamp();
    let found =
        listed(&app, "alice", &format!("cluster=lab&start={}&end={}&tag=pytorch", now - 3600, now + 60), 50).await;
    assert!(ids(&found).contains(&job), "{:?}", ids(&found));
    assert!(found.iter().all(|listed| listed.tags.contains(&"pytorch".to_string())));
}

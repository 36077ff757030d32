//! The job listing sorted by a column over the whole window, a page at a time (issue #36: the list
//! showed the newest 1,000 jobs of a day and sorted only those): every job of the window exactly once,
//! in the column's order, on sakura's demo day and within a viewer's scope.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use chrono::{Duration, Utc};
use slurmlens::config::AnonymousAccess;
use slurmlens_wire::{Job, JobSort, Page};

use crate::jobs_listing::all_pages;
use crate::support::{TestApp, database_shared, mix, spawn_app, test_config};

/// A cell as this test reads it, apart from the server's own comparison: a number, or text.
#[derive(Debug, PartialEq, PartialOrd)]
enum Cell {
    Number(f64),
    Text(String),
}

fn cell(job: &Job, sort: JobSort) -> Option<Cell> {
    let number = |value: f64| Some(Cell::Number(value));
    let text = |value: &str| Some(Cell::Text(value.to_string()));
    match sort {
        JobSort::JobId => number(f64::from(job.job_id_raw)),
        JobSort::Submit => number(job.submit.timestamp() as f64),
        JobSort::JobName => text(&job.job_name),
        JobSort::User => text(&job.user),
        JobSort::Account => text(&job.account),
        JobSort::Partition => text(&job.partition),
        JobSort::State => text(&job.state),
        JobSort::Start => job.start.map(|time| Cell::Number(time.timestamp() as f64)),
        JobSort::End => job.end.map(|time| Cell::Number(time.timestamp() as f64)),
        JobSort::Elapsed => number(job.elapsed_raw as f64),
        JobSort::AllocNodes => number(f64::from(job.alloc_nodes)),
        JobSort::AllocGpus => number(job.alloc_gpus as f64),
        JobSort::NodeList => text(&job.node_list),
        JobSort::ExitCode => text(&job.exit_code),
        JobSort::MeanGpuUtil => job.mean_gpu_util.map(Cell::Number),
        JobSort::Blame => job.blame.map(|blame| Cell::Text(blame.as_str().to_string())),
    }
}

/// Every page of `query` sorted by `sort`, `rows` at a time, checking each page's `total` and `offset`.
async fn sorted_pages(app: &TestApp, user: &str, query: &str, sort: JobSort, descending: bool, rows: u64) -> Vec<Job> {
    let order = if descending { "desc" } else { "asc" };
    let mut jobs = Vec::new();
    let mut total = None;
    loop {
        let offset = jobs.len();
        let path = format!("/api/v1/jobs?{query}&sort={sort}&order={order}&limit={rows}&offset={offset}");
        let response = app.get_as(user, &path).await;
        assert_eq!(response.status(), 200, "{path}");
        let page: Page<Job> = response.json().await.expect("page JSON");
        assert_eq!(page.offset, Some(offset as u64), "{path}");
        assert!(page.next_cursor.is_none(), "a sorted page has no cursor");
        let page_total = page.total.expect("a sorted page says its total");
        assert_eq!(*total.get_or_insert(page_total), page_total, "the total is the same on every page: {path}");
        let expected = (page_total - offset as u64).min(rows);
        assert_eq!(page.items.len() as u64, expected, "{path}");
        jobs.extend(page.items);
        if jobs.len() as u64 >= page_total {
            return jobs;
        }
    }
}

/// Panics unless `jobs` are in `sort`'s order: blank cells last, then by the cell, ties by job id and
/// submission, all in the one direction.
fn assert_ordered(jobs: &[Job], sort: JobSort, descending: bool) {
    for pair in jobs.windows(2) {
        let (a, b) = (cell(&pair[0], sort), cell(&pair[1], sort));
        let ascending = match (&a, &b) {
            (Some(_), None) => continue,
            (None, Some(_)) => panic!("{sort}: blank {} before {} ({b:?})", pair[0].job_id, pair[1].job_id),
            (None, None) => Ordering::Equal,
            (Some(a), Some(b)) => a.partial_cmp(b).expect("comparable cells"),
        }
        .then(pair[0].job_id_raw.cmp(&pair[1].job_id_raw))
        .then(pair[0].job_id.cmp(&pair[1].job_id))
        // A requeued job keeps its id: its records differ by submission.
        .then(pair[0].submit.cmp(&pair[1].submit));
        let ordered = if descending { ascending.reverse() } else { ascending };
        assert_eq!(
            ordered,
            Ordering::Less,
            "{sort} {}: {} ({a:?}) then {} ({b:?})",
            if descending { "desc" } else { "asc" },
            pair[0].job_id,
            pair[1].job_id
        );
    }
}

fn keys(jobs: &[Job]) -> Vec<(u32, i64)> {
    jobs.iter().map(|job| (job.job_id_raw, job.submit.timestamp())).collect()
}

/// Panics unless `paged` holds each job of `whole` once and nothing else.
fn assert_same_jobs(paged: &[Job], whole: &[Job], what: &str) {
    let paged_keys = keys(paged);
    let unique: BTreeSet<(u32, i64)> = paged_keys.iter().copied().collect();
    assert_eq!(unique.len(), paged_keys.len(), "{what}: a job shown twice");
    assert_eq!(unique, keys(whole).into_iter().collect::<BTreeSet<_>>(), "{what}: lost or added jobs");
}

#[tokio::test(flavor = "multi_thread")]
async fn sorted_pages_hold_every_job_of_a_busy_window_once_in_each_columns_order() {
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Nobody)).await;
    // Four hours of sakura's demo a day ago: hundreds of jobs, some still running.
    let end = (Utc::now() - Duration::days(1)).timestamp() / 3600 * 3600;
    let query = format!("cluster=sakura&start={}&end={end}", end - 4 * 3600);
    let whole = all_pages(&app, Some("root"), &format!("{query}&limit=5000")).await;
    assert!(whole.len() > 250, "sakura's demo runs hundreds of jobs in four hours: {}", whole.len());
    for sort in JobSort::ALL {
        for descending in [false, true] {
            let paged = sorted_pages(&app, "root", &query, sort, descending, 97).await;
            assert_same_jobs(&paged, &whole, &format!("{sort} desc={descending}"));
            assert_ordered(&paged, sort, descending);
        }
    }
    // Filters apply to the whole window before it is paged.
    let failed = sorted_pages(&app, "root", &format!("{query}&state=FAILED"), JobSort::Elapsed, true, 50).await;
    let expected: Vec<Job> = whole.iter().filter(|job| job.state == "FAILED").cloned().collect();
    assert!(!expected.is_empty(), "the demo fails some jobs every hour");
    assert_same_jobs(&failed, &expected, "FAILED by elapsed");
    assert_ordered(&failed, JobSort::Elapsed, true);
}

#[tokio::test(flavor = "multi_thread")]
async fn sorted_pages_keep_the_viewers_scope_and_refuse_mixed_paging() {
    mix();
    let _db = database_shared().await;
    let app = spawn_app(test_config(AnonymousAccess::Nobody)).await;
    let now = Utc::now().timestamp();
    let query = format!("cluster=lab&start={}&end={}", now - 6 * 3600, now + 300);
    let whole = all_pages(&app, Some("bob"), &query).await;
    assert!(!whole.is_empty());
    let paged = sorted_pages(&app, "bob", &query, JobSort::User, false, 2).await;
    assert_same_jobs(&paged, &whole, "bob's jobs by user");
    assert!(paged.iter().all(|job| job.user == "bob"));

    for (bad, parameter) in [
        ("sort=uid", "sort"),
        ("sort=user&order=up", "order"),
        ("order=desc", "order"),
        ("offset=10", "offset"),
        ("sort=user&cursor=1795946340.1", "cursor"),
    ] {
        let response = app.get_as("bob", &format!("/api/v1/jobs?{query}&{bad}")).await;
        assert_eq!(response.status(), 400, "{bad}");
        let body: serde_json::Value = response.json().await.expect("error JSON");
        assert_eq!(body["error"]["parameter"], parameter, "{bad}: {body}");
    }
}

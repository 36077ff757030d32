//! Server-side rendering of the pages through the router the server mounts, with an in-memory
//! [`WebData`] (the web crate's only seam: the real one is the server's application layer, tested in
//! the server's integration tests and the browser tests). The fixture names the viewer by the
//! `X-Remote-User` header, as the server's sign-in layer would.

use std::sync::{Arc, LazyLock};

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{Request, StatusCode};
use slurmlens_web::api::DataError;
use slurmlens_web::palette::ColourSlots;
use slurmlens_web::query::JobQuery;
use slurmlens_web::server::{DataFuture, PageData, WebData, WebOptions, routes};
use slurmlens_wire as wire;
use tower::ServiceExt;

struct Fixture {
    jobs: Arc<Vec<wire::Job>>,
}

/// The fixture as one request's viewer sees it: `None` sees everyone's jobs (staff-like).
struct Viewing {
    jobs: Arc<Vec<wire::Job>>,
    viewer: Option<String>,
}

fn job(id: u32, user: &str, nodes: &str, start: &str, end: Option<&str>, gpus: u64) -> wire::Job {
    let mut value = serde_json::json!({
        "job_id": id.to_string(), "job_id_raw": id, "cluster": "lab", "job_name": format!("job-{id}"),
        "user": user, "uid": 1001, "gid": 1001, "account": "ml", "partition": "gpu", "qos": "normal",
        "state": if end.is_some() { "COMPLETED" } else { "RUNNING" }, "exit_code": "0:0",
        "derived_exit_code": "0:0", "submit": start, "start": start, "elapsed": "01:00:00",
        "elapsed_raw": 3600, "timelimit": "02:00:00", "node_list": nodes, "alloc_nodes": 1, "alloc_cpus": 4,
        "alloc_gpus": gpus, "alloc_tres": "cpu=4,gres/gpu=2", "req_tres": "cpu=4", "req_mem": "1000M"
    });
    if let Some(end) = end {
        value["end"] = serde_json::json!(end);
    }
    serde_json::from_value(value).expect("valid job")
}

impl WebData for Fixture {
    fn clusters(&self) -> Vec<String> {
        vec!["lab".into()]
    }

    /// The signed-in user of a request, as the server's access configuration names the header.
    fn for_request(&self, request: &Parts) -> Arc<dyn PageData> {
        let viewer = request.headers.get("x-remote-user").and_then(|value| value.to_str().ok()).map(str::to_string);
        Arc::new(Viewing { jobs: self.jobs.clone(), viewer })
    }
}

impl PageData for Viewing {
    /// Everyone's jobs without a signed-in user (staff-like); a named user's own jobs only.
    /// With `sort`, ordered and sliced as the server's sorted pages are. Pages in the default order
    /// answer as during an archiver's first round that has counted 1,234 due reports and made 56; those
    /// by job id as after it.
    fn jobs<'a>(&'a self, query: &'a JobQuery) -> DataFuture<'a, wire::Page<wire::Job>> {
        Box::pin(async move {
            let viewer = self.viewer.as_deref();
            let mut items: Vec<wire::Job> =
                self.jobs.iter().filter(|job| viewer.is_none_or(|name| job.user == name)).cloned().collect();
            let Some(sort) = query.sort else {
                return Ok(wire::Page { items, next_cursor: None, total: None, offset: None, archiving: None });
            };
            wire::sort_jobs(&mut items, sort, query.descending);
            let total = items.len() as u64;
            let offset = query.offset.unwrap_or(0);
            let limit = query.limit.map_or(usize::MAX, |limit| limit as usize);
            let items = items.into_iter().skip(offset as usize).take(limit).collect();
            let archiving = (sort != wire::JobSort::JobId).then_some(wire::Archiving {
                since: 1_796_000_000,
                due: 1234,
                counted: true,
                made: 56,
            });
            Ok(wire::Page { items, next_cursor: None, total: Some(total), offset: Some(offset), archiving })
        })
    }

    fn job<'a>(&'a self, _: Option<&'a str>, job_id: &'a str) -> DataFuture<'a, wire::JobDetail> {
        Box::pin(async move {
            let job =
                self.jobs.iter().find(|job| job.job_id == job_id).ok_or_else(|| DataError::not_found("no such job"))?;
            Ok(wire::JobDetail {
                job: job.clone(),
                work_dir: "/home".into(),
                submit_line: "sbatch x.sh".into(),
                nodes: vec![wire::NodeAllocation {
                    node: job.node_list.clone(),
                    gpus: Some(job.alloc_gpus),
                    gpus_source: wire::GpusSource::SingleNode,
                }],
                steps: Vec::new(),
            })
        })
    }

    fn gpu_values<'a>(
        &'a self,
        _: Option<&'a str>,
        metric: &'a str,
        at: i64,
    ) -> DataFuture<'a, Option<wire::GpuReadings>> {
        Box::pin(async move {
            let value = |node: &str, gpu: u16, value: f64| wire::GpuValue { node: node.into(), gpu, value };
            let at = chrono::DateTime::from_timestamp(at, 0).expect("time");
            // The readings are 14 minutes old, as after a scrape pipeline stopped.
            let taken = at - chrono::Duration::minutes(14);
            let (unit, values, xid_codes) = if metric == "xid" {
                let code =
                    |code: u32, strength, meaning: &str| wire::XidCode { code, strength, meaning: meaning.into() };
                (
                    "code",
                    vec![value("n1", 0, 0.0), value("n1", 1, 31.0), value("n2", 0, 79.0), value("n2", 1, 0.0)],
                    vec![
                        code(31, wire::EvidenceStrength::Application, "GPU memory page fault"),
                        code(79, wire::EvidenceStrength::Strong, "GPU has fallen off the bus"),
                    ],
                )
            } else {
                ("%", vec![value("n1", 0, 97.0), value("n1", 1, 3.0), value("n1", 2, 0.0), value("n2", 0, 1.0)], vec![])
            };
            let values = wire::GpuValues {
                metric: metric.to_string(),
                unit: unit.into(),
                at,
                status: wire::ValuesState::Ok,
                message: None,
                values,
            };
            Ok(Some(wire::GpuReadings { values, readings_at: Some(taken), max_age_s: 1800, xid_codes }))
        })
    }

    /// n3 down from 11:00 on 2026-11-30, for good (a plain IDLE event is no down).
    fn node_events<'a>(&'a self, _: Option<&'a str>, _: (i64, i64)) -> DataFuture<'a, Vec<wire::NodeEvent>> {
        Box::pin(async move {
            let event = |state: &str| wire::NodeEvent {
                node: "n3".into(),
                state: state.into(),
                reason: "Xid 79: GPU has fallen off the bus".into(),
                reason_uid: None,
                start: chrono::DateTime::from_timestamp(1_796_036_400, 0).expect("a time"),
                end: None,
            };
            Ok(vec![event("DOWN+NOT_RESPONDING"), event("IDLE")])
        })
    }

    /// alice, bob and carol in the order they were associated; a named user learns only their own slot.
    fn colour_slots<'a>(&'a self, _: Option<&'a str>, slots: u32) -> DataFuture<'a, ColourSlots> {
        Box::pin(async move {
            let users = ["alice", "bob", "carol"]
                .iter()
                .enumerate()
                .filter(|(_, name)| self.viewer.as_deref().is_none_or(|viewer| viewer == **name))
                .map(|(rank, name)| (name.to_string(), rank as u32 % slots))
                .collect();
            Ok(ColourSlots { users, accounts: [("ml".to_string(), 0)].into() })
        })
    }

    /// Counts of the running jobs the viewer may not see, per node, as the server's scoped source gives.
    fn busy_gpus<'a>(&'a self, _: Option<&'a str>, at: i64) -> DataFuture<'a, Vec<wire::BusyGpus>> {
        Box::pin(async move {
            let Some(viewer) = &self.viewer else { return Ok(Vec::new()) };
            let mut busy: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
            for job in self.jobs.iter().filter(|job| &job.user != viewer) {
                let running = job.start.is_some_and(|start| start.timestamp() <= at)
                    && job.end.is_none_or(|end| end.timestamp() > at);
                if running {
                    *busy.entry(job.node_list.clone()).or_default() += job.alloc_gpus;
                }
            }
            Ok(busy.into_iter().map(|(node, gpus)| wire::BusyGpus { node, gpus }).collect())
        })
    }

    /// Job 8's report: metrics answered, but no node_exporter, ipmi_exporter or Lustre series.
    fn report<'a>(&'a self, _: Option<&'a str>, job_id: &'a str) -> DataFuture<'a, Option<wire::JobReport>> {
        Box::pin(async move {
            let Some(job) = self.jobs.iter().find(|job| job.job_id == job_id && job_id == "8") else { return Ok(None) };
            let report = serde_json::json!({
                "job": job, "source": "live", "generated_at": "2026-11-29T11:00:00Z",
                "window_start": "2026-11-29T10:30:00Z", "window_end": "2026-11-29T11:00:00Z",
                "metrics": {"status": "ok", "step_s": 60}, "gpus": [],
                "nodes": [{"node": "n2", "summary": [{"metric": "rdma_tx", "unit": "B/s", "mean": 1e9, "max": 2e9, "samples": 0}],
                           "series": [{"metric": "rdma_tx", "unit": "B/s", "points": [[1_795_948_260_i64, 1e9], [1_795_948_800_i64, 2e9]]}]}],
                "totals": {"gpu_hours": 2.0, "idle_gpu_hours": 0.0}, "verdicts": [],
                "chart_queries": [{"metric": "rdma_tx", "query": "sum by (instance) (rate(x{instance=~\"n2\"}[60s]))",
                                   "start": "2026-11-29T10:31:00Z", "end": "2026-11-29T11:00:00Z", "step_s": 60,
                                   "vmui_url": "http://vm:8428/vmui/#/?g0.expr=q&g0.tab=0"}],
                "dashboard_url": "https://grafana.example.org/d/slurm-job?var-job=8&var-host=n2"
            });
            Ok(Some(serde_json::from_value(report).expect("a report")))
        })
    }

    /// Job 7's script as a coordinator of its account reads it: cut, the environment withheld.
    fn script<'a>(&'a self, _: Option<&'a str>, job_id: &'a str) -> DataFuture<'a, Option<wire::JobScript>> {
        Box::pin(async move {
            let text = "#!/bin/sh\necho \"<b>hi</b>\"\n".to_string();
            Ok((job_id == "7").then(|| wire::JobScript {
                job_id: "7".into(),
                cluster: "lab".into(),
                user: "alice".into(),
                account: "ml".into(),
                submit_line: "sbatch train.sh".into(),
                script: Some(wire::StoredText { shown_chars: 25, total_chars: 300_000, truncated: true, text }),
                environment: None,
                environment_access: wire::EnvironmentAccess::Withheld,
            }))
        })
    }

    fn nodes<'a>(&'a self, _: Option<&'a str>) -> DataFuture<'a, Vec<wire::Node>> {
        Box::pin(async move {
            Ok((1..=4)
                .map(|n| wire::Node {
                    node: format!("n{n}"),
                    state: "IDLE".into(),
                    reason: None,
                    reason_since: None,
                    running_jobs: 0,
                    alloc_gpus: 0,
                })
                .collect())
        })
    }
}

fn app_with(options: WebOptions) -> axum::Router {
    let jobs = vec![
        job(7, "alice", "n1", "2026-11-29T10:00:00Z", Some("2026-11-29T11:00:00Z"), 2),
        job(8, "bob", "n2", "2026-11-29T10:30:00Z", None, 4),
    ];
    routes(Arc::new(Fixture { jobs: Arc::new(jobs) }), options)
}

/// One runtime for every test of this binary: leptos' executor is global to the process, so tests that
/// each brought their own runtime could, in parallel, wait forever on a runtime a finished test dropped.
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime")
});

fn get(path: &str) -> (StatusCode, String) {
    get_as(None, path)
}

fn get_as(user: Option<&str>, path: &str) -> (StatusCode, String) {
    let (status, _, body) = request(WebOptions::default(), path, user.map(|user| ("X-Remote-User", user)));
    (status, body)
}

/// `path` from the pages served with `options`, with one extra request header; the status, response
/// headers and body.
fn request(
    options: WebOptions,
    path: &str,
    header: Option<(&str, &str)>,
) -> (StatusCode, axum::http::HeaderMap, String) {
    RUNTIME.block_on(async {
        let mut request = Request::get(path);
        if let Some((name, value)) = header {
            request = request.header(name, value);
        }
        let request = request.body(Body::empty()).expect("request");
        let response = app_with(options).oneshot(request).await.expect("answer");
        let (status, headers) = (response.status(), response.headers().clone());
        let bytes = axum::body::to_bytes(response.into_body(), 10 << 20).await.expect("body");
        // Without leptos's empty hydration markers (`<!>`, after each type-erased view under
        // `erase_components`): the page as a reader sees it.
        (status, headers, String::from_utf8_lossy(&bytes).replace("<!>", ""))
    })
}

#[test]
fn the_job_list_is_complete_html_before_any_script_runs() {
    let (status, html) = get("/jobs?cluster=lab");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(html.matches("data-testid=\"job-row\"").count(), 2, "{html}");
    assert!(html.contains("job-7") && html.contains(">bob<"));
    assert!(html.contains("/pkg/slurmlens_web_bg.wasm"), "the hydration script is linked");
    // While the archiver's first round runs, the list says why its last columns may be blank.
    let note = html.split("data-testid=\"jobs-archiving\"").nth(1).expect("the archiver's progress is shown");
    assert!(note.contains("56 of 1,234 so far") && note.contains("GPU util % and Failure cells stay blank"), "{note}");
    let (_, sorted) = get("/jobs?cluster=lab&sort=job_id");
    assert!(!sorted.contains("jobs-archiving"), "no round, no note: {sorted}");
}

/// Issue #36: the list pages through the whole window, saying which rows of how many it shows.
#[test]
fn the_job_list_pages_through_the_window_with_links_that_pin_it() {
    let (_, first) = get("/jobs?cluster=lab&start=1796000000&end=1796040000&limit=1&sort=job_id");
    assert_eq!(first.matches("data-testid=\"job-row\"").count(), 1, "{first}");
    assert!(first.contains("1–1 of 2 jobs"), "{first}");
    assert!(first.contains("page 1 of 2"), "{first}");
    assert!(first.contains("data-job=\"7\""), "job 7 sorts first by id: {first}");
    let next = first.split("data-testid=\"jobs-next\"").next().and_then(|head| head.rsplit("href=\"").next());
    let next = next.and_then(|tail| tail.split('"').next()).expect("a next link").replace("&amp;", "&");
    assert!(next.contains("page=2") && next.contains("start=1796000000") && next.contains("sort=job_id"), "{next}");
    let (_, second) = get(&next);
    assert!(second.contains("2–2 of 2 jobs") && second.contains("data-job=\"8\""), "{second}");
    assert!(second.contains("data-testid=\"jobs-previous\""), "{second}");
}

/// Issue #36: `/nodes` lists every node, linking to its page, and filters by state.
#[test]
fn the_node_list_names_every_node_with_its_state_and_links_to_it() {
    let (status, html) = get("/nodes?cluster=lab");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(html.matches("data-testid=\"node-row\"").count(), 4, "{html}");
    assert!(html.contains("href=\"/nodes/n1?cluster=lab\""), "{html}");
    assert!(html.contains("4 nodes"), "{html}");
    let (_, down) = get("/nodes?cluster=lab&state=down");
    assert_eq!(down.matches("data-testid=\"node-row\"").count(), 0, "no node is down: {down}");
}

#[test]
fn a_job_page_shows_the_facts_and_a_missing_job_is_a_404() {
    let (status, html) = get("/jobs/7?cluster=lab");
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("data-fact=\"NodeList\">n1<"), "{html}");
    assert!(html.contains("report not available yet"));
    let (status, html) = get("/jobs/99?cluster=lab");
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains("load-error"));
}

#[test]
fn every_page_has_a_go_to_job_box_that_works_without_scripts() {
    let (_, html) = get("/jobs?cluster=lab");
    assert!(html.contains(r#"action="/go""#) && html.contains(r#"name="job""#), "the header's box: {html}");
    let response = RUNTIME.block_on(async {
        app_with(WebOptions::default())
            .oneshot(Request::get("/go?job=+7+").body(Body::empty()).expect("request"))
            .await
            .expect("answer")
    });
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(response.headers()["location"], "/jobs/7", "trimmed, and every cluster searched");
    let node = RUNTIME.block_on(async {
        app_with(WebOptions::default())
            .oneshot(Request::get("/go?job=gpu006&cluster=sakura").body(Body::empty()).expect("request"))
            .await
            .expect("answer")
    });
    assert_eq!(node.headers()["location"], "/nodes/gpu006?cluster=sakura", "a node's name goes to its page");
    let (status, _) = get("/go?job=");
    assert_eq!(status, StatusCode::SEE_OTHER, "an empty box goes to the job list");
}

#[test]
fn a_report_without_node_or_lustre_exporters_says_so() {
    let (status, html) = get("/jobs/8?cluster=lab");
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("data-testid=\"report-nodes-missing\""), "{html}");
    assert!(html.contains("data-source=\"none\""), "the file-system line says none: {html}");
    assert!(!html.contains("data-testid=\"report-nodes\""), "no empty node table");
}

#[test]
fn a_job_page_shows_its_script_escaped_cut_and_who_may_read_it() {
    let (status, html) = get("/jobs/7?cluster=lab");
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("echo \"&lt;b&gt;hi&lt;/b&gt;\""), "the script as text: {html}");
    assert!(!html.contains("<b>hi</b>"), "the script is text, never markup");
    assert!(html.contains("cut after its first 25 of 300000 characters"), "{html}");
    assert!(html.contains("coordinators of account ml and staff"), "the page says who can see it");
    assert!(html.contains("data-testid=\"script-env-withheld\"") && !html.contains("data-testid=\"script-env\""));
    let (_, other) = get("/jobs/8?cluster=lab");
    assert!(other.contains("script not available"), "a job without a script says so");
}

#[test]
fn each_chart_links_its_query_and_the_report_its_dashboard() {
    let (status, html) = get("/jobs/8?cluster=lab");
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("href=\"http://vm:8428/vmui/#/?g0.expr=q&amp;g0.tab=0\""), "{html}");
    assert!(
        html.contains(r#"<code data-testid="chart-query">sum by (instance) (rate(x{instance=~"n2"}[60s]))</code>"#)
    );
    assert!(html.contains("data-testid=\"report-dashboard\""), "{html}");
    assert!(!html.contains("data-testid=\"chart-grafana\""), "no Grafana configured: vmui alone");
}

#[test]
fn the_grid_names_the_job_on_each_gpu_at_the_moment_asked() {
    let at = chrono::DateTime::parse_from_rfc3339("2026-11-29T10:45:00Z").expect("time").timestamp();
    let (status, html) = get(&format!("/grid?cluster=lab&at={at}"));
    assert_eq!(status, StatusCode::OK);
    assert_eq!(html.matches("data-testid=\"gpu-cell\"").count(), 16, "4 nodes × 4 GPUs (inferred)");
    assert_eq!(html.matches("data-job=\"7\"").count(), 2, "job 7 holds two GPUs of n1");
    assert_eq!(html.matches("data-job=\"8\"").count(), 4, "job 8 holds n2's four GPUs");
}

#[test]
fn exports_and_the_static_gantt_come_from_the_same_rows() {
    let (status, csv) = get("/web/v1/jobs.csv?cluster=lab&sort=alloc_gpus&desc=1");
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<&str> = csv.lines().skip(1).map(|line| line.split(',').next().unwrap_or("")).collect();
    assert_eq!(ids, ["8", "7"]);
    let (status, svg) = get("/web/v1/gantt.svg?cluster=lab&start=1796032800&end=1796040000");
    assert_eq!(status, StatusCode::OK);
    assert!(svg.starts_with("<svg") && svg.contains("n1"), "{svg}");
    // Issue #36: a down node is hatched on its row, never drawn as idle.
    assert_eq!(svg.matches("fill=\"url(#state-down)\"").count(), 1, "{svg}");
    assert!(svg.contains("<title>DOWN+NOT_RESPONDING down: Xid 79: GPU has fallen off the bus</title>"), "{svg}");
    let (_, json) = get("/web/v1/gantt?cluster=lab&start=1796032800&end=1796040000");
    assert!(json.contains("\"node_states\":[{") && json.contains("\"kind\":\"down\""), "{json}");
    let (status, body) = get("/web/v1/gantt?cluster=nowhere");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("unknown cluster"));
}

/// The whole tag of GPU cell `node`/`gpu` in `html`.
fn gpu_cell(html: &str, node: &str, gpu: u16) -> String {
    let marker = format!("data-node=\"{node}\" data-gpu=\"{gpu}\"");
    let at = html.find(&marker).unwrap_or_else(|| panic!("no cell {node}/{gpu} in {html}"));
    let start = html[..at].rfind('<').expect("tag start");
    let end = at + html[at..].find('>').expect("tag end");
    html[start..=end].to_string()
}

/// 2026-11-29T10:45:00Z: job 7 (alice) holds n1's GPUs 0 and 1, job 8 (bob) n2's four.
const MOMENT: i64 = 1_795_949_100;

#[test]
fn the_grid_tells_free_idle_held_and_unmonitored_gpus_apart() {
    // Regression (review "pages a tenant and a site can trust", problems 6 and 7): free GPUs and
    // allocated idle ones looked alike, and so did GPUs without a series and free ones.
    let (status, html) = get(&format!("/grid?cluster=lab&at={MOMENT}&metric=gpu_util"));
    assert_eq!(status, StatusCode::OK);
    let cell = |node: &str, gpu: u16| gpu_cell(&html, node, gpu);
    assert!(
        cell("n1", 0).contains("class=\"gpu held\"") && cell("n1", 0).contains("background:#FDE725"),
        "{}",
        cell("n1", 0)
    );
    assert!(cell("n1", 0).contains("gpu_util 97 %"), "the reading is named: {}", cell("n1", 0));
    assert!(cell("n1", 1).contains("class=\"gpu held idle\""), "3 % on a held GPU is idle: {}", cell("n1", 1));
    assert!(cell("n1", 1).contains("allocated but idle"), "{}", cell("n1", 1));
    assert!(
        cell("n1", 2).contains("class=\"gpu free\"") && cell("n1", 2).contains("background:#FFFFFF"),
        "{}",
        cell("n1", 2)
    );
    assert!(cell("n1", 3).contains("class=\"gpu free unmonitored\""), "no series: {}", cell("n1", 3));
    assert!(cell("n2", 0).contains("class=\"gpu held idle\""), "{}", cell("n2", 0));
    assert!(cell("n2", 1).contains("class=\"gpu held unmonitored\""), "{}", cell("n2", 1));
    assert!(cell("n2", 1).contains("not monitored (no reading)"), "{}", cell("n2", 1));
    let background =
        |tag: String| tag.split("background:").nth(1).and_then(|rest| rest.split('"').next()).map(str::to_string);
    let (idle, free, unmonitored) = (background(cell("n1", 1)), background(cell("n1", 2)), background(cell("n1", 3)));
    assert!(idle != free && free != unmonitored && idle != unmonitored, "{idle:?} {free:?} {unmonitored:?}");
    for kind in ["free", "idle", "unmonitored"] {
        assert!(html.contains(&format!("data-kind=\"{kind}\"")), "the legend explains `{kind}`");
    }
    assert!(html.contains("data-testid=\"grid-metric-legend\""));
    assert!(
        html.contains("gpu_util readings from 2026-11-29 10:31:00 UTC, 14 min before this moment."),
        "the readings say how old they are: {html}"
    );
}

#[test]
fn the_grid_at_now_shows_the_latest_readings_and_how_old_they_are() {
    // Regression (review problem 6): at now every GPU read "no data", the last sample being 15 min old.
    let (status, html) = get("/grid?cluster=lab&metric=gpu_util");
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("gpu_util readings from 14 min ago"), "{html}");
    assert!(html.contains("data-age-s=\"840\""), "{html}");
}

#[test]
fn xid_reads_no_error_a_classified_code_or_not_monitored() {
    // Regression (review problem 6): XID was a ten-step gradient and healthy GPUs read "no data".
    let (status, html) = get(&format!("/grid?cluster=lab&at={MOMENT}&metric=xid"));
    assert_eq!(status, StatusCode::OK);
    let cell = |node: &str, gpu: u16| gpu_cell(&html, node, gpu);
    assert!(cell("n1", 0).contains("class=\"gpu held healthy\""), "{}", cell("n1", 0));
    assert!(cell("n1", 0).contains("no XID"), "{}", cell("n1", 0));
    assert!(cell("n1", 1).contains("class=\"gpu held xid-application\""), "{}", cell("n1", 1));
    assert!(cell("n1", 1).contains("XID 31: GPU memory page fault (application fault)"), "{}", cell("n1", 1));
    assert!(cell("n2", 0).contains("class=\"gpu held xid-hardware\""), "{}", cell("n2", 0));
    assert!(
        cell("n2", 0).contains("XID 79: GPU has fallen off the bus (hardware or driver fault)"),
        "{}",
        cell("n2", 0)
    );
    assert!(cell("n1", 2).contains("class=\"gpu free unmonitored\""), "{}", cell("n1", 2));
    assert!(html.contains("data-code=\"79\" data-strength=\"strong\""), "the legend names the codes present");
    assert!(html.contains("data-code=\"31\" data-strength=\"application\""));
    for kind in ["healthy", "xid-hardware", "xid-application", "unmonitored", "free"] {
        assert!(html.contains(&format!("data-kind=\"{kind}\"")), "the legend explains `{kind}`");
    }
    assert!(!html.contains("no error → XID set"), "no gradient for a categorical value");
}

#[test]
fn a_moment_in_the_future_or_not_a_time_is_refused_with_a_message() {
    // Regression (review problem 9): `?at=2030-03-17` drew today's running jobs four years ahead.
    let (status, html) = get("/grid?cluster=lab&at=2030-03-17");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains("2030-03-17 00:00Z is in the future: GPUs are shown up to now"), "{html}");
    assert!(html.contains("data-testid=\"grid-now\""), "a way back to now");
    assert!(!html.contains("data-testid=\"gpu-cell\""), "nothing is drawn for the future");
    let (status, body) = get("/web/v1/grid?cluster=lab&at=2030-03-17");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("is in the future"), "{body}");
    let (status, html) = get("/grid?cluster=lab&at=yesterday");
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(html.contains("`yesterday` is not a moment"), "{html}");
}

#[test]
fn node_names_are_ink_on_the_panel_and_hovers_say_what_jobs_were_doing_then() {
    // Regression (review problem 7): node names were black on job colours (1.7:1 on indigo), and a
    // running job's hover read "COMPLETED since 10:00".
    let (_, html) = get(&format!("/grid?cluster=lab&at={MOMENT}"));
    let from = html.find("data-testid=\"node-cell\" data-node=\"n2\"").expect("n2");
    let node = &html[from..from + 900];
    let server = &node[node.find("<span").expect("server span")..];
    let server = &server[..server.find('>').expect("tag end")];
    assert!(server.contains("class=\"server\"") && !server.contains("style="), "no background behind the name: {node}");
    // The name links to the node's page.
    assert!(node.contains("data-testid=\"node-label\" href=\"/nodes/n2?cluster=lab\" class=\"name\">n2<"), "{node}");
    let bar = format!("class=\"holders\" style=\"background:{}", slurmlens_web::palette::job_colour("8"));
    assert!(node.contains(&bar), "the job's colour is the bar beneath: {node}");
    let alice = gpu_cell(&html, "n1", 0);
    assert!(
        alice.contains(
            "job 7 (alice, ml, gpu): running then, since 2026-11-29 10:00; ended 2026-11-29 11:00 as COMPLETED"
        ),
        "{alice}"
    );
    assert!(gpu_cell(&html, "n2", 0).contains("running then, since 2026-11-29 10:30; still running"));
    assert!(gpu_cell(&html, "n1", 3).contains("n1 GPU 3: free (no job)"));
}

#[test]
fn a_user_keeps_one_colour_across_windows_and_pages() {
    // Regression (review problem 5): colours went to the top users of each view.
    let svg_of = |start: i64, end: i64| get(&format!("/web/v1/gantt.svg?cluster=lab&start={start}&end={end}")).1;
    let bob = slurmlens_web::palette::IDENTITY[1];
    let day = svg_of(MOMENT - 86_400, MOMENT + 3600);
    let hour = svg_of(MOMENT - 60, MOMENT + 3600);
    assert!(day.contains(&format!("fill=\"{bob}\"")) && hour.contains(&format!("fill=\"{bob}\"")), "{day}\n{hour}");
    let (_, grid) = get(&format!("/grid?cluster=lab&at={MOMENT}&colour=user"));
    assert!(gpu_cell(&grid, "n2", 0).contains(&format!("background:{bob}")), "the same colour on the grid");
    // A tenant learns no one else's colour slot.
    let (_, json) = get_as(Some("bob"), &format!("/web/v1/gantt?cluster=lab&start={}&end={}", MOMENT - 86_400, MOMENT));
    assert!(json.contains("\"users\":{\"bob\":1}") && !json.contains("alice"), "{json}");
}

#[test]
fn a_tenant_sees_other_tenants_gpus_as_busy_cells_that_name_no_one() {
    // Tenancy on the grid: alice's job 7 holds two GPUs of n1 at this moment; bob sees them busy, unnamed.
    let at = chrono::DateTime::parse_from_rfc3339("2026-11-29T10:45:00Z").expect("time").timestamp();
    for path in [format!("/grid?cluster=lab&at={at}"), format!("/grid?cluster=lab&at={at}&metric=gpu_util")] {
        let (status, html) = get_as(Some("bob"), &path);
        assert_eq!(status, StatusCode::OK);
        assert_eq!(html.matches("data-job=\"8\"").count(), 4, "bob's own job keeps its cells: {html}");
        assert_eq!(html.matches("data-busy=\"true\"").count(), 2, "alice's two GPUs are busy: {html}");
        assert!(
            html.contains("n1 GPU 0: busy: another tenant&#x27;s job")
                || html.contains("n1 GPU 0: busy: another tenant's job")
        );
        assert!(html.contains("data-testid=\"grid-busy-legend\""), "the legend explains the hatch");
        // Neither the markup nor the hydration data names alice or her job.
        for leak in ["alice", "job-7", "data-job=\"7\"", "/jobs/7", "job 7", "\"job_id\":\"7\""] {
            assert!(!html.contains(leak), "`{leak}` leaked into bob's grid ({path}): {html}");
        }
        // A busy cell never carries a reading, even where the source has one.
        let from = html.find("data-node=\"n1\" data-gpu=\"0\"").expect("cell n1/0");
        assert!(!html[from..from + 400].contains("gpu_util"), "{}", &html[from..from + 400]);
    }
    let (status, json) = get_as(Some("bob"), &format!("/web/v1/grid?cluster=lab&at={at}"));
    assert_eq!(status, StatusCode::OK);
    assert!(!json.contains("alice") && !json.contains("job-7"), "{json}");
    let grid: slurmlens_web::grid::GridSnapshot = serde_json::from_str(&json).expect("grid JSON");
    assert_eq!(grid.nodes[0].busy, [0, 1]);
    assert_eq!(grid.jobs.iter().map(|job| job.job_id.as_str()).collect::<Vec<_>>(), ["8"]);
    // Without a signed-in user the fixture answers like staff: alice's job by name, nothing busy.
    let (_, html) = get(&format!("/grid?cluster=lab&at={at}"));
    assert!(html.contains("data-job=\"7\"") && !html.contains("data-busy"));
}

#[test]
fn every_time_on_a_page_is_in_the_viewers_zone_and_the_page_says_which() {
    // No choice made: UTC, said in the header and in the page's zone for the bundle.
    let (_, html) = get("/jobs?cluster=lab&start=1796000000&end=1796040000");
    assert!(html.contains("<meta name=\"slurmlens-zone\" content=\"UTC\""), "{html}");
    assert!(html.contains("data-zone=\"UTC\""), "the header's choice shows UTC");
    assert!(html.contains(">2026-11-29 10:00<"), "job 7's start in UTC: {html}");
    // The viewer chose Tokyo: the same job starts at 19:00 there, the hover gives both clocks, and the
    // list's form fields and their labels are on that clock too.
    let tokyo = Some(("Cookie", "theme=dark; slurmlens_tz=Asia/Tokyo"));
    let (_, _, html) = request(WebOptions::default(), "/jobs?cluster=lab&start=1796000000&end=1796040000", tokyo);
    assert!(html.contains("<meta name=\"slurmlens-zone\" content=\"Asia/Tokyo\""), "{html}");
    assert!(html.contains(">2026-11-29 19:00<"), "job 7's start in Tokyo: {html}");
    assert!(!html.contains(">2026-11-29 10:00<"), "no second clock: {html}");
    assert!(html.contains("title=\"2026-11-29 19:00:00 UTC+09:00 = 2026-11-29 10:00:00 UTC\""), "{html}");
    assert!(html.contains("From (UTC+09:00)") && html.contains("value=\"2026-11-30T09:53\""), "{html}");
    assert!(html.contains("name=\"tz\" value=\"Asia/Tokyo\""), "the form says its zone");
    // The grid's hover, its form and the moment it shows, on the same clock.
    let (_, _, html) = request(WebOptions::default(), &format!("/grid?cluster=lab&at={MOMENT}"), tokyo);
    assert!(html.contains("since 2026-11-29 19:00; ended 2026-11-29 20:00 as COMPLETED"), "{html}");
    // A site whose default is Berlin shows Berlin to viewers who chose nothing, and offers it.
    let berlin = WebOptions { time_zone: "Europe/Berlin".parse().expect("a zone"), ..WebOptions::default() };
    let (_, _, html) = request(berlin, "/jobs?cluster=lab&start=1796000000&end=1796040000", None);
    assert!(
        html.contains(">2026-11-29 11:00<") && html.contains(">Europe/Berlin (UTC+01:00), site default<"),
        "{html}"
    );
}

#[test]
fn choosing_a_zone_keeps_it_in_a_cookie_and_goes_back_to_the_same_page() {
    let (status, headers, _) = request(WebOptions::default(), "/zone?tz=Asia/Tokyo&to=%2Fjobs%3Fcluster%3Dlab", None);
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers["location"], "/jobs?cluster=lab");
    let cookie = headers["set-cookie"].to_str().expect("text");
    assert!(cookie.starts_with("slurmlens_tz=Asia/Tokyo;") && cookie.contains("SameSite=Lax"), "{cookie}");
    // Elsewhere than this site is never where it goes back to.
    for to in ["https://evil.example/", "//evil.example/", "/\\evil.example/"] {
        let (_, headers, _) = request(
            WebOptions::default(),
            &format!("/zone?tz=UTC&to={}", slurmlens_web::query::percent_encode(to)),
            None,
        );
        assert_eq!(headers["location"], "/", "{to}");
    }
    // An unknown zone is a 400 that says so, and sets nothing.
    let (status, headers, body) = request(WebOptions::default(), "/zone?tz=Mars%2FOlympus&to=%2F", None);
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(headers.get("set-cookie").is_none());
    assert!(body.contains("unknown time zone `Mars/Olympus`"), "{body}");
}

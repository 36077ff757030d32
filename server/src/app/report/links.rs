//! Where a report's charts came from, and links that open them in the site's own tools: per chart the
//! raw PromQL of its timeline (written by the report's plan, so it is the query the chart was drawn
//! from) over the report's window and step, as a VictoriaMetrics vmui link and a Grafana Explore link;
//! and the site's per-job Grafana dashboard with the job's id, hosts and window as variables.
//!
//! Tenant safety and trust: a GPU chart's query names the GPUs the page shows, node by node (nodes
//! that show the same indices share one selector), and a shared node the page draws as a band is
//! queried as that band (lowest, mean, highest of its GPUs), never as another tenant's GPU series.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use slurmlens_wire as wire;

use super::Reporter;
use super::plan::{FaultScope, Tiles, Wanted};
use super::rules::Reads;

/// What a URL component may hold unescaped: RFC 3986's unreserved characters.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

fn encode(text: &str) -> String {
    utf8_percent_encode(text, COMPONENT).to_string()
}

/// The site's tools a report links to (`[links]`, with vmui's base already resolved).
#[derive(Debug, Clone, Default)]
pub struct LinkSettings {
    /// Grafana as users reach it, without a trailing `/`; none: no Grafana links.
    pub grafana_url: Option<String>,
    /// Grafana's data source for this VictoriaMetrics; Explore links need it.
    pub datasource_uid: Option<String>,
    /// The data source's plugin type (`prometheus`, `victoriametrics-metrics-datasource`).
    pub datasource_type: String,
    pub org_id: u32,
    /// The per-job dashboard; none: no dashboard link.
    pub dashboard_uid: Option<String>,
    /// vmui as users reach it, ending in `/`; none: no vmui links.
    pub vmui_url: Option<String>,
}

/// vmui's base beside a VictoriaMetrics Prometheus API root as the server reaches it: single node
/// `http://vm:8428` → `http://vm:8428/vmui/`; vmselect `…/select/0/prometheus` → `…/select/0/vmui/`.
/// Credentials and query are dropped: a link must never carry the server's secrets.
pub fn vmui_beside(vm_url: &str) -> Option<String> {
    let mut url = reqwest::Url::parse(vm_url).ok()?;
    url.set_username("").ok()?;
    url.set_password(None).ok()?;
    url.set_query(None);
    url.set_fragment(None);
    let path = url.path().trim_end_matches('/');
    let path = path.strip_suffix("/prometheus").unwrap_or(path);
    let path = format!("{path}/vmui/");
    url.set_path(&path);
    Some(url.to_string())
}

impl LinkSettings {
    /// `query` over `[start, end]` at `step_s` in vmui.
    pub fn vmui(&self, query: &str, start: DateTime<Utc>, end: DateTime<Utc>, step_s: u64) -> Option<String> {
        let base = self.vmui_url.as_deref()?;
        let range_s = (end - start).num_seconds().max(1);
        Some(format!(
            "{base}#/?g0.expr={}&g0.range_input={range_s}s&g0.end_input={}&g0.step_input={step_s}s&g0.relative_time=none&g0.tab=0",
            encode(query),
            encode(&end.format("%Y-%m-%dT%H:%M:%S").to_string()),
        ))
    }

    /// `query` over `[start, end]` at `step_s` in Grafana Explore (its `panes` URL, Grafana 10 and later).
    pub fn explore(&self, query: &str, start: DateTime<Utc>, end: DateTime<Utc>, step_s: u64) -> Option<String> {
        let (grafana, uid) = (self.grafana_url.as_deref()?, self.datasource_uid.as_deref()?);
        let datasource = serde_json::json!({"type": self.datasource_type, "uid": uid});
        let panes = serde_json::json!({
            "slurmlens": {
                "datasource": uid,
                "queries": [{"refId": "A", "expr": query, "range": true, "instant": false,
                             "interval": format!("{step_s}s"), "datasource": datasource}],
                "range": {"from": start.timestamp_millis().to_string(), "to": end.timestamp_millis().to_string()},
            }
        });
        Some(format!("{grafana}/explore?schemaVersion=1&orgId={}&panes={}", self.org_id, encode(&panes.to_string())))
    }

    /// The per-job dashboard with `var-cluster`, `var-job`, one `var-host` per node and the window.
    pub fn dashboard(
        &self,
        cluster: &str,
        job_id: &str,
        hosts: &[String],
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Option<String> {
        let (grafana, uid) = (self.grafana_url.as_deref()?, self.dashboard_uid.as_deref()?);
        let hosts: String = hosts.iter().map(|host| format!("&var-host={}", encode(host))).collect();
        Some(format!(
            "{grafana}/d/{}?orgId={}&from={}&to={}&var-cluster={}&var-job={}{hosts}",
            encode(uid),
            self.org_id,
            start.timestamp_millis(),
            end.timestamp_millis(),
            encode(cluster),
            encode(job_id),
        ))
    }
}

/// Some of a report's GPUs as its page shows them: each GPU of `nodes` at `indices` as a line, or
/// (`band`) every GPU of `nodes` as one band, the lowest, mean and highest of them.
#[derive(Debug, PartialEq)]
struct GpuScope {
    nodes: Vec<String>,
    indices: Vec<u16>,
    band: bool,
}

/// How `report` shows its GPUs, as few scopes as the page allows: nodes showing the same indices
/// share one, and the shared nodes drawn as a band (a tenant's view) are one band together, as the
/// page merges them.
fn gpu_scopes(report: &wire::JobReport) -> Vec<GpuScope> {
    let mut per_node: BTreeMap<&str, BTreeSet<u16>> = BTreeMap::new();
    for gpu in &report.gpus {
        per_node.entry(gpu.node.as_str()).or_default().insert(gpu.gpu);
    }
    let mut by_indices: BTreeMap<BTreeSet<u16>, Vec<String>> = BTreeMap::new();
    for (node, indices) in per_node {
        by_indices.entry(indices).or_default().push(node.to_string());
    }
    let mut scopes: Vec<GpuScope> = by_indices
        .into_iter()
        .map(|(indices, nodes)| GpuScope { nodes, indices: indices.into_iter().collect(), band: false })
        .collect();
    let banded: Vec<String> = report.shared_node_bands.iter().map(|band| band.node.clone()).collect();
    if !banded.is_empty() {
        scopes.push(GpuScope { nodes: banded, indices: Vec::new(), band: true });
    }
    scopes
}

/// The band a page draws across the GPUs of `lines` (one series per GPU): three series, labelled
/// `band="lowest"`, `"mean"` and `"highest"`, in PromQL that any Prometheus-compatible tool runs.
fn band_of(lines: &str) -> String {
    [("min", "lowest"), ("avg", "mean"), ("max", "highest")]
        .into_iter()
        .map(|(aggregate, name)| format!(r#"label_replace({aggregate}({lines}), "band", "{name}", "", "")"#))
        .collect::<Vec<_>>()
        .join(" or ")
}

impl Reporter {
    /// The query of a GPU metric's chart as the page draws it: per scope its GPUs' lines or its band,
    /// joined with `or`; none where the page shows no GPU.
    fn gpu_chart_query(&self, key: &str, scopes: &[GpuScope], step_s: u64) -> Option<String> {
        let spec = self.settings.catalog.gpu_metric(key)?;
        let parts: Vec<String> = scopes
            .iter()
            .map(|scope| {
                let selectors = self.gpu_selectors(&spec.name, &scope.nodes, &scope.indices);
                let lines = self.bucket_means(&selectors, step_s);
                if scope.band { band_of(&lines) } else { lines }
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(" or "))
    }

    /// Puts on `report` (as the viewer will see it) each chart's query with its links, and the per-job
    /// dashboard link. `nodes` are the job's nodes; `vmui`: whether vmui answers here
    /// ([`Reporter::vmui_answers`]). A report without a window or a step gets none.
    pub fn attach_links(&self, report: &mut wire::JobReport, job_id: u32, nodes: &[String], vmui: bool) {
        let links = &self.settings.links;
        let (Some(start), Some(end)) = (report.window_start, report.window_end) else { return };
        report.dashboard_url = links.dashboard(&report.job.cluster, &report.job.job_id, nodes, start, end);
        let step_s = report.metrics.step_s;
        if step_s == 0 || !self.has_metrics_source() {
            return;
        }
        let tiles = Tiles::new(start, end, step_s);
        let scopes = gpu_scopes(report);
        // The nodes' own charts (network, node, I/O) from the plan; the GPU charts per scope.
        let plan = self.plan(job_id, nodes, &[], &tiles, &FaultScope::default(), &Reads::Raw(None));
        let (from, to) = (tiles.first_bucket_end(), tiles.end);
        report.chart_queries = plan
            .into_iter()
            .filter_map(|planned| {
                let (metric, query) = match planned.what {
                    Wanted::Buckets(key, _) => {
                        let query = self.gpu_chart_query(&key, &scopes, step_s)?;
                        (key, query)
                    }
                    Wanted::NodeTimeline(key, _) => (key, planned.query),
                    Wanted::Io(key, _, false) => (key.to_string(), planned.query),
                    _ => return None,
                };
                Some(wire::ChartQuery {
                    vmui_url: links.vmui(&query, from, to, step_s).filter(|_| vmui),
                    grafana_url: links.explore(&query, from, to, step_s),
                    metric,
                    query,
                    start: from,
                    end: to,
                    step_s,
                })
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{END, START, at, reporter};
    use super::*;

    fn settings() -> LinkSettings {
        LinkSettings {
            grafana_url: Some("https://grafana.example.org".into()),
            datasource_uid: Some("vm-main".into()),
            datasource_type: "prometheus".into(),
            org_id: 1,
            dashboard_uid: Some("slurm-job".into()),
            vmui_url: vmui_beside("http://reader:pw@vm.internal:8428"),
        }
    }

    #[test]
    fn vmui_sits_beside_the_prometheus_root_without_credentials() {
        assert_eq!(vmui_beside("http://reader:pw@vm.internal:8428").as_deref(), Some("http://vm.internal:8428/vmui/"));
        assert_eq!(
            vmui_beside("http://vmselect:8481/select/0/prometheus/").as_deref(),
            Some("http://vmselect:8481/select/0/vmui/")
        );
        assert_eq!(vmui_beside("not a url"), None);
    }

    #[test]
    fn links_carry_the_exact_query_and_window() {
        let query = r#"max by (Hostname, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu001"}[60s]))"#;
        let (start, end) = (at(START), at(END));
        let vmui = settings().vmui(query, start, end, 60).expect("a vmui link");
        assert!(vmui.starts_with("http://vm.internal:8428/vmui/#/?g0.expr=max%20by%20%28Hostname"), "{vmui}");
        assert!(vmui.contains("&g0.range_input=3600s&") && vmui.contains("&g0.step_input=60s&"), "{vmui}");
        assert!(vmui.contains(&format!("g0.end_input={}", encode(&end.format("%Y-%m-%dT%H:%M:%S").to_string()))));
        let explore = settings().explore(query, start, end, 60).expect("an Explore link");
        let panes = explore.split("&panes=").nth(1).expect("panes");
        let decoded = percent_encoding::percent_decode_str(panes).decode_utf8().expect("UTF-8");
        let panes: serde_json::Value = serde_json::from_str(&decoded).expect("panes are JSON");
        assert_eq!(panes["slurmlens"]["queries"][0]["expr"], query);
        assert_eq!(panes["slurmlens"]["queries"][0]["datasource"]["uid"], "vm-main");
        assert_eq!(panes["slurmlens"]["range"]["from"], start.timestamp_millis().to_string());
        assert_eq!(panes["slurmlens"]["range"]["to"], end.timestamp_millis().to_string());
        let dashboard =
            settings().dashboard("lab", "42", &["n1".into(), "n2".into()], start, end).expect("a dashboard link");
        assert!(dashboard.starts_with("https://grafana.example.org/d/slurm-job?orgId=1&from="), "{dashboard}");
        assert!(dashboard.ends_with("&var-cluster=lab&var-job=42&var-host=n1&var-host=n2"), "{dashboard}");
    }

    /// Job 4242's report on `gpu[001-002]` showing `gpus` (node, index), with minute steps.
    fn report_showing(gpus: &[(&str, u16)]) -> wire::JobReport {
        use super::super::fixtures::failed_job;
        use crate::domain::tres::{TresCatalog, TresId, TresKind};
        let kind = |id, kind: &str, name: &str| TresKind { id: TresId(id), kind: kind.into(), name: name.into() };
        let catalog = TresCatalog::new([kind(1, "cpu", ""), kind(4, "node", ""), kind(1001, "gres", "gpu")]);
        let job = crate::app::wire_map::job(&failed_job(), &catalog, "lab", END as u64);
        let mut report = super::super::unassembled(job, wire::ReportSource::Final, at(END), Some((at(START), at(END))));
        report.metrics.step_s = 60;
        report.gpus = gpus
            .iter()
            .map(|(node, gpu)| wire::GpuReport {
                node: node.to_string(),
                gpu: *gpu,
                uuid: None,
                attribution: wire::Attribution::PluginRecord,
                uncertain: false,
                summary: Vec::new(),
                series: Vec::new(),
                xid_events: Vec::new(),
            })
            .collect();
        report
    }

    fn reporter_with_links() -> Reporter {
        let vm = crate::sources::victoriametrics::VictoriaMetrics::new(
            "http://vm.internal:8428",
            std::time::Duration::from_secs(1),
        )
        .expect("a client");
        let settings = super::super::ReportSettings { links: settings(), ..Default::default() };
        Reporter::new(Some(vm), None, settings)
    }

    #[test]
    fn every_chart_links_its_query_naming_only_the_gpus_and_nodes_the_page_shows() {
        let nodes = vec!["gpu001".to_string(), "gpu002".to_string()];
        let mut report = report_showing(&[("gpu001", 2), ("gpu001", 3), ("gpu002", 2), ("gpu002", 3)]);
        reporter_with_links().attach_links(&mut report, 4242, &nodes, true);
        let util = report.chart_queries.iter().find(|q| q.metric == "gpu_util").expect("the utilisation chart's query");
        assert!(util.query.contains(r#"=~"gpu001|gpu002""#) && util.query.contains(r#"=~"2|3""#), "{}", util.query);
        assert!(util.query.contains("[60s]"), "the chart's own step: {}", util.query);
        assert_eq!((util.start, util.end, util.step_s), (at(START + 60), at(END), 60), "the chart's buckets");
        assert!(util.vmui_url.as_deref().is_some_and(|url| url.starts_with("http://vm.internal:8428/vmui/#/")));
        assert!(util.grafana_url.is_some());
        assert!(report.chart_queries.iter().any(|q| q.metric == "rdma_rx"), "node charts too");
        for query in &report.chart_queries {
            let names_other_nodes = query.query.contains("gpu003") || !query.query.contains("gpu001");
            let lustre_jobstats = query.metric.starts_with("lustre") && query.query.contains("4242");
            assert!(!names_other_nodes || lustre_jobstats, "{}: {}", query.metric, query.query);
        }
        assert!(report.dashboard_url.as_deref().is_some_and(|url| url.contains("&var-job=4242&var-host=gpu001")));

        // Nodes shown with different GPUs: each node's own, and no index of one asked on the other.
        let mut uneven = report_showing(&[("gpu001", 0), ("gpu002", 5)]);
        reporter_with_links().attach_links(&mut uneven, 4242, &nodes, true);
        let util = uneven.chart_queries.iter().find(|q| q.metric == "gpu_util").expect("a query");
        assert!(util.query.contains(r#"{Hostname=~"gpu001",gpu=~"0"}"#), "{}", util.query);
        assert!(util.query.contains(r#"{Hostname=~"gpu002",gpu=~"5"}"#), "{}", util.query);
        assert!(!util.query.contains("gpu001|gpu002") && !util.query.contains(r#"gpu=~"0|5""#), "{}", util.query);
        let mut without_metrics = report_showing(&[]);
        reporter().attach_links(&mut without_metrics, 4242, &nodes, true);
        assert!(without_metrics.chart_queries.is_empty(), "no metrics source, no queries");
    }

    #[test]
    fn a_shared_node_drawn_as_a_band_is_queried_as_that_band() {
        let nodes = vec!["gpu001".to_string(), "gpu002".to_string()];
        // A tenant's view: gpu001's GPUs 0 and 1 are the job's; gpu002 was shared without a record.
        let mut report = report_showing(&[("gpu001", 0), ("gpu001", 1)]);
        report.shared_node_bands =
            vec![wire::SharedNodeBand { node: "gpu002".into(), gpus: 8, summary: Vec::new(), spread: Vec::new() }];
        reporter_with_links().attach_links(&mut report, 4242, &nodes, true);
        let util = report.chart_queries.iter().find(|q| q.metric == "gpu_util").expect("a query");
        let lines = r#"max by (Hostname, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"gpu002"}[60s]))"#;
        for (aggregate, name) in [("min", "lowest"), ("avg", "mean"), ("max", "highest")] {
            let band = format!(r#"label_replace({aggregate}({lines}"#);
            assert!(util.query.contains(&band), "{band} in {}", util.query);
            assert!(util.query.contains(&format!(r#""band", "{name}", "", "")"#)), "{name}: {}", util.query);
        }
        assert!(util.query.contains(r#"{Hostname=~"gpu001",gpu=~"0|1"}"#), "the job's own GPUs: {}", util.query);
        // gpu002 is never asked GPU by GPU outside the band.
        let outside = util.query.split("label_replace(").next().unwrap_or_default();
        assert!(!outside.contains("gpu002"), "{}", util.query);
        assert_eq!(
            gpu_scopes(&report),
            [
                GpuScope { nodes: vec!["gpu001".into()], indices: vec![0, 1], band: false },
                GpuScope { nodes: vec!["gpu002".into()], indices: Vec::new(), band: true },
            ]
        );
    }

    #[test]
    fn a_site_without_grafana_gets_vmui_alone() {
        let only_vm = LinkSettings { grafana_url: None, ..settings() };
        let (start, end) = (at(START), at(END));
        assert!(only_vm.vmui("up", start, end, 60).is_some());
        assert_eq!(only_vm.explore("up", start, end, 60), None);
        assert_eq!(only_vm.dashboard("lab", "42", &[], start, end), None);
    }
}

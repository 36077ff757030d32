//! Tests of the demo's GPU, RDMA, ping-mesh and burst series.

use super::*;

#[test]
fn series_follow_the_workloads() {
    let workloads = vec![
        GpuWorkload {
            node: "gpu001".into(),
            gpu: 0,
            job_id: 1,
            start: 0,
            end: 600,
            profile: Profile::Idle,
            multi_node: false,
            degraded: None,
        },
        GpuWorkload {
            node: "gpu001".into(),
            gpu: 1,
            job_id: 2,
            start: 0,
            end: 600,
            profile: Profile::Fp32,
            multi_node: false,
            degraded: None,
        },
        GpuWorkload {
            node: "gpu001".into(),
            gpu: 2,
            job_id: 3,
            start: 0,
            end: 600,
            profile: Profile::XidCrash { at: 300 },
            multi_node: false,
            degraded: None,
        },
    ];
    let gpus: Vec<(String, u16)> = (0..3).map(|gpu| ("gpu001".to_string(), gpu)).collect();
    let (body, samples) = gpu_series_json(&gpus, &workloads, 0, 585, 15, 1);
    assert!(samples > 0);
    let lines: Vec<serde_json::Value> =
        body.lines().map(|line| serde_json::from_str(line).expect("JSON line")).collect();
    let util = |gpu: &str| -> Vec<f64> {
        lines
            .iter()
            .find(|l| l["metric"]["__name__"] == "DCGM_FI_DEV_GPU_UTIL" && l["metric"]["gpu"] == gpu)
            .and_then(|l| l["values"].as_array().cloned())
            .expect("util series")
            .iter()
            .filter_map(serde_json::Value::as_f64)
            .collect()
    };
    assert!(util("0").iter().all(|&v| v == 0.0), "idle GPU");
    assert!(util("1").iter().all(|&v| v >= 95.0), "fp32 GPU busy");
    assert_eq!(util("2").len(), 20, "the crashed GPU stops reporting at the XID");
    assert!(
        lines.iter().any(|l| l["metric"]["__name__"] == "DCGM_FI_DEV_XID_ERRORS" && l["metric"]["err_code"] == "79")
    );
    assert!(gpu_uuid("gpu001", 0).starts_with("GPU-") && gpu_uuid("gpu001", 0) != gpu_uuid("gpu001", 1));
}

fn parse(body: &str) -> Vec<serde_json::Value> {
    body.lines().map(|line| serde_json::from_str(line).expect("JSON line")).collect()
}

fn values(line: &serde_json::Value) -> Vec<f64> {
    line["values"].as_array().expect("values").iter().filter_map(serde_json::Value::as_f64).collect()
}

fn stamps(line: &serde_json::Value) -> Vec<i64> {
    line["timestamps"].as_array().expect("timestamps").iter().filter_map(serde_json::Value::as_i64).collect()
}

fn find<'a>(lines: &'a [serde_json::Value], labels: &[(&str, &str)]) -> &'a serde_json::Value {
    lines
        .iter()
        .find(|line| labels.iter().all(|(key, value)| line["metric"][*key] == *value))
        .unwrap_or_else(|| panic!("a series with {labels:?}"))
}

#[test]
fn app_crash_shows_xid_31_and_an_idle_gpu_until_the_job_ends() {
    let workloads = vec![GpuWorkload {
        node: "gpu001".into(),
        gpu: 0,
        job_id: 9,
        start: 0,
        end: 600,
        profile: Profile::AppCrash { at: 596 },
        multi_node: false,
        degraded: None,
    }];
    let (body, _) = gpu_series_json(&[("gpu001".to_string(), 0)], &workloads, 0, 900, 15, 1);
    let lines = parse(&body);
    let util = values(find(&lines, &[("__name__", "DCGM_FI_DEV_GPU_UTIL")]));
    assert!(util[..39].iter().all(|&v| v >= 90.0), "busy before the fault: {util:?}");
    assert!(util[40..].iter().all(|&v| v == 0.0), "idle after it, and still reporting");
    assert_eq!(util.len(), 61, "a page fault does not take the GPU off the bus");
    let fault = find(&lines, &[("__name__", "DCGM_FI_DEV_XID_ERRORS"), ("err_code", "31")]);
    assert_eq!(fault["metric"]["err_msg"], "GPU memory page fault");
    assert_eq!(stamps(fault)[0], 596_000, "XID 31 a few seconds before the job's end");
    assert!(values(fault).iter().all(|&v| v == 31.0));
    let cleared = find(&lines, &[("__name__", "DCGM_FI_DEV_XID_ERRORS"), ("err_code", "0")]);
    assert!(stamps(cleared).contains(&600_000), "back to 0 once the job is gone");
    // Every scrape reports an XID value, 0 or the last code, as dcgm-exporter does: a healthy GPU reads
    // "no error" on the grid, not "not monitored".
    assert_eq!(stamps(cleared).len() + stamps(fault).len(), 61 + 1, "every scrape, and the fault's instant");
    assert_eq!(stamps(cleared)[..3], [0, 15_000, 30_000]);
    assert!(!lines.iter().any(|l| l["metric"]["err_code"] == "79"), "no infrastructure fault");
}

#[test]
fn xid_79_is_logged_between_scrapes_and_the_gpu_is_silent_until_the_reboot() {
    let workloads = vec![GpuWorkload {
        node: "gpu001".into(),
        gpu: 0,
        job_id: 9,
        start: 0,
        end: 1800,
        profile: Profile::XidCrash { at: 895 },
        multi_node: true,
        degraded: None,
    }];
    let (body, _) = gpu_series_json(&[("gpu001".to_string(), 0)], &workloads, 0, 2400, 30, 1);
    let lines = parse(&body);
    let util = find(&lines, &[("__name__", "DCGM_FI_DEV_GPU_UTIL")]);
    let silent: Vec<i64> = stamps(util).into_iter().filter(|&t| (895_000..1_800_000).contains(&t)).collect();
    assert!(silent.is_empty(), "nothing from a GPU off the bus: {silent:?}");
    assert_eq!(stamps(util).last(), Some(&2_400_000), "back after the reboot");
    let fault = find(&lines, &[("__name__", "DCGM_FI_DEV_XID_ERRORS"), ("err_code", "79")]);
    assert_eq!(stamps(fault), vec![895_000], "logged at its instant, between two scrapes");
    let cleared = find(&lines, &[("__name__", "DCGM_FI_DEV_XID_ERRORS"), ("err_code", "0")]);
    assert!(stamps(cleared).contains(&1_800_000));
    let (rdma, _, _) = rdma_series_json(&["gpu001".to_string()], &workloads, &BTreeSet::new(), 0, 2400, 30, 1);
    let words = values(find(&parse(&rdma), &[("__name__", "rdma_port_xmit_data_total")]));
    assert!(words[40] - words[31] < 1e9, "a node that is down sends nothing");
}

#[test]
fn lossy_tor_pair_loses_3_to_8_percent_in_its_window_only() {
    let racks: Vec<String> = ["A01", "A02", "A03"].map(String::from).to_vec();
    let paths = ping_paths(&racks);
    assert_eq!(paths.len(), 3 + 4, "every ToR mesh and both directions between neighbours");
    let pair = PingPath { source: "A01".into(), target: "A02".into() };
    let lossy = LossyPath { path: pair, from: 7200, to: 14_400, job_id: 5 };
    let (body, samples) = pingmesh_series_json(&paths, Some(&lossy), 0, 21_600, 3);
    let lines = parse(&body);
    assert_eq!(samples, paths.len() * 14 * (21_600 / 10 + 1));
    // Loss and p99 over [a, b) from the counters, as the report's PromQL computes them.
    let window = |source: &str, target: &str, a: usize, b: usize| {
        let series = |name: &str, le: Option<&str>| {
            let mut labels = vec![("__name__", name), ("source_tor", source), ("target_tor", target)];
            if let Some(le) = le {
                labels.push(("le", le));
            }
            let values = values(find(&lines, &labels));
            values[b / 10] - values[a / 10]
        };
        let total = series("rpingmesh_probe_total", None);
        let success = series("rpingmesh_probe_success_total", None);
        let answered = series("rpingmesh_network_rtt_ns_bucket", Some("+Inf"));
        assert_eq!(answered, success, "every answered probe has an RTT");
        let within_100us = series("rpingmesh_network_rtt_ns_bucket", Some("100000")) / answered;
        let within_10us = series("rpingmesh_network_rtt_ns_bucket", Some("10000")) / answered;
        (1.0 - success / total, within_100us, within_10us, total)
    };
    for (source, target) in [("A01", "A02"), ("A02", "A01")] {
        let (loss, within_100us, _, total) = window(source, target, 7200, 14_400);
        assert!((0.03..=0.08).contains(&loss), "{source}→{target} loses {loss}");
        assert!(within_100us < 0.99, "p99 above 100 µs on the lossy link: {within_100us}");
        assert_eq!(total, 7200.0, "inter-ToR: one probe a second");
        let (loss, _, within_10us, _) = window(source, target, 0, 7200);
        assert!(loss < 0.001 && within_10us > 0.99, "healthy before: {loss} {within_10us}");
    }
    let (loss, _, within_10us, total) = window("A02", "A02", 7200, 14_400);
    assert!(loss < 0.001 && within_10us > 0.99, "other paths stay healthy: {loss}");
    assert_eq!(total, 72_000.0, "ToR mesh: ten probes a second");
    let instance = find(&lines, &[("source_tor", "A03")]);
    assert_eq!(instance["metric"]["instance"], "A03-agent");
    assert_eq!(instance["metric"]["job"], "rpingmesh-agent");
}

#[test]
fn burst_peaks_exceed_the_scrape_average_and_exist_only_where_the_agent_runs() {
    let workloads: Vec<GpuWorkload> = ["gpu001", "gpu002"]
        .iter()
        .map(|node| GpuWorkload {
            node: node.to_string(),
            gpu: 0,
            job_id: 1,
            start: 600,
            end: 4200,
            profile: Profile::Training { period_s: 60 },
            multi_node: true,
            degraded: Some((1800, 2400)),
        })
        .collect();
    let nodes = vec!["gpu001".to_string(), "gpu002".to_string(), "gpu003".to_string()];
    let agents: BTreeSet<String> = ["gpu001".to_string(), "gpu003".to_string()].into();
    let (body, _, burst_samples) = rdma_series_json(&nodes, &workloads, &agents, 0, 4800, 15, 2);
    let lines = parse(&body);
    assert_eq!(burst_samples, 2 * 4 * (4800 / 15 + 1));
    assert!(!lines.iter().any(|l| l["metric"]["instance"] == "gpu002:9879"
        && l["metric"]["__name__"].as_str().is_some_and(|name| name.starts_with("nic_"))));
    let node = [("instance", "gpu001:9879")];
    let words = values(find(&lines, &[node[0], ("__name__", "rdma_port_xmit_data_total")]));
    let peaks = values(find(&lines, &[node[0], ("__name__", "nic_tx_bytes_per_second_max")]));
    let above = find(&lines, &[node[0], ("__name__", "nic_tx_burst_seconds_total")]);
    assert_eq!(above["metric"]["threshold"], "0.9");
    assert_eq!(above["metric"]["job"], "rdma");
    let above = values(above);
    let mut bursty = 0;
    for i in 1..words.len() {
        let average = (words[i] - words[i - 1]) * 4.0 / 15.0;
        assert!(peaks[i] >= average, "peak {} below the average {average} at {i}", peaks[i]);
        let seconds = above[i] - above[i - 1];
        assert!(seconds >= 0.0 && seconds * 4.5e10 <= average * 15.0 + 1.0, "burst seconds fit the bytes");
        let t = i as i64 * 15;
        if (600..4200).contains(&t) && !(1800..2400).contains(&t) {
            assert!((5e9..=15.1e9).contains(&average), "training averages 5–15 GB/s: {average}");
            bursty += usize::from(peaks[i] >= 4.5e10 && seconds > 0.0);
        } else if !(600..4200).contains(&t) {
            assert!(peaks[i] < 1e8 && seconds == 0.0, "a quiet port has small peaks");
        } else {
            assert!(peaks[i] < 4.5e10 && seconds == 0.0, "a lossy path caps the bursts");
        }
    }
    assert!(bursty > 120, "all-reduces reach line rate in most scrapes: {bursty}");
}

/// The series the batch seeding writes for a fixed mix of workloads (every generator, every profile), as
/// their digest: the live continuation shares the generators, and sharing them must not change a sample.
#[test]
fn batch_series_are_those_written_before_the_live_continuation() {
    use sha2::Digest;
    let profiles = [
        Profile::Training { period_s: 60 },
        Profile::InputBound,
        Profile::Fp32,
        Profile::Idle,
        Profile::Bursty,
        Profile::XidCrash { at: 5000 },
        Profile::AppCrash { at: 6000 },
    ];
    let nodes: Vec<String> = ["gpu001", "gpu002", "gpu003"].map(String::from).to_vec();
    let workloads: Vec<GpuWorkload> = profiles
        .iter()
        .enumerate()
        .map(|(index, &profile)| GpuWorkload {
            node: nodes[index % 3].clone(),
            gpu: index as u16,
            job_id: 100 + index as u32,
            start: 300 * index as i64,
            end: 7000,
            profile,
            multi_node: index % 2 == 0,
            degraded: (index == 0).then_some((1000, 2000)),
        })
        .collect();
    let gpus: Vec<(String, u16)> = nodes.iter().flat_map(|node| (0..8).map(move |gpu| (node.clone(), gpu))).collect();
    let agents: BTreeSet<String> = nodes[..2].iter().cloned().collect();
    let (gpu, _) = gpu_series_json(&gpus, &workloads, 0, 7200, 30, 11);
    let (rdma, _, _) = rdma_series_json(&nodes, &workloads, &agents, 0, 7200, 30, 11);
    let paths = ping_paths(&["A01".to_string(), "A02".to_string()]);
    let lossy = LossyPath { path: paths[1].clone(), from: 1000, to: 3000, job_id: 100 };
    let (ping, _) = pingmesh_series_json(&paths, Some(&lossy), 0, 7200, 13);
    let (node, _) = crate::demo::nodes::node_series_json(&nodes, 8, &workloads, 0, 7200, 17);
    let (stats, _) = crate::demo::nodes::job_stats_json(&workloads, 0, 7200, 17);
    let digest = sha2::Sha256::digest([gpu, rdma, ping, node, stats].concat().as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    assert_eq!(hex, "224f27e9908c25d4aef9845edc09fb2b965b8c1794bbfd8267e4556ccfbf4b59");
}

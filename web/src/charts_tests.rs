//! The report charts' drawing, on fixed reports: log moments, zoom, units and heat maps.

use super::*;

fn report(gpus: usize, points: &[(i64, f64)]) -> wire::JobReport {
    let gpu = |index: usize| {
        serde_json::json!({
            "node": format!("gpu{:03}", index / 8 + 1), "gpu": index % 8, "attribution": "whole_node",
            "uncertain": false, "summary": [],
            "series": [{"metric": "gpu_util", "unit": "%", "points": points}],
            "xid_events": if index == 1 { serde_json::json!([{"at": "2026-11-29T10:30:00Z", "xid": 79}]) } else { serde_json::json!([]) }
        })
    };
    let value = serde_json::json!({
        "job": null, "source": "final", "generated_at": "2026-11-29T12:00:00Z",
        "window_start": "2026-11-30T10:00:00Z", "window_end": "2026-11-30T11:00:00Z",
        "metrics": {"status": "ok", "step_s": 600},
        "gpus": (0..gpus).map(gpu).collect::<Vec<_>>(),
        "nodes": [], "totals": {"gpu_hours": 1.0, "idle_gpu_hours": 0.0}, "verdicts": []
    });
    let mut value = value;
    value["job"] = serde_json::json!({
        "job_id": "7", "job_id_raw": 7, "cluster": "lab", "job_name": "x", "user": "alice", "uid": 1, "gid": 1,
        "account": "ml", "partition": "gpu", "qos": "normal", "state": "COMPLETED", "exit_code": "0:0",
        "derived_exit_code": "0:0", "submit": "2026-11-29T10:00:00Z", "elapsed": "01:00:00", "elapsed_raw": 3600,
        "timelimit": "02:00:00", "node_list": "gpu001", "alloc_nodes": 1, "alloc_cpus": 4, "alloc_gpus": 8,
        "alloc_tres": "cpu=4", "req_tres": "cpu=4", "req_mem": "1000M"
    });
    serde_json::from_value(value).expect("report")
}

const T0: i64 = 1_796_032_800; // 2026-11-30T10:00:00Z

#[test]
fn important_log_lines_are_marked_on_timelines_only() {
    let span = Span { start: 1000, end: 2000, step: 10, zone: Zone::UTC };
    let mut charts = vec![
        Chart { kind: "heat-map".into(), title: "h".into(), svg: "<svg></svg>".into(), metrics: Vec::new() },
        Chart { kind: "timeline".into(), title: "t".into(), svg: "<svg></svg>".into(), metrics: Vec::new() },
        Chart { kind: "network".into(), title: "n".into(), svg: "<svg></svg>".into(), metrics: Vec::new() },
    ];
    let moments = vec![(1500, "XID 79 on <n1>".to_string()), (5000, "after the window".to_string())];
    mark_moments(&mut charts, &span, &moments);
    assert!(!charts[0].svg.contains("log-mark"));
    for chart in &charts[1..] {
        assert_eq!(chart.svg.matches(r#"class="log-mark""#).count(), 1, "{}", chart.svg);
        assert!(chart.svg.contains("XID 79 on &lt;n1&gt;") && chart.svg.ends_with("</svg>"));
    }
}

#[test]
fn a_zoom_narrows_every_chart_to_its_range_and_draws_only_the_points_there() {
    let points: Vec<(i64, f64)> = (1..=6).map(|i| (T0 + i * 600, 10.0 * i as f64)).collect();
    let whole = gpu_timeline(&report(2, &points), "gpu_util", Zone::UTC).expect("chart");
    assert!(whole.contains(&format!(r#"data-start="{T0}" data-end="{}""#, T0 + 3600)), "{whole}");
    let zoom = ChartView { zone: Zone::UTC, zoom: Some((T0 + 1200, T0 + 2400)) };
    let part = gpu_timeline(&report(2, &points), "gpu_util", zoom).expect("chart");
    assert!(part.contains(&format!(r#"data-start="{}" data-end="{}""#, T0 + 1200, T0 + 2400)), "{part}");
    // The points standing for (T0+1200, T0+2400]: those at T0+1800 and T0+2400, per line.
    let d = part.split(r#"class="line" "#).nth(1).and_then(|l| l.split('"').nth(3)).expect("a line's path");
    assert_eq!(d.matches(['M', 'L']).count(), 2, "{d}");
    let wide = ChartView { zone: Zone::UTC, zoom: Some((T0 - 86_400, T0 + 86_400)) };
    let span = Span::of(&report(2, &points), wide).expect("a span");
    assert_eq!((span.start, span.end), (T0, T0 + 3600), "a zoom never widens the window");
}

#[test]
fn heat_map_has_a_row_per_gpu_merges_runs_and_marks_xids() {
    let points: Vec<(i64, f64)> = (1..=6).map(|i| (T0 + i * 600, if i <= 3 { 95.0 } else { 2.0 })).collect();
    let svg = heat_map(&report(4, &points), "gpu_util", Zone::UTC).expect("a heat map");
    assert_eq!(svg.matches("<g data-gpu=").count(), 4);
    // Two runs per row (busy, then idle), not six cells.
    assert_eq!(svg.matches(r##"fill="#FDE725""##).count(), 4 + 1, "4 busy runs + the legend swatch");
    assert_eq!(svg.matches(r##"fill="#440154""##).count(), 4 + 1, "4 idle runs + the legend swatch");
    assert_eq!(svg.matches(r#"class="xid""#).count(), 1, "the XID of gpu001/1");
    assert!(heat_map(&report(4, &points), "power", Zone::UTC).is_none());
}

#[test]
fn a_big_jobs_heat_map_labels_its_nodes_and_scales_round() {
    let points: Vec<(i64, f64)> = (1..=6).map(|i| (T0 + i * 600, 50.0)).collect();
    let svg = heat_map(&report(256, &points), "gpu_util", Zone::UTC).expect("a heat map");
    assert_eq!(svg.matches(r#"class="node-label""#).count(), 32, "one label per node of 8 GPUs");
    assert!(svg.contains(">gpu032</text>"));
    let small = heat_map(&report(4, &points), "gpu_util", Zone::UTC).expect("a heat map");
    assert_eq!(small.matches(r#"class="node-label""#).count(), 0, "few rows are labelled one by one");
    assert_eq!(nice_ceiling(71_336.0), 80_000.0);
    assert_eq!(nice_ceiling(547.0), 600.0);
    assert_eq!(nice_ceiling(12.2e9), 1.5e10);
    assert_eq!(nice_ceiling(0.0), 1.0);
}

#[test]
fn node_signals_and_lustre_io_get_charts_of_their_own() {
    let points: Vec<(i64, f64)> = (1..=6).map(|i| (T0 + i * 600, 40.0)).collect();
    let mut with_nodes = report(2, &points);
    with_nodes.nodes = serde_json::from_value(serde_json::json!([{
        "node": "gpu001",
        "summary": [{"metric": "cpu_iowait", "unit": "%", "mean": 20.0, "max": 31.0, "samples": 0}],
        "series": [{"metric": "cpu_iowait", "unit": "%", "points": points},
                   {"metric": "node_power", "unit": "W", "points": points}]
    }]))
    .expect("nodes");
    with_nodes.io = serde_json::from_value(serde_json::json!({
        "source": "jobstats", "read_bytes": 1e12, "write_bytes": 1e9, "summary": [],
        "series": [{"metric": "lustre_read", "unit": "B/s", "points": points}]
    }))
    .expect("io");
    let charts = for_report(&with_nodes, Zone::UTC);
    let kinds: Vec<(&str, &str)> = charts.iter().map(|c| (c.kind.as_str(), c.title.as_str())).collect();
    assert_eq!(kinds.iter().filter(|(kind, _)| *kind == "node").count(), 2, "{kinds:?}");
    assert!(kinds.iter().any(|(kind, title)| *kind == "io" && title.contains("job statistics")), "{kinds:?}");
    // Each chart names the metrics it draws: the report's `chart_queries` it links are found by them.
    let metrics: Vec<(&str, Vec<&str>)> =
        charts.iter().map(|c| (c.kind.as_str(), c.metrics.iter().map(String::as_str).collect())).collect();
    assert!(metrics.contains(&("heat-map", vec!["gpu_util"])), "{metrics:?}");
    assert!(metrics.contains(&("node", vec!["cpu_iowait"])), "{metrics:?}");
    assert!(metrics.contains(&("io", vec!["lustre_read", "lustre_write"])), "{metrics:?}");
    assert!(
        for_report(&report(2, &points), Zone::UTC).iter().all(|c| c.kind != "node" && c.kind != "io"),
        "none without data"
    );
    let stripped = without_series(with_nodes);
    assert!(stripped.io.is_some_and(|io| io.series.is_empty()));
}

#[test]
fn timelines_draw_lines_for_few_gpus_and_a_band_for_many() {
    let points: Vec<(i64, f64)> = (1..=6).map(|i| (T0 + i * 600, 50.0)).collect();
    let few = gpu_timeline(&report(4, &points), "gpu_util", Zone::UTC).expect("chart");
    assert_eq!(few.matches(r#"class="line""#).count(), 4);
    let many = gpu_timeline(&report(MAX_LINES + 4, &points), "gpu_util", Zone::UTC).expect("chart");
    assert!(many.contains(r#"data-banded="true""#) && many.contains(r#"class="band""#));
    assert_eq!(many.matches(r#"class="line""#).count(), 0);
    // A job shorter than a step has one point per series: a dot each, no invisible line alone.
    let one = gpu_timeline(&report(2, &[(T0 + 3600, 40.0)]), "gpu_util", Zone::UTC).expect("chart");
    assert_eq!(one.matches(r#"class="point""#).count(), 2);
    assert_eq!(few.matches(r#"class="point""#).count(), 0, "lines need no dots");
}

#[test]
fn a_tenants_shared_nodes_are_one_band_per_metric_weighted_by_their_gpus() {
    let band = |node: &str, gpus: u32, low: f64, mean: f64, high: f64| {
        serde_json::json!({
            "node": node, "gpus": gpus, "summary": [],
            "spread": [{"metric": "gpu_util", "unit": "%", "count": gpus,
                        "points": [[T0 + 600, low, mean, high], [T0 + 1200, low, mean, high]]}]
        })
    };
    let mut shared = report(0, &[]);
    shared.shared_node_bands = serde_json::from_value(serde_json::json!([
        band("gpu001", 8, 10.0, 40.0, 90.0),
        band("gpu002", 2, 5.0, 90.0, 95.0)
    ]))
    .expect("bands");
    let charts = for_report(&shared, Zone::UTC);
    let drawn: Vec<(&str, &str)> = charts.iter().map(|c| (c.kind.as_str(), c.title.as_str())).collect();
    assert_eq!(drawn, [("shared", "gpu util (%) on the 2 shared nodes, all their GPUs")], "no per-GPU chart");
    let svg = &charts[0].svg;
    assert!(svg.contains(r#"data-banded="true""#) && svg.contains(r#"data-series="10""#), "{svg}");
    assert!(svg.contains("of the 10 GPUs, other tenants' too"), "{svg}");
    // Lowest of the lows (5 %), highest of the highs (95 %), the mean weighted by GPUs: (8·40 + 2·90) / 10.
    let span = Span::of(&shared, Zone::UTC).expect("span");
    let plot = Plot::new("%", std::iter::empty());
    let mean = plot.path(&span, [(T0 + 600, 50.0), (T0 + 1200, 50.0)].into_iter());
    assert!(svg.contains(&format!(r#"class="mean" d="{mean}""#)), "{svg}");
    let upper = plot.path(&span, [(T0 + 600, 95.0), (T0 + 1200, 95.0)].into_iter());
    assert!(svg.contains(&format!(r#"class="band" d="{upper}L"#)), "{svg}");

    shared.shared_node_bands.truncate(1);
    assert_eq!(for_report(&shared, Zone::UTC)[0].title, "gpu util (%) on the shared node gpu001, all its GPUs");
    let stripped = without_series(shared);
    assert!(stripped.shared_node_bands.iter().all(|band| band.spread.is_empty()), "the page carries the drawing only");
}

#[test]
fn time_shares_stack_to_the_full_width_per_gpu() {
    let breakdown = |compute: f64, nccl: f64| {
        serde_json::json!({"traced_s": 60.0, "compute_share": compute, "communication_share": nccl,
            "memcpy_share": 0.0, "sync_share": 0.0, "idle_share": 1.0 - compute - nccl,
            "kernel_ns": 0, "nccl_ns": 0, "memcpy_ns": 0, "sync_ns": 0})
    };
    let mut gpu = breakdown(0.25, 0.6);
    gpu["node"] = serde_json::json!("n1");
    gpu["gpu"] = serde_json::json!(0);
    let traces: wire::JobTraces = serde_json::from_value(serde_json::json!({
        "cluster": "lab", "job_id": 7, "total": breakdown(0.25, 0.6), "gpus": [gpu],
        "top_kernels": [], "top_collectives": []
    }))
    .expect("traces");
    let svg = time_shares(&traces).expect("bars");
    assert_eq!(svg.matches("<g data-gpu=").count(), 2, "the whole job and one GPU");
    let plot = WIDTH - LEFT - RIGHT;
    assert!(svg.contains(&format!(r#"width="{:.1}""#, 0.6 * plot)), "NCCL takes 60 % of the bar");
    let mut empty = traces.clone();
    empty.total.traced_s = 0.0;
    assert!(time_shares(&empty).is_none());
}

#[test]
fn values_read_with_their_units() {
    assert_eq!(human(87.0, "%"), "87 %");
    assert_eq!(human(1.3e9, "B/s"), "1.3 GB/s");
    assert_eq!(human(238_232.0, "W"), "238,232 W", "thousands grouped as every page writes them");
    assert_eq!(viridis(100.0, 100.0).0, 9);
    assert_eq!(viridis(-3.0, 100.0).0, 0);
}

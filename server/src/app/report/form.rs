//! The form a report's time series are given in. A 256-GPU job's per-GPU and per-node series are
//! megabytes of JSON that no one reads point by point; its summary form (`spread`) gives, per metric,
//! the lowest, mean and highest across the GPUs (and across the nodes) at each point instead, and keeps
//! every GPU's and node's summary, the XIDs and the verdicts. The pages ask for `per_gpu` (their heat
//! maps draw every GPU).

use std::collections::BTreeMap;
use std::str::FromStr;

use slurmlens_wire as wire;

/// Above this many GPUs, a report asked for without a form comes in the `spread` form.
pub const SPREAD_ABOVE_GPUS: usize = 16;

/// The `series=` a client asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SeriesChoice {
    /// Per GPU up to [`SPREAD_ABOVE_GPUS`] GPUs, the spread above.
    #[default]
    Auto,
    Form(wire::SeriesForm),
}

impl FromStr for SeriesChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(Self::Auto),
            "per_gpu" => Ok(Self::Form(wire::SeriesForm::PerGpu)),
            "spread" => Ok(Self::Form(wire::SeriesForm::Spread)),
            other => Err(format!("`{other}` is not a series form; one of auto, per_gpu, spread")),
        }
    }
}

/// `report` in the form `choice` asks for.
pub fn in_form(mut report: wire::JobReport, choice: SeriesChoice) -> wire::JobReport {
    let form = match choice {
        SeriesChoice::Form(form) => form,
        SeriesChoice::Auto if report.gpus.len() > SPREAD_ABOVE_GPUS => wire::SeriesForm::Spread,
        SeriesChoice::Auto => wire::SeriesForm::PerGpu,
    };
    if form == wire::SeriesForm::Spread && report.series_form == wire::SeriesForm::PerGpu {
        report.gpu_spread = spread(report.gpus.iter().map(|gpu| gpu.series.as_slice()));
        report.node_spread = spread(report.nodes.iter().map(|node| node.series.as_slice()));
        for gpu in &mut report.gpus {
            gpu.series.clear();
        }
        for node in &mut report.nodes {
            node.series.clear();
        }
    }
    report.series_form = form;
    report
}

/// Per metric (in the order the GPUs or nodes list them), the lowest, mean and highest across them at
/// each point.
pub(super) fn spread<'a>(members: impl Iterator<Item = &'a [wire::MetricSeries]>) -> Vec<wire::SpreadSeries> {
    struct Acc {
        unit: String,
        count: u32,
        points: BTreeMap<i64, (f64, f64, f64, u32)>,
    }
    let mut order: Vec<String> = Vec::new();
    let mut by_metric: BTreeMap<String, Acc> = BTreeMap::new();
    for member in members {
        for series in member {
            let acc = by_metric.entry(series.metric.clone()).or_insert_with(|| {
                order.push(series.metric.clone());
                Acc { unit: series.unit.clone(), count: 0, points: BTreeMap::new() }
            });
            acc.count += 1;
            for &(at, value) in &series.points {
                let point = acc.points.entry(at).or_insert((f64::INFINITY, 0.0, f64::NEG_INFINITY, 0));
                point.0 = point.0.min(value);
                point.1 += value;
                point.2 = point.2.max(value);
                point.3 += 1;
            }
        }
    }
    order
        .into_iter()
        .filter_map(|metric| {
            let acc = by_metric.remove(&metric)?;
            let points =
                acc.points.into_iter().map(|(at, (low, sum, high, n))| (at, low, sum / f64::from(n), high)).collect();
            Some(wire::SpreadSeries { metric, unit: acc.unit, count: acc.count, points })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u16, values: &[f64]) -> wire::GpuReport {
        wire::GpuReport {
            node: "gpu001".into(),
            gpu: index,
            uuid: None,
            attribution: wire::Attribution::PluginRecord,
            uncertain: false,
            summary: Vec::new(),
            series: vec![wire::MetricSeries {
                metric: "gpu_util".into(),
                unit: "%".into(),
                points: values.iter().enumerate().map(|(i, v)| (1000 + 60 * i as i64, *v)).collect(),
            }],
            xid_events: Vec::new(),
        }
    }

    fn report(gpus: Vec<wire::GpuReport>) -> wire::JobReport {
        use crate::app::report::fixtures::{END, START, at, failed_job};
        use crate::domain::tres::{TresCatalog, TresId, TresKind};
        let kind = |id, kind: &str, name: &str| TresKind { id: TresId(id), kind: kind.into(), name: name.into() };
        let catalog = TresCatalog::new([kind(1, "cpu", ""), kind(4, "node", ""), kind(1001, "gres", "gpu")]);
        let job = crate::app::wire_map::job(&failed_job(), &catalog, "lab", END as u64);
        let mut report = super::super::unassembled(job, wire::ReportSource::Final, at(END), Some((at(START), at(END))));
        report.gpus = gpus;
        report
    }

    #[test]
    fn a_big_job_comes_as_its_spread_a_small_one_per_gpu_unless_asked_otherwise() {
        let many: Vec<wire::GpuReport> = (0..17).map(|i| gpu(i, &[f64::from(i), 50.0])).collect();
        let mut with_nodes = report(many.clone());
        with_nodes.nodes = [2e9, 4e9]
            .into_iter()
            .enumerate()
            .map(|(i, rate)| wire::NodeNetworkReport {
                node: format!("gpu00{i}"),
                summary: Vec::new(),
                series: vec![wire::MetricSeries {
                    metric: "rdma_tx".into(),
                    unit: "B/s".into(),
                    points: vec![(1000, rate)],
                }],
            })
            .collect();
        let big = in_form(with_nodes, SeriesChoice::Auto);
        assert!(big.nodes.iter().all(|node| node.series.is_empty()) && big.nodes.len() == 2);
        assert_eq!(big.node_spread[0].points, vec![(1000, 2e9, 3e9, 4e9)]);
        assert_eq!(big.series_form, wire::SeriesForm::Spread);
        assert!(big.gpus.iter().all(|gpu| gpu.series.is_empty()) && big.gpus.len() == 17, "every GPU, no series");
        assert_eq!(big.gpu_spread.len(), 1);
        let spread = &big.gpu_spread[0];
        assert_eq!((spread.metric.as_str(), spread.unit.as_str(), spread.count), ("gpu_util", "%", 17));
        assert_eq!(spread.points, vec![(1000, 0.0, 8.0, 16.0), (1060, 50.0, 50.0, 50.0)]);
        let asked = in_form(report(many), SeriesChoice::Form(wire::SeriesForm::PerGpu));
        assert_eq!(asked.series_form, wire::SeriesForm::PerGpu);
        assert!(asked.gpus.iter().all(|gpu| !gpu.series.is_empty()) && asked.gpu_spread.is_empty());
        let small = in_form(report(vec![gpu(0, &[1.0]), gpu(1, &[3.0])]), SeriesChoice::Auto);
        assert_eq!(small.series_form, wire::SeriesForm::PerGpu);
        let summary =
            in_form(report(vec![gpu(0, &[1.0]), gpu(1, &[3.0])]), SeriesChoice::Form(wire::SeriesForm::Spread));
        assert_eq!(summary.gpu_spread[0].points, vec![(1000, 1.0, 2.0, 3.0)]);
        assert_eq!("spread".parse(), Ok(SeriesChoice::Form(wire::SeriesForm::Spread)));
        assert!("all".parse::<SeriesChoice>().expect_err("not a form").contains("one of auto, per_gpu, spread"));
    }
}

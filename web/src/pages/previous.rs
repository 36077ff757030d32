//! The job page's "Previous runs" section: the job against its owner's previous runs of the same work
//! (same name and stored script, same size class), a small table with their median, the "slower than
//! usual" flag with its evidence, and a link to compare them side by side.

use leptos::prelude::*;
use slurmlens_wire as wire;

use crate::app::Time;
use crate::query::{encode, percent_encode};

/// Most jobs the compare link takes (this run and the newest previous ones).
const COMPARE_AT_MOST: usize = 8;

/// Seconds as `1h 05m`, `12m 30s` or `45s`.
pub fn run_time(seconds: Option<f64>) -> String {
    let Some(seconds) = seconds else { return "—".into() };
    let total = seconds.max(0.0).round() as u64;
    let (hours, minutes, secs) = (total / 3600, total % 3600 / 60, total % 60);
    match (hours, minutes) {
        (0, 0) => format!("{secs}s"),
        (0, _) => format!("{minutes}m {secs:02}s"),
        _ => format!("{hours}h {minutes:02}m"),
    }
}

/// A percentage, or a dash.
pub fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "—".into(), |value| format!("{value:.0}%"))
}

/// A share (0–1) as a percentage, or a dash.
pub fn share(value: Option<f64>) -> String {
    percent(value.map(|value| value * 100.0))
}

/// Wh per GPU-hour, or a dash.
pub fn energy(value: Option<f64>) -> String {
    value.map_or_else(|| "—".into(), |value| format!("{value:.0} Wh"))
}

/// The link to the compare page for these job ids on `cluster`.
pub fn compare_href(cluster: &str, jobs: &[String]) -> String {
    format!("/compare?{}", encode(&[("jobs", jobs.join(",")), ("cluster", cluster.to_string())]))
}

fn figures_row(run: &wire::RunFigures, kind: &'static str) -> impl IntoView + use<> {
    let job = &run.job;
    let href = format!("/jobs/{}?{}", percent_encode(&job.job_id), encode(&[("cluster", job.cluster.clone())]));
    let end = job.end.map(|end| view! { <Time at=end.timestamp() /> });
    view! {
        <tr class=kind data-testid="previous-run" data-job=job.job_id.clone()>
            <td><a href=href>{job.job_id.clone()}</a>{(kind == "this").then_some(" (this run)")}</td>
            <td class="num" data-testid="previous-run-time">{run_time(run.run_time_s.map(|s| s as f64))}</td>
            <td class="num">{percent(job.mean_gpu_util)}</td>
            <td class="num">{percent(job.mean_tensor_active)}</td>
            <td class="num">{share(run.nccl_share)}</td>
            <td class="num">{energy(run.wh_per_gpu_hour)}</td>
            <td class="num">{job.alloc_gpus}</td>
            <td>{job.state.clone()}</td>
            <td>{end}</td>
        </tr>
    }
}

/// The section; "not available" when the previous runs could not be asked.
#[component]
pub fn PreviousRunsSection(previous: Option<wire::PreviousRuns>) -> impl IntoView {
    let Some(previous) = previous else {
        return view! {
            <section class="previous" aria-label="previous runs" data-testid="previous-section" data-status="missing">
                <h2>"Previous runs"</h2>
                <p class="muted">"previous runs not available"</p>
            </section>
        }
        .into_any();
    };
    let job = &previous.this_run.job;
    let matched = match previous.matched_by {
        wire::WorkMatch::NameAndScript => "the same job name and batch script",
        wire::WorkMatch::NameOnly => "the same job name (slurmdbd stored no batch script for this job)",
    };
    let size = if previous.max_gpus == 0 {
        "without GPUs".to_string()
    } else {
        format!("{}–{} GPUs", previous.min_gpus, previous.max_gpus)
    };
    let count = previous.runs.len();
    let summary = format!(
        "{count} previous finished run{} of {} by {} on {}, {matched}, {size}, ended since ",
        if count == 1 { "" } else { "s" },
        job.job_name,
        job.user,
        job.cluster,
    );
    let flag = match &previous.slower_than_usual {
        Some(verdict) => {
            let slower = verdict.slower;
            let (class, word) = if slower { ("flag slower", "Slower than usual") } else { ("flag usual", "As usual") };
            let items = verdict.evidence.iter().map(|line| view! { <li>{line.clone()}</li> }).collect_view();
            view! {
                <div class=class data-testid="previous-flag" data-slower=slower.to_string()>
                    <strong>{word}</strong>
                    <ul data-testid="previous-evidence">{items}</ul>
                </div>
            }
            .into_any()
        }
        None => view! {
            <p class="muted" data-testid="previous-flag" data-slower="none">
                "No verdict: fewer than 3 previous runs to compare with."
            </p>
        }
        .into_any(),
    };
    let median = &previous.median;
    let median_row = (count > 0).then(|| {
        view! {
            <tr class="median" data-testid="previous-median">
                <td>"median of previous"</td>
                <td class="num">{run_time(median.run_time_s)}</td>
                <td class="num">{percent(median.mean_gpu_util)}</td>
                <td class="num">{percent(median.mean_tensor_active)}</td>
                <td class="num">{share(median.nccl_share)}</td>
                <td class="num">{energy(median.wh_per_gpu_hour)}</td>
                <td></td>
                <td></td>
                <td></td>
            </tr>
        }
    });
    let mut compared = vec![job.job_id.clone()];
    compared.extend(previous.runs.iter().take(COMPARE_AT_MOST - 1).map(|run| run.job.job_id.clone()));
    let compare = (count > 0).then(|| {
        let href = compare_href(&job.cluster, &compared);
        let text = format!("Compare this run with its {} newest previous runs", compared.len() - 1);
        view! { <p><a href=href data-testid="previous-compare">{text}</a></p> }
    });
    let rows = previous.runs.iter().map(|run| figures_row(run, "previous")).collect_view();
    view! {
        <section class="previous" aria-label="previous runs" data-testid="previous-section" data-status="ok">
            <h2>"Previous runs"</h2>
            <p data-testid="previous-summary">{summary}<Time at=previous.since.timestamp() /></p>
            {flag}
            <div class="table-wrap">
                <table class="compact" data-testid="previous-table">
                    <thead>
                        <tr>
                            <th scope="col">"Job"</th>
                            <th scope="col">"Run time"</th>
                            <th scope="col">"GPU util"</th>
                            <th scope="col">"Tensor"</th>
                            <th scope="col">"NCCL"</th>
                            <th scope="col">"Energy / GPU-h"</th>
                            <th scope="col">"GPUs"</th>
                            <th scope="col">"State"</th>
                            <th scope="col">"End"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {figures_row(&previous.this_run, "this")}
                        {median_row}
                        {rows}
                    </tbody>
                </table>
            </div>
            {compare}
        </section>
    }
    .into_any()
}

//! `/compare?jobs=ID,ID,…`: 2–8 jobs side by side: a table of their figures (run time, GPUs, GPU
//! utilisation, tensor activity, NCCL share, energy per GPU-hour) and their timelines on one axis of
//! time since each job's start, so runs of different days lie on top of each other.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use slurmlens_wire as wire;

use crate::aligned::aligned_chart;
use crate::api::Loader;
use crate::app::Time;
use crate::pages::LoadError;
use crate::pages::previous::{energy, percent, run_time, share};
use crate::palette::CATEGORICAL;
use crate::query::{encode, percent_encode};

/// The compare page.
#[component]
pub fn ComparePage() -> impl IntoView {
    let query = use_query_map();
    let key = Memo::new(move |_| {
        query.with(|q| {
            let jobs: Vec<String> = q
                .get("jobs")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .map(String::from)
                .collect();
            (q.get("cluster"), jobs)
        })
    });
    let loader = Loader::from_context();
    let comparison = Resource::new(move || key.get(), move |(cluster, jobs)| loader.compare(cluster, jobs));
    #[cfg(feature = "ssr")]
    let response = use_context::<leptos_axum::ResponseOptions>();
    view! {
        <section class="page compare-page">
            <Suspense fallback=|| view! { <p class="status">"Loading…"</p> }>
                {move || {
                    #[cfg(feature = "ssr")]
                    let response = response.clone();
                    Suspend::new(async move {
                        match comparison.await {
                            Ok(comparison) => view! { <ComparisonView comparison /> }.into_any(),
                            Err(error) => {
                                #[cfg(feature = "ssr")]
                                crate::pages::answer_with_status(response, &error);
                                view! { <h1>"Compare jobs"</h1><LoadError error /> }.into_any()
                            }
                        }
                    })
                }}
            </Suspense>
        </section>
    }
}

#[component]
fn ComparisonView(comparison: wire::Comparison) -> impl IntoView {
    let count = comparison.jobs.len();
    let rows = comparison
        .jobs
        .iter()
        .enumerate()
        .map(|(index, compared)| {
            let job = &compared.figures.job;
            let colour = format!("background:{}", CATEGORICAL[index % CATEGORICAL.len()]);
            let href = format!("/jobs/{}?{}", percent_encode(&job.job_id), encode(&[("cluster", job.cluster.clone())]));
            let start = job.start.map(|start| view! { <Time at=start.timestamp() /> });
            view! {
                <tr data-testid="compare-job" data-job=job.job_id.clone()>
                    <td><span class="swatch" style=colour></span><a href=href>{job.job_id.clone()}</a></td>
                    <td class="num" data-testid="compare-run-time">{run_time(compared.figures.run_time_s.map(|s| s as f64))}</td>
                    <td class="num">{percent(job.mean_gpu_util)}</td>
                    <td class="num">{percent(job.mean_tensor_active)}</td>
                    <td class="num">{share(compared.figures.nccl_share)}</td>
                    <td class="num">{energy(compared.figures.wh_per_gpu_hour)}</td>
                    <td class="num">{job.alloc_gpus}</td>
                    <td>{job.state.clone()}</td>
                    <td>{start}</td>
                    <td>{job.job_name.clone()}</td>
                    <td>{job.user.clone()}</td>
                </tr>
            }
        })
        .collect_view();
    let charts = [("gpu_util", "Mean GPU utilisation"), ("power", "GPU power, all the job's GPUs")]
        .into_iter()
        .filter_map(|(metric, title)| {
            let lines: Vec<(String, &[(i64, f64)])> = comparison
                .jobs
                .iter()
                .map(|compared| {
                    let points = compared
                        .timelines
                        .iter()
                        .find(|series| series.metric == metric)
                        .map_or(&[][..], |series| series.points.as_slice());
                    (compared.figures.job.job_id.clone(), points)
                })
                .collect();
            let unit = comparison
                .jobs
                .iter()
                .flat_map(|compared| &compared.timelines)
                .find(|series| series.metric == metric)
                .map(|series| series.unit.clone())?;
            let svg = aligned_chart(metric, &unit, &lines)?;
            Some(view! {
                <figure class="chart-box" data-testid="compare-chart" data-metric=metric>
                    <figcaption>{format!("{title} ({unit}), by time since each job's start")}</figcaption>
                    <div inner_html=svg></div>
                </figure>
            })
        })
        .collect::<Vec<_>>();
    let no_charts = charts.is_empty().then(|| {
        view! { <p class="muted" data-testid="compare-no-charts">"No GPU metrics for these jobs: nothing to draw."</p> }
    });
    view! {
        <h1 data-testid="compare-title">{format!("Compare {count} jobs")}</h1>
        <div class="table-wrap">
            <table class="compact" data-testid="compare-table">
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
                        <th scope="col">"Start"</th>
                        <th scope="col">"Name"</th>
                        <th scope="col">"User"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
        <div class="compare-charts">{charts}</div>
        {no_charts}
    }
}

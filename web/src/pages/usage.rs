//! `/usage` (showback: GPU-hours allocated and idle per account or user, with a bar chart, a sortable
//! table and its CSV from the API) and `/stats` (top users and accounts, histograms of job size, run
//! time and queue wait). Both are server-rendered; sorting and the account/user toggle are links, so
//! they work without the wasm bundle.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use slurmlens_wire::{self as wire, UsageGrouping, UsageRow};

use crate::api::{Loader, now};
use crate::numbers::{count, decimal};
use crate::pages::LoadError;
use crate::query::encode;
use crate::usage::{UsageColumn, UsageQuery, bin_label, by_word, duration, hours, order_of, percent, sorted};

/// Most rows the bar chart draws (the largest by GPU-hours).
const BARS: usize = 15;

/// The window form both pages share: from, to (in the viewer's zone), and on `/usage` the grouping.
#[component]
fn WindowForm(action: &'static str, query: UsageQuery, with_by: bool) -> impl IntoView {
    let zone = crate::clock::use_zone();
    let (start, end) = query.window(now());
    view! {
        <form class="filters" method="get" action=action data-testid="usage-window">
            {query.cluster.clone().map(|cluster| view! { <input type="hidden" name="cluster" value=cluster /> })}
            <label>
                {format!("From ({})", zone.offset_name(start))}
                <input type="datetime-local" name="start" value=zone.form_value(start) data-testid="usage-start" />
            </label>
            <label>
                {format!("To ({})", zone.offset_name(end))}
                <input type="datetime-local" name="end" value=zone.form_value(end) data-testid="usage-end" />
            </label>
            <input type="hidden" name="tz" value=zone.name() />
            <label>
                "Tag"
                <input type="text" name="tag" value=query.tag.clone().unwrap_or_default() placeholder="pytorch" data-testid="usage-tag" />
            </label>
            {with_by.then(|| view! {
                <label>
                    "Rows"
                    <select name="by" data-testid="usage-by">
                        <option value="account" selected=query.by == UsageGrouping::Account>"accounts"</option>
                        <option value="user" selected=query.by == UsageGrouping::User>"users"</option>
                    </select>
                </label>
            })}
            <button type="submit" data-testid="usage-apply">"Apply"</button>
        </form>
    }
}

/// The usage page.
#[component]
pub fn UsagePage() -> impl IntoView {
    let query_map = use_query_map();
    let query = Memo::new(move |_| query_map.with(|map| UsageQuery::from_lookup(|name| map.get(name))));
    let order = Memo::new(move |_| query_map.with(|map| order_of(&|name| map.get(name))));
    let loader = Loader::from_context();
    let report = Resource::new(move || query.get(), move |query| loader.usage(query.resolved(now())));
    view! {
        <section class="page usage-page">
            <h1>"Usage and waste"</h1>
            {move || view! { <WindowForm action="/usage" query=query.get() with_by=true /> }}
            <Transition fallback=|| view! { <p class="status">"Loading…"</p> }>
                {move || {
                    let order = order.get();
                    let query = query.get();
                    Suspend::new(async move {
                        match report.await {
                            Ok(report) => view! { <UsageBody report query order /> }.into_any(),
                            Err(error) => view! { <LoadError error /> }.into_any(),
                        }
                    })
                }}
            </Transition>
        </section>
    }
}

/// The toolbar, the totals, the chart and the table of one answer.
#[component]
fn UsageBody(report: wire::UsageReport, query: UsageQuery, order: (UsageColumn, bool)) -> impl IntoView {
    let own = query.api_query(false);
    let join = |base: &str, extra: &[(&str, String)]| {
        let extra = encode(extra);
        match (own.is_empty(), extra.is_empty()) {
            (true, true) => base.to_string(),
            (true, false) => format!("{base}?{extra}"),
            (false, true) => format!("{base}?{own}"),
            (false, false) => format!("{base}?{own}&{extra}"),
        }
    };
    let by_account = join("/usage", &[("by", "account".into())]);
    let by_user = join("/usage", &[("by", "user".into())]);
    let csv = format!("/api/v1/usage?{}&format=csv", query.resolved(now()).api_query(true));
    let stats = join("/stats", &[]);
    let total = report.total.clone();
    let measured_share =
        if total.gpu_hours > 0.0 { Some(100.0 * total.gpu_hours_measured / total.gpu_hours) } else { None };
    let idle_share = total
        .idle_gpu_hours
        .filter(|_| total.gpu_hours_measured > 0.0)
        .map(|idle| 100.0 * idle / total.gpu_hours_measured);
    // Energy is read from archived reports only: say over which of the GPU-hours.
    let over = if total.gpu_hours_with_energy < total.gpu_hours * 0.999 {
        format!(" over the {} GPU-hours with a reading", hours(total.gpu_hours_with_energy))
    } else {
        String::new()
    };
    let energy = match (total.energy_kwh, total.co2_kg) {
        (Some(kwh), Some(co2)) => format!("{} kWh ({} kg CO₂){over}", hours(kwh), decimal(co2, 1)),
        (Some(kwh), None) => format!("{} kWh{over}", hours(kwh)),
        _ => "no energy readings".to_string(),
    };
    let summary = format!(
        "{} jobs, {} GPU-hours allocated; utilisation known for {} of them; {} idle GPU-hours ({} of the measured); {}.",
        count(total.jobs),
        hours(total.gpu_hours),
        percent(measured_share),
        total.idle_gpu_hours.map_or_else(|| "unknown".to_string(), hours),
        percent(idle_share),
        energy,
    );
    let rows = sorted(report.rows.clone(), order);
    let by = report.by;
    let account = by == UsageGrouping::Account;
    view! {
        <div class="toolbar">
            <a class="button" class:active=account href=by_account data-testid="usage-by-account">"By account"</a>
            <a class="button" class:active=!account href=by_user data-testid="usage-by-user">"By user"</a>
            <a class="button" href=csv download="usage.csv" data-testid="usage-csv">"Export CSV"</a>
            <a href=stats data-testid="usage-stats-link">"Statistics of this window"</a>
        </div>
        <p class="status" data-testid="usage-summary">{summary}</p>
        <p class="hint">
            "Idle = allocated GPU-hours × (1 − mean utilisation), from archived reports and running jobs' means so far; GPU-hours without either are unmeasured, not idle."
            {account.then_some(" Accounts include their sub-accounts, so rows add up to more than the total.")}
        </p>
        <UsageBars rows=report.rows.clone() />
        <UsageTable rows total=report.total by query order />
    }
}

/// Allocated GPU-hours of the largest rows as bars: busy, idle and unmeasured parts.
#[component]
fn UsageBars(rows: Vec<UsageRow>) -> impl IntoView {
    let mut rows = rows;
    rows.sort_by(|a, b| b.gpu_hours.total_cmp(&a.gpu_hours));
    rows.truncate(BARS);
    let largest = rows.first().map_or(0.0, |row| row.gpu_hours).max(f64::MIN_POSITIVE);
    let width = |value: f64| format!("width:{:.2}%", (100.0 * value / largest).clamp(0.0, 100.0));
    view! {
        <figure class="usage-bars" data-testid="usage-chart">
            <figcaption>
                <ul class="legend">
                    <li><span class="swatch seg-busy"></span>"busy"</li>
                    <li><span class="swatch seg-idle"></span>"idle"</li>
                    <li><span class="swatch seg-unknown"></span>"unmeasured"</li>
                </ul>
            </figcaption>
            {rows
                .into_iter()
                .map(|row| {
                    let idle = row.idle_gpu_hours.unwrap_or(0.0).max(0.0);
                    let busy = (row.gpu_hours_measured - idle).max(0.0);
                    let unknown = (row.gpu_hours - row.gpu_hours_measured).max(0.0);
                    let title = format!(
                        "{}: {} GPU-hours, {} idle, {} unmeasured",
                        row.name,
                        hours(row.gpu_hours),
                        row.idle_gpu_hours.map_or_else(|| "unknown".to_string(), hours),
                        hours(unknown),
                    );
                    let label = title.clone();
                    view! {
                        <div class="bar-row" title=title>
                            <span class="bar-name">{row.name.clone()}</span>
                            <span class="bar-track" role="img" aria-label=label>
                                <span class="seg seg-busy" style=width(busy)></span>
                                <span class="seg seg-idle" style=width(idle)></span>
                                <span class="seg seg-unknown" style=width(unknown)></span>
                            </span>
                            <span class="bar-value">{hours(row.gpu_hours)}</span>
                        </div>
                    }
                })
                .collect_view()}
        </figure>
    }
}

/// One row's cells.
fn cells(row: &UsageRow) -> impl IntoView + use<> {
    let over = if row.gpu_hours_with_energy < row.gpu_hours * 0.999 {
        format!(" (of {} GPU-h)", hours(row.gpu_hours_with_energy))
    } else {
        String::new()
    };
    let energy = match (row.energy_kwh, row.co2_kg) {
        (Some(kwh), Some(co2)) => format!("{} kWh / {} kg{over}", hours(kwh), decimal(co2, 1)),
        (Some(kwh), None) => format!("{} kWh{over}", hours(kwh)),
        _ => "—".to_string(),
    };
    let failed = &row.failed_jobs;
    let failed = [failed.infrastructure, failed.application, failed.unknown].map(|jobs| decimal(jobs, 0)).join(" / ");
    let lost = row.failed_gpu_hours.infrastructure + row.failed_gpu_hours.application + row.failed_gpu_hours.unknown;
    let idle = match row.idle_gpu_hours {
        Some(idle) if row.gpu_hours_measured < row.gpu_hours * 0.999 => {
            format!("{} (of {} measured)", hours(idle), hours(row.gpu_hours_measured))
        }
        Some(idle) => hours(idle),
        None => "unknown".to_string(),
    };
    let wait = match (row.median_wait_s, row.mean_wait_s) {
        (Some(median), Some(mean)) => format!("{} (mean {})", duration(median), duration(mean)),
        _ => "—".to_string(),
    };
    view! {
        <td class="num">{count(row.jobs)}</td>
        <td class="num" data-column="gpu_hours">{hours(row.gpu_hours)}</td>
        <td class="num" data-column="idle_gpu_hours">{idle}</td>
        <td class="num">{percent(row.mean_gpu_util)}</td>
        <td class="num">{percent(row.mean_tensor_active)}</td>
        <td class="num">{energy}</td>
        <td class="num" title=format!("{} GPU-hours lost", hours(lost))>{failed}</td>
        <td class="num">{wait}</td>
    }
}

/// The table, with sortable headers (links).
#[component]
fn UsageTable(
    rows: Vec<UsageRow>,
    total: UsageRow,
    by: UsageGrouping,
    query: UsageQuery,
    order: (UsageColumn, bool),
) -> impl IntoView {
    let headers = UsageColumn::ALL
        .into_iter()
        .map(|column| {
            let current = order.0 == column;
            let descending = if current { !order.1 } else { column != UsageColumn::Name };
            let mut pairs = vec![("by", by_word(by).to_string())];
            pairs.push(("sort", column.key().to_string()));
            pairs.push(("desc", if descending { "1" } else { "0" }.to_string()));
            let base = query.api_query(false);
            let href = if base.is_empty() {
                format!("/usage?{}", encode(&pairs))
            } else {
                format!("/usage?{base}&{}", encode(&pairs))
            };
            let aria = current.then_some(if order.1 { "descending" } else { "ascending" });
            let arrow = if current { if order.1 { " ▼" } else { " ▲" } } else { "" };
            view! {
                <th scope="col" aria-sort=aria>
                    <a href=href data-testid=format!("usage-sort-{}", column.key())>{column.label(by)}{arrow}</a>
                </th>
            }
        })
        .collect_view();
    let body = rows
        .iter()
        .map(|row| {
            let parent =
                row.parent.clone().map(|parent| view! { <small class="muted">{format!(" in {parent}")}</small> });
            view! {
                <tr data-name=row.name.clone()>
                    <th scope="row">{row.name.clone()}{parent}</th>
                    {cells(row)}
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap">
            <table class="usage" data-testid="usage-table">
                <thead><tr>{headers}</tr></thead>
                <tbody>{body}</tbody>
                <tfoot>
                    <tr data-name="total">
                        <th scope="row">"Total"</th>
                        {cells(&total)}
                    </tr>
                </tfoot>
            </table>
        </div>
    }
}

/// The statistics page.
#[component]
pub fn StatsPage() -> impl IntoView {
    let query_map = use_query_map();
    let query = Memo::new(move |_| query_map.with(|map| UsageQuery::from_lookup(|name| map.get(name))));
    let loader = Loader::from_context();
    let stats = Resource::new(move || query.get(), move |query| loader.stats(query.resolved(now())));
    view! {
        <section class="page stats-page">
            <h1>"Statistics"</h1>
            {move || view! { <WindowForm action="/stats" query=query.get() with_by=false /> }}
            <Transition fallback=|| view! { <p class="status">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match stats.await {
                        Ok(stats) => view! {
                            <div class="stats-grid">
                                <TopList title="Top users by GPU-hours" entries=stats.top_users testid="top-users" />
                                <TopList title="Top accounts by GPU-hours" entries=stats.top_accounts testid="top-accounts" />
                                <TopList title="Top users by idle GPU-hours" entries=stats.top_idle_users testid="top-idle-users" idle=true />
                                <TopList title="Top accounts by idle GPU-hours" entries=stats.top_idle_accounts testid="top-idle-accounts" idle=true />
                                <HistogramView title="GPUs per job" histogram=stats.job_gpus testid="hist-gpus" />
                                <HistogramView title="Run time (jobs that ended)" histogram=stats.run_time testid="hist-run" />
                                <HistogramView title="Queue wait (jobs that started)" histogram=stats.queue_wait testid="hist-wait" />
                            </div>
                            <p class="hint" data-testid="stats-accounts-note">
                                "Accounts here count their own jobs only; Usage by account adds each account's sub-accounts (as sreport rolls them up), so a parent account shows more there."
                            </p>
                        }
                        .into_any(),
                        Err(error) => view! { <LoadError error /> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

/// A top list with bars.
#[component]
fn TopList(
    title: &'static str,
    entries: Vec<wire::TopEntry>,
    testid: &'static str,
    #[prop(optional)] idle: bool,
) -> impl IntoView {
    let class = if idle { "seg seg-idle" } else { "seg seg-busy" };
    let largest = entries.first().map_or(0.0, |entry| entry.gpu_hours).max(f64::MIN_POSITIVE);
    let empty = entries.is_empty().then(|| view! { <p class="hint">"Nothing measured in this window."</p> });
    view! {
        <section class="stats-box" data-testid=testid>
            <h2>{title}</h2>
            {empty}
            {entries
                .into_iter()
                .map(|entry| {
                    let style = format!("width:{:.2}%", (100.0 * entry.gpu_hours / largest).clamp(0.0_f64, 100.0));
                    view! {
                        <div class="bar-row">
                            <span class="bar-name">{entry.name}</span>
                            <span class="bar-track"><span class=class style=style></span></span>
                            <span class="bar-value">{hours(entry.gpu_hours)}</span>
                        </div>
                    }
                })
                .collect_view()}
        </section>
    }
}

/// A histogram as one bar per bin.
#[component]
fn HistogramView(title: &'static str, histogram: wire::Histogram, testid: &'static str) -> impl IntoView {
    let largest = histogram.bins.iter().map(|bin| bin.jobs).max().unwrap_or(0).max(1);
    let count = histogram.bins.len();
    let unit = histogram.unit.clone();
    let empty = (count == 0).then(|| view! { <p class="hint">"No jobs in this window."</p> });
    view! {
        <section class="stats-box" data-testid=testid>
            <h2>{title}</h2>
            {empty}
            {histogram
                .bins
                .into_iter()
                .map(|bin| {
                    let label = bin_label(&bin, &unit);
                    let style = format!("width:{:.2}%", 100.0 * bin.jobs as f64 / largest as f64);
                    view! {
                        <div class="bar-row">
                            <span class="bar-name">{label}</span>
                            <span class="bar-track"><span class="seg seg-count" style=style></span></span>
                            <span class="bar-value">{crate::numbers::count(bin.jobs)}</span>
                        </div>
                    }
                })
                .collect_view()}
        </section>
    }
}

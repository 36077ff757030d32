//! `/jobs`: the job list. The window, filters, search, column order and page go to the API in the
//! page's URL: the server orders the whole window and sends one page with the window's total ("201–400
//! of 7,712 jobs", previous and next links that pin the window). A search is asked twice, in the
//! window and beyond it (the matches outside the window are shown apart, and said to be). CSV and JSON
//! export write exactly the page's rows, in the order shown (in the browser from the rows on screen;
//! without the wasm bundle the same links ask the server for the same rows). "Whole window" links ask
//! the API's streamed export (`/api/v1/jobs/export`) for every job of the window with the page's
//! filters, newest submission first.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use slurmlens_wire as wire;

use crate::api::{DataError, Loader, now};
use crate::app::Time;
use crate::joblist::{self, Column, order_of};
use crate::pages::gantt_packed::thousands;
use crate::pages::{FilterField, LoadError};
use crate::palette::state_colour;
use crate::query::{ListQuery, encode, percent_encode};

/// The job list page.
#[component]
pub fn JobsPage() -> impl IntoView {
    let query_map = use_query_map();
    let list = Memo::new(move |_| query_map.with(|map| ListQuery::from_lookup(|name| map.get(name))));
    let order = Memo::new(move |_| query_map.with(|map| order_of(&|name| map.get(name))));
    let loader = Loader::from_context();
    let jobs = Resource::new(
        move || (list.get(), order.get()),
        move |(query, order)| {
            let now = now();
            let sort = order.map(|(column, descending)| (column.sort(), descending));
            let in_window = loader.jobs(query.page_query(now, sort));
            // A search also looks beyond the window; that part failing leaves the window's matches.
            let beyond = query.beyond_query(now).map(|beyond| loader.jobs(beyond));
            async move {
                let page = in_window.await?;
                let beyond = match beyond {
                    Some(beyond) => Some(beyond.await),
                    None => None,
                };
                Ok::<_, DataError>((page, beyond))
            }
        },
    );
    let shown: StoredValue<Vec<wire::Job>> = StoredValue::new(Vec::new());
    let initial = list.get_untracked();
    let window_end = initial.end.unwrap_or(now());
    let window_start = initial.start.unwrap_or(window_end - 86_400);
    let zone = crate::clock::use_zone();

    let export = move |format: &'static str| {
        move |event: leptos::ev::MouseEvent| {
            event.prevent_default();
            let rows = shown.get_value();
            let (text, mime) = match format {
                "csv" => (joblist::to_csv(&rows), "text/csv"),
                _ => (joblist::to_json(&rows), "application/json"),
            };
            download(&format!("jobs.{format}"), mime, &text);
        }
    };

    view! {
        <section class="page jobs-page">
            <h1>"Jobs"</h1>
            <form class="filters" method="get" action="/jobs" data-testid="jobs-filters">
                {initial.cluster.clone().map(|cluster| view! { <input type="hidden" name="cluster" value=cluster /> })}
                <label>
                    {format!("From ({})", zone.offset_name(window_start))}
                    <input type="datetime-local" name="start" value=zone.form_value(window_start) data-testid="filter-start" />
                </label>
                <label>
                    {format!("To ({})", zone.offset_name(window_end))}
                    <input type="datetime-local" name="end" value=zone.form_value(window_end) data-testid="filter-end" />
                </label>
                <input type="hidden" name="tz" value=zone.name() />
                <FilterField label="User" name="user" value=initial.filters.user.clone() />
                <FilterField label="Account" name="account" value=initial.filters.account.clone() />
                <FilterField label="Partition" name="partition" value=initial.filters.partition.clone() />
                <FilterField label="State" name="state" value=initial.filters.state.clone() placeholder="FAILED,TIMEOUT" />
                <FilterField label="Tag" name="tag" value=initial.filters.tag.clone() placeholder="pytorch" />
                <FilterField label="Search" name="q" value=initial.search.clone() placeholder="job id, name, user, account" />
                <button type="submit" data-testid="jobs-apply">"Apply"</button>
            </form>
            <Transition fallback=|| view! { <p class="status">"Loading…"</p> }>
                {move || {
                    let order = order.get();
                    let query = list.get();
                    Suspend::new(async move {
                        match jobs.await {
                            Ok((page, beyond)) => {
                                let api_window = query.api_query(now());
                                let window = (api_window.start.unwrap_or(0), api_window.end.unwrap_or(0));
                                let total = page.total.unwrap_or(page.items.len() as u64);
                                let first = page.offset.unwrap_or(0);
                                let archiving = page.archiving.map(|progress| {
                                    view! { <p class="hint" data-testid="jobs-archiving">{archiving_line(&progress)}</p> }
                                });
                                let rows = page.items;
                                shown.set_value(rows.clone());
                                let sort_words: Vec<(&str, String)> = order
                                    .map(|(column, descending)| {
                                        vec![("sort", column.key().to_string()), ("desc", if descending { "1" } else { "0" }.to_string())]
                                    })
                                    .unwrap_or_default();
                                // Pages of one window: its bounds pinned, so "now" does not move under them.
                                let pinned = ListQuery { start: Some(window.0), end: Some(window.1), ..query.clone() };
                                let csv_href = format!("/web/v1/jobs.csv?{}", pinned.to_query(&sort_words));
                                let json_href = format!("/web/v1/jobs.json?{}", pinned.to_query(&sort_words));
                                let whole_csv = whole_window_href(&api_window, "csv");
                                let whole_ndjson = whole_window_href(&api_window, "ndjson");
                                let count = count_line(first, rows.len() as u64, total, query.search.as_deref());
                                let top_pager = view! { <Pager query=pinned.clone() first shown=rows.len() as u64 total sort_words=sort_words.clone() top=true /> };
                                let pager = view! { <Pager query=pinned first shown=rows.len() as u64 total sort_words /> };
                                // A search that found nothing in the window shows no empty table.
                                let table = (!rows.is_empty() || query.search.is_none())
                                    .then(|| view! { <JobTable rows query=query.clone() order /> });
                                let beyond_view = beyond.map(|answer| {
                                    view! { <Beyond answer window search=query.search.clone().unwrap_or_default() query=query.clone() order /> }
                                });
                                view! {
                                    <div class="toolbar">
                                        <span class="status" data-testid="jobs-count">{count}</span>
                                        {top_pager}
                                        <a class="button" href=csv_href download="jobs.csv" data-testid="export-csv" on:click=export("csv")>"Export CSV"</a>
                                        <a class="button" href=json_href download="jobs.json" data-testid="export-json" on:click=export("json")>"Export JSON"</a>
                                        <a class="button" href=whole_csv download="jobs.csv" data-testid="export-window-csv" title=WHOLE_WINDOW>"Whole window CSV"</a>
                                        <a class="button" href=whole_ndjson download="jobs.ndjson" data-testid="export-window-ndjson" title=WHOLE_WINDOW>"Whole window NDJSON"</a>
                                    </div>
                                    {archiving}
                                    {table}
                                    {pager}
                                    {beyond_view}
                                }
                                .into_any()
                            }
                            Err(error) => view! { <LoadError error /> }.into_any(),
                        }
                    })
                }}
            </Transition>
        </section>
    }
}

/// `201–400 of 7,712 jobs`, or with a search `12 jobs in this window match “x”`.
/// What the listing says while the archiver's first round makes the reports that fill its last columns.
pub fn archiving_line(progress: &wire::Archiving) -> String {
    let made = thousands(progress.made as usize);
    let due = thousands(progress.due as usize);
    let how_far = if progress.counted {
        format!("{made} of {due} so far (those of jobs that ended badly first, then the rest, newest first)")
    } else {
        format!(
            "first those of jobs that ended badly ({made} made so far), while counting the jobs that need one ({due} so far)"
        )
    };
    format!(
        "Reports of recently ended jobs are being made: {how_far}. Until a job's report is made, its {} and {} cells stay blank; reload to see more.",
        Column::GpuUtil.title(),
        Column::Blame.title()
    )
}

pub fn count_line(first: u64, shown: u64, total: u64, search: Option<&str>) -> String {
    let range = if shown == 0 || shown == total {
        String::new()
    } else {
        format!("{}–{} of ", thousands(first as usize + 1), thousands((first + shown) as usize))
    };
    let noun = if total == 1 { "job" } else { "jobs" };
    match search {
        Some(search) => format!("{range}{} {noun} in this window match “{search}”", thousands(total as usize)),
        None => format!("{range}{} {noun}", thousands(total as usize)),
    }
}

/// Previous and next pages of the ordered window (links, so they work without the wasm bundle too);
/// above the table (`top`, its test ids end in `-top`) and below it.
#[component]
fn Pager(
    query: ListQuery,
    first: u64,
    shown: u64,
    total: u64,
    sort_words: Vec<(&'static str, String)>,
    #[prop(optional)] top: bool,
) -> impl IntoView {
    let id = move |name: &str| if top { format!("{name}-top") } else { name.to_string() };
    let rows = u64::from(query.rows()).max(1);
    let page = first / rows + 1;
    let pages = total.div_ceil(rows).max(1);
    let href = |page: u64| {
        let target = ListQuery { page: u32::try_from(page).ok().filter(|page| *page > 1), ..query.clone() };
        format!("/jobs?{}", target.to_query(&sort_words))
    };
    let previous = (page > 1).then(|| href(page - 1));
    let next = (first + shown < total).then(|| href(page + 1));
    (pages > 1).then(|| {
        view! {
            <nav class="pager" aria-label=if top { "pages (top)" } else { "pages" } data-testid=id("jobs-pager")>
                {match previous {
                    Some(href) => view! { <a class="button" rel="prev" href=href data-testid=id("jobs-previous")>"← Previous"</a> }.into_any(),
                    None => view! { <span class="button disabled" aria-disabled="true">"← Previous"</span> }.into_any(),
                }}
                <span class="status" data-testid=id("jobs-page")>{format!("page {} of {}", thousands(page as usize), thousands(pages as usize))}</span>
                {match next {
                    Some(href) => view! { <a class="button" rel="next" href=href data-testid=id("jobs-next")>"Next →"</a> }.into_any(),
                    None => view! { <span class="button disabled" aria-disabled="true">"Next →"</span> }.into_any(),
                }}
            </nav>
        }
    })
}

/// What the "whole window" links hold, said on hover.
const WHOLE_WINDOW: &str =
    "Every job of the window with these filters (not only the rows shown), newest submission first, every field";

/// The API's streamed export of the page's window with its filters and search (no page size).
fn whole_window_href(window: &crate::query::JobQuery, format: &str) -> String {
    let pairs: Vec<(String, String)> = window.pairs();
    let mut kept: Vec<(&str, String)> = pairs
        .iter()
        .filter(|(name, _)| name != "limit" && name != "cursor")
        .map(|(name, value)| (name.as_str(), value.clone()))
        .collect();
    kept.push(("format", format.to_string()));
    format!("/api/v1/jobs/export?{}", encode(&kept))
}

/// A search's matches outside the window: how many, from how far, and their table.
#[component]
fn Beyond(
    answer: Result<wire::Page<wire::Job>, DataError>,
    window: (i64, i64),
    search: String,
    query: ListQuery,
    order: Option<(Column, bool)>,
) -> impl IntoView {
    let back = crate::query::SEARCH_BACK_DAYS;
    match answer {
        Ok(page) => {
            let more = page.next_cursor.is_some();
            let outside: Vec<wire::Job> =
                page.items.into_iter().filter(|job| !joblist::overlaps(job, window)).collect();
            let rows = joblist::shown(outside, order);
            let heading = match rows.len() {
                0 => format!("No other job matches “{search}” in the {back} days before now"),
                1 => format!("1 more job matches “{search}” outside this window"),
                count => {
                    format!("{count}{} more jobs match “{search}” outside this window", if more { "+" } else { "" })
                }
            };
            let note = if rows.is_empty() {
                String::new()
            } else {
                format!(
                    "Searched the {back} days before now{}; these jobs did not run in the window above, so the export leaves them out.",
                    if more { ", newest submissions first" } else { "" }
                )
            };
            let table = (!rows.is_empty()).then(|| view! { <JobTable rows query order /> });
            view! {
                <section class="beyond" data-testid="jobs-beyond" aria-label="matches outside the window">
                    <h2 data-testid="jobs-beyond-count">{heading}</h2>
                    {(!note.is_empty()).then(|| view! { <p class="hint">{note}</p> })}
                    {table}
                </section>
            }
            .into_any()
        }
        Err(error) => view! {
            <p class="status" data-testid="jobs-beyond-count">
                {format!("Could not search beyond the window: {}", error.message)}
            </p>
        }
        .into_any(),
    }
}

/// The table, with sortable headers (links, so they work without the wasm bundle too).
#[component]
fn JobTable(rows: Vec<wire::Job>, query: ListQuery, order: Option<(Column, bool)>) -> impl IntoView {
    let headers = Column::ALL
        .into_iter()
        .map(|column| {
            let (sorted, descending) = match order {
                Some((by, descending)) if by == column => (true, descending),
                _ => (false, false),
            };
            let next_desc = sorted && !descending;
            let first_page = ListQuery { page: None, ..query.clone() };
            let href = format!(
                "/jobs?{}",
                first_page.to_query(&[
                    ("sort", column.key().to_string()),
                    ("desc", if next_desc { "1" } else { "0" }.to_string())
                ])
            );
            let aria = if sorted { if descending { "descending" } else { "ascending" } } else { "none" };
            let marker = if sorted { if descending { " ▼" } else { " ▲" } } else { "" };
            view! {
                <th scope="col" aria-sort=aria>
                    <a href=href data-testid=format!("sort-{}", column.key())>{column.title()}{marker}</a>
                </th>
            }
        })
        .collect_view();
    let cluster = query.cluster.clone();
    let body = rows
        .into_iter()
        .map(|job| {
            let suffix = cluster.as_ref().map(|c| format!("?{}", encode(&[("cluster", c.clone())]))).unwrap_or_default();
            let href = format!("/jobs/{}{suffix}", percent_encode(&job.job_id));
            let cells = Column::ALL
                .into_iter()
                .map(|column| {
                    let content = match column {
                        Column::JobId => view! { <a href=href.clone()>{job.job_id.clone()}</a> }.into_any(),
                        Column::Name => view! { {job.job_name.clone()} {super::job_tags::tag_chips(&job.tags)} }.into_any(),
                        Column::Start => job.start.map(|t| view! { <Time at=t.timestamp() /> }.into_any()).unwrap_or_else(|| ().into_any()),
                        Column::End => job.end.map(|t| view! { <Time at=t.timestamp() /> }.into_any()).unwrap_or_else(|| ().into_any()),
                        Column::State => view! {
                            <span class="state" style=format!("border-color:{}", state_colour(&job.state))>{job.state.clone()}</span>
                        }
                        .into_any(),
                        other => other.text(&job).into_any(),
                    };
                    view! { <td data-column=column.key()>{content}</td> }
                })
                .collect_view();
            view! { <tr data-testid="job-row" data-job=job.job_id.clone()>{cells}</tr> }
        })
        .collect_view();
    view! {
        <div class="table-wrap">
            <table class="jobs" data-testid="jobs-table">
                <thead><tr>{headers}</tr></thead>
                <tbody>{body}</tbody>
            </table>
        </div>
    }
}

/// Saves `text` as a file named `name` (browser only).
fn download(name: &str, mime: &str, text: &str) {
    use wasm_bindgen::JsCast;
    let Some(document) = web_sys::window().and_then(|w| w.document()) else {
        return;
    };
    let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let Ok(blob) = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options) else {
        return;
    };
    let Ok(url) = web_sys::Url::create_object_url_with_blob(&blob) else {
        return;
    };
    if let Some(anchor) =
        document.create_element("a").ok().and_then(|e| e.dyn_into::<web_sys::HtmlAnchorElement>().ok())
    {
        anchor.set_href(&url);
        anchor.set_download(name);
        if let Some(body) = document.body() {
            let _ = body.append_child(&anchor);
            anchor.click();
            anchor.remove();
        }
    }
    let revoke = url.clone();
    set_timeout(move || drop(web_sys::Url::revoke_object_url(&revoke)), std::time::Duration::from_secs(30));
}

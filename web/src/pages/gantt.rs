//! `/`: the Gantt of jobs on nodes. The server sends the controls and, for browsers without the wasm
//! bundle, a static SVG of the window; once hydrated, the page loads compact job data and draws on a
//! canvas: zoom from an hour to thirty days, pan, fold racks, unfold nodes into GPU lanes, hover for a
//! summary, click (or Enter) to open a job, auto-refresh while the window reaches now. `job=<id>` (the
//! job page's "On the Gantt") names a job: the server renders its details above the chart, and the
//! chart outlines it (however thin at that zoom), selects its row and scrolls it into view.

use std::sync::Arc;
use std::time::Duration;

use leptos::ev;
use leptos::prelude::*;
use leptos_meta::Link;
use leptos_router::NavigateOptions;
use leptos_router::hooks::{use_navigate, use_query_map};

use crate::api::{Loader, now};
use crate::app::display_time;
use crate::gantt::{
    Expansion, GanttData, GanttIndex, LABEL_WIDTH, MAX_SPAN, METRICS, RowKind, RowLayout, Viewport, job_at, layout,
    packed_at, row_jobs,
};
use crate::pages::FilterField;
use crate::pages::gantt_focus::{FocusPanel, scroll_to_row};
use crate::pages::gantt_packed::{packed_tooltip, status_line, thousands, zoom_to_packed};
use crate::pages::gantt_states::{
    NodeStates, fallback_image, keep_view_in_url, listed_states, state_tooltip, state_under,
};
use crate::palette::ColourBy;
use crate::query::{Filters, GanttQuery, encode};

/// Height of the time axis above the chart's body, CSS pixels.
pub(crate) const AXIS_HEIGHT: f64 = 24.0;
const REFRESH: Duration = Duration::from_secs(60);

/// Loaded data with its index, and the filters it was loaded for.
struct Loaded {
    data: GanttData,
    index: GanttIndex,
    key: (Option<String>, Filters),
}

/// Zoom presets: label and span in seconds.
const SPANS: [(&str, f64); 5] =
    [("1 h", 3600.0), ("6 h", 6.0 * 3600.0), ("1 d", 86_400.0), ("7 d", 7.0 * 86_400.0), ("30 d", MAX_SPAN)];

/// The Gantt page.
#[component]
pub fn GanttPage() -> impl IntoView {
    let query_map = use_query_map();
    let query = Memo::new(move |_| query_map.with(|map| GanttQuery::from_lookup(|name| map.get(name))));
    let initial = query.get_untracked();
    let (start, end) = initial.window(now());
    // A live view (no explicit end) shows a little of the future, so the "now" line is visible.
    let lead = if initial.end.is_none() { (end - start) as f64 * 0.03 } else { 0.0 };
    let view_port = RwSignal::new(Viewport {
        start: start as f64 + lead,
        end: end as f64 + lead,
        left: LABEL_WIDTH,
        width: 1000.0,
    });
    let width = RwSignal::new(0.0f64);
    let colour = RwSignal::new(initial.colour);
    let expansion = RwSignal::new(Expansion::default());
    let loaded: RwSignal<Option<Arc<Loaded>>> = RwSignal::new(None);
    let status = RwSignal::new(String::from("Loading…"));
    let ready = RwSignal::new(false);
    let auto_refresh = RwSignal::new(true);
    let hover: RwSignal<Option<(u32, f64, f64)>> = RwSignal::new(None);
    let hover_packed: RwSignal<Option<(u32, f64, f64)>> = RwSignal::new(None);
    let hover_state: RwSignal<Option<(usize, f64, f64)>> = RwSignal::new(None);
    let selected_row: RwSignal<Option<usize>> = RwSignal::new(None);
    let selected_job: RwSignal<Option<u32>> = RwSignal::new(None);
    let clock = RwSignal::new(now());
    let layout_cache: StoredValue<Option<Arc<RowLayout>>> = StoredValue::new(None);
    let request = StoredValue::new(0u64);
    let drag: StoredValue<Option<(f64, Viewport, bool)>> = StoredValue::new(None);
    let frame_stats = StoredValue::new((0u32, 0.0f64, 0.0f64));
    let container = NodeRef::<leptos::html::Div>::new();
    let axis_canvas = NodeRef::<leptos::html::Canvas>::new();
    let body_canvas = NodeRef::<leptos::html::Canvas>::new();
    let navigate = use_navigate();
    let loader = Loader::from_context();
    // The job `job=` names: outlined and scrolled to once its window's data is drawn.
    let focus_id: Option<String> =
        query_map.with_untracked(|map| map.get("job")).map(|id| id.trim().to_string()).filter(|id| !id.is_empty());
    let focus_pending: StoredValue<Option<String>> = StoredValue::new(focus_id.clone());
    let focus_note: RwSignal<Option<String>> = RwSignal::new(None);
    let focus_detail = {
        let cluster = initial.cluster.clone();
        let loader = loader.clone();
        let focus_id = focus_id.clone();
        Resource::new(
            || (),
            move |()| {
                let future = focus_id.clone().map(|id| loader.job_detail(cluster.clone(), id));
                async move {
                    match future {
                        Some(future) => Some(future.await),
                        None => None,
                    }
                }
            },
        )
    };

    let filter_key = Memo::new(move |_| query.with(|q| (q.cluster.clone(), q.filters.clone())));
    let categories =
        Memo::new(move |_| loaded.with(|l| l.as_ref().map(|l| l.data.categories(colour.get())).unwrap_or_default()));
    // Each job's colour, once per load and colouring; the draw loop indexes it.
    let colour_table: Memo<Arc<Vec<&'static str>>> = Memo::new(move |_| {
        let by = colour.get();
        categories.with(|categories| {
            loaded.with(|l| l.as_ref().map(|l| Arc::new(l.data.colour_table(by, categories))).unwrap_or_default())
        })
    });
    let packed_colours: Memo<Arc<Vec<&'static str>>> = Memo::new(move |_| {
        let by = colour.get();
        categories.with(|categories| {
            loaded.with(|l| {
                let colours =
                    |data: &GanttData| data.packed.iter().map(|bar| data.packed_colour(bar, by, categories)).collect();
                l.as_ref().map(|l| Arc::new(colours(&l.data))).unwrap_or_default()
            })
        })
    });

    // Width follows the container (1280×800 laptops to wall displays).
    // Callbacks that run later (timers, frames, fetches) may outlive the page: they use `try_*`, which
    // answers `None` once the page's signals are disposed, instead of panicking.
    let measure = move || {
        let Some(Some(element)) = container.try_get_untracked() else {
            return;
        };
        let measured = f64::from(element.client_width());
        if measured > 0.0 && width.try_get_untracked().is_some_and(|known| (measured - known).abs() > 0.5) {
            width.set(measured);
            view_port.update(|v| v.width = measured - LABEL_WIDTH);
        }
    };
    // Browser only: effects do not run on the server.
    Effect::new(move |_| {
        measure();
        let resize = window_event_listener(ev::resize, move |_| measure());
        on_cleanup(move || resize.remove());
    });

    keep_view_in_url(view_port, query, colour);

    // Load whatever the view needs and the loaded data does not cover.
    let start_input = NodeRef::<leptos::html::Input>::new();
    let end_input = NodeRef::<leptos::html::Input>::new();
    let server_window = move || -> Option<(i64, i64)> {
        let start = start_input.try_get_untracked()??.value().parse().ok()?;
        let end = end_input.try_get_untracked()??.value().parse().ok()?;
        Some((start, end))
    };
    let load = move |force: bool| {
        let v = view_port.get_untracked();
        let key = filter_key.get_untracked();
        let current = now();
        let covered = loaded.with_untracked(|l| {
            l.as_ref().is_some_and(|l| {
                let reaches_end = l.data.end as f64 >= v.end || l.data.end >= l.data.now - 5;
                // A wider load left out short jobs or was cut: zooming in well past it asks for the detail.
                let detailed_enough = (!l.data.truncated && l.data.min_duration == 0)
                    || (v.end - v.start) >= (l.data.end - l.data.start) as f64 * 0.6;
                l.key == key && l.data.start as f64 <= v.start && reaches_end && detailed_enough
            })
        });
        if covered && !force {
            return;
        }
        // The first load asks for exactly the window the server rendered, so it is the request the
        // page's preload link already started; later loads add a quarter window either side for panning.
        let first = loaded.with_untracked(Option::is_none) && !force;
        let (fetch_start, fetch_end) = match server_window().filter(|_| first) {
            Some((start, end)) => (start as f64, end as f64),
            None => {
                let span = v.end - v.start;
                let margin = if span * 1.5 <= MAX_SPAN { span / 4.0 } else { 0.0 };
                let fetch_end = (v.end + margin).min(current as f64 + 60.0).max(v.end.min(current as f64 + 60.0));
                ((v.start - margin).max(fetch_end - MAX_SPAN).min(v.start), fetch_end)
            }
        };
        let gantt_query = GanttQuery {
            cluster: key.0.clone(),
            start: Some(fetch_start as i64),
            end: Some(fetch_end.max(fetch_start + 3600.0) as i64),
            span: None,
            colour: colour.get_untracked(),
            filters: key.1.clone(),
        };
        let ticket = request.get_value() + 1;
        request.set_value(ticket);
        status.set("Loading…".into());
        let future = loader.gantt(gantt_query);
        leptos::task::spawn_local(async move {
            let result = future.await;
            if request.try_get_value() != Some(ticket) {
                return;
            }
            match result {
                Ok(data) => {
                    let index = GanttIndex::new(&data, data.now);
                    crate::mark("slurmlens:gantt indexed");
                    clock.set(now());
                    loaded.set(Some(Arc::new(Loaded { data, index, key })));
                }
                Err(error) => status.set(format!("Could not load jobs: {error}")),
            }
        });
    };
    let debounce = StoredValue::new(0u64);
    let load_later = load.clone();
    Effect::new(move |_| {
        let load = load_later.clone();
        view_port.track();
        filter_key.track();
        if loaded.with_untracked(Option::is_none) && request.get_value() == 0 {
            // The first load goes out at once: it is the request the page preloaded.
            load(false);
            return;
        }
        let ticket = debounce.get_value() + 1;
        debounce.set_value(ticket);
        set_timeout(
            move || {
                if debounce.try_get_value() == Some(ticket) {
                    load(false);
                }
            },
            Duration::from_millis(120),
        );
    });

    // Live view: slide the window with the clock and reload.
    let load_live = load.clone();
    Effect::new(move |_| {
        let load_live = load_live.clone();
        let tick = move || {
            let current = now();
            let previous = clock.get_untracked();
            clock.set(current);
            let v = view_port.get_untracked();
            if auto_refresh.get_untracked() && v.end >= previous as f64 - (v.end - v.start) * 0.02 {
                let shift = (current - previous) as f64;
                view_port.set(Viewport { start: v.start + shift, end: v.end + shift, ..v });
                load_live(true);
            }
        };
        if let Ok(handle) = set_interval_with_handle(tick, REFRESH) {
            on_cleanup(move || handle.clear());
        }
    });

    // The named job: selected (outlined, its row marked, its details shown as the keyboard's `]`
    // shows them), in the view, and its first node's row scrolled to the middle of the screen.
    let focus_on = move |job_id: &str, current: &Loaded, rows: &RowLayout, body: &web_sys::HtmlCanvasElement| {
        let Some(job) = current.data.jobs.iter().position(|job| job.job_id == job_id) else {
            let why = if current.data.min_duration > 0 {
                "it may be too short to draw at this zoom (inside an outlined packed bar), or outside the filters"
            } else {
                "it did not run on these nodes in this window, or the filters leave it out"
            };
            focus_note.set(Some(format!("Job {job_id} is not on the chart: {why}.")));
            return;
        };
        let gantt_job = &current.data.jobs[job];
        let Some(row_index) =
            gantt_job.nodes.first().and_then(|&node| rows.node_row.get(node as usize).copied().flatten())
        else {
            return;
        };
        let row = rows.rows[row_index as usize];
        let v = view_port.get_untracked();
        let (start, end) = (gantt_job.start as f64, current.data.end_of(gantt_job, current.data.now) as f64);
        if end < v.start || start > v.end {
            let span = v.end - v.start;
            view_port.set(Viewport { start: start - span / 3.0, end: start + span * 2.0 / 3.0, ..v });
        }
        selected_row.set(Some(row_index as usize));
        selected_job.set(Some(job as u32));
        let x = view_port.get_untracked().x(start).max(LABEL_WIDTH);
        hover.set(Some((job as u32, x, row.y + row.height)));
        focus_note.set(Some(format!(
            "Job {job_id} is outlined in black on {} (its row is marked in blue).",
            if gantt_job.nodes.len() == 1 {
                "its node".to_string()
            } else {
                format!("its {} nodes", gantt_job.nodes.len())
            }
        )));
        scroll_to_row(body.clone(), row.y + row.height / 2.0, job, 10);
    };

    // Draw whenever anything shown changes.
    let zone = crate::clock::use_zone();
    Effect::new(move |_| {
        let v = view_port.get();
        let total_width = width.get();
        colour.track();
        let expansion_now = expansion.get();
        let row = selected_row.get();
        let job = selected_job.get();
        let now_at = clock.get();
        let Some(current) = loaded.get() else {
            return;
        };
        let (Some(axis), Some(body)) = (axis_canvas.get(), body_canvas.get()) else {
            return;
        };
        if total_width <= LABEL_WIDTH {
            // After a client-side navigation the container is laid out only after this first run.
            request_animation_frame(measure);
            return;
        }
        let started = web_sys::window().and_then(|w| w.performance()).map(|p| p.now()).unwrap_or(0.0);
        if !ready.get_untracked() {
            crate::mark("slurmlens:gantt first draw");
        }
        let rows = Arc::new(layout(&current.data.racks, &expansion_now, METRICS));
        layout_cache.set_value(Some(rows.clone()));
        let colours = colour_table.get();
        let packed_colours = packed_colours.get();
        let frame = crate::canvas::Frame {
            data: &current.data,
            index: &current.index,
            layout: &rows,
            expansion: &expansion_now,
            view: v,
            now: now_at.max(current.data.now),
            colours: &colours,
            packed_colours: &packed_colours,
            selected_row: row,
            selected_job: job,
            visible: (0.0, rows.height),
            zone,
        };
        if let Some(context) = crate::canvas::prepare(&axis, total_width, AXIS_HEIGHT) {
            crate::canvas::draw_axis(&context, total_width, AXIS_HEIGHT, &v, frame.now, zone);
        }
        if let Some(context) = crate::canvas::prepare(&body, total_width, rows.height) {
            crate::canvas::draw_body(&context, total_width, &frame);
        }
        let elapsed = web_sys::window().and_then(|w| w.performance()).map(|p| p.now()).unwrap_or(0.0) - started;
        let (count, total, worst) = frame_stats.get_value();
        frame_stats.set_value((count + 1, total + elapsed, worst.max(elapsed)));
        let _ = body.set_attribute("data-frame-ms", &format!("{elapsed:.2}"));
        let _ = body.set_attribute(
            "data-frame-stats",
            &format!("{} {:.2} {:.2}", count + 1, (total + elapsed) / f64::from(count + 1), worst.max(elapsed)),
        );
        let _ = body.set_attribute("data-view-start", &format!("{}", v.start as i64));
        let _ = body.set_attribute("data-view-end", &format!("{}", v.end as i64));
        let _ = body.set_attribute("data-jobs", &current.data.jobs.len().to_string());
        let _ = body.set_attribute("data-loaded-start", &current.data.start.to_string());
        let _ = body.set_attribute("data-loaded-end", &current.data.end.to_string());
        let _ = body.set_attribute("data-truncated", &current.data.truncated.to_string());
        let _ = body.set_attribute("data-packed-jobs", &current.data.packed_jobs.to_string());
        let _ = body.set_attribute("data-packed", &current.data.packed.len().to_string());
        let _ = body.set_attribute("data-cluster", &current.data.cluster);
        let _ = body.set_attribute("data-users", &current.data.users.join(","));
        if !ready.get_untracked() {
            ready.set(true);
            // When the first chart with data was on screen, from navigation start: the page is interactive.
            let _ = body.set_attribute("data-first-draw-ms", &format!("{:.1}", started + elapsed));
        }
        status.set(status_line(&current.data, &v));
        if let Some(job_id) = focus_pending.get_value() {
            focus_pending.set_value(None);
            focus_on(&job_id, &current, &rows, &body);
        }
    });

    let rows_now = move || layout_cache.get_value();
    let hit = move |x: f64, y: f64| -> Option<u32> {
        let current = loaded.get_untracked()?;
        let rows = rows_now()?;
        job_at(
            &current.data,
            &current.index,
            &rows,
            &view_port.get_untracked(),
            clock.get_untracked().max(current.data.now),
            (x, y),
        )
    };
    let hit_packed = move |x: f64, y: f64| -> Option<u32> {
        let current = loaded.get_untracked()?;
        packed_at(&current.data, rows_now()?.as_ref(), &view_port.get_untracked(), (x, y))
    };
    let open_job = {
        let navigate = navigate.clone();
        move |job: u32| {
            let Some(current) = loaded.get_untracked() else {
                return;
            };
            let job_id = &current.data.jobs[job as usize].job_id;
            let href = format!(
                "/jobs/{}?{}",
                crate::query::percent_encode(job_id),
                encode(&[("cluster", current.data.cluster.clone())])
            );
            navigate(&href, NavigateOptions::default());
        }
    };
    let toggle_row = move |row_index: usize| {
        let Some(rows) = rows_now() else {
            return;
        };
        let Some(row) = rows.rows.get(row_index) else {
            return;
        };
        expansion.update(|e| match row.kind {
            RowKind::Rack(rack) => {
                if !e.collapsed_racks.remove(&rack) {
                    e.collapsed_racks.insert(rack);
                }
            }
            RowKind::Node(node) | RowKind::Gpu { node, .. } => {
                if !e.expanded_nodes.remove(&node) {
                    e.expanded_nodes.insert(node);
                }
            }
        });
    };

    let on_mousedown = move |event: ev::MouseEvent| {
        drag.set_value(Some((f64::from(event.offset_x()), view_port.get_untracked(), false)));
    };
    let on_mousemove = move |event: ev::MouseEvent| {
        let (x, y) = (f64::from(event.offset_x()), f64::from(event.offset_y()));
        if let Some((from, origin, moved)) = drag.get_value()
            && event.buttons() & 1 == 1
        {
            if moved || (x - from).abs() > 3.0 {
                drag.set_value(Some((from, origin, true)));
                view_port.set(origin.pan(from - x));
                hover.set(None);
                hover_packed.set(None);
            }
            return;
        }
        // A packed bar is drawn over its row's jobs, so it is what the pointer is on.
        let packed = hit_packed(x, y);
        hover_packed.set(packed.map(|bar| (bar, x, y)));
        hover.set(if packed.is_some() { None } else { hit(x, y).map(|job| (job, x, y)) });
        // Behind the bars: a down or drained node's span, where no job is under the pointer.
        let free = packed.is_none() && hover.get_untracked().is_none();
        let state = move || {
            state_under(&loaded.get_untracked()?.data, rows_now()?.as_ref(), &view_port.get_untracked(), (x, y))
        };
        hover_state.set(free.then(state).flatten().map(|span| (span, x, y)));
    };
    let on_mouseup = {
        let open_job = open_job.clone();
        move |event: ev::MouseEvent| {
            let dragged = drag.get_value().is_some_and(|(_, _, moved)| moved);
            drag.set_value(None);
            if dragged {
                return;
            }
            let (x, y) = (f64::from(event.offset_x()), f64::from(event.offset_y()));
            if x < LABEL_WIDTH {
                if let Some(row) = rows_now().and_then(|rows| rows.row_at(y)) {
                    selected_row.set(Some(row));
                    toggle_row(row);
                }
            } else if let Some(bar) = hit_packed(x, y) {
                // Zooming in loads the bar's range again, in full detail.
                let packed = loaded.get_untracked().and_then(|current| current.data.packed.get(bar as usize).copied());
                if let Some(packed) = packed {
                    hover_packed.set(None);
                    view_port.update(|v| *v = zoom_to_packed(*v, &packed));
                }
            } else if let Some(job) = hit(x, y) {
                open_job(job);
            }
        }
    };
    let on_wheel = move |event: ev::WheelEvent| {
        let x = f64::from(event.offset_x());
        if event.ctrl_key() || event.meta_key() {
            event.prevent_default();
            view_port.update(|v| *v = v.zoom((event.delta_y() * 0.002).exp(), x));
        } else if event.shift_key() || event.delta_x().abs() > event.delta_y().abs() {
            event.prevent_default();
            let delta = if event.delta_x().abs() > 0.0 { event.delta_x() } else { event.delta_y() };
            view_port.update(|v| *v = v.pan(delta));
        }
    };
    let step_job = move |forward: bool| {
        let (Some(current), Some(rows)) = (loaded.get_untracked(), rows_now()) else {
            return;
        };
        let row_index = selected_row.get_untracked().unwrap_or(0).min(rows.rows.len().saturating_sub(1));
        let Some(row) = rows.rows.get(row_index) else {
            return;
        };
        let jobs = row_jobs(&current.data, &current.index, row.kind);
        let v = view_port.get_untracked();
        let pivot = selected_job
            .get_untracked()
            .and_then(|job| jobs.iter().position(|&j| j == job))
            .map(|at| if forward { at + 1 } else { at.wrapping_sub(1) })
            .unwrap_or_else(|| {
                let middle = ((v.start + v.end) / 2.0) as i64;
                jobs.partition_point(|&j| current.data.jobs[j as usize].start < middle)
            });
        if let Some(&job) = jobs.get(pivot) {
            selected_job.set(Some(job));
            let gantt_job = &current.data.jobs[job as usize];
            let start = gantt_job.start as f64;
            let span = v.end - v.start;
            if start < v.start || start > v.end {
                view_port.set(Viewport { start: start - span / 3.0, end: start + span * 2.0 / 3.0, ..v });
            }
            let x = view_port.get_untracked().x(start).max(LABEL_WIDTH);
            hover.set(Some((job, x, row.y + row.height)));
        }
    };
    let on_keydown = {
        let open_job = open_job.clone();
        move |event: ev::KeyboardEvent| {
            let v = view_port.get_untracked();
            let middle = v.left + v.width / 2.0;
            let rows_count = rows_now().map_or(0, |rows| rows.rows.len());
            let handled = match event.key().as_str() {
                "ArrowLeft" => {
                    view_port.set(v.pan(-v.width * if event.shift_key() { 0.5 } else { 0.1 }));
                    true
                }
                "ArrowRight" => {
                    view_port.set(v.pan(v.width * if event.shift_key() { 0.5 } else { 0.1 }));
                    true
                }
                "+" | "=" => {
                    view_port.set(v.zoom(0.5, middle));
                    true
                }
                "-" | "_" => {
                    view_port.set(v.zoom(2.0, middle));
                    true
                }
                "ArrowDown" | "ArrowUp" if rows_count > 0 => {
                    let current = selected_row.get_untracked();
                    let next = match (event.key().as_str(), current) {
                        ("ArrowDown", None) => 0,
                        ("ArrowDown", Some(row)) => (row + 1).min(rows_count - 1),
                        (_, None) => 0,
                        (_, Some(row)) => row.saturating_sub(1),
                    };
                    selected_row.set(Some(next));
                    selected_job.set(None);
                    hover.set(None);
                    true
                }
                "]" => {
                    step_job(true);
                    true
                }
                "[" => {
                    step_job(false);
                    true
                }
                "Enter" => {
                    match (selected_job.get_untracked(), selected_row.get_untracked()) {
                        (Some(job), _) => open_job(job),
                        (None, Some(row)) => toggle_row(row),
                        _ => {}
                    }
                    true
                }
                " " => {
                    if let Some(row) = selected_row.get_untracked() {
                        toggle_row(row);
                    }
                    true
                }
                "Home" => {
                    view_port.set(v.with_span(v.end - v.start, now() as f64 + (v.end - v.start) * 0.05));
                    true
                }
                "Escape" => {
                    selected_job.set(None);
                    hover.set(None);
                    true
                }
                _ => false,
            };
            if handled {
                event.prevent_default();
            }
        }
    };

    let zoom_by = move |factor: f64| {
        view_port.update(|v| {
            let middle = v.left + v.width / 2.0;
            *v = v.zoom(factor, middle);
        });
    };
    let pan_by = move |share: f64| view_port.update(|v| *v = v.pan(v.width * share));
    let set_span = move |span: f64| {
        view_port.update(|v| {
            // Centred on the view, but never further into the future than a live view shows.
            let live_end = now() as f64 + span * 0.02;
            let end =
                if v.end >= now() as f64 - 60.0 { live_end } else { ((v.start + v.end + span) / 2.0).min(live_end) };
            *v = v.with_span(span, end);
        });
    };
    let go_now = move || {
        view_port.update(|v| {
            let span = v.end - v.start;
            *v = v.with_span(span, now() as f64 + span * 0.02);
        });
    };
    let navigate_for_colour = navigate.clone();
    let on_colour = move |event: ev::Event| {
        let value = event_target_value(&event);
        colour.set(ColourBy::parse(&value));
        let v = view_port.get_untracked();
        let next =
            GanttQuery { colour: colour.get_untracked(), ..query.get_untracked() }.for_view((v.start, v.end), now());
        navigate_for_colour(
            &format!("/?{}", next.to_query()),
            NavigateOptions { replace: true, scroll: false, ..NavigateOptions::default() },
        );
    };
    let navigate_for_filters = navigate.clone();
    let on_submit = move |event: ev::SubmitEvent| {
        event.prevent_default();
        let Some(form) =
            event.target().and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlFormElement>(t).ok())
        else {
            return;
        };
        let field = |name: &str| -> Option<String> {
            let element = form.elements().named_item(name)?;
            let input: web_sys::HtmlInputElement = wasm_bindgen::JsCast::dyn_into(element).ok()?;
            Some(input.value()).filter(|v| !v.trim().is_empty())
        };
        let v = view_port.get_untracked();
        let next = GanttQuery {
            cluster: query.get_untracked().cluster,
            colour: colour.get_untracked(),
            filters: Filters::from_lookup(&field),
            ..GanttQuery::default()
        }
        .for_view((v.start, v.end), now());
        navigate_for_filters(
            &format!("/?{}", next.to_query()),
            NavigateOptions { scroll: false, ..NavigateOptions::default() },
        );
    };

    let tooltip = move || {
        let (job, x, y) = hover.get()?;
        let current = loaded.get()?;
        let summary = current.data.summary(job as usize, zone);
        let gantt_job = &current.data.jobs[job as usize];
        let local_start = display_time(gantt_job.start);
        let local_end = if gantt_job.end > 0 { display_time(gantt_job.end) } else { "running".into() };
        let total = width.get_untracked();
        let left = if x > total - 300.0 { (x - 290.0).max(0.0) } else { x + 14.0 };
        Some(view! {
            <div class="tooltip" data-testid="gantt-tooltip" data-job=gantt_job.job_id.clone() style=format!("left:{left}px;top:{}px", y + AXIS_HEIGHT + 12.0) role="status">
                <strong>{format!("Job {}", gantt_job.job_id)}</strong>
                <span class="when">{format!("{local_start} → {local_end}")}</span>
                <dl>
                    {summary.into_iter().filter(|(label, _)| *label != "job").map(|(label, value)| view! { <dt>{label}</dt><dd>{value}</dd> }).collect_view()}
                </dl>
                <span class="hint">"click or Enter opens the job"</span>
            </div>
        })
    };
    let legend = move || {
        categories.with(|categories| {
            categories
                .legend
                .iter()
                .map(|entry| {
                    view! {
                        <li>
                            <span class="swatch" style=format!("background:{}", entry.colour)></span>
                            {format!("{} ({})", entry.label, thousands(entry.count))}
                        </li>
                    }
                })
                .collect_view()
        })
    };
    let static_url = format!("/web/v1/gantt.svg?{}", initial.to_query());
    let first_query = GanttQuery { start: Some(start), end: Some(end), ..initial.clone() };
    let preload_url = format!("/web/v1/gantt?{}", first_query.to_query());
    let fallback_html = fallback_image(&static_url, leptos::nonce::use_nonce().map(|nonce| nonce.to_string()));
    let filters = initial.filters.clone();

    view! {
        <Link rel="preload" as_="fetch" href=preload_url crossorigin="anonymous" />
        <section class="page gantt-page">
            <h1 class="visually-hidden">"Jobs on nodes over time"</h1>
            <form class="filters" method="get" action="/" on:submit=on_submit data-testid="gantt-filters">
                {initial.cluster.clone().map(|cluster| view! { <input type="hidden" name="cluster" value=cluster /> })}
                <input type="hidden" name="start" value=start.to_string() node_ref=start_input />
                <input type="hidden" name="end" value=end.to_string() node_ref=end_input />
                <FilterField label="User" name="user" value=filters.user.clone() placeholder="u01,alice" />
                <FilterField label="Account" name="account" value=filters.account.clone() />
                <FilterField label="Partition" name="partition" value=filters.partition.clone() />
                <FilterField label="State" name="state" value=filters.state.clone() placeholder="FAILED,TIMEOUT" />
                <FilterField label="Tag" name="tag" value=filters.tag.clone() placeholder="pytorch" />
                <label>
                    "Colour by"
                    <select name="colour" data-testid="colour-by" on:change=on_colour>
                        {ColourBy::ALL
                            .into_iter()
                            .map(|choice| view! { <option value=choice.as_str() selected=choice == initial.colour>{choice.as_str()}</option> })
                            .collect_view()}
                    </select>
                </label>
                <button type="submit" data-testid="apply-filters">"Apply"</button>
            </form>
            <div class="toolbar" role="toolbar" aria-label="time window">
                {SPANS
                    .into_iter()
                    .map(|(label, span)| {
                        view! {
                            <button type="button" data-testid=format!("span-{}", label.replace(' ', "")) on:click=move |_| set_span(span)>
                                {label}
                            </button>
                        }
                    })
                    .collect_view()}
                <button type="button" data-testid="zoom-in" aria-label="zoom in" on:click=move |_| zoom_by(0.5)>"+"</button>
                <button type="button" data-testid="zoom-out" aria-label="zoom out" on:click=move |_| zoom_by(2.0)>"−"</button>
                <button type="button" data-testid="pan-left" aria-label="earlier" on:click=move |_| pan_by(-0.25)>"◀"</button>
                <button type="button" data-testid="pan-right" aria-label="later" on:click=move |_| pan_by(0.25)>"▶"</button>
                <button type="button" data-testid="now" on:click=move |_| go_now()>"Now"</button>
                <label class="check">
                    <input type="checkbox" data-testid="auto-refresh" prop:checked=move || auto_refresh.get() on:change=move |event| auto_refresh.set(event_target_checked(&event)) />
                    "Auto-refresh"
                </label>
                <span class="status" data-testid="gantt-status" aria-live="polite">{move || status.get()}</span>
            </div>
            <ul class="legend" data-testid="gantt-legend" aria-label="colours">{legend}</ul>
            {move || loaded.get().map(|loaded| view! { <NodeStates states=listed_states(&loaded.data) zone /> })}
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    focus_detail.await.map(|answer| view! { <FocusPanel answer note=focus_note /> })
                })}
            </Suspense>
            <p class="hint">"Drag or Shift+wheel pans, Ctrl+wheel zooms. Click a rack or node name to fold or unfold it. Keyboard: focus the chart, ←/→ pan, +/− zoom, ↑/↓ pick a row, Space folds it, [/] step through its jobs, Enter opens one."</p>
            <div class="gantt" node_ref=container>
                <div class="gantt-fallback" class:hidden=move || ready.get() inner_html=fallback_html></div>
                <canvas class="gantt-axis" class:hidden=move || !ready.get() node_ref=axis_canvas aria-hidden="true"></canvas>
                <canvas
                    class="gantt-body"
                    class:hidden=move || !ready.get()
                    node_ref=body_canvas
                    tabindex="0"
                    role="img"
                    aria-label="Gantt chart of jobs on nodes; use the arrow keys, [ and ] to move, Enter to open a job"
                    data-testid="gantt-canvas"
                    on:mousedown=on_mousedown
                    on:mousemove=on_mousemove
                    on:mouseup=on_mouseup
                    on:mouseleave=move |_| {
                        drag.set_value(None);
                        hover.set(None);
                        hover_packed.set(None);
                        hover_state.set(None);
                    }
                    on:wheel=on_wheel
                    on:keydown=on_keydown
                ></canvas>
                {tooltip}
                {move || {
                    let (bar, x, y) = hover_packed.get()?;
                    packed_tooltip(&loaded.get()?.data, bar, (x, y), width.get_untracked(), zone)
                }}
                {move || {
                    let (span, x, y) = hover_state.get()?;
                    state_tooltip(&loaded.get()?.data, span, (x, y), width.get_untracked(), zone)
                }}
            </div>
        </section>
    }
}

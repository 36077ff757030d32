//! The application shell and what every page shares: the header with navigation and the cluster
//! switch, times shown in the viewer's zone (UTC on hover), and the routes.

use leptos::prelude::*;
use leptos_meta::{MetaTags, Title, provide_meta_context};
use leptos_router::SsrMode;
use leptos_router::components::{A, Route, Router, Routes};
use leptos_router::hooks::{use_location, use_query_map};
use leptos_router::path;

use crate::api::Loader;
use crate::pages::{gantt::GanttPage, grid::GridPage, job::JobPage, jobs::JobsPage, tokens::TokensPage};
use crate::timefmt;

/// The stylesheet, served at `/web/style.css` from the binary so pages keep their look without a site folder.
pub const STYLESHEET: &str = include_str!("../style/slurmlens.css");

/// The HTML document around the app (server only).
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <link rel="stylesheet" href="/web/style.css" />
                <link rel="icon" href="data:," />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

/// Whether times may be shown in the viewer's zone yet: false while rendering on the server and
/// hydrating (so the HTML matches), true once the browser runs the app.
#[derive(Clone, Copy)]
pub struct LocalZone(pub RwSignal<bool>);

/// Minutes east of UTC in the viewer's zone at `epoch` (0 on the server).
pub fn offset_minutes(epoch: i64) -> i32 {
    #[cfg(target_arch = "wasm32")]
    {
        let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(epoch as f64 * 1000.0));
        -(date.get_timezone_offset() as i32)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = epoch;
        0
    }
}

/// Formats `epoch` for display: the viewer's zone once known, UTC before.
pub fn display_time(epoch: i64) -> String {
    let local = use_context::<LocalZone>().is_some_and(|zone| zone.0.get());
    if local { timefmt::local_short(epoch, offset_minutes(epoch)) } else { timefmt::utc_short(epoch) }
}

/// A time in the viewer's zone, UTC on hover.
#[component]
pub fn Time(at: i64) -> impl IntoView {
    let zone = use_context::<LocalZone>();
    let text = move || {
        if zone.is_some_and(|zone| zone.0.get()) {
            timefmt::local_short(at, offset_minutes(at))
        } else {
            timefmt::utc_short(at)
        }
    };
    view! {
        <time datetime=timefmt::rfc3339(at) title=timefmt::utc_long(at)>
            {text}
        </time>
    }
}

/// The whole front end.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    let zone = RwSignal::new(false);
    provide_context(LocalZone(zone));
    // Effects run only in the browser, after hydration.
    Effect::new(move |_| zone.set(true));
    view! {
        <Title text="slurmlens" />
        <Router>
            <Header />
            <main>
                <Routes fallback=|| view! { <p class="error">"No such page."</p> }>
                    <Route path=path!("/") view=GanttPage ssr=SsrMode::Async />
                    <Route path=path!("/grid") view=GridPage ssr=SsrMode::Async />
                    <Route path=path!("/jobs") view=JobsPage ssr=SsrMode::Async />
                    <Route path=path!("/jobs/:id") view=JobPage ssr=SsrMode::Async />
                    <Route path=path!("/tokens") view=TokensPage ssr=SsrMode::Async />
                </Routes>
            </main>
        </Router>
    }
}

/// Navigation, the cluster switch and the zone times are shown in.
#[component]
fn Header() -> impl IntoView {
    let loader = Loader::from_context();
    let clusters = Resource::new(|| (), move |()| loader.clusters());
    let query = use_query_map();
    let location = use_location();
    let cluster = move || query.with(|q| q.get("cluster"));
    let with_cluster = move |path: &'static str| match cluster() {
        Some(cluster) => format!("{path}?cluster={}", crate::query::percent_encode(&cluster)),
        None => path.to_string(),
    };
    let zone = use_context::<LocalZone>();
    let zone_text = move || {
        if zone.is_some_and(|zone| zone.0.get()) {
            let now = crate::api::now();
            format!("times in {} (UTC on hover)", timefmt::zone_name(offset_minutes(now)))
        } else {
            "times in UTC".to_string()
        }
    };
    view! {
        <header class="top">
            <a class="brand" href="/">"slurmlens"</a>
            <nav aria-label="pages">
                <A href=move || with_cluster("/")>"Gantt"</A>
                <A href=move || with_cluster("/grid")>"Grid"</A>
                <A href=move || with_cluster("/jobs")>"Jobs"</A>
                <A href="/tokens">"Tokens"</A>
            </nav>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    let names = clusters.await.unwrap_or_default();
                    let path = location.pathname.get();
                    let path = if path.starts_with("/jobs/") { "/jobs".to_string() } else { path };
                    let current = cluster().or_else(|| names.first().cloned());
                    view! {
                        <nav class="clusters" aria-label="clusters" data-testid="cluster-switch">
                            {names
                                .into_iter()
                                .map(|name| {
                                    let href = format!(
                                        "{path}?cluster={}",
                                        crate::query::percent_encode(&name),
                                    );
                                    let active = current.as_deref() == Some(name.as_str());
                                    view! {
                                        <a href=href class:active=active aria-current=active.then_some("true")>
                                            {name}
                                        </a>
                                    }
                                })
                                .collect_view()}
                        </nav>
                    }
                })}
            </Suspense>
            <form class="goto" action="/go" method="get" role="search" data-testid="goto">
                <label>
                    <span class="visually-hidden">"Go to job"</span>
                    <input name="job" type="search" inputmode="numeric" placeholder="go to job id" size="12" aria-label="Go to job id" />
                </label>
            </form>
            <span class="zone" data-testid="zone">
                {zone_text}
            </span>
        </header>
    }
}

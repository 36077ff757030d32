//! The application shell and what every page shares: the header with navigation and the cluster
//! switch, times shown in the viewer's zone (UTC on hover), and the routes.

use leptos::prelude::*;
use leptos_meta::{MetaTags, Title, provide_meta_context};
use leptos_router::SsrMode;
use leptos_router::components::{A, Route, Router, Routes};
use leptos_router::hooks::{use_location, use_query_map};
use leptos_router::path;

use crate::api::Loader;
use crate::clock::{self, Zone};
use crate::pages::compare::ComparePage;
use crate::pages::notifications::NotificationsPage;
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
                <meta name=clock::META content=clock::viewer_zone().name() />
                <meta name=clock::META_SITE content=clock::site_zone().0.name() />
                <link rel="stylesheet" href="/web/style.css" />
                <link rel="icon" href="data:," />
                <meta http-equiv="Content-Security-Policy" content=content_security_policy() />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

/// The page's script policy: only scripts carrying this response's nonce (the hydration scripts and the
/// Gantt's fallback) and what they load run; no inline handler, no other origin. Style attributes stay
/// allowed (charts and bars are sized with them). Framing and the rest are refused by the server's
/// `Content-Security-Policy` header, which a `<meta>` cannot carry.
fn content_security_policy() -> String {
    let nonce = leptos::nonce::use_nonce().map(|nonce| format!("'nonce-{nonce}' ")).unwrap_or_default();
    format!(
        "default-src 'self'; script-src {nonce}'strict-dynamic' 'wasm-unsafe-eval'; style-src 'self' \
         'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'"
    )
}

/// Formats `epoch` for display in the viewer's zone.
pub fn display_time(epoch: i64) -> String {
    clock::use_zone().short(epoch)
}

/// A time in the viewer's zone; on hover, with seconds, its offset and the same moment in UTC.
#[component]
pub fn Time(at: i64) -> impl IntoView {
    let zone = clock::use_zone();
    view! {
        <time datetime=timefmt::rfc3339(at) title=zone.hover(at)>
            {zone.short(at)}
        </time>
    }
}

/// The whole front end.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    provide_context(clock::viewer_zone());
    provide_context(clock::site_zone());
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
                    <Route path=path!("/notifications") view=NotificationsPage ssr=SsrMode::Async />
                    <Route path=path!("/usage") view=crate::pages::usage::UsagePage ssr=SsrMode::Async />
                    <Route path=path!("/stats") view=crate::pages::usage::StatsPage ssr=SsrMode::Async />
                    <Route path=path!("/nodes") view=crate::pages::nodes::NodesPage ssr=SsrMode::Async />
                    <Route path=path!("/nodes/:name") view=crate::pages::node::NodePage ssr=SsrMode::Async />
                    <Route path=path!("/compare") view=ComparePage ssr=SsrMode::Async />
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
    view! {
        <header class="top">
            <a class="brand" href="/">"slurmlens"</a>
            <nav aria-label="pages">
                <A href=move || with_cluster("/")>"Gantt"</A>
                <A href=move || with_cluster("/grid")>"Grid"</A>
                <A href=move || with_cluster("/jobs")>"Jobs"</A>
                <A href=move || with_cluster("/nodes")>"Nodes"</A>
                <A href=move || with_cluster("/usage")>"Usage"</A>
                <A href=move || with_cluster("/stats")>"Stats"</A>
                <A href="/tokens">"Tokens"</A>
                <A href="/notifications">"Notifications"</A>
            </nav>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    let names = clusters.await.unwrap_or_default();
                    let path = location.pathname.get();
                    let path = if path.starts_with("/jobs/") { "/jobs".to_string() } else { path };
                    let current = cluster().or_else(|| names.first().cloned());
                    // Before sign-in no cluster is named: no menu, not even its label.
                    let none = names.is_empty();
                    view! {
                        <nav class="clusters" aria-label="clusters" data-testid="cluster-switch" hidden=none>
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
                    <input name="job" type="search" placeholder="job id or node" size="12" aria-label="Go to a job id or a node" />
                </label>
            </form>
            <ZoneChoice />
        </header>
    }
}

/// The zone every time is shown in, and the choice of another: UTC, the site's default, or (once the
/// page runs) the browser's own zone. Choosing goes through `/zone`, which keeps it in a cookie and
/// comes back to the same page; without the bundle, the form's button does the same.
#[component]
fn ZoneChoice() -> impl IntoView {
    let zone = clock::use_zone();
    let location = use_location();
    let back = move || {
        let search = location.search.get();
        let query = if search.is_empty() { String::new() } else { format!("?{}", search.trim_start_matches('?')) };
        format!("{}{query}", location.pathname.get())
    };
    // The browser's zone is known only in the browser, after hydration (the server's HTML lacks it).
    let browser = RwSignal::new(None::<Zone>);
    Effect::new(move |_| browser.set(clock::browser_zone()));
    let site = use_context::<clock::SiteZone>().map(|site| site.0);
    let now = crate::api::now();
    let options = move || {
        let mut zones: Vec<(Zone, String)> = vec![(Zone::UTC, "UTC".to_string())];
        for (candidate, why) in [(site, ", site default"), (Some(zone), ""), (browser.get(), ", this browser")] {
            if let Some(candidate) = candidate
                && !zones.iter().any(|(known, _)| *known == candidate)
            {
                zones.push((candidate, format!("{}{why}", candidate.label(now))));
            }
        }
        zones
            .into_iter()
            .map(|(candidate, text)| {
                view! {
                    <option value=candidate.name() selected=candidate == zone>
                        {text}
                    </option>
                }
            })
            .collect_view()
    };
    let on_change = move |event: leptos::ev::Event| {
        let chosen = event_target_value(&event);
        #[cfg(target_arch = "wasm32")]
        if let Some(window) = web_sys::window() {
            let to = format!(
                "/zone?tz={}&to={}",
                crate::query::percent_encode(&chosen),
                crate::query::percent_encode(&back())
            );
            let _ = window.location().set_href(&to);
        }
        #[cfg(not(target_arch = "wasm32"))]
        let _ = chosen;
    };
    view! {
        <form class="zone" action="/zone" method="get" data-testid="zone">
            <label>
                "times in "
                <select name="tz" aria-label="Time zone of every time shown" data-zone=zone.name() on:change=on_change>
                    {options}
                </select>
            </label>
            <input type="hidden" name="to" value=back />
            <noscript>
                <button type="submit">"Set"</button>
            </noscript>
        </form>
    }
}

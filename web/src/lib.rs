//! slurmlens web front end: leptos pages rendered by the slurmlens server and hydrated in the browser.
//!
//! The layout code (`axis`, `clock`, `flame`, `gantt`, `grid`, `joblist`, `palette`, `query`, `timefmt`) is plain
//! Rust, tested natively; hostlists and rack topology come from `slurmlens-slurm`. `app` and `pages` are the leptos views; `canvas` draws the
//! Gantt in the browser; `api` loads data (in process on the server, over HTTP in the browser);
//! `server` (feature `ssr`) is the trait the server implements and the router it merges.

#![recursion_limit = "256"]

pub mod aligned;
pub mod api;
pub mod app;
pub mod axis;
pub mod canvas;
pub mod chart_hover;
pub mod charts;
pub mod clock;
pub mod flame;
pub mod gantt;
pub mod grid;
pub mod joblist;
pub mod nodelist;
pub mod numbers;
pub mod pages;
pub mod palette;
#[cfg(feature = "ssr")]
pub mod printable;
pub mod query;
#[cfg(feature = "ssr")]
pub mod server;
pub mod timefmt;
pub mod tz;
pub mod usage;

#[cfg(test)]
mod fuzz_tests;

/// The browser entry point: hydrates the server-rendered page.
#[cfg(feature = "hydrate")]
#[allow(unsafe_code, reason = "wasm_bindgen exports the entry point with #[no_mangle]")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    if let Some(window) = web_sys::window() {
        // Tells the static-chart fallback script that the bundle loaded.
        let _ = js_sys::Reflect::set(&window, &"__slurmlensHydrated".into(), &true.into());
        if let Some(performance) = window.performance() {
            let _ = js_sys::Reflect::set(&window, &"__slurmlensHydrateStart".into(), &performance.now().into());
        }
    }
    leptos::mount::hydrate_body(app::App);
    mark("slurmlens:hydrated");
}

/// A User Timing mark (`performance.mark`) in the browser, so a benchmark can tell the page's steps
/// apart (hydration, a fetch's body in, its JSON parsed, a chart's first draw); nothing elsewhere.
pub fn mark(name: &str) {
    #[cfg(target_arch = "wasm32")]
    if let Some(performance) = web_sys::window().and_then(|window| window.performance()) {
        let _ = performance.mark(name);
    }
    #[cfg(not(target_arch = "wasm32"))]
    let _ = name;
}

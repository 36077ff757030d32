//! The pages: Gantt (`/`), grid (`/grid`), job list (`/jobs`), job (`/jobs/<id>`, with its script), personal API
//! tokens (`/tokens`), the viewer's notifications (`/notifications`), usage (`/usage`), statistics (`/stats`), the
//! node list (`/nodes`) and a node (`/nodes/<name>`).

pub mod compare;
pub mod gantt;
pub mod gantt_focus;
pub mod gantt_packed;
pub mod gantt_states;
pub mod grid;
pub mod job;
pub mod job_output;
pub mod job_script;
pub mod job_tags;
pub mod jobs;
pub mod node;
pub mod nodes;
pub mod notifications;
pub mod previous;
pub mod report;
pub mod share;
pub mod tokens;
pub mod usage;

use leptos::prelude::*;

use crate::api::DataError;

/// The server-rendered page answers with a failed load's status (404 for a missing job or node, 400 for
/// a bad moment), not 200; in the browser there is no response to set.
#[cfg(feature = "ssr")]
pub fn answer_with_status(response: Option<leptos_axum::ResponseOptions>, error: &DataError) {
    if let Some(response) = response {
        response.set_status(
            axum::http::StatusCode::from_u16(error.status).unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR),
        );
    }
}

/// A failed load, shown in place of the page's content.
#[component]
pub fn LoadError(error: DataError) -> impl IntoView {
    let text = match error.status {
        401 => format!("Sign in to see jobs: {}", error.message),
        404 => format!("Not found: {}", error.message),
        503 | 0 => format!("Data source unavailable: {}", error.message),
        _ => error.message,
    };
    view! {
        <p class="error" role="alert" data-testid="load-error">
            {text}
        </p>
    }
}

/// A labelled text field of a filter form.
#[component]
pub fn FilterField(
    label: &'static str,
    name: &'static str,
    value: Option<String>,
    #[prop(optional)] placeholder: &'static str,
) -> impl IntoView {
    view! {
        <label>
            {label}
            <input
                type="text"
                name=name
                value=value.unwrap_or_default()
                placeholder=placeholder
                data-testid=format!("filter-{name}")
            />
        </label>
    }
}

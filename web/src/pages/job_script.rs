//! The job page's script section: the submit line and the batch script as slurmdbd stores them, and
//! the environment at submission where the viewer may see it, with a line saying who can: scripts and
//! environments may hold secrets.

use leptos::prelude::*;
use slurmlens_wire as wire;

/// Who may read the script and the environment of a job of `user` in `account`.
fn audience(script: &wire::JobScript) -> String {
    format!(
        "Scripts may hold secrets. The script and submit line are shown to {user} (the job's owner), the \
         coordinators of account {account} and staff; the environment to {user} and staff only.",
        user = script.user,
        account = script.account,
    )
}

/// `shown of total characters` when a text was cut.
fn cut_note(text: &wire::StoredText, what: &str) -> Option<String> {
    text.truncated
        .then(|| format!("The {what} is cut after its first {} of {} characters.", text.shown_chars, text.total_chars))
}

/// The script section; nothing when the script could not be asked (the section then says so).
#[component]
pub fn ScriptSection(script: Option<wire::JobScript>) -> impl IntoView {
    let Some(script) = script else {
        return view! {
            <section class="script" aria-label="job script" data-testid="script-section" data-status="missing">
                <h2>"Script"</h2>
                <p class="muted" data-testid="script-status">"script not available"</p>
            </section>
        }
        .into_any();
    };
    let audience = audience(&script);
    let batch = match &script.script {
        Some(text) => {
            let lines = text.text.lines().count();
            let note = cut_note(text, "script");
            view! {
                <details open=true data-testid="script-batch">
                    <summary>{format!("Batch script ({lines} lines)")}</summary>
                    {note.map(|note| view! { <p class="muted" data-testid="script-truncated">{note}</p> })}
                    <pre class="script-text" data-testid="script-text">{text.text.clone()}</pre>
                </details>
            }
            .into_any()
        }
        None => view! {
            <p class="muted" data-testid="script-status">
                "slurmdbd stored no batch script for this job (not submitted with sbatch, or the site does not set AccountingStoreFlags=job_script)."
            </p>
        }
        .into_any(),
    };
    let environment = match (script.environment_access, &script.environment) {
        (wire::EnvironmentAccess::Shown, Some(text)) => {
            let variables = text.text.lines().count();
            let note = cut_note(text, "environment");
            // Folded: it is the part most likely to hold a secret.
            view! {
                <details data-testid="script-environment">
                    <summary>{format!("Environment at submission ({variables} variables)")}</summary>
                    {note.map(|note| view! { <p class="muted">{note}</p> })}
                    <pre class="script-text" data-testid="script-env">{text.text.clone()}</pre>
                </details>
            }
            .into_any()
        }
        (wire::EnvironmentAccess::Withheld, _) => view! {
            <p class="muted" data-testid="script-env-withheld">
                {format!("The environment at submission is shown to {} and staff only.", script.user)}
            </p>
        }
        .into_any(),
        _ => view! {
            <p class="muted" data-testid="script-env-missing">
                "slurmdbd stored no environment for this job (AccountingStoreFlags=job_env)."
            </p>
        }
        .into_any(),
    };
    view! {
        <section class="script" aria-label="job script" data-testid="script-section" data-status="ok">
            <h2>"Script"</h2>
            <p class="script-audience" data-testid="script-audience">{audience}</p>
            <h3>"Submit line"</h3>
            <pre class="script-text" data-testid="script-submit-line">{script.submit_line.clone()}</pre>
            {batch}
            {environment}
        </section>
    }
    .into_any()
}

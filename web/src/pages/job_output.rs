//! The job page's "Program output" section: where the job's standard output and error went and, to its
//! owner and staff where the site lets slurmlens read them, their last lines. The failure card's "what
//! to do" points here: a failed program's own words are the first evidence.

use leptos::prelude::*;
use slurmlens_wire as wire;

/// Why a file's lines are not shown, in words.
fn unread(state: wire::OutputState) -> &'static str {
    match state {
        wire::OutputState::Read => "",
        wire::OutputState::Discarded => "discarded (/dev/null)",
        wire::OutputState::NotAllowed => "not readable by slurmlens at this site: open it on a login node",
        wire::OutputState::Missing => "not there any more (deleted or moved)",
        wire::OutputState::NotTheOwners => "not shown: the file belongs to someone other than the job's owner",
        wire::OutputState::NotAFile => "not shown: not a regular file",
        wire::OutputState::Failed => "could not be read just now",
        wire::OutputState::Withheld => "shown to the job's owner and staff only",
    }
}

fn named(named: wire::OutputNamed) -> &'static str {
    match named {
        wire::OutputNamed::Slurmdbd => "as Slurm recorded it",
        wire::OutputNamed::SubmitLine => "from the submit line",
        wire::OutputNamed::Script => "from the script's #SBATCH lines",
        wire::OutputNamed::Default => "Slurm's default: no --output was given",
    }
}

/// The section; it says so when the files could not be asked for.
#[component]
pub fn OutputSection(output: Option<wire::JobOutput>) -> impl IntoView {
    let Some(output) = output else {
        return view! {
            <section class="job-output" aria-label="program output" data-testid="output-section" data-status="missing">
                <h2>"Program output"</h2>
                <p class="muted">"where the job's output went is not available"</p>
            </section>
        }
        .into_any();
    };
    let files = output
        .files
        .into_iter()
        .map(|file| {
            let what = match file.stream {
                wire::OutputStream::Error => "Standard error",
                wire::OutputStream::Output => "Standard output (and error, unless named apart)",
            };
            let path = file.path.clone().unwrap_or_else(|| "/dev/null".into());
            let size = file.size_bytes.map(|bytes| format!(", {bytes} bytes")).unwrap_or_default();
            let body = match &file.tail {
                Some(tail) => {
                    let note = if file.truncated { "its last lines:" } else { "all of it:" };
                    view! {
                        <p class="muted">{note}</p>
                        <pre class="script-text" data-testid="output-tail">{tail.clone()}</pre>
                    }
                    .into_any()
                }
                None => view! { <p class="muted" data-testid="output-unread">{unread(file.state)}</p> }.into_any(),
            };
            view! {
                <div data-testid="output-file" data-stream=format!("{:?}", file.stream).to_lowercase() data-state=format!("{:?}", file.state)>
                    <h3>{what}</h3>
                    <p><code data-testid="output-path">{path}</code>{format!(" ({}{size})", named(file.named))}</p>
                    {body}
                </div>
            }
        })
        .collect_view();
    view! {
        <section class="job-output" aria-label="program output" data-testid="output-section" data-status="ok">
            <h2>"Program output"</h2>
            {files}
        </section>
    }
    .into_any()
}

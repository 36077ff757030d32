//! The job page's "Share" control, for the job's owner and staff: make a read-only link to the job's
//! report with an expiry (`POST /api/v1/jobs/{id}/shares`), its address shown once, and the job's links
//! with their state and openings, each live one revocable (`DELETE /api/v1/shares/{id}`). Everything is
//! asked from the browser after hydration (same-origin requests, as the API requires); for anyone the
//! API refuses the list to (not signed in, not the owner, a token), the control does not appear.

use leptos::prelude::*;
use slurmlens_wire as wire;

use crate::app::Time;
use crate::pages::tokens::{confirm, copy_text, refusal, select_all, send};
use crate::query::{encode, percent_encode};

/// Lifetimes offered, in days (the API takes 1 to 90).
const LIFETIMES: [u32; 4] = [1, 7, 30, 90];

/// The share control of one job.
#[component]
pub fn ShareSection(job_id: String, cluster: String) -> impl IntoView {
    let list_url = format!("/api/v1/jobs/{}/shares?{}", percent_encode(&job_id), encode(&[("cluster", cluster)]));
    // `None`: not asked yet or refused (the control stays hidden); `Some`: the job's links.
    let shares: RwSignal<Option<Vec<wire::ShareInfo>>> = RwSignal::new(None);
    let created: RwSignal<Option<wire::CreatedShare>> = RwSignal::new(None);
    let message: RwSignal<Option<String>> = RwSignal::new(None);
    let version = RwSignal::new(0u32);
    let url = list_url.clone();
    Effect::new(move |_| {
        version.track();
        let url = url.clone();
        leptos::task::spawn_local(async move {
            if let Ok((200, text)) = send("GET", &url, None).await
                && let Ok(list) = serde_json::from_str::<Vec<wire::ShareInfo>>(&text)
            {
                shares.set(Some(list));
            }
        });
    });
    let create_url = list_url.clone();
    let on_create = move |event: leptos::ev::SubmitEvent| {
        event.prevent_default();
        let Some(form) =
            event.target().and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlFormElement>(t).ok())
        else {
            return;
        };
        let field = |name: &str| -> String {
            form.elements()
                .named_item(name)
                .and_then(|element| {
                    wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlInputElement>(element.clone())
                        .map(|input| input.value())
                        .or_else(|_| {
                            wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlSelectElement>(element).map(|s| s.value())
                        })
                        .ok()
                })
                .unwrap_or_default()
        };
        let days: u32 = field("expires_in_days").parse().unwrap_or(7);
        let note = field("note").trim().to_string();
        let body = serde_json::json!({ "expires_in_days": days, "note": note }).to_string();
        let url = create_url.clone();
        message.set(None);
        created.set(None);
        leptos::task::spawn_local(async move {
            match send("POST", &url, Some(body)).await {
                Ok((201, text)) => match serde_json::from_str::<wire::CreatedShare>(&text) {
                    Ok(share) => {
                        created.set(Some(share));
                        form.reset();
                        version.update(|v| *v += 1);
                    }
                    Err(error) => message.set(Some(format!("The server's answer was not a link: {error}"))),
                },
                Ok((status, text)) => message.set(Some(refusal(status, &text))),
                Err(error) => message.set(Some(error.message)),
            }
        });
    };
    let revoke = move |share: wire::ShareInfo| {
        let question = "Revoke this link? Whoever has it gets “not found” from then on. This cannot be undone.";
        if !confirm(question) {
            return;
        }
        message.set(None);
        leptos::task::spawn_local(async move {
            match send("DELETE", &format!("/api/v1/shares/{}", share.id), None).await {
                Ok((200, _)) => {
                    message.set(Some("Link revoked.".into()));
                    version.update(|v| *v += 1);
                }
                Ok((status, text)) => message.set(Some(refusal(status, &text))),
                Err(error) => message.set(Some(error.message)),
            }
        });
    };
    move || {
        let list = shares.get()?;
        Some(view! {
            <section class="share" aria-label="share" data-testid="share-section">
                <details open=created.with(Option::is_some)>
                    <summary><h2 class="inline">"Share"</h2></summary>
                    <p class="hint">
                        "A link lets someone without an account read this job's facts and report (never its logs, profile or script) until it expires or you revoke it. Every opening is logged."
                    </p>
                    <form class="filters token-form" data-testid="share-create" on:submit=on_create.clone()>
                        <label>
                            "Expires after"
                            <select name="expires_in_days" data-testid="share-days">
                                {LIFETIMES
                                    .into_iter()
                                    .map(|days| view! { <option value=days.to_string() selected=days == 7>{format!("{days} day{}", if days == 1 { "" } else { "s" })}</option> })
                                    .collect_view()}
                            </select>
                        </label>
                        <label>
                            "For (shown on the page)"
                            <input type="text" name="note" maxlength="200" placeholder="ticket, colleague…" data-testid="share-note" />
                        </label>
                        <button type="submit" data-testid="share-create-button">"Make a link"</button>
                    </form>
                    <CreatedLink created />
                    <p class="status" role="status" data-testid="share-message">{move || message.get()}</p>
                    <ShareTable list revoke />
                </details>
            </section>
        })
    }
}

/// The link just made, shown once, with a copy button.
#[component]
fn CreatedLink(created: RwSignal<Option<wire::CreatedShare>>) -> impl IntoView {
    move || {
        let share = created.get()?;
        let origin = web_sys::window().and_then(|w| w.location().origin().ok()).unwrap_or_default();
        let link = format!("{origin}{}", share.path);
        let copied = RwSignal::new(None::<&'static str>);
        let to_copy = link.clone();
        let copy = move |_| {
            let text = to_copy.clone();
            leptos::task::spawn_local(async move {
                copied.set(Some(if copy_text(&text).await { "Copied." } else { "Select it and copy it (Ctrl+C)." }));
            });
        };
        Some(view! {
            <div class="token-created" data-testid="share-created" aria-live="polite">
                <p><strong>"Copy the link now: it is shown only this once."</strong></p>
                <div class="secret">
                    <input type="text" readonly value=link aria-label="the new link" data-testid="share-link" on:focus=|event| select_all(&event) />
                    <button type="button" on:click=copy data-testid="share-copy">"Copy"</button>
                    <span class="status">{move || copied.get()}</span>
                </div>
                <p class="hint">"It expires " <Time at=share.expires.timestamp() /> "."</p>
            </div>
        })
    }
}

/// The job's links, newest first, each live one with its revoke button.
#[component]
fn ShareTable(
    list: Vec<wire::ShareInfo>,
    revoke: impl Fn(wire::ShareInfo) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    if list.is_empty() {
        return view! { <p class="status" data-testid="share-none">"No links to this job yet."</p> }.into_any();
    }
    let rows = list
        .into_iter()
        .map(|share| {
            let state = match share.state {
                wire::TokenState::Live => "live",
                wire::TokenState::Expired => "expired",
                wire::TokenState::Revoked => "revoked",
            };
            let live = share.state == wire::TokenState::Live;
            let last_used = share
                .last_used
                .map(|at| view! { " (last " <Time at=at.timestamp() /> ")" });
            let for_button = share.clone();
            view! {
                <tr data-testid="share-row" data-share=share.id.to_string() data-state=state>
                    <td>{share.note.clone()}</td>
                    <td>{share.created_by.clone()}</td>
                    <td><Time at=share.created.timestamp() /></td>
                    <td><Time at=share.expires.timestamp() /></td>
                    <td>{share.uses}{last_used}</td>
                    <td>{state}</td>
                    <td>
                        {live.then(|| view! {
                            <button type="button" class="danger" data-testid="share-revoke" on:click=move |_| revoke(for_button.clone())>
                                "Revoke"
                            </button>
                        })}
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap">
            <table class="jobs tokens" data-testid="share-table">
                <thead>
                    <tr>
                        <th scope="col">"For"</th>
                        <th scope="col">"Made by"</th>
                        <th scope="col">"Made"</th>
                        <th scope="col">"Expires"</th>
                        <th scope="col">"Opened"</th>
                        <th scope="col">"State"</th>
                        <th scope="col"><span class="visually-hidden">"Revoke"</span></th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
    .into_any()
}

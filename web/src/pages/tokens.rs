//! `/tokens`: the signed-in viewer's personal API tokens: the list (name, created, last used, expiry,
//! state) is server-rendered; making one and revoking one go to `/api/v1/tokens` from the browser (a
//! same-origin request, as the API requires of browsers). A new token's secret exists only in the
//! answer to the request that made it: it is shown once, in the browser, never in server-rendered HTML.
//! A viewer who is not signed in is told how to sign in, not shown an error.

use leptos::prelude::*;
use slurmlens_wire as wire;

use crate::api::{DataError, Loader};
use crate::app::Time;

/// Lifetimes offered, in days (the server refuses more than its `access.tokens.max_days`).
const LIFETIMES: [u32; 4] = [7, 30, 90, 365];

/// The tokens page.
#[component]
pub fn TokensPage() -> impl IntoView {
    let loader = Loader::from_context();
    let version = RwSignal::new(0u32);
    let tokens = Resource::new(move || version.get(), move |_| loader.tokens());
    // The just-made token: shown once, held only in this page's memory.
    let created: RwSignal<Option<wire::CreatedToken>> = RwSignal::new(None);
    let message: RwSignal<Option<String>> = RwSignal::new(None);
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));

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
        let name = field("name").trim().to_string();
        let days: u32 = field("expires_in_days").parse().unwrap_or(90);
        let body = serde_json::json!({ "name": name, "expires_in_days": days }).to_string();
        message.set(None);
        created.set(None);
        leptos::task::spawn_local(async move {
            match send("POST", "/api/v1/tokens", Some(body)).await {
                Ok((201, text)) => match serde_json::from_str::<wire::CreatedToken>(&text) {
                    Ok(token) => {
                        created.set(Some(token));
                        form.reset();
                        version.update(|v| *v += 1);
                    }
                    Err(error) => message.set(Some(format!("The server's answer was not a token: {error}"))),
                },
                Ok((status, text)) => message.set(Some(refusal(status, &text))),
                Err(error) => message.set(Some(error.message)),
            }
        });
    };
    let revoke = move |token: wire::TokenInfo| {
        let question = format!(
            "Revoke the token “{}”? Every program that uses it gets 401 from then on. This cannot be undone.",
            token.name
        );
        if !confirm(&question) {
            return;
        }
        message.set(None);
        leptos::task::spawn_local(async move {
            match send("DELETE", &format!("/api/v1/tokens/{}", token.id), None).await {
                Ok((204, _)) => {
                    message.set(Some(format!("Revoked “{}”.", token.name)));
                    version.update(|v| *v += 1);
                }
                Ok((status, text)) => message.set(Some(refusal(status, &text))),
                Err(error) => message.set(Some(error.message)),
            }
        });
    };

    view! {
        <section class="page tokens-page">
            <h1>"Personal API tokens"</h1>
            <p class="hint">
                "A token lets a script or notebook read the API as you: the jobs you may see, read-only. Each use is logged, and each token is limited in requests per minute. Send it as "
                <code>"Authorization: Bearer slt_…"</code>"."
            </p>
            <Transition fallback=|| view! { <p class="status">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match tokens.await {
                        Ok(list) => view! {
                            <form class="filters token-form" data-testid="token-create" on:submit=on_create>
                                <label>
                                    "Name"
                                    <input type="text" name="name" required maxlength="64" placeholder="laptop, notebook…" data-testid="token-name" />
                                </label>
                                <label>
                                    "Expires after"
                                    <select name="expires_in_days" data-testid="token-days">
                                        {LIFETIMES
                                            .into_iter()
                                            .map(|days| view! { <option value=days.to_string() selected=days == 90>{format!("{days} days")}</option> })
                                            .collect_view()}
                                    </select>
                                </label>
                                <button type="submit" data-testid="token-create-button" prop:disabled=move || !hydrated.get()>
                                    "Make a token"
                                </button>
                                <noscript>
                                    <span class="hint">"Making and revoking tokens needs JavaScript on this page."</span>
                                </noscript>
                            </form>
                            <Created created />
                            <p class="status" role="status" data-testid="token-message">{move || message.get()}</p>
                            <TokenTable list revoke />
                        }
                        .into_any(),
                        Err(error) => view! { <NotSignedInTo error what="tokens" /> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

/// The secret of the token just made, with a copy button and a first call to try.
#[component]
fn Created(created: RwSignal<Option<wire::CreatedToken>>) -> impl IntoView {
    move || {
        let token = created.get()?;
        let origin = web_sys::window().and_then(|w| w.location().origin().ok()).unwrap_or_default();
        let example = format!("curl -s -H 'Authorization: Bearer {}' '{origin}/api/v1/jobs?limit=5'", token.token);
        let secret = token.token.clone();
        let copied = RwSignal::new(None::<&'static str>);
        let copy = move |_| {
            let secret = secret.clone();
            leptos::task::spawn_local(async move {
                copied.set(Some(if copy_text(&secret).await { "Copied." } else { "Select it and copy it (Ctrl+C)." }));
            });
        };
        Some(view! {
            <section class="token-created" data-testid="token-created" aria-live="polite">
                <h2>{format!("Your new token “{}”", token.name)}</h2>
                <p>
                    <strong>"Copy it now: it is shown only this once."</strong>
                    " slurmlens keeps only a hash of it; if you lose it, revoke it and make another."
                </p>
                <div class="secret">
                    <input type="text" readonly value=token.token.clone() aria-label="the new token" data-testid="token-secret" on:focus=|event| select_all(&event) />
                    <button type="button" on:click=copy data-testid="token-copy">"Copy"</button>
                    <span class="status">{move || copied.get()}</span>
                </div>
                <p>"Try it (it lists your five newest jobs of the last day):"</p>
                <pre data-testid="token-example">{example}</pre>
                <p class="hint">"It expires " <Time at=token.expires.timestamp() /> "."</p>
            </section>
        })
    }
}

/// The viewer's tokens, newest first, each live one with its revoke button.
#[component]
fn TokenTable(
    list: Vec<wire::TokenInfo>,
    revoke: impl Fn(wire::TokenInfo) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    if list.is_empty() {
        return view! { <p class="status" data-testid="token-none">"You have no tokens yet."</p> }.into_any();
    }
    let rows = list
        .into_iter()
        .map(|token| {
            let state = match token.state {
                wire::TokenState::Live => "live",
                wire::TokenState::Expired => "expired",
                wire::TokenState::Revoked => "revoked",
            };
            let live = token.state == wire::TokenState::Live;
            let last_used = token
                .last_used
                .map(|at| view! { <Time at=at.timestamp() /> }.into_any())
                .unwrap_or_else(|| "never".into_any());
            let revoked = token.revoked.map(|at| view! { " " <Time at=at.timestamp() /> });
            let name = token.name.clone();
            let for_button = token.clone();
            view! {
                <tr data-testid="token-row" data-token=token.id.to_string() data-state=state>
                    <td>{name.clone()}</td>
                    <td><Time at=token.created.timestamp() /></td>
                    <td>{last_used}</td>
                    <td><Time at=token.expires.timestamp() /></td>
                    <td>{state}{revoked}</td>
                    <td>
                        {live.then(|| view! {
                            <button type="button" class="danger" data-testid="token-revoke" aria-label=format!("revoke {name}") on:click=move |_| revoke(for_button.clone())>
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
            <table class="jobs tokens" data-testid="token-table">
                <thead>
                    <tr>
                        <th scope="col">"Name"</th>
                        <th scope="col">"Created"</th>
                        <th scope="col">"Last used"</th>
                        <th scope="col">"Expires"</th>
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

/// Why there is no list: not signed in (explained), or the database behind `what` (tokens,
/// notifications: a person's own things) is away.
#[component]
pub(crate) fn NotSignedInTo(error: DataError, what: &'static str) -> impl IntoView {
    if error.status == 401 {
        view! {
            <div class="notice" data-testid=format!("{what}-signed-out")>
                <p><strong>{format!("You are not signed in, so there are no {what} to show.")}</strong></p>
                <p>
                    {format!("Your {what} belong to you as a person. Open slurmlens through your site's sign-in (the address your centre gives you, behind its login), then come back to this page.")}
                </p>
                <p class="hint">{format!("Pages you can read without signing in stay readable; only your {what} need to know who you are.")}</p>
            </div>
        }
        .into_any()
    } else {
        view! {
            <p class="error" role="alert" data-testid=format!("{what}-unavailable")>
                {format!("Your {what} cannot be shown right now: {}", error.message)}
            </p>
        }
        .into_any()
    }
}

/// The error envelope's message of a refused request, with its status.
pub(crate) fn refusal(status: u16, text: &str) -> String {
    let message = serde_json::from_str::<wire::ErrorEnvelope>(text)
        .map(|envelope| envelope.error.message)
        .unwrap_or_else(|_| text.chars().take(200).collect());
    format!("Refused ({status}): {message}")
}

/// Asks the viewer to confirm (browser only; elsewhere nothing is confirmed).
pub(crate) fn confirm(question: &str) -> bool {
    web_sys::window().and_then(|window| window.confirm_with_message(question).ok()).unwrap_or(false)
}

pub(crate) fn select_all(event: &leptos::ev::FocusEvent) {
    if let Some(input) =
        event.target().and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlInputElement>(t).ok())
    {
        input.select();
    }
}

/// Copies `text` to the clipboard; false where the browser does not allow it.
pub(crate) async fn copy_text(text: &str) -> bool {
    let Some(window) = web_sys::window() else {
        return false;
    };
    let promise = window.navigator().clipboard().write_text(text);
    wasm_bindgen_futures::JsFuture::from(promise).await.is_ok()
}

/// A same-origin request with a JSON body: (status, body text).
pub(crate) async fn send(method: &str, url: &str, body: Option<String>) -> Result<(u16, String), DataError> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    let failed = || DataError { status: 0, message: format!("{method} {url} failed; is the server up?") };
    let window = web_sys::window().ok_or_else(failed)?;
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    init.set_credentials(web_sys::RequestCredentials::SameOrigin);
    if let Some(body) = body {
        let headers = web_sys::Headers::new().map_err(|_| failed())?;
        headers.set("content-type", "application/json").map_err(|_| failed())?;
        init.set_headers(&headers);
        init.set_body(&wasm_bindgen::JsValue::from_str(&body));
    }
    let response = JsFuture::from(window.fetch_with_str_and_init(url, &init)).await.map_err(|_| failed())?;
    let response: web_sys::Response = response.dyn_into().map_err(|_| failed())?;
    let text = JsFuture::from(response.text().map_err(|_| failed())?).await.map_err(|_| failed())?;
    Ok((response.status(), text.as_string().unwrap_or_default()))
}

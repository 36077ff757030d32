//! `/notifications`: what slurmlens told the signed-in viewer about their own jobs (a job whose GPUs sat
//! idle, a job ended by a fault of the cluster), newest first, each with a link to its evidence, and
//! their choice of rules: turning one off goes to `/api/v1/me/notifications/rules/{rule}` from the
//! browser (same-origin), as the tokens page's changes do.

use leptos::prelude::*;
use slurmlens_wire as wire;

use super::tokens::{NotSignedInTo, refusal, send};
use crate::api::Loader;
use crate::app::Time;

/// The notifications page.
#[component]
pub fn NotificationsPage() -> impl IntoView {
    let loader = Loader::from_context();
    let version = RwSignal::new(0u32);
    let mine = Resource::new(move || version.get(), move |_| loader.my_notifications());
    let message: RwSignal<Option<String>> = RwSignal::new(None);
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));
    let toggle = move |rule: wire::NotifyRule, enabled: bool| {
        message.set(None);
        let body = serde_json::json!({ "enabled": enabled }).to_string();
        leptos::task::spawn_local(async move {
            match send("PUT", &format!("/api/v1/me/notifications/rules/{rule}"), Some(body)).await {
                Ok((204, _)) => version.update(|v| *v += 1),
                Ok((status, text)) => message.set(Some(refusal(status, &text))),
                Err(error) => message.set(Some(error.message)),
            }
        });
    };
    view! {
        <section class="page notifications-page">
            <h1>"Notifications"</h1>
            <p class="hint">
                "slurmlens tells you when a job of yours holds GPUs it does not use, and when a job of yours ended by a fault of the cluster rather than of the job; an account's coordinator gets each month's usage of their accounts. Staff hear of the first two, and of nodes that keep faulting."
            </p>
            <Transition fallback=|| view! { <p class="status">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match mine.await {
                        Ok(mine) => view! {
                            <Rules rules=mine.rules.clone() email=mine.email.clone() hydrated toggle />
                            <p class="status" role="status" data-testid="notify-message">{move || message.get()}</p>
                            <NoticeList list=mine.notifications watched=watched_rules(&mine.rules) />
                        }
                        .into_any(),
                        Err(error) => view! { <NotSignedInTo error what="notifications" /> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

/// Each rule that speaks to users, with the viewer's switch.
#[component]
fn Rules(
    rules: Vec<wire::NotificationRule>,
    email: Option<String>,
    hydrated: RwSignal<bool>,
    toggle: impl Fn(wire::NotifyRule, bool) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let address = match email {
        Some(address) => view! { <p>"E-mails go to " <strong data-testid="notify-email">{address}</strong> "."</p> }.into_any(),
        None => view! { <p class="hint" data-testid="notify-email">"This site sends users no e-mail; your notifications are listed here."</p> }.into_any(),
    };
    let rows = rules
        .into_iter()
        .map(|rule| {
            let name = rule.rule;
            let enabled = rule.enabled;
            let state = match (rule.on_at_site, enabled) {
                (false, _) => "off at this site",
                (true, true) => "on",
                (true, false) => "off for you",
            };
            view! {
                <li data-testid="notify-rule" data-rule=name.as_str() data-enabled=enabled.to_string()>
                    <label>
                        <input
                            type="checkbox"
                            checked=enabled
                            prop:disabled=move || !hydrated.get() || !rule.on_at_site
                            on:change=move |_| toggle(name, !enabled)
                        />
                        " " {rule.description}
                    </label>
                    <span class="hint">" (" {state} ")"</span>
                </li>
            }
        })
        .collect_view();
    view! {
        <section class="notify-rules">
            <h2>"Tell me about"</h2>
            {address}
            <ul class="plain">{rows}</ul>
            <noscript><p class="hint">"Changing these needs JavaScript on this page."</p></noscript>
        </section>
    }
}

/// What a notice of `rule` is about, in words.
fn rule_words(rule: wire::NotifyRule) -> &'static str {
    match rule {
        wire::NotifyRule::IdleGpus => "idle GPUs",
        wire::NotifyRule::InfrastructureFailure => "ended by the cluster",
        wire::NotifyRule::MonthlyUsage => "monthly usage",
        wire::NotifyRule::NodeFaulting => rule.as_str(),
    }
}

/// The rules the site runs and the viewer has not turned off, in words.
fn watched_rules(rules: &[wire::NotificationRule]) -> Vec<String> {
    rules.iter().filter(|rule| rule.on_at_site && rule.enabled).map(|rule| rule_words(rule.rule).to_string()).collect()
}

/// The notices about the viewer's jobs, newest first.
#[component]
fn NoticeList(list: Vec<wire::Notification>, watched: Vec<String>) -> impl IntoView {
    if list.is_empty() {
        // An empty list says only what the rules that run looked for: with the rules off, it says nothing
        // about the jobs (the job list's Failure column does).
        let words = if watched.is_empty() {
            "No notices: no rule runs for you here (see above), so this list says nothing about your jobs; the job list's Failure column shows which ended badly.".to_string()
        } else {
            format!("Nothing to tell you yet: none of your jobs met a rule that runs for you ({}).", watched.join(", "))
        };
        return view! { <p class="status" data-testid="notify-none">{words}</p> }.into_any();
    }
    let items = list
        .into_iter()
        .map(|notice| {
            let kind = rule_words(notice.rule);
            let emailed = if notice.emailed_to_you { "e-mailed to you" } else { "not e-mailed" };
            let evidence = if notice.rule == wire::NotifyRule::MonthlyUsage {
                "The month on the usage page"
            } else {
                "The evidence"
            };
            view! {
                <li class="notice-item" data-testid="notify-item" data-rule=notice.rule.as_str()>
                    <p>
                        <Time at=notice.created_at.timestamp() />
                        " · " <span class="tag">{kind}</span>
                        " · " <span class="hint">{emailed}</span>
                    </p>
                    <p><strong>{notice.title}</strong></p>
                    {match notice.body.split_once("\n\n") {
                        // A report: its sentence wraps, its table keeps its columns (and scrolls on a phone).
                        Some((intro, table)) => view! {
                            <p class="notice-body" data-testid="notify-body">{intro.to_string()}</p>
                            <pre class="notice-body">{table.to_string()}</pre>
                        }
                        .into_any(),
                        None => view! { <p class="notice-body" data-testid="notify-body">{notice.body}</p> }.into_any(),
                    }}
                    <p><a href=notice.link data-testid="notify-evidence">{evidence}</a></p>
                </li>
            }
        })
        .collect_view();
    view! { <ul class="plain notices">{items}</ul> }.into_any()
}

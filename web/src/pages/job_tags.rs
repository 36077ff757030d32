//! Job tags on the pages: chips on the job list's rows, and the job page's tags with, for the job's
//! owner and staff, a field to add one and a button to remove each one a person set (a rule's tag,
//! `pytorch` from the script, is marked and stays). Changes go to `/api/v1/jobs/{id}/tags/{tag}`
//! from the browser.

use leptos::prelude::*;
use slurmlens_wire as wire;

use crate::query::{encode, percent_encode};

/// A list row's tags, as small chips (nothing without tags).
pub fn tag_chips(tags: &[String]) -> impl IntoView + use<> {
    let chips =
        tags.iter().map(|tag| view! { <span class="tag" data-testid="row-tag">{tag.clone()}</span> }).collect_view();
    (!tags.is_empty()).then(|| view! { <span class="tags">{chips}</span> })
}

/// The tag API's URL for `tag` of a job.
fn tag_url(tags: &wire::JobTags, tag: &str) -> String {
    let job = percent_encode(&tags.job_id);
    let cluster = encode(&[("cluster", tags.cluster.clone())]);
    format!("/api/v1/jobs/{job}/tags/{}?{cluster}", percent_encode(tag))
}

/// The job page's tags section; a line saying so where they could not be read.
#[component]
pub fn TagsSection(tags: Option<wire::JobTags>) -> impl IntoView {
    let Some(tags) = tags else {
        return view! {
            <section class="job-tags" aria-label="tags" data-testid="tags-section" data-status="missing">
                <h2>"Tags"</h2>
                <p class="muted">"tags not available"</p>
            </section>
        }
        .into_any();
    };
    let current = RwSignal::new(tags);
    let message = RwSignal::new(None::<String>);
    let change = move |method: &'static str, tag: String| {
        let url = tag_url(&current.get_untracked(), &tag);
        message.set(None);
        leptos::task::spawn_local(async move {
            match super::tokens::send(method, &url, None).await {
                Ok((200, text)) => match serde_json::from_str::<wire::JobTags>(&text) {
                    Ok(tags) => current.set(tags),
                    Err(error) => message.set(Some(format!("The server's answer was not the job's tags: {error}"))),
                },
                Ok((status, text)) => message.set(Some(super::tokens::refusal(status, &text))),
                Err(error) => message.set(Some(error.message)),
            }
        });
    };
    let on_add = move |event: leptos::ev::SubmitEvent| {
        event.prevent_default();
        let Some(form) =
            event.target().and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlFormElement>(t).ok())
        else {
            return;
        };
        let value = form
            .elements()
            .named_item("tag")
            .and_then(|element| wasm_bindgen::JsCast::dyn_into::<web_sys::HtmlInputElement>(element).ok())
            .map(|input| input.value())
            .unwrap_or_default();
        form.reset();
        change("PUT", value.trim().to_string());
    };
    let chips = move || {
        let tags = current.get();
        if tags.tags.is_empty() {
            return view! { <span class="muted" data-testid="tags-none">"no tags"</span> }.into_any();
        }
        let editable = tags.editable;
        tags.tags
            .into_iter()
            .map(|tag| {
                let rule = tag.origin == wire::TagOrigin::Rule;
                let title = match (&tag.set_by, rule) {
                    (_, true) => "set by the rules from the job's script or traces".to_string(),
                    (Some(user), false) => format!("set by {user}"),
                    (None, false) => String::new(),
                };
                let name = tag.tag.clone();
                let remove = (editable && !rule).then(|| {
                    let label = format!("remove tag {name}");
                    view! {
                        <button type="button" class="tag-remove" aria-label=label data-testid="tag-remove" on:click=move |_| change("DELETE", name.clone())>"×"</button>
                    }
                });
                view! {
                    <span class="tag" class:rule=rule title=title data-testid="job-tag" data-tag=tag.tag.clone() data-origin=if rule { "rule" } else { "user" }>
                        {tag.tag.clone()}
                        {rule.then(|| view! { <small>" (rule)"</small> })}
                        {remove}
                    </span>
                }
            })
            .collect_view()
            .into_any()
    };
    let editable = current.with_untracked(|tags| tags.editable);
    let max_tags = current.with_untracked(|tags| tags.max_tags);
    view! {
        <section class="job-tags" aria-label="tags" data-testid="tags-section" data-status="ok">
            <h2>"Tags"</h2>
            <p class="tags" data-testid="tags-list">{chips}</p>
            {editable.then(|| view! {
                <form class="tag-add" on:submit=on_add data-testid="tag-add">
                    <label>
                        "Add a tag"
                        <input type="text" name="tag" maxlength="32" pattern="[a-z0-9][a-z0-9._\\-]{0,31}" placeholder="ablation-3" data-testid="tag-input" />
                    </label>
                    <button type="submit" data-testid="tag-submit">"Add"</button>
                    <span class="hint">{format!("lowercase letters, digits, . _ -; at most {max_tags} tags")}</span>
                </form>
            })}
            {move || message.get().map(|text| view! { <p class="error" role="alert" data-testid="tag-message">{text}</p> })}
        </section>
    }
    .into_any()
}

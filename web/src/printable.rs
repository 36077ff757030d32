//! A server-rendered page made into one self-contained HTML file, for a ticket or an e-mail: the
//! stylesheet inlined, every script dropped (the charts are SVG in the page already, so nothing is lost
//! but interaction), links resolved against the site's address, and a note saying where and when it
//! was printed. `slurmlens report JOBID --format html` writes the job page this way; a shared report
//! link (`/shared/…`) serves it this way, with who shared it and until when.

use crate::app::STYLESHEET;

/// What a file hides of a page, beside what the print stylesheet hides on paper.
const FILE_RULES: &str =
    "header.top, form.filters, .toolbar, p.hint, .chart-hint, .chart-box .readout { display: none; }";

/// What the printed file says about itself.
#[derive(Debug, Clone)]
pub struct Printed<'a> {
    /// The site's public address (`[server] public_url`): the page's links resolve against it.
    pub site: &'a str,
    /// The live page's path and query on that site (`/jobs/123?cluster=lab`).
    pub path: &'a str,
    /// When it was printed, as the note shows it.
    pub at: &'a str,
}

/// Who shared a page (`/shared/…`), until when, and their note.
#[derive(Debug, Clone)]
pub struct Shared<'a> {
    pub by: &'a str,
    pub until: &'a str,
    pub note: &'a str,
    /// Where the link's holder reads the report's JSON (`/api/v1/shared/{secret}`).
    pub report_json: &'a str,
}

/// The sections a shared link never carries: their "not available" reads as what it is.
const NOT_SHARED: [(&str, &str); 3] = [
    ("logs-status", "logs not available"),
    ("profile-status", "profile not available"),
    ("script-status", "script not available"),
];

/// `page` (a whole document, as the page routes answer) as a self-contained file.
pub fn self_contained(page: &str, printed: &Printed<'_>) -> String {
    let site = printed.site.trim_end_matches('/');
    let mut document = static_document(page);
    let base = format!("<head><base href=\"{}/\"/>", escape(site));
    document = document.replacen("<head>", &base, 1);
    let live = format!("{site}{}", printed.path);
    let note = format!(
        "<body><p class=\"printed-note\" data-testid=\"printed-note\">Printed by slurmlens on {} from \
         <a href=\"{}\">{}</a>. The live page may have more: logs, newer readings, interactive charts.</p>",
        escape(printed.at),
        escape(&live),
        escape(&live)
    );
    document.replacen("<body>", &note, 1)
}

/// `page` as a shared link shows it: one document that loads nothing, saying who shared it and until when.
pub fn shared(page: &str, shared: &Shared<'_>) -> String {
    let note = if shared.note.is_empty() { String::new() } else { format!(" ({})", escape(shared.note)) };
    let banner = format!(
        "<body><p class=\"printed-note\" data-testid=\"shared-note\">Shared read-only by {}{note} until {}. \
         It shows this job's facts and report only.</p>",
        escape(shared.by),
        escape(shared.until)
    );
    let mut document = static_document(page).replacen("<body>", &banner, 1);
    // The signed-in API's addresses mean nothing to the link's holder: the report's JSON is read
    // through the link itself, and the job's own JSON is not part of what is shared.
    document = with_attribute(&document, "<a data-testid=\"report-json\" href=\"", shared.report_json);
    document = without_elements(&document, "<a data-testid=\"job-json\"", "</a>");
    for (testid, text) in NOT_SHARED {
        document = document.replace(
            &format!("data-testid=\"{testid}\">{text}<"),
            &format!("data-testid=\"{testid}\">not part of a shared report<"),
        );
    }
    document
}

/// `text` with the attribute value that follows each `opening` (up to its closing quote) set to `value`.
fn with_attribute(text: &str, opening: &str, value: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(opening) {
        out.push_str(&rest[..start + opening.len()]);
        out.push_str(&escape(value));
        let after = &rest[start + opening.len()..];
        rest = after.find('"').map_or("", |end| &after[end..]);
    }
    out.push_str(rest);
    out
}

/// `page` with every script and preload gone and the stylesheet inline (with [`FILE_RULES`]).
fn static_document(page: &str) -> String {
    let mut document = without_elements(page, "<script", "</script>");
    document = without_elements(&document, "<link rel=\"modulepreload\"", ">");
    document = without_elements(&document, "<link rel=\"preload\"", ">");
    // Read, not used: no site navigation, no hints about hovering or dragging.
    let stylesheet = format!("<style>\n{STYLESHEET}\n{FILE_RULES}\n</style>");
    document = document.replacen("<link rel=\"stylesheet\" href=\"/web/style.css\"/>", &stylesheet, 1);
    document.replacen("<link rel=\"stylesheet\" href=\"/web/style.css\">", &stylesheet, 1)
}

/// `text` with every element from `open` up to the next `close` removed (`close` included).
fn without_elements(text: &str, open: &str, close: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        out.push_str(&rest[..start]);
        let after = &rest[start + open.len()..];
        match after.find(close) {
            Some(end) => rest = &after[end + close.len()..],
            // An element left open runs to the end: drop the rest rather than keep a script's start.
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// Text for an HTML attribute or element.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"/>\
        <link rel=\"stylesheet\" href=\"/web/style.css\"/><link rel=\"modulepreload\" href=\"/pkg/x.js\" nonce=\"n\">\
        <script nonce=\"n\">import('/pkg/x.js')</script></head><body><main><a href=\"/grid?at=1\">grid</a>\
        <svg><rect/></svg><script>window.__RESOLVED=[1]</script><p>after</p></main></body></html>";

    fn printed() -> Printed<'static> {
        Printed { site: "https://lens.example.org/", path: "/jobs/7?cluster=lab", at: "2026-12-02 16:00 UTC" }
    }

    #[test]
    fn scripts_go_the_stylesheet_comes_inline_and_links_resolve_on_the_site() {
        let file = self_contained(PAGE, &printed());
        assert!(!file.contains("<script") && !file.contains("modulepreload"), "{file}");
        assert!(!file.contains("/web/style.css"), "{file}");
        assert!(file.contains("<style>") && file.contains(".chart-box"), "the stylesheet inline");
        assert!(file.contains(FILE_RULES), "navigation and hints hidden");
        assert!(file.contains("<head><base href=\"https://lens.example.org/\"/>"), "{file}");
        assert!(file.contains("<svg><rect/></svg>") && file.contains("<p>after</p>"), "the page stays: {file}");
        assert!(file.contains("from <a href=\"https://lens.example.org/jobs/7?cluster=lab\">"), "{file}");
    }

    #[test]
    fn a_shared_page_says_who_shared_it_and_loads_nothing() {
        let with_sections = PAGE.replace(
            "<p>after</p>",
            "<a data-testid=\"job-json\" href=\"/api/v1/jobs/7\">JSON</a>\
             <a data-testid=\"report-json\" href=\"/api/v1/jobs/7/report?cluster=lab\">report JSON</a>\
             <p class=\"muted\" data-testid=\"logs-status\">logs not available</p>\
             <p class=\"muted\" data-testid=\"script-status\">script not available</p><p>after</p>",
        );
        let shared_with = Shared {
            by: "alice",
            until: "2026-12-09 16:00 UTC",
            note: "ticket <4711>",
            report_json: "/api/v1/shared/sls_ab",
        };
        let page = shared(&with_sections, &shared_with);
        assert!(!page.contains("<script") && !page.contains("/web/style.css") && !page.contains("<base"), "{page}");
        assert!(page.contains("Shared read-only by alice (ticket &lt;4711&gt;) until 2026-12-09 16:00 UTC."), "{page}");
        assert!(
            page.contains("<a data-testid=\"report-json\" href=\"/api/v1/shared/sls_ab\">report JSON</a>"),
            "{page}"
        );
        assert!(!page.contains("/api/v1/jobs/7"), "no signed-in API address is left: {page}");
        assert!(page.contains("data-testid=\"logs-status\">not part of a shared report<"), "{page}");
        assert!(page.contains("data-testid=\"script-status\">not part of a shared report<"), "{page}");
        assert!(page.contains("<p>after</p>"), "{page}");
    }

    #[test]
    fn an_unclosed_script_drops_the_rest_and_the_note_is_escaped() {
        assert_eq!(without_elements("a<script>b", "<script", "</script>"), "a");
        let file = self_contained(PAGE, &Printed { at: "<now>", ..printed() });
        assert!(file.contains("on &lt;now&gt;"), "{file}");
    }
}

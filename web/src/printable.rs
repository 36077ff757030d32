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
}

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
    static_document(page).replacen("<body>", &banner, 1)
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
        let page = shared(PAGE, &Shared { by: "alice", until: "2026-12-09 16:00 UTC", note: "ticket <4711>" });
        assert!(!page.contains("<script") && !page.contains("/web/style.css") && !page.contains("<base"), "{page}");
        assert!(page.contains("Shared read-only by alice (ticket &lt;4711&gt;) until 2026-12-09 16:00 UTC."), "{page}");
    }

    #[test]
    fn an_unclosed_script_drops_the_rest_and_the_note_is_escaped() {
        assert_eq!(without_elements("a<script>b", "<script", "</script>"), "a");
        let file = self_contained(PAGE, &Printed { at: "<now>", ..printed() });
        assert!(file.contains("on &lt;now&gt;"), "{file}");
    }
}

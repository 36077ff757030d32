//! The job page's icicle graph of a profile: the flame graph's bars from `/api/v1/jobs/{id}/profile`
//! drawn as static SVG on the server (root on top, callees below, width = share of the samples).
//! Plain Rust, tested natively.

use slurmlens_wire as wire;

/// Drawing width and bar height, in SVG units.
pub const WIDTH: f64 = 1000.0;
const ROW: f64 = 17.0;
/// Deepest level drawn; deeper stacks are cut (the top tables still count them).
const MAX_LEVELS: u32 = 40;
/// Bars narrower than this are not drawn.
const MIN_WIDTH: f64 = 0.5;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A warm colour per function name, stable across renders (FNV-1a of the name).
fn colour(name: &str) -> String {
    let hash = name.bytes().fold(0x811c_9dc5_u32, |hash, byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193));
    let hue = 10 + hash % 40;
    let lightness = 55 + (hash >> 8) % 15;
    format!("hsl({hue},75%,{lightness}%)")
}

/// The icicle graph of `flame` scaled to `total`, or `None` when there is nothing to draw.
pub fn icicle(flame: &[wire::FlameBar], total: u64) -> Option<String> {
    if total == 0 || flame.is_empty() {
        return None;
    }
    let scale = WIDTH / total as f64;
    let depth = flame.iter().map(|bar| bar.level).max().unwrap_or(0).min(MAX_LEVELS - 1) + 1;
    let height = f64::from(depth) * ROW;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="flame" viewBox="0 0 {WIDTH} {height}" width="100%" role="img" aria-label="flame graph" font-size="11" font-family="monospace">"#
    );
    for bar in flame.iter().filter(|bar| bar.level < MAX_LEVELS) {
        let width = bar.value as f64 * scale;
        if width < MIN_WIDTH {
            continue;
        }
        let x = bar.start as f64 * scale;
        let y = f64::from(bar.level) * ROW;
        let share = bar.value as f64 / total as f64 * 100.0;
        let name = escape(&bar.name);
        svg.push_str(&format!(
            r#"<g data-flame-bar="1"><title>{name} ({share:.1} %)</title><rect x="{x:.2}" y="{y:.1}" width="{width:.2}" height="{:.1}" fill="{}" stroke="white" stroke-width="0.5"/>"#,
            ROW - 1.0,
            colour(&bar.name)
        ));
        // Roughly 6.6 units per monospace character at 11 px.
        let fits = ((width - 4.0) / 6.6).floor() as usize;
        if fits >= 3 {
            let label: String = if bar.name.chars().count() > fits {
                bar.name.chars().take(fits.saturating_sub(1)).chain(std::iter::once('…')).collect()
            } else {
                bar.name.clone()
            };
            svg.push_str(&format!(r#"<text x="{:.2}" y="{:.1}">{}</text>"#, x + 2.0, y + ROW - 5.0, escape(&label)));
        }
        svg.push_str("</g>");
    }
    svg.push_str("</svg>");
    Some(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(level: u32, start: u64, value: u64, name: &str) -> wire::FlameBar {
        wire::FlameBar { level, start, value, self_value: 0, name: name.into() }
    }

    #[test]
    fn draws_bars_scaled_to_the_root_and_escapes_names() {
        let flame =
            vec![bar(0, 0, 1000, "total"), bar(1, 0, 750, "std::vector<int>::push_back"), bar(1, 750, 250, "b")];
        let svg = icicle(&flame, 1000).expect("drawn");
        assert_eq!(svg.matches("data-flame-bar").count(), 3);
        assert!(svg.contains(r#"width="750.00""#) && svg.contains(r#"x="750.00""#));
        assert!(svg.contains("std::vector&lt;int&gt;::push_back"));
        assert!(!svg.contains("<int>"));
    }

    #[test]
    fn skips_slivers_and_draws_nothing_without_samples() {
        let flame = vec![bar(0, 0, 100_000, "total"), bar(1, 0, 1, "tiny")];
        assert_eq!(icicle(&flame, 100_000).expect("drawn").matches("data-flame-bar").count(), 1);
        assert_eq!(icicle(&flame, 0), None);
        assert_eq!(icicle(&[], 10), None);
    }
}

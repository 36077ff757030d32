//! The agent's `/metrics`: Prometheus text written by hand (a few dozen series), the parts' series and the
//! agent's own: which parts run (and why not), its resident memory and CPU time.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

/// Something that writes series into a scrape.
pub trait Exporter: Send + Sync {
    /// Appends this part's series (`# TYPE` lines included) to `out`.
    fn render(&self, out: &mut String);
}

/// One part of the agent and whether it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct PartState {
    pub part: &'static str,
    pub running: bool,
    /// Why not, or what it runs on.
    pub detail: String,
}

/// What each part said about itself at start (and after), for `slurmlens_agent_part_running`.
#[derive(Debug, Default)]
pub struct Parts(Mutex<Vec<PartState>>);

impl Parts {
    /// Records the state of `part`, replacing an earlier one; logs a change once.
    pub fn set(&self, part: &'static str, running: bool, detail: impl Into<String>) {
        let detail = detail.into();
        let mut parts = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let changed = parts
            .iter()
            .find(|state| state.part == part)
            .is_none_or(|state| state.running != running || state.detail != detail);
        if changed {
            if running {
                tracing::info!(part, "{detail}");
            } else {
                tracing::warn!(part, "not running: {detail}");
            }
        }
        parts.retain(|state| state.part != part);
        parts.push(PartState { part, running, detail });
    }

    pub fn snapshot(&self) -> Vec<PartState> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

impl Exporter for Parts {
    fn render(&self, out: &mut String) {
        out.push_str("# HELP slurmlens_agent_part_running 1 while a part of the agent runs; `detail` says on what, or why not.\n");
        out.push_str("# TYPE slurmlens_agent_part_running gauge\n");
        for state in self.snapshot() {
            let _ = writeln!(
                out,
                "slurmlens_agent_part_running{{part=\"{}\",detail=\"{}\"}} {}",
                state.part,
                escape(&state.detail),
                u8::from(state.running)
            );
        }
        if let Some((resident, cpu_s)) = own_usage() {
            out.push_str("# TYPE slurmlens_agent_resident_memory_bytes gauge\n");
            let _ = writeln!(out, "slurmlens_agent_resident_memory_bytes {resident}");
            out.push_str("# TYPE slurmlens_agent_cpu_seconds_total counter\n");
            let _ = writeln!(out, "slurmlens_agent_cpu_seconds_total {cpu_s}");
        }
    }
}

/// The agent's resident bytes and user+system CPU seconds, from `/proc/self`.
pub fn own_usage() -> Option<(u64, f64)> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command's closing parenthesis; utime and stime are the 14th and 15th of the line.
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux ABI the agent runs on; the page size 4 KiB on x86-64 and most arm64.
    Some((pages * 4096, ticks as f64 / 100.0))
}

/// A label value escaped for the text format.
pub fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The `/metrics` router over every exporter.
pub fn router(exporters: Vec<Arc<dyn Exporter>>) -> Router {
    Router::new().route("/metrics", get(scrape)).with_state(Arc::new(exporters))
}

async fn scrape(State(exporters): State<Arc<Vec<Arc<dyn Exporter>>>>) -> impl IntoResponse {
    let mut out = String::with_capacity(16 * 1024);
    for exporter in exporters.iter() {
        exporter.render(&mut out);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_that_does_not_run_says_why_in_its_series() {
        let parts = Parts::default();
        parts.set("cuda", false, "no \"bpf\" here");
        parts.set("bursts", true, "2 ports");
        let mut out = String::new();
        parts.render(&mut out);
        assert!(out.contains("slurmlens_agent_part_running{part=\"cuda\",detail=\"no \\\"bpf\\\" here\"} 0"), "{out}");
        assert!(out.contains("slurmlens_agent_part_running{part=\"bursts\",detail=\"2 ports\"} 1"), "{out}");
        assert!(out.contains("slurmlens_agent_resident_memory_bytes "), "{out}");
    }
}

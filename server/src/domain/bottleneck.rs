//! "Where time goes": shares of a GPU's traced time (compute, communication, copies, waits, idle) and
//! the verdict they add up to, with the evidence that triggered it.

use std::fmt;

/// A communication share at or above this, and at least compute's, is communication-bound.
pub const COMMUNICATION_SHARE: f64 = 0.30;
/// A memory-copy share at or above this, and at least compute's, is memory-copy-bound.
pub const MEMCPY_SHARE: f64 = 0.20;
/// Idle at or above this, with host-to-device copies, is input-bound.
pub const INPUT_IDLE_SHARE: f64 = 0.30;
/// Idle at or above this (without the input pattern) is gpus-idle.
pub const IDLE_SHARE: f64 = 0.50;

/// Traced activity of one GPU (or a whole job, summed), in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ActivityTotals {
    /// Interval time traced (the union of the summaries' intervals).
    pub traced_ns: u64,
    pub kernel_ns: u64,
    pub nccl_ns: u64,
    pub memcpy_ns: u64,
    pub sync_ns: u64,
    /// Host-to-device copies: count, time and bytes (the input pipeline's footprint).
    pub htod_count: u64,
    pub htod_ns: u64,
    pub htod_bytes: u64,
}

impl ActivityTotals {
    /// Adds another GPU's totals (for the job as a whole).
    pub fn add(&mut self, other: &Self) {
        self.traced_ns = self.traced_ns.saturating_add(other.traced_ns);
        self.kernel_ns = self.kernel_ns.saturating_add(other.kernel_ns);
        self.nccl_ns = self.nccl_ns.saturating_add(other.nccl_ns);
        self.memcpy_ns = self.memcpy_ns.saturating_add(other.memcpy_ns);
        self.sync_ns = self.sync_ns.saturating_add(other.sync_ns);
        self.htod_count = self.htod_count.saturating_add(other.htod_count);
        self.htod_ns = self.htod_ns.saturating_add(other.htod_ns);
        self.htod_bytes = self.htod_bytes.saturating_add(other.htod_bytes);
    }
}

/// Shares of the traced time, summing to 1 (or all 0 when nothing was traced). Activities overlap
/// (concurrent streams, host waits during kernels); when they add up to more than the traced time
/// they are scaled down together, and idle is 0.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TimeShares {
    pub compute: f64,
    pub communication: f64,
    pub memcpy: f64,
    pub sync: f64,
    pub idle: f64,
}

impl TimeShares {
    pub fn of(totals: &ActivityTotals) -> Self {
        if totals.traced_ns == 0 {
            return Self::default();
        }
        let traced = totals.traced_ns as f64;
        let busy = [totals.kernel_ns, totals.nccl_ns, totals.memcpy_ns, totals.sync_ns].map(|ns| ns as f64);
        let busy_sum: f64 = busy.iter().sum();
        let scale = if busy_sum > traced { traced / busy_sum } else { 1.0 };
        let [compute, communication, memcpy, sync] = busy.map(|ns| ns * scale / traced);
        let idle = if busy_sum >= traced { 0.0 } else { (1.0 - compute - communication - memcpy - sync).max(0.0) };
        Self { compute, communication, memcpy, sync, idle }
    }
}

/// What mostly held a job's GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bottleneck {
    ComputeBound,
    CommunicationBound,
    InputBound,
    MemoryCopyBound,
    GpusIdle,
}

impl Bottleneck {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ComputeBound => "compute-bound",
            Self::CommunicationBound => "communication-bound",
            Self::InputBound => "input-bound",
            Self::MemoryCopyBound => "memory-copy-bound",
            Self::GpusIdle => "gpus-idle",
        }
    }
}

impl fmt::Display for Bottleneck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verdict and the sentences that justify it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub bottleneck: Bottleneck,
    pub evidence: Vec<String>,
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// The verdict for these totals, or `None` when nothing was traced or no kernel was timed on the GPU
/// (host-side summaries). Rules, first match wins:
/// communication ≥ 30% and ≥ compute; memory copies ≥ 20% and ≥ compute; idle ≥ 30% with
/// host-to-device copies (the GPU waits for input); idle ≥ 50%; else the largest share.
pub fn verdict(totals: &ActivityTotals) -> Option<Verdict> {
    // No kernel time: host-side summaries (the node agent's uprobes count launches, never time them on the
    // GPU). Their shares say how the host spent its time, not whether the GPU idled: no verdict is drawn
    // from them; DCGM's device-side activity is the report's reading of the GPU.
    if totals.traced_ns == 0 || totals.kernel_ns == 0 {
        return None;
    }
    let shares = TimeShares::of(totals);
    let compute = format!("compute kernels {} of traced time", percent(shares.compute));
    if shares.communication >= COMMUNICATION_SHARE && shares.communication >= shares.compute {
        return Some(Verdict {
            bottleneck: Bottleneck::CommunicationBound,
            evidence: vec![
                format!(
                    "NCCL collectives {} of traced time (threshold {})",
                    percent(shares.communication),
                    percent(COMMUNICATION_SHARE)
                ),
                format!("{compute}, less than communication"),
            ],
        });
    }
    if shares.memcpy >= MEMCPY_SHARE && shares.memcpy >= shares.compute {
        return Some(Verdict {
            bottleneck: Bottleneck::MemoryCopyBound,
            evidence: vec![
                format!(
                    "memory copies {} of traced time (threshold {})",
                    percent(shares.memcpy),
                    percent(MEMCPY_SHARE)
                ),
                format!("{compute}, less than copies"),
            ],
        });
    }
    if shares.idle >= INPUT_IDLE_SHARE && totals.htod_count > 0 {
        let mut evidence = vec![
            format!("GPU idle {} of traced time (threshold {})", percent(shares.idle), percent(INPUT_IDLE_SHARE)),
            format!(
                "{} host-to-device copies ({:.1} MB) between the idle gaps: the input pipeline does not keep up",
                totals.htod_count,
                totals.htod_bytes as f64 / 1e6
            ),
        ];
        if shares.sync > 0.0 {
            evidence.push(format!("host waits in synchronisation {} of traced time", percent(shares.sync)));
        }
        return Some(Verdict { bottleneck: Bottleneck::InputBound, evidence });
    }
    if shares.idle >= IDLE_SHARE {
        return Some(Verdict {
            bottleneck: Bottleneck::GpusIdle,
            evidence: vec![
                format!("GPU idle {} of traced time (threshold {})", percent(shares.idle), percent(IDLE_SHARE)),
                compute,
            ],
        });
    }
    let largest = [
        (shares.compute, Bottleneck::ComputeBound, "compute kernels"),
        (shares.communication, Bottleneck::CommunicationBound, "NCCL collectives"),
        (shares.memcpy, Bottleneck::MemoryCopyBound, "memory copies"),
        (shares.idle, Bottleneck::GpusIdle, "idle"),
    ]
    .into_iter()
    .fold((0.0, Bottleneck::ComputeBound, "compute kernels"), |best, next| if next.0 > best.0 { next } else { best });
    Some(Verdict {
        bottleneck: largest.1,
        evidence: vec![format!("{} {} of traced time, the largest share", largest.2, percent(largest.0))],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    fn totals(kernel: f64, nccl: f64, memcpy: f64, sync: f64) -> ActivityTotals {
        let ns = |share: f64| (share * 10.0 * SECOND as f64) as u64;
        ActivityTotals {
            traced_ns: 10 * SECOND,
            kernel_ns: ns(kernel),
            nccl_ns: ns(nccl),
            memcpy_ns: ns(memcpy),
            sync_ns: ns(sync),
            ..Default::default()
        }
    }

    fn kind(totals: &ActivityTotals) -> Bottleneck {
        verdict(totals).expect("traced").bottleneck
    }

    #[test]
    fn shares_sum_to_one_and_scale_overlap() {
        let shares = TimeShares::of(&totals(0.5, 0.2, 0.1, 0.0));
        assert!((shares.idle - 0.2).abs() < 1e-9);
        let overlapping = TimeShares::of(&totals(0.9, 0.6, 0.0, 0.5));
        let sum = overlapping.compute + overlapping.communication + overlapping.memcpy + overlapping.sync;
        assert!((sum - 1.0).abs() < 1e-9 && overlapping.idle == 0.0);
        assert_eq!(TimeShares::of(&ActivityTotals::default()), TimeShares::default());
        assert_eq!(verdict(&ActivityTotals::default()), None);
    }

    #[test]
    fn bottleneck_verdicts() {
        assert_eq!(kind(&totals(0.85, 0.05, 0.02, 0.0)), Bottleneck::ComputeBound);
        let communication = verdict(&totals(0.3, 0.55, 0.02, 0.0)).expect("traced");
        assert_eq!(communication.bottleneck, Bottleneck::CommunicationBound);
        assert!(communication.evidence[0].contains("NCCL collectives 55%"), "{:?}", communication.evidence);
        assert_eq!(kind(&totals(0.2, 0.05, 0.4, 0.0)), Bottleneck::MemoryCopyBound);
        let mut input = totals(0.4, 0.0, 0.1, 0.1);
        input.htod_count = 100;
        input.htod_bytes = 5_000_000;
        assert_eq!(kind(&input), Bottleneck::InputBound);
        assert_eq!(kind(&totals(0.2, 0.0, 0.0, 0.0)), Bottleneck::GpusIdle);
        // Below every threshold: the largest share decides.
        assert_eq!(kind(&totals(0.45, 0.25, 0.0, 0.0)), Bottleneck::ComputeBound);
    }

    #[test]
    fn host_side_summaries_without_kernel_time_draw_no_verdict() {
        // The node agent's uprobes: launches counted with no GPU time, host waits and copies timed.
        let mut host_side = totals(0.0, 0.05, 0.1, 0.2);
        host_side.htod_count = 100;
        assert_eq!(verdict(&host_side), None, "neither input-bound nor gpus-idle from host-side times");
    }
}

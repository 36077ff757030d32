//! A node's health: NVML's clock-event reasons decoded from dcgm-exporter's bitmask, and the rules
//! that turn a node's state and its GPUs' counters (XIDs, ECC, row remapping, slowdowns) and links
//! into one level, `ok`, `warn` or `fault`, with a reason for each finding.

use slurmlens_wire::{ClockEventReason, HealthLevel};

use super::blame::{Strength, xid_strength};

/// NVML's clocks-event reasons (`nvmlClocksEventReason*`, formerly `nvmlClocksThrottleReason*`), the
/// bits of `DCGM_FI_DEV_CLOCK_THROTTLE_REASONS` / `DCGM_FI_DEV_CLOCKS_EVENT_REASONS` (field 112).
const CLOCK_EVENT_BITS: [(u64, ClockEventReason); 9] = [
    (0x1, ClockEventReason::GpuIdle),
    (0x2, ClockEventReason::ApplicationsClocksSetting),
    (0x4, ClockEventReason::SwPowerCap),
    (0x8, ClockEventReason::HwSlowdown),
    (0x10, ClockEventReason::SyncBoost),
    (0x20, ClockEventReason::SwThermalSlowdown),
    (0x40, ClockEventReason::HwThermalSlowdown),
    (0x80, ClockEventReason::HwPowerBrakeSlowdown),
    (0x100, ClockEventReason::DisplayClockSetting),
];

/// Single-bit ECC errors in a window above which a GPU is worth a look (they are corrected, but a
/// rising rate precedes XID 92 and page retirement).
pub const SBE_WARN: f64 = 100.0;

/// The reasons set in `mask`, in bit order. Bits NVML does not define are ignored; so is a value that
/// is not a whole non-negative number (a blank reading).
pub fn clock_event_reasons(mask: f64) -> Vec<ClockEventReason> {
    if !mask.is_finite() || mask < 0.0 || mask.fract() != 0.0 || mask >= 2f64.powi(53) {
        return Vec::new();
    }
    let bits = mask as u64;
    CLOCK_EVENT_BITS.iter().filter(|(bit, _)| bits & bit != 0).map(|(_, reason)| *reason).collect()
}

/// The reason in words.
pub fn clock_event_words(reason: ClockEventReason) -> &'static str {
    match reason {
        ClockEventReason::GpuIdle => "idle",
        ClockEventReason::ApplicationsClocksSetting => "application clocks setting",
        ClockEventReason::SwPowerCap => "software power cap",
        ClockEventReason::HwSlowdown => "hardware slowdown",
        ClockEventReason::SyncBoost => "sync boost",
        ClockEventReason::SwThermalSlowdown => "software thermal slowdown",
        ClockEventReason::HwThermalSlowdown => "hardware thermal slowdown (too hot)",
        ClockEventReason::HwPowerBrakeSlowdown => "hardware power brake",
        ClockEventReason::DisplayClockSetting => "display clock setting",
    }
}

/// Whether the reason means the GPU was slowed by heat or by its power supply: a node problem. Idle,
/// the power cap and clock settings are normal operation.
pub fn is_slowdown(reason: ClockEventReason) -> bool {
    matches!(
        reason,
        ClockEventReason::HwSlowdown
            | ClockEventReason::SwThermalSlowdown
            | ClockEventReason::HwThermalSlowdown
            | ClockEventReason::HwPowerBrakeSlowdown
    )
}

/// What is known of one GPU over a window (absent: not exported).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuFacts {
    pub gpu: u16,
    /// XID codes seen in the window.
    pub xid_codes: Vec<u32>,
    /// New single-bit / double-bit ECC errors in the window.
    pub sbe_in_window: Option<f64>,
    pub dbe_in_window: Option<f64>,
    /// Rows remapped after uncorrectable errors in the window.
    pub uncorrectable_remaps_in_window: Option<f64>,
    pub row_remap_failure: bool,
    pub row_remap_pending: bool,
    /// Clock-event reasons seen in the window.
    pub clock_event_reasons: Vec<ClockEventReason>,
}

/// A node's state and what its GPUs and links showed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeFacts {
    /// As sacct prints node states (`IDLE`, `DOWN+DRAIN`, `ALLOCATED+DRAIN`).
    pub state: String,
    pub reason: Option<String>,
    pub gpus: Vec<GpuFacts>,
    /// Ping-mesh paths of the node's ToR with loss or RTT above the thresholds (`tor-a → tor-b`).
    pub unhealthy_links: Vec<String>,
}

/// The node's level and the reasons, worst first.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    pub level: HealthLevel,
    pub reasons: Vec<String>,
}

/// Weighs `facts`: a node down or failing, a hardware XID, a double-bit ECC error or a failed row
/// remap is a fault; a drain, a weak XID, a pending remap, many corrected errors, a thermal or power
/// slowdown or a lossy link is a warning. A program's XID (31, 43, …) says nothing of the node.
pub fn assess(facts: &NodeFacts) -> Health {
    let mut found: Vec<(HealthLevel, String)> = Vec::new();
    let flags: Vec<&str> = facts.state.split('+').collect();
    let reason =
        facts.reason.as_deref().filter(|reason| !reason.is_empty()).map(|r| format!(": {r}")).unwrap_or_default();
    if flags.iter().any(|flag| matches!(*flag, "DOWN" | "FAIL" | "FAILING" | "NOT_RESPONDING")) {
        found.push((HealthLevel::Fault, format!("node {}{reason}", facts.state)));
    } else if flags.iter().any(|flag| matches!(*flag, "DRAIN" | "DRAINED" | "DRAINING" | "MAINT")) {
        found.push((HealthLevel::Warn, format!("node {}{reason}", facts.state)));
    }
    for gpu in &facts.gpus {
        let id = gpu.gpu;
        for &code in &gpu.xid_codes {
            let (strength, meaning) = xid_strength(code);
            match strength {
                Strength::Strong => found.push((HealthLevel::Fault, format!("GPU {id}: XID {code} ({meaning})"))),
                Strength::Weak => found.push((HealthLevel::Warn, format!("GPU {id}: XID {code} ({meaning})"))),
                Strength::Application | Strength::Context => {}
            }
        }
        if let Some(dbe) = gpu.dbe_in_window.filter(|dbe| *dbe >= 1.0) {
            found.push((HealthLevel::Fault, format!("GPU {id}: {dbe:.0} uncorrectable (double-bit) ECC errors")));
        }
        if gpu.row_remap_failure {
            found.push((HealthLevel::Fault, format!("GPU {id}: a row remap failed (the GPU needs service)")));
        }
        if gpu.row_remap_pending {
            found.push((HealthLevel::Warn, format!("GPU {id}: a row remap waits for a GPU reset")));
        } else if let Some(rows) = gpu.uncorrectable_remaps_in_window.filter(|rows| *rows >= 1.0) {
            found.push((HealthLevel::Warn, format!("GPU {id}: {rows:.0} rows remapped after uncorrectable errors")));
        }
        if let Some(sbe) = gpu.sbe_in_window.filter(|sbe| *sbe >= SBE_WARN) {
            found.push((HealthLevel::Warn, format!("GPU {id}: {sbe:.0} corrected (single-bit) ECC errors")));
        }
        let slowdowns: Vec<&str> =
            gpu.clock_event_reasons.iter().filter(|r| is_slowdown(**r)).map(|r| clock_event_words(*r)).collect();
        if !slowdowns.is_empty() {
            found.push((HealthLevel::Warn, format!("GPU {id}: clocks held down by {}", slowdowns.join(", "))));
        }
    }
    for link in &facts.unhealthy_links {
        found.push((HealthLevel::Warn, format!("ping-mesh path {link}: loss or latency above the thresholds")));
    }
    // Worst first; within a level, in the order found (state, then GPU by GPU).
    found.sort_by_key(|(level, _)| std::cmp::Reverse(*level));
    Health {
        level: found.first().map_or(HealthLevel::Ok, |(level, _)| *level),
        reasons: found.into_iter().map(|(_, reason)| reason).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_event_bits_decode_as_nvml_defines_them() {
        // 0x48: hardware slowdown + hardware thermal slowdown; 0x1: idle.
        assert_eq!(clock_event_reasons(72.0), [ClockEventReason::HwSlowdown, ClockEventReason::HwThermalSlowdown]);
        assert_eq!(clock_event_reasons(1.0), [ClockEventReason::GpuIdle]);
        assert_eq!(clock_event_reasons(4.0), [ClockEventReason::SwPowerCap]);
        assert_eq!(clock_event_reasons(0x100 as f64), [ClockEventReason::DisplayClockSetting]);
        assert_eq!(clock_event_reasons(0x1ff as f64).len(), 9);
        // Undefined bits, blanks and nonsense decode to nothing.
        assert!(clock_event_reasons(0x200 as f64).is_empty());
        assert!(clock_event_reasons(f64::NAN).is_empty());
        assert!(clock_event_reasons(-8.0).is_empty());
        assert!(clock_event_reasons(8.5).is_empty());
        assert!(clock_event_reasons(9.223_372_036_854_776e18).is_empty(), "DCGM's blank sentinel");
        assert!(!is_slowdown(ClockEventReason::GpuIdle) && !is_slowdown(ClockEventReason::SwPowerCap));
        assert!(is_slowdown(ClockEventReason::HwThermalSlowdown));
    }

    fn idle_node() -> NodeFacts {
        NodeFacts {
            state: "IDLE".into(),
            gpus: vec![GpuFacts { gpu: 0, ..GpuFacts::default() }],
            ..NodeFacts::default()
        }
    }

    #[test]
    fn a_quiet_node_is_ok_and_a_program_xid_leaves_it_ok() {
        let mut facts = idle_node();
        assert_eq!(assess(&facts), Health { level: HealthLevel::Ok, reasons: Vec::new() });
        facts.gpus[0].xid_codes = vec![31];
        facts.gpus[0].clock_event_reasons = vec![ClockEventReason::GpuIdle, ClockEventReason::SwPowerCap];
        facts.gpus[0].sbe_in_window = Some(SBE_WARN - 1.0);
        assert_eq!(assess(&facts).level, HealthLevel::Ok, "XID 31 is the program's; idle and power cap are normal");
    }

    #[test]
    fn hardware_faults_outrank_warnings_and_each_is_named() {
        let mut facts = idle_node();
        facts.state = "IDLE+DRAIN".into();
        facts.reason = Some("gpu check".into());
        facts.gpus[0].clock_event_reasons = vec![ClockEventReason::HwThermalSlowdown];
        facts.gpus.push(GpuFacts { gpu: 3, xid_codes: vec![79], dbe_in_window: Some(2.0), ..GpuFacts::default() });
        facts.unhealthy_links = vec!["rack1 → rack2".into()];
        let health = assess(&facts);
        assert_eq!(health.level, HealthLevel::Fault);
        assert_eq!(health.reasons[0], "GPU 3: XID 79 (GPU has fallen off the bus)");
        assert_eq!(health.reasons[1], "GPU 3: 2 uncorrectable (double-bit) ECC errors");
        assert_eq!(health.reasons[2], "node IDLE+DRAIN: gpu check");
        assert!(health.reasons[3].contains("hardware thermal slowdown"), "{health:?}");
        assert!(health.reasons[4].contains("rack1 → rack2"));
        assert_eq!(health.reasons.len(), 5);
    }

    #[test]
    fn drains_pending_remaps_and_corrected_errors_warn_and_down_is_a_fault() {
        let mut facts = idle_node();
        facts.gpus[0].row_remap_pending = true;
        facts.gpus[0].uncorrectable_remaps_in_window = Some(1.0);
        let health = assess(&facts);
        assert_eq!(health.level, HealthLevel::Warn);
        assert_eq!(health.reasons, ["GPU 0: a row remap waits for a GPU reset"]);
        facts.gpus[0].row_remap_pending = false;
        facts.gpus[0].sbe_in_window = Some(SBE_WARN);
        assert_eq!(assess(&facts).reasons.len(), 2);
        facts.state = "DOWN".into();
        facts.reason = Some("Not responding".into());
        let health = assess(&facts);
        assert_eq!((health.level, health.reasons[0].as_str()), (HealthLevel::Fault, "node DOWN: Not responding"));
        facts.gpus[0].row_remap_failure = true;
        assert_eq!(assess(&facts).reasons.iter().filter(|r| r.contains("remap failed")).count(), 1);
    }
}

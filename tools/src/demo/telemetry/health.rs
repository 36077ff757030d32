//! dcgm-exporter's health fields for the demo (`shared/reference/datasources.md` §1.1, enabled by a
//! custom counters CSV): the clock-event reasons bitmask, ECC single-/double-bit counters (volatile
//! and aggregate), remapped rows and pending remaps, and the power/thermal violation counters (ns).
//! Every GPU gets plausible quiet values; one node of the cluster ([`FLAKY_NODE`]) keeps faulting:
//! its GPU [`FLAKY_GPU`] runs hot (hardware thermal slowdown), gathers corrected errors, and every
//! [`FLAKY_PERIOD_S`] an uncorrectable error raises XID 48 and queues a row remap.

use std::collections::BTreeMap;

/// The node that keeps faulting (sakura's nodes are `gpu001`…`gpu100`).
pub const FLAKY_NODE: &str = "gpu042";
pub const FLAKY_GPU: u16 = 5;
/// Seconds between the flaky GPU's uncorrectable ECC errors.
pub const FLAKY_PERIOD_S: i64 = 5 * 3600;

/// NVML's clocks-event bits the demo sets.
const IDLE: f64 = 1.0;
const SW_POWER_CAP: f64 = 4.0;
const HW_SLOWDOWN_THERMAL: f64 = 8.0 + 64.0;
/// Above this draw (W) an H100 SXM sits at its software power cap.
const POWER_CAP_W: f64 = 600.0;

/// What the health series of one GPU add: the JSON lines written, their samples, and XID change
/// points `(epoch seconds, code)` for the caller's XID series.
pub struct HealthLines {
    pub samples: usize,
    pub xid_points: Vec<(i64, u32)>,
}

/// The health series of GPU `gpu` of `node` at `stamps_ms`, from its power draw at each (W), written
/// to `out` with `labels(name)` as each line's labels.
pub fn health_series(
    out: &mut String,
    node: &str,
    gpu: u16,
    stamps_ms: &[i64],
    power_w: &[f64],
    labels: impl Fn(&str) -> serde_json::Value,
) -> HealthLines {
    let flaky = node == FLAKY_NODE && gpu == FLAKY_GPU;
    let seed = super::fnv(node) ^ u64::from(gpu);
    // Corrected errors a healthy GPU carries from its past (a few), and a remapped row or two.
    let sbe_base = (seed % 7) as f64;
    let correctable_rows = seed.is_multiple_of(3) as u8 as f64;
    let mut fields: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut xid_points = Vec::new();
    let (mut power_ns, mut thermal_ns, mut sbe, mut dbe, mut uncorrectable_rows) = (0.0, 0.0, sbe_base, 0.0, 0.0);
    let mut last_fault = None;
    for (index, (&ms, &power)) in stamps_ms.iter().zip(power_w).enumerate() {
        let t = ms / 1000;
        let step_ns = index.checked_sub(1).map_or(0.0, |before| (ms - stamps_ms[before]) as f64 * 1e6);
        // The flaky GPU overheats for the first 20 minutes of every hour.
        let hot = flaky && t.rem_euclid(3600) < 1200;
        let mut reasons = if power < 150.0 { IDLE } else { 0.0 };
        if power >= POWER_CAP_W {
            reasons += SW_POWER_CAP;
            power_ns += step_ns;
        }
        if hot {
            reasons += HW_SLOWDOWN_THERMAL;
            thermal_ns += step_ns;
        }
        let fault = t.div_euclid(FLAKY_PERIOD_S);
        if flaky {
            sbe += 3.0;
            if last_fault.is_some_and(|last| last != fault) {
                dbe += 1.0;
                uncorrectable_rows += 1.0;
                // The exporter's last XID, shown for its 5 min window, then "No Error" again.
                xid_points.push((t, 48));
                xid_points.push((t + 300, 0));
            }
            last_fault = Some(fault);
        }
        // A remap waits for the GPU's reset, which the flaky GPU never gets.
        let pending = if uncorrectable_rows > 0.0 { 1.0 } else { 0.0 };
        for (name, value) in [
            ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", reasons),
            ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", sbe - sbe_base),
            ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", dbe),
            ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", sbe),
            ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", dbe),
            ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", correctable_rows),
            ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", uncorrectable_rows),
            ("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0.0),
            ("DCGM_FI_DEV_ROW_REMAP_PENDING", pending),
            ("DCGM_FI_DEV_POWER_VIOLATION", power_ns.round()),
            ("DCGM_FI_DEV_THERMAL_VIOLATION", thermal_ns.round()),
        ] {
            fields.entry(name).or_default().push(value);
        }
    }
    let mut samples = 0;
    for (name, values) in &fields {
        samples += super::line(out, labels(name), values, stamps_ms);
    }
    HealthLines { samples, xid_points }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(out: &str, name: &str) -> Vec<f64> {
        out.lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("JSON line"))
            .find(|line| line["metric"]["__name__"] == name)
            .map(|line| line["values"].as_array().expect("values").iter().filter_map(|v| v.as_f64()).collect())
            .unwrap_or_else(|| panic!("no {name}"))
    }

    fn labels(name: &str) -> serde_json::Value {
        serde_json::json!({"__name__": name, "gpu": "5", "Hostname": "n"})
    }

    #[test]
    fn a_healthy_gpu_idles_or_sits_at_its_power_cap_with_no_uncorrectable_errors() {
        let stamps: Vec<i64> = (0..240).map(|i| i * 30_000).collect();
        let power: Vec<f64> = (0..240).map(|i| if i < 120 { 90.0 } else { 680.0 }).collect();
        let mut out = String::new();
        let lines = health_series(&mut out, "gpu001", 0, &stamps, &power, labels);
        assert!(lines.xid_points.is_empty());
        assert_eq!(lines.samples, 11 * 240);
        let reasons = read(&out, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS");
        assert_eq!((reasons[0], reasons[239]), (IDLE, SW_POWER_CAP));
        assert!(read(&out, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL").iter().all(|&v| v == 0.0));
        assert!(read(&out, "DCGM_FI_DEV_THERMAL_VIOLATION").iter().all(|&v| v == 0.0));
        // 120 scrapes 30 s apart at the cap, in ns.
        assert_eq!(read(&out, "DCGM_FI_DEV_POWER_VIOLATION")[239], 120.0 * 30e9);
    }

    #[test]
    fn the_flaky_node_keeps_faulting_hot_with_uncorrectable_errors_and_xid_48() {
        let stamps: Vec<i64> = (0..(12 * 120)).map(|i| i * 30_000).collect();
        let power = vec![400.0; stamps.len()];
        let mut out = String::new();
        let lines = health_series(&mut out, FLAKY_NODE, FLAKY_GPU, &stamps, &power, labels);
        // 12 hours: the 5 h and 10 h boundaries each bring an uncorrectable error and XID 48.
        assert_eq!(lines.xid_points, [(5 * 3600, 48), (5 * 3600 + 300, 0), (10 * 3600, 48), (10 * 3600 + 300, 0)]);
        let dbe = read(&out, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL");
        assert_eq!(dbe.last(), Some(&2.0));
        assert_eq!(read(&out, "DCGM_FI_DEV_ROW_REMAP_PENDING").last(), Some(&1.0));
        let reasons = read(&out, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS");
        assert_eq!(reasons[0], HW_SLOWDOWN_THERMAL, "hot in the first minutes of the hour");
        assert_eq!(reasons[60], 0.0, "30 minutes in: cool, busy, below the cap");
        assert!(read(&out, "DCGM_FI_DEV_THERMAL_VIOLATION").last().is_some_and(|&ns| ns > 0.0));
        // Another GPU of the same node stays healthy.
        let mut other = String::new();
        assert!(health_series(&mut other, FLAKY_NODE, 0, &stamps, &power, labels).xid_points.is_empty());
    }
}

//! Slurm's text encodings of the generated rows: time limits, node index ranges, array bitmaps, TRES lists.

use std::fmt::Write as _;

use slurmlens::domain::hostlist::Hostlist;

use super::NICE_LIMITS;

pub(super) fn nice_limit_at_least(minutes: f64) -> u32 {
    NICE_LIMITS.iter().copied().find(|&limit| f64::from(limit) >= minutes).unwrap_or(10080)
}

pub(super) fn format_time_limit(minutes: u32) -> String {
    let days = minutes / 1440;
    let hours = (minutes % 1440) / 60;
    let mins = minutes % 60;
    if days > 0 { format!("{days}-{hours:02}:{mins:02}:00") } else { format!("{hours:02}:{mins:02}:00") }
}

pub(super) fn runs(sorted: &[u16]) -> Vec<(u32, u32)> {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &index in sorted {
        let index = u32::from(index);
        match runs.last_mut() {
            Some((_, run_end)) if *run_end + 1 == index => *run_end = index,
            _ => runs.push((index, index)),
        }
    }
    runs
}

/// Compressed hostlist of 0-based node indices (`gpu[001-004,010]`, `gpu005`) as sacct prints it, and
/// `None assigned` for none.
pub(super) fn hostlist(nodes: &[u16], width: usize) -> String {
    if nodes.is_empty() {
        return "None assigned".to_string();
    }
    Hostlist::from_hosts(nodes.iter().map(|&node| node_name(node, width))).compress()
}

/// The name of the node at a 0-based index, zero-padded to `width` digits: `gpu001`.
pub(super) fn node_name(node: u16, width: usize) -> String {
    format!("gpu{:0width$}", u32::from(node) + 1)
}

/// Bit-index ranges (`0-3,9`) of 0-based node indices, as in `node_inx`.
pub(super) fn node_inx(nodes: &[u16]) -> String {
    let mut text = String::new();
    for (position, (first, last)) in runs(nodes).into_iter().enumerate() {
        if position > 0 {
            text.push(',');
        }
        if first == last {
            let _ = write!(text, "{first}");
        } else {
            let _ = write!(text, "{first}-{last}");
        }
    }
    text
}

/// Slurm's hex bitmap (`0x3FF`): bit i = array task i, most significant nibble first.
pub(super) fn hex_bitmap(bits: &[bool]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let nibbles = bits.len().div_ceil(4).max(1);
    let mut text = String::from("0x");
    for nibble in (0..nibbles).rev() {
        let mut value = 0usize;
        for bit in 0..4 {
            let index = nibble * 4 + bit;
            if index < bits.len() && bits[index] {
                value |= 1 << bit;
            }
        }
        text.push(char::from(HEX[value]));
    }
    text
}

/// `id=count` list in ascending id order.
pub(super) fn tres_string(pairs: &mut [(u32, u64)]) -> String {
    pairs.sort_unstable_by_key(|pair| pair.0);
    let mut text = String::new();
    for (position, (id, count)) in pairs.iter().enumerate() {
        if position > 0 {
            text.push(',');
        }
        let _ = write!(text, "{id}={count}");
    }
    text
}

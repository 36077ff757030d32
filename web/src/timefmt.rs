//! Time formatting that needs no zone (durations, RFC 3339, offsets); times in the viewer's zone are
//! [`crate::clock::Zone`]'s.

use chrono::DateTime;

/// `2026-11-29 12:03Z`: compact UTC, for messages that name their zone.
pub fn utc_short(epoch: i64) -> String {
    DateTime::from_timestamp(epoch, 0).map(|t| t.format("%Y-%m-%d %H:%MZ").to_string()).unwrap_or_default()
}

/// RFC 3339 for `datetime=` attributes and exports.
pub fn rfc3339(epoch: i64) -> String {
    DateTime::from_timestamp(epoch, 0).map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string()).unwrap_or_default()
}

/// An axis label at a local time: `21:00`, or the date at midnight or for day-sized steps.
pub fn axis_label(epoch: i64, offset_minutes: i32, step: i64) -> String {
    let Some(local) = DateTime::from_timestamp(epoch + i64::from(offset_minutes) * 60, 0) else {
        return String::new();
    };
    let midnight = local.format("%H:%M").to_string() == "00:00";
    if step >= 86_400 || midnight { local.format("%b %d").to_string() } else { local.format("%H:%M").to_string() }
}

/// `UTC+09:00` for an offset in minutes.
pub fn zone_name(offset_minutes: i32) -> String {
    let sign = if offset_minutes < 0 { '-' } else { '+' };
    let magnitude = offset_minutes.unsigned_abs();
    format!("UTC{sign}{:02}:{:02}", magnitude / 60, magnitude % 60)
}

/// `3d 04:05:06`-style durations for hover text.
pub fn duration(seconds: i64) -> String {
    let seconds = seconds.max(0);
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    let clock = format!("{:02}:{:02}:{:02}", rest / 3600, rest % 3600 / 60, rest % 60);
    if days > 0 { format!("{days}d {clock}") } else { clock }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_times_and_offsets() {
        let epoch = 1_796_040_000; // 2026-11-30T12:00:00Z
        assert_eq!(utc_short(epoch), "2026-11-30 12:00Z");
        assert_eq!(rfc3339(epoch), "2026-11-30T12:00:00Z");
        assert_eq!(zone_name(-330), "UTC-05:30");
    }

    #[test]
    fn axis_labels_show_dates_at_midnight_and_for_day_steps() {
        let midnight_tokyo = 1_796_040_000 - 21 * 3600 + 24 * 3600;
        assert_eq!(axis_label(midnight_tokyo, 540, 3600), "Dec 01");
        assert_eq!(axis_label(1_796_040_000, 0, 3600), "12:00");
        assert_eq!(axis_label(1_796_040_000, 0, 86_400), "Nov 30");
    }

    #[test]
    fn durations_read_like_sacct() {
        assert_eq!(duration(3661), "01:01:01");
        assert_eq!(duration(90_061), "1d 01:01:01");
    }
}

//! Times as slurmdbd stores them (epoch seconds, 0 = unset) and durations as sacct prints them.

use chrono::{DateTime, Utc};

use super::ids::{INFINITE, NO_VAL};

/// Epoch seconds from slurmdbd; 0 (and anything unrepresentable) means "not set".
pub fn epoch(seconds: u64) -> Option<DateTime<Utc>> {
    if seconds == 0 {
        return None;
    }
    i64::try_from(seconds).ok().and_then(|s| DateTime::from_timestamp(s, 0))
}

/// sacct's `[D-]HH:MM:SS`.
/// An epoch second as ISO 8601 in UTC (`2026-11-30T12:21:40Z`), for text that names a moment; a time
/// out of range is written as the number it is.
pub fn iso_utc(seconds: i64) -> String {
    DateTime::<Utc>::from_timestamp(seconds, 0)
        .map_or_else(|| seconds.to_string(), |at| at.format("%Y-%m-%dT%H:%M:%SZ").to_string())
}

pub fn format_duration(seconds: u64) -> String {
    let days = seconds / 86_400;
    let hours = (seconds % 86_400) / 3600;
    let minutes = (seconds % 3600) / 60;
    let secs = seconds % 60;
    if days > 0 {
        format!("{days}-{hours:02}:{minutes:02}:{secs:02}")
    } else {
        format!("{hours:02}:{minutes:02}:{secs:02}")
    }
}

/// A job's time limit (`timelimit`, minutes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeLimit {
    Minutes(u32),
    Unlimited,
    /// NO_VAL: the job never got a limit (it did not start); sacct prints `Partition_Limit`.
    PartitionLimit,
}

impl TimeLimit {
    pub fn from_raw(raw: u32) -> Self {
        match raw {
            INFINITE => Self::Unlimited,
            NO_VAL => Self::PartitionLimit,
            minutes => Self::Minutes(minutes),
        }
    }

    pub fn minutes(self) -> Option<u32> {
        match self {
            Self::Minutes(minutes) => Some(minutes),
            _ => None,
        }
    }

    /// sacct's `Timelimit` column.
    pub fn display(self) -> String {
        match self {
            Self::Minutes(minutes) => format_duration(u64::from(minutes) * 60),
            Self::Unlimited => "UNLIMITED".to_string(),
            Self::PartitionLimit => "Partition_Limit".to_string(),
        }
    }
}

/// Elapsed seconds as slurmdbd computes them: until `end`, or until `now` while running, less suspended time.
pub fn elapsed_seconds(start: u64, end: u64, suspended: u64, now: u64) -> u64 {
    if start == 0 {
        return 0;
    }
    let until = if end == 0 { now } else { end };
    until.saturating_sub(start).saturating_sub(suspended)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_durations_like_sacct() {
        assert_eq!(format_duration(15), "00:00:15");
        assert_eq!(format_duration(3_661), "01:01:01");
        assert_eq!(format_duration(90_061), "1-01:01:01");
        assert_eq!(TimeLimit::from_raw(525_600).display(), "365-00:00:00");
        assert_eq!(TimeLimit::from_raw(INFINITE).display(), "UNLIMITED");
        assert_eq!(TimeLimit::from_raw(NO_VAL).display(), "Partition_Limit");
        assert_eq!(TimeLimit::from_raw(1).display(), "00:01:00");
    }

    #[test]
    fn zero_means_unset() {
        assert_eq!(epoch(0), None);
        assert_eq!(epoch(1_795_971_325).map(|t| t.timestamp()), Some(1_795_971_325));
        assert_eq!(elapsed_seconds(0, 0, 0, 100), 0);
        assert_eq!(elapsed_seconds(10, 0, 0, 100), 90);
        assert_eq!(elapsed_seconds(10, 40, 5, 100), 25);
    }
}

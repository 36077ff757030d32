//! A `DateTime<Utc>` written exactly as chrono's serde writes it (`2026-12-04T05:00:05Z`), in one
//! string rather than through chrono's formatter, which writes a character at a time: a listing or an
//! export writes four timestamps a job, and chrono's path was a twentieth of the export's CPU time.
//! Fractional seconds and years outside 0–9999 (never in slurmdbd) are left to chrono.

use chrono::{DateTime, Datelike, Timelike, Utc};
use serde::{Serialize, Serializer};

/// `YYYY-MM-DDTHH:MM:SSZ` for a time in whole seconds of the years 0–9999.
fn whole_seconds(at: &DateTime<Utc>) -> Option<[u8; 20]> {
    let year = u32::try_from(at.year()).ok().filter(|year| *year <= 9999)?;
    if at.nanosecond() != 0 {
        return None;
    }
    let mut text = *b"0000-00-00T00:00:00Z";
    let mut put = |at: usize, value: u32, digits: usize| {
        let mut value = value;
        for position in (at..at + digits).rev() {
            // A digit: `value % 10` is below ten.
            text[position] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, year, 4);
    put(5, at.month(), 2);
    put(8, at.day(), 2);
    put(11, at.hour(), 2);
    put(14, at.minute(), 2);
    put(17, at.second(), 2);
    Some(text)
}

/// Serializes `at` as chrono does.
pub(crate) fn serialize<S: Serializer>(at: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    match whole_seconds(at) {
        Some(text) => match std::str::from_utf8(&text) {
            Ok(text) => serializer.serialize_str(text),
            Err(_) => at.serialize(serializer),
        },
        None => at.serialize(serializer),
    }
}

/// [`serialize`] for an optional time.
pub(crate) fn serialize_option<S: Serializer>(at: &Option<DateTime<Utc>>, serializer: S) -> Result<S::Ok, S::Error> {
    match at {
        Some(at) => serialize(at, serializer),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written through [`serialize`], as JSON.
    struct Fast(DateTime<Utc>);

    impl Serialize for Fast {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serialize(&self.0, serializer)
        }
    }

    #[test]
    fn every_time_reads_as_chrono_writes_it() {
        let mut times: Vec<DateTime<Utc>> = [0, 1, 59, 951_782_400, 1_764_900_005, 1_800_000_000, 253_402_300_799]
            .into_iter()
            .filter_map(|seconds| DateTime::from_timestamp(seconds, 0))
            .collect();
        // Leap days, the turn of years, fractional seconds and years beyond 9999 (chrono's own path).
        times.extend(
            ["2024-02-29T23:59:59Z", "2000-12-31T00:00:00Z", "2026-12-05T05:00:05.250Z"]
                .map(|text| text.parse::<DateTime<Utc>>().expect("an RFC 3339 time")),
        );
        times.extend(DateTime::from_timestamp(253_402_300_800, 0));
        times.extend(DateTime::from_timestamp(-86_400, 0));
        for at in times {
            let expected = serde_json::to_string(&at).expect("chrono writes it");
            assert_eq!(serde_json::to_string(&Fast(at)).expect("written"), expected, "{at:?}");
        }
    }
}

//! SLUIDs (Slurm ≥ 26.05's lexicographically sortable unique ids of jobs): slurmdbd stores one as a
//! 64-bit number (`<cluster>_job_table.sluid`), cgroup/v2 names the job's directory by its text form,
//! `s` and 13 digits of Crockford's base 32 (most significant first), e.g. `s5K1KKYAYG5D00`.

use std::fmt;
use std::str::FromStr;

/// Crockford's base-32 digits (no I, L, O or U).
const DIGITS: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A job's SLUID. Zero is slurmdbd's "none" (rows written before 26.05) and is never a `Sluid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sluid(u64);

impl Sluid {
    /// The SLUID stored as `value`; `None` for slurmdbd's 0 (no SLUID).
    pub fn from_stored(value: u64) -> Option<Self> {
        (value != 0).then_some(Self(value))
    }

    /// The number slurmdbd stores.
    pub fn value(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Sluid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = [b's'; 14];
        for (position, slot) in text[1..].iter_mut().enumerate() {
            let shift = 5 * (12 - position);
            *slot = DIGITS[((self.0 >> shift) & 0x1f) as usize];
        }
        f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

/// Why a text is not a SLUID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a SLUID (s and 13 base-32 digits)")]
pub struct BadSluid(String);

impl FromStr for Sluid {
    type Err = BadSluid;

    /// Reads the text form as Slurm does: either case, and `O`, `I`, `L` for the digits they resemble.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadSluid(text.to_string());
        let digits = text.strip_prefix(['s', 'S']).filter(|digits| digits.len() == 13).ok_or_else(bad)?;
        let mut value: u64 = 0;
        for (position, byte) in digits.bytes().enumerate() {
            let digit = match byte.to_ascii_uppercase() {
                b'O' => 0,
                b'I' | b'L' => 1,
                upper => DIGITS.iter().position(|d| *d == upper).ok_or_else(bad)? as u64,
            };
            // The first digit carries the top 4 bits only (13 × 5 = 65).
            if position == 0 && digit > 0xf {
                return Err(bad());
            }
            value = (value << 5) | digit;
        }
        Sluid::from_stored(value).ok_or_else(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips_and_keeps_numeric_order() {
        for value in [1, 31, 32, 0x0123_4567_89ab_cdef, u64::MAX] {
            let sluid = Sluid::from_stored(value).expect("not zero");
            let text = sluid.to_string();
            assert_eq!(text.len(), 14);
            assert_eq!(text.parse::<Sluid>(), Ok(sluid), "{text}");
        }
        let (low, high) = (Sluid(1 << 40).to_string(), Sluid((1 << 40) + 1).to_string());
        assert!(low < high, "lexicographically sortable: {low} < {high}");
    }

    #[test]
    fn reads_cgroup_exporters_example_and_slurms_lenient_digits() {
        let sluid: Sluid = "s5K1KKYAYG5D00".parse().expect("the documented example");
        assert_eq!(sluid.to_string(), "s5K1KKYAYG5D00");
        assert_eq!("s5k1kkyayg5doo".parse::<Sluid>(), Ok(sluid), "lower case and O for 0");
        assert_eq!("s0000000000001".parse::<Sluid>().map(Sluid::value), Ok(1));
        assert_eq!("s000000000000I".parse::<Sluid>().map(Sluid::value), Ok(1));
    }

    #[test]
    fn refuses_what_is_not_a_sluid() {
        for text in ["", "s", "5K1KKYAYG5D00", "s5K1KKYAYG5D0", "s5K1KKYAYG5D000", "s5K1KKYAYG5DU0", "sZZZZZZZZZZZZZ"] {
            assert!(text.parse::<Sluid>().is_err(), "{text}");
        }
        assert!("s0000000000000".parse::<Sluid>().is_err(), "zero is slurmdbd's none");
        assert_eq!(Sluid::from_stored(0), None);
    }
}

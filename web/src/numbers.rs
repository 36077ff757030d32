//! The one way the pages write numbers: counts with thousands grouped (`48,732 jobs`), decimals the
//! same (`102,391.3 GPU-hours`), so that figures side by side read alike on every page.

/// `48,732`.
pub fn count(value: u64) -> String {
    group(&value.to_string())
}

/// `102,391.3` with `places` decimals (negative values keep their sign; not finite: `—`).
pub fn decimal(value: f64, places: usize) -> String {
    if !value.is_finite() {
        return "—".to_string();
    }
    let text = format!("{:.*}", places, value.abs());
    let (whole, fraction) =
        text.split_once('.').map_or((text.as_str(), None), |(whole, fraction)| (whole, Some(fraction)));
    let sign = if value < 0.0 && text.chars().any(|digit| digit.is_ascii_digit() && digit != '0') { "-" } else { "" };
    match fraction {
        Some(fraction) => format!("{sign}{}.{fraction}", group(whole)),
        None => format!("{sign}{}", group(whole)),
    }
}

/// Digits with a comma before each group of three from the right.
fn group(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_decimals_group_thousands_alike() {
        assert_eq!(count(48_732), "48,732");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(decimal(102_391.34, 1), "102,391.3");
        assert_eq!(decimal(238_232.0, 0), "238,232");
        assert_eq!(decimal(-1_234.5, 1), "-1,234.5");
        assert_eq!(decimal(-0.01, 1), "0.0");
        assert_eq!(decimal(f64::NAN, 1), "—");
    }
}

//! Time axis ticks for the Gantt and scrubber: a readable step for any zoom from an hour to 30 days.

/// Steps a time axis may use, in seconds, smallest first.
const STEPS: [i64; 14] = [
    60,
    5 * 60,
    10 * 60,
    15 * 60,
    30 * 60,
    3600,
    2 * 3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86_400,
    2 * 86_400,
    7 * 86_400,
    14 * 86_400,
];

/// One tick: its time (epoch seconds) and its x position in `[0, width]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tick {
    pub at: i64,
    pub x: f64,
}

/// The smallest step that keeps ticks at least `min_spacing` pixels apart across `width` pixels.
pub fn step_for(start: i64, end: i64, width: f64, min_spacing: f64) -> i64 {
    let span = (end - start).max(1) as f64;
    let seconds_per_pixel = span / width.max(1.0);
    STEPS.iter().copied().find(|&step| step as f64 / seconds_per_pixel >= min_spacing).unwrap_or(STEPS[STEPS.len() - 1])
}

/// Ticks on multiples of the chosen step (UTC-aligned), inside `[start, end]`.
pub fn ticks(start: i64, end: i64, width: f64, min_spacing: f64) -> Vec<Tick> {
    if end <= start || width <= 0.0 {
        return Vec::new();
    }
    let step = step_for(start, end, width, min_spacing);
    let first = start.div_euclid(step) * step + if start.rem_euclid(step) == 0 { 0 } else { step };
    let scale = width / (end - start) as f64;
    (0..)
        .map(|index| first + index * step)
        .take_while(|&at| at <= end)
        .map(|at| Tick { at, x: (at - start) as f64 * scale })
        .collect()
}

/// Ticks aligned to a zone `offset_seconds` east of UTC (midnights and hours of the viewer's clock).
pub fn ticks_in_zone(start: i64, end: i64, width: f64, min_spacing: f64, offset_seconds: i64) -> Vec<Tick> {
    ticks(start + offset_seconds, end + offset_seconds, width, min_spacing)
        .into_iter()
        .map(|tick| Tick { at: tick.at - offset_seconds, x: tick.x })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hour_on_1200_pixels_ticks_every_five_minutes() {
        let ticks = ticks(0, 3600, 1200.0, 80.0);
        assert_eq!(ticks.len(), 13);
        assert_eq!(ticks[1].at - ticks[0].at, 300);
        assert!((ticks[12].x - 1200.0).abs() < 1e-9);
    }

    #[test]
    fn thirty_days_tick_by_days_and_stay_apart() {
        let ticks = ticks(1_000, 30 * 86_400 + 1_000, 1200.0, 60.0);
        let step = ticks[1].at - ticks[0].at;
        assert!(step >= 86_400, "step {step}");
        assert!(ticks.windows(2).all(|pair| pair[1].x - pair[0].x >= 60.0));
        assert!(ticks.iter().all(|tick| tick.at % step == 0));
    }

    #[test]
    fn zone_ticks_fall_on_local_midnights() {
        let offset = 9 * 3600;
        let ticks = ticks_in_zone(0, 10 * 86_400, 1000.0, 60.0, offset);
        assert!(ticks.iter().all(|tick| (tick.at + offset) % 86_400 == 0));
    }

    #[test]
    fn empty_or_inverted_windows_have_no_ticks() {
        assert!(ticks(10, 10, 100.0, 10.0).is_empty());
        assert!(ticks(10, 5, 100.0, 10.0).is_empty());
    }
}

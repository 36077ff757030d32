//! One clock per viewer. Every time on every page (accounting fields, charts, forms, the grid, the
//! Gantt's axis, the moments named in verdicts) is shown in one zone: the one the viewer chose in the
//! header (a cookie), else the site's default (`time_zone` in the server's configuration), else UTC.
//! The server renders in that zone and the browser hydrates in the same one, read back from the page,
//! so the first paint and the interactive page agree. Formats are ISO 8601, 24-hour. The zones' rules
//! come from [`crate::tz`]: chrono-tz's tables on the server, the browser's own in the bundle.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, FixedOffset, NaiveDateTime};

use crate::timefmt;
use crate::tz::{Tz, UTC_NAMES};

/// The cookie holding the viewer's choice (an IANA zone name, or `UTC`).
pub const COOKIE: &str = "slurmlens_tz";
/// The `<meta name=…>` through which the server tells the browser the zone it rendered in.
pub const META: &str = "slurmlens-zone";
/// The `<meta name=…>` naming the site's default zone (offered in the header's choice).
pub const META_SITE: &str = "slurmlens-site-zone";

/// A time zone times are shown in: `UTC` or an IANA name (`Europe/Berlin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Zone(Tz);

impl Default for Zone {
    fn default() -> Self {
        Self::UTC
    }
}

/// A zone name that is not UTC or an IANA time zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownZone(pub String);

impl fmt::Display for UnknownZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown time zone `{}`: give UTC or an IANA name such as Europe/Berlin", self.0)
    }
}

impl std::error::Error for UnknownZone {}

impl FromStr for Zone {
    type Err = UnknownZone;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let name = text.trim();
        if name.eq_ignore_ascii_case("utc") || name == "Z" {
            return Ok(Self::UTC);
        }
        Tz::parse(name).map(Self).ok_or_else(|| UnknownZone(name.to_string()))
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Zone {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Zone {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Zone {
    pub const UTC: Self = Self(Tz::UTC);

    /// `UTC`, or the IANA name.
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// Whether this zone is UTC itself (not merely at offset 0 now, as London in winter).
    pub fn is_utc(self) -> bool {
        UTC_NAMES.contains(&self.name())
    }

    fn at(self, epoch: i64) -> Option<DateTime<FixedOffset>> {
        let offset = FixedOffset::east_opt(self.0.offset_seconds(epoch))?;
        DateTime::from_timestamp(epoch, 0).map(|at| at.with_timezone(&offset))
    }

    /// Minutes east of UTC at `epoch`.
    pub fn offset_minutes(self, epoch: i64) -> i32 {
        self.0.offset_seconds(epoch) / 60
    }

    /// `2026-11-30T13:21:05`: the wall time in this zone, as vmui's `g0.end_input` reads it.
    pub fn wall_time(self, epoch: i64) -> String {
        self.at(epoch).map(|at| at.format("%Y-%m-%dT%H:%M:%S").to_string()).unwrap_or_default()
    }

    /// `2026-11-30 13:21`.
    pub fn short(self, epoch: i64) -> String {
        self.at(epoch).map(|at| at.format("%Y-%m-%d %H:%M").to_string()).unwrap_or_default()
    }

    /// `2026-11-30 13:21:05 UTC+01:00` (`… UTC` in UTC).
    pub fn long(self, epoch: i64) -> String {
        let Some(at) = self.at(epoch) else { return String::new() };
        format!("{} {}", at.format("%Y-%m-%d %H:%M:%S"), self.offset_name(epoch))
    }

    /// The hover text of a time: [`Zone::long`], and the moment in UTC where the zone is another.
    pub fn hover(self, epoch: i64) -> String {
        if self.is_utc() { self.long(epoch) } else { format!("{} = {}", self.long(epoch), Self::UTC.long(epoch)) }
    }

    /// `UTC+01:00` at `epoch` (`UTC` in UTC).
    pub fn offset_name(self, epoch: i64) -> String {
        if self.is_utc() { "UTC".to_string() } else { timefmt::zone_name(self.offset_minutes(epoch)) }
    }

    /// What the header says: `Europe/Berlin (UTC+01:00)`, or `UTC`.
    pub fn label(self, epoch: i64) -> String {
        if self.is_utc() { "UTC".to_string() } else { format!("{} ({})", self.name(), self.offset_name(epoch)) }
    }

    /// A `datetime-local` field's value: `2026-11-30T13:21`.
    pub fn form_value(self, epoch: i64) -> String {
        self.at(epoch).map(|at| at.format("%Y-%m-%dT%H:%M").to_string()).unwrap_or_default()
    }

    /// A wall-clock time in this zone (`2026-11-30T13:21`, seconds optional, `T` or a space) as epoch
    /// seconds. A time the clocks skipped (spring forward) is `None`; one they passed twice (fall back)
    /// is its first passing.
    pub fn parse_local(self, text: &str) -> Option<i64> {
        let text = text.trim();
        let naive = ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"]
            .iter()
            .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())?;
        // The moment is the wall time less the offset in force then: try the offsets of half a day
        // before and after (a transition between them changes it), keep those that hold at the moment
        // they give; none hold in a skipped hour, both in a repeated one (the first passing is kept).
        let wall = naive.and_utc().timestamp();
        [wall - 43_200, wall + 43_200]
            .into_iter()
            .map(|probe| wall - i64::from(self.0.offset_seconds(probe)))
            .filter(|&moment| wall - moment == i64::from(self.0.offset_seconds(moment)))
            .min()
    }

    /// A time axis label: `21:00`, or the date at midnight or for day-sized steps.
    pub fn axis_label(self, epoch: i64, step: i64) -> String {
        timefmt::axis_label(epoch, self.offset_minutes(epoch), step)
    }

    /// `text` with each UTC stamp the API writes into sentences (`2026-11-30T12:21:40Z`) shown in this
    /// zone (`2026-11-30 13:21:40`), so a verdict's moments read on the same clock as the charts.
    pub fn restamp(self, text: &str) -> String {
        const LEN: usize = "2026-11-30T12:21:40Z".len();
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut at = 0;
        while at + LEN <= bytes.len() {
            let candidate = &bytes[at..at + LEN];
            let stamp = is_utc_stamp(candidate)
                .then(|| chrono::DateTime::parse_from_rfc3339(&text[at..at + LEN]).ok())
                .flatten();
            match stamp {
                Some(moment) => {
                    out.push_str(&text[copied..at]);
                    let epoch = moment.timestamp();
                    match self.at(epoch) {
                        Some(local) => out.push_str(&local.format("%Y-%m-%d %H:%M:%S").to_string()),
                        None => out.push_str(&text[at..at + LEN]),
                    }
                    at += LEN;
                    copied = at;
                }
                None => at += 1,
            }
        }
        out.push_str(&text[copied..]);
        out
    }
}

/// `dddd-dd-ddTdd:dd:ddZ`.
fn is_utc_stamp(bytes: &[u8]) -> bool {
    const SHAPE: &[u8] = b"0000-00-00T00:00:00Z";
    bytes.len() == SHAPE.len()
        && bytes
            .iter()
            .zip(SHAPE)
            .all(|(byte, shape)| if *shape == b'0' { byte.is_ascii_digit() } else { byte == shape })
}

/// The site's default zone, which the server provides to each render (from its configuration).
#[derive(Clone, Copy, Debug, Default)]
pub struct SiteZone(pub Zone);

/// The zone named by the `slurmlens_tz` cookie of a `Cookie:` header, if any and valid.
pub fn from_cookie_header(header: &str) -> Option<Zone> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .and_then(|(_, value)| value.trim_matches('"').parse().ok())
}

/// The zone a request's `slurmlens_tz` cookie names, if any and valid.
#[cfg(feature = "ssr")]
pub fn from_request(parts: &axum::http::request::Parts) -> Option<Zone> {
    parts
        .headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .find_map(|value| value.to_str().ok().and_then(from_cookie_header))
}

/// The zone of this render: on the server, the viewer's cookie, else the site's default; in the
/// browser, the zone the server rendered in (its `<meta>`), so hydration shows the same text.
pub fn viewer_zone() -> Zone {
    #[cfg(feature = "ssr")]
    {
        let cookie =
            leptos::prelude::use_context::<axum::http::request::Parts>().and_then(|parts| from_request(&parts));
        cookie.unwrap_or_else(|| site_zone().0)
    }
    #[cfg(not(feature = "ssr"))]
    {
        from_meta(META).unwrap_or_default()
    }
}

/// The site's default zone: on the server, from its configuration; in the browser, from the page.
pub fn site_zone() -> SiteZone {
    #[cfg(feature = "ssr")]
    {
        leptos::prelude::use_context::<SiteZone>().unwrap_or_default()
    }
    #[cfg(not(feature = "ssr"))]
    {
        SiteZone(from_meta(META_SITE).unwrap_or_default())
    }
}

/// The zone a `<meta name=…>` of the page names (in the browser; `None` elsewhere).
#[cfg(not(feature = "ssr"))]
#[cfg_attr(not(target_arch = "wasm32"), allow(unused_variables, reason = "read only in the browser"))]
fn from_meta(name: &str) -> Option<Zone> {
    #[cfg(target_arch = "wasm32")]
    {
        web_sys::window()
            .and_then(|window| window.document())
            .and_then(|document| document.query_selector(&format!("meta[name=\"{name}\"]")).ok().flatten())
            .and_then(|meta| meta.get_attribute("content"))
            .and_then(|zone| zone.parse().ok())
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        None
    }
}

/// The zone this page shows times in (provided by the app; UTC outside it).
pub fn use_zone() -> Zone {
    leptos::prelude::use_context::<Zone>().unwrap_or_default()
}

/// The browser's own zone, as `Intl` resolves it (`None` outside a browser or where it names none).
pub fn browser_zone() -> Option<Zone> {
    #[cfg(target_arch = "wasm32")]
    {
        let options =
            js_sys::Intl::DateTimeFormat::new(&js_sys::Array::new(), &js_sys::Object::new()).resolved_options();
        js_sys::Reflect::get(&options, &"timeZone".into()).ok()?.as_string()?.parse().ok()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOON_UTC: i64 = 1_796_040_000; // 2026-11-30T12:00:00Z

    #[test]
    fn parses_utc_and_iana_names_and_refuses_others() {
        assert_eq!("UTC".parse::<Zone>(), Ok(Zone::UTC));
        assert_eq!(" utc ".parse::<Zone>(), Ok(Zone::UTC));
        assert_eq!("Europe/Berlin".parse::<Zone>().map(Zone::name), Ok("Europe/Berlin"));
        assert_eq!("asia/tokyo".parse::<Zone>().map(Zone::name), Ok("Asia/Tokyo"));
        let error = "Mars/Olympus".parse::<Zone>().expect_err("not a zone");
        assert_eq!(
            error.to_string(),
            "unknown time zone `Mars/Olympus`: give UTC or an IANA name such as Europe/Berlin"
        );
        assert!("".parse::<Zone>().is_err());
    }

    #[test]
    fn formats_in_the_zone_with_its_offset_at_that_moment() {
        let berlin: Zone = "Europe/Berlin".parse().expect("a zone");
        assert_eq!(berlin.short(NOON_UTC), "2026-11-30 13:00");
        assert_eq!(berlin.long(NOON_UTC), "2026-11-30 13:00:00 UTC+01:00");
        assert_eq!(berlin.hover(NOON_UTC), "2026-11-30 13:00:00 UTC+01:00 = 2026-11-30 12:00:00 UTC");
        assert_eq!(berlin.label(NOON_UTC), "Europe/Berlin (UTC+01:00)");
        // Summer time: the offset is the one at that moment.
        let july = NOON_UTC - 150 * 86_400;
        assert_eq!(berlin.offset_minutes(july), 120);
        assert_eq!(Zone::UTC.long(NOON_UTC), "2026-11-30 12:00:00 UTC");
        assert_eq!(Zone::UTC.hover(NOON_UTC), "2026-11-30 12:00:00 UTC");
        assert_eq!("Asia/Kolkata".parse::<Zone>().expect("a zone").short(NOON_UTC), "2026-11-30 17:30");
        // London is at offset 0 in winter but is not UTC.
        let london: Zone = "Europe/London".parse().expect("a zone");
        assert_eq!(london.label(NOON_UTC), "Europe/London (UTC+00:00)");
    }

    #[test]
    fn form_values_round_trip_and_skipped_times_are_refused() {
        let berlin: Zone = "Europe/Berlin".parse().expect("a zone");
        assert_eq!(berlin.form_value(NOON_UTC), "2026-11-30T13:00");
        assert_eq!(berlin.parse_local("2026-11-30T13:00"), Some(NOON_UTC));
        assert_eq!(berlin.parse_local("2026-11-30 13:00:30"), Some(NOON_UTC + 30));
        assert_eq!(Zone::UTC.parse_local("2026-11-30T12:00"), Some(NOON_UTC));
        // 2026-03-29 02:30 never happened in Berlin; 2026-10-25 02:30 happened twice (the first is +02:00).
        assert_eq!(berlin.parse_local("2026-03-29T02:30"), None);
        assert_eq!(berlin.parse_local("2026-10-25T02:30"), Some(1_792_888_200));
        assert_eq!(berlin.parse_local("yesterday"), None);
        // The southern summer starts in October; Lord Howe moves its clocks by half an hour.
        let sydney: Zone = "Australia/Sydney".parse().expect("a zone");
        assert_eq!(sydney.parse_local("2026-10-04T02:30"), None);
        assert_eq!(sydney.parse_local("2026-10-04T03:00"), Some(1_791_043_200));
        let lord_howe: Zone = "Australia/Lord_Howe".parse().expect("a zone");
        assert_eq!(lord_howe.parse_local("2026-10-04T02:15"), None);
        assert_eq!(lord_howe.offset_minutes(NOON_UTC), 660);
    }

    #[test]
    fn utc_stamps_in_sentences_are_restamped_and_nothing_else_changes() {
        let tokyo: Zone = "Asia/Tokyo".parse().expect("a zone");
        let text = "XID 79 at 2026-11-30T12:00:00Z on gpu073; 2026-11-30T12:00:00 stays, job 2026-11-30T25:00:00Z too";
        assert_eq!(
            tokyo.restamp(text),
            "XID 79 at 2026-11-30 21:00:00 on gpu073; 2026-11-30T12:00:00 stays, job 2026-11-30T25:00:00Z too"
        );
        assert_eq!(Zone::UTC.restamp("at 2026-11-30T12:00:00Z."), "at 2026-11-30 12:00:00.");
        assert_eq!(tokyo.restamp("ü 2026-11-30T12:00:00Z ü"), "ü 2026-11-30 21:00:00 ü");
    }

    #[test]
    fn the_cookie_names_the_zone_and_a_bad_one_is_ignored() {
        assert_eq!(from_cookie_header("a=1; slurmlens_tz=Asia/Tokyo; b=2").map(Zone::name), Some("Asia/Tokyo"));
        assert_eq!(from_cookie_header("slurmlens_tz=Nowhere/Else"), None);
        assert_eq!(from_cookie_header("other=UTC"), None);
    }
}

//! The time-zone database behind [`crate::clock::Zone`]: IANA's, as chrono-tz compiles it into the
//! server (and the native tests), and as the browser itself holds it (`Intl.DateTimeFormat`) in the
//! wasm bundle, which so carries no second copy of the tables (148 KB of its 833 KB gzip). Both answer
//! the two questions a zone is asked: its name, and its offset from UTC at a moment.

pub use imp::Tz;

/// Names that mean UTC itself, not merely a zone at offset 0 now (London in winter).
pub const UTC_NAMES: [&str; 6] = ["UTC", "Etc/UTC", "Etc/UCT", "Etc/Universal", "Etc/Zulu", "Zulu"];

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use std::str::FromStr;

    use chrono::{Offset, TimeZone};

    /// An IANA time zone, from chrono-tz's tables.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Tz(chrono_tz::Tz);

    impl Tz {
        pub const UTC: Self = Self(chrono_tz::Tz::UTC);

        /// The zone of an IANA name, its case ignored.
        pub fn parse(name: &str) -> Option<Self> {
            chrono_tz::Tz::from_str(name).or_else(|_| chrono_tz::Tz::from_str_insensitive(name)).ok().map(Self)
        }

        pub fn name(self) -> &'static str {
            self.0.name()
        }

        /// Seconds east of UTC at `epoch`.
        pub fn offset_seconds(self, epoch: i64) -> i32 {
            chrono::DateTime::from_timestamp(epoch, 0)
                .map_or(0, |at| self.0.offset_from_utc_datetime(&at.naive_utc()).fix().local_minus_utc())
        }
    }
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use js_sys::{Array, Function, Intl, Object, Reflect};
    use wasm_bindgen::{JsCast, JsValue};

    /// An IANA time zone, as the browser's `Intl` knows it: its name (interned: a page meets few).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Tz(&'static str);

    /// Offsets change only at a whole quarter hour of UTC in every zone in use, so one answer per
    /// quarter hour serves every moment of it.
    const SLOT_S: i64 = 900;

    thread_local! {
        /// One formatter per zone met (making one is the costly part).
        static FORMATS: RefCell<Vec<(&'static str, Intl::DateTimeFormat)>> = const { RefCell::new(Vec::new()) };
        static OFFSETS: RefCell<HashMap<(&'static str, i64), i32>> = RefCell::new(HashMap::new());
    }

    /// The parts of a moment a formatter gives, in the order they are read.
    const FIELDS: [&str; 6] = ["year", "month", "day", "hour", "minute", "second"];

    /// The zone met before under `name`, with its formatter.
    fn known(name: &str) -> Option<(&'static str, Intl::DateTimeFormat)> {
        FORMATS.with(|formats| formats.borrow().iter().find(|(n, _)| *n == name).cloned())
    }

    impl Tz {
        pub const UTC: Self = Self("UTC");

        /// The zone of an IANA name the browser knows, its case ignored; named as given unless only
        /// its case differs from the browser's name (whose own canonical names may be older ones, as
        /// `Asia/Calcutta` for `Asia/Kolkata`, and must not rename what the server rendered).
        pub fn parse(name: &str) -> Option<Self> {
            if let Some((name, _)) = known(name) {
                return Some(Self(name));
            }
            let format = formatter(name)?;
            let resolved = Reflect::get(&format.resolved_options(), &"timeZone".into()).ok()?.as_string()?;
            let name: &'static str = if resolved.eq_ignore_ascii_case(name) {
                Box::leak(resolved.into_boxed_str())
            } else {
                Box::leak(name.to_string().into_boxed_str())
            };
            FORMATS.with(|formats| formats.borrow_mut().push((name, format)));
            Some(Self(name))
        }

        pub fn name(self) -> &'static str {
            self.0
        }

        /// Seconds east of UTC at `epoch`: the zone's wall time then, less the moment.
        pub fn offset_seconds(self, epoch: i64) -> i32 {
            let slot = epoch.div_euclid(SLOT_S) * SLOT_S;
            if let Some(offset) = OFFSETS.with(|offsets| offsets.borrow().get(&(self.0, slot)).copied()) {
                return offset;
            }
            let offset = self.wall_seconds(slot).map_or(0, |wall| (wall - slot) as i32);
            OFFSETS.with(|offsets| offsets.borrow_mut().insert((self.0, slot), offset));
            offset
        }

        /// The wall time at `epoch` in this zone, read as if it were UTC.
        fn wall_seconds(self, epoch: i64) -> Option<i64> {
            // Every zone but the `UTC` constant was parsed, which kept its formatter.
            let format = match known(self.0) {
                Some((_, format)) => format,
                None => {
                    let format = formatter(self.0)?;
                    FORMATS.with(|formats| formats.borrow_mut().push((self.0, format.clone())));
                    format
                }
            };
            let date = js_sys::Date::new(&JsValue::from_f64(epoch as f64 * 1000.0));
            let parts = format.format_to_parts(&date);
            let mut fields = [0i64; 6];
            for part in parts.iter() {
                let kind = Reflect::get(&part, &"type".into()).ok()?.as_string()?;
                let index = FIELDS.iter().position(|field| *field == kind);
                if let Some(index) = index {
                    fields[index] = Reflect::get(&part, &"value".into()).ok()?.as_string()?.parse().ok()?;
                }
            }
            let [year, month, day, hour, minute, second] = fields;
            let date = chrono::NaiveDate::from_ymd_opt(year as i32, month as u32, day as u32)?;
            let wall = date.and_hms_opt(hour as u32, minute as u32, second as u32)?;
            Some(wall.and_utc().timestamp())
        }
    }

    /// `new Intl.DateTimeFormat("en-US", {timeZone: name, …})` with every field numeric on a 24-hour
    /// clock; `None` where the browser knows no such zone (it throws a `RangeError`).
    fn formatter(name: &str) -> Option<Intl::DateTimeFormat> {
        let options = Object::new();
        let set = |key: &str, value: &str| Reflect::set(&options, &key.into(), &value.into()).ok();
        set("timeZone", name)?;
        set("hourCycle", "h23")?;
        for field in FIELDS {
            set(field, "numeric")?;
        }
        let intl = Reflect::get(&js_sys::global(), &"Intl".into()).ok()?;
        let constructor: Function = Reflect::get(&intl, &"DateTimeFormat".into()).ok()?.dyn_into().ok()?;
        let arguments = Array::of2(&"en-US".into(), &options);
        Reflect::construct(&constructor, &arguments).ok()?.dyn_into().ok()
    }
}

//! Counting an ingest body's records on the wire, before any record is built, and decoding off the
//! async workers. A 16 KB gzip body can inflate to 16 MiB of empty OTLP log records (two bytes each,
//! eight million of them); decoded, they would take gigabytes. The passes here walk the protobuf tags
//! or the JSON tokens, allocate nothing per record, and stop one record past the limit.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use tokio::sync::Semaphore;

use super::error::ApiError;

/// Bodies decoded at once, each on a blocking thread: a decode of 16 MiB takes a CPU for a while.
const DECODES_AT_ONCE: usize = 2;
static DECODES: Semaphore = Semaphore::const_new(DECODES_AT_ONCE);

/// More records than the limit: the body is refused before it is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverLimit;

/// Runs `decode` on a blocking thread, at most [`DECODES_AT_ONCE`] at a time, so a large body never
/// holds an async worker (and the other requests on it).
pub async fn off_runtime<T, F>(decode: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
{
    let _permit = DECODES.acquire().await.map_err(|_| ApiError::Internal("the decoders' semaphore closed".into()))?;
    tokio::task::spawn_blocking(decode).await.map_err(|e| ApiError::Internal(format!("decoding a body failed: {e}")))?
}

/// One protobuf varint, advancing `bytes`; `None` when it runs off the end or past 64 bits.
fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The payloads of a protobuf message's length-delimited fields numbered `number`, in order. A
/// malformed message ends the walk quietly: the decoder that follows names the fault.
fn len_fields(mut bytes: &[u8], number: u64) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        while !bytes.is_empty() {
            let key = varint(&mut bytes)?;
            match key & 7 {
                0 => {
                    varint(&mut bytes)?;
                }
                1 => bytes = bytes.get(8..)?,
                5 => bytes = bytes.get(4..)?,
                2 => {
                    let length = usize::try_from(varint(&mut bytes)?).ok()?;
                    let payload = bytes.get(..length)?;
                    bytes = &bytes[length..];
                    if key >> 3 == number {
                        return Some(payload);
                    }
                }
                _ => return None,
            }
        }
        None
    })
}

/// The log records of a protobuf `ExportLogsServiceRequest` (`resource_logs` = 1, their `scope_logs`
/// = 2, theirs `log_records` = 2), counted up to `limit`.
pub fn protobuf_log_records(body: &[u8], limit: usize) -> Result<usize, OverLimit> {
    let mut count = 0usize;
    for resource in len_fields(body, 1) {
        for scope in len_fields(resource, 2) {
            for _record in len_fields(scope, 2) {
                count += 1;
                if count > limit {
                    return Err(OverLimit);
                }
            }
        }
    }
    Ok(count)
}

/// OTLP/JSON's path to the log records (the proto names are accepted too).
pub const OTLP_JSON_LOG_RECORDS: &[&[&str]] =
    &[&["resourceLogs", "resource_logs"], &["scopeLogs", "scope_logs"], &["logRecords", "log_records"]];

/// The elements of the arrays found along `path` (at each step, the object's member named by one of
/// the step's names; every element of an array is an object for the next step), counted up to `limit`.
/// A body that is not such JSON counts what was seen before the fault: the decoder names it.
pub fn json_elements(body: &[u8], path: &[&[&str]], limit: usize) -> Result<usize, OverLimit> {
    let tally = Tally { count: Cell::new(0), limit, over: Cell::new(false) };
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let _ = Level { path, tally: &tally }.deserialize(&mut deserializer);
    if tally.over.get() { Err(OverLimit) } else { Ok(tally.count.get()) }
}

struct Tally {
    count: Cell<usize>,
    limit: usize,
    over: Cell<bool>,
}

/// An object along the path; with no path left, one counted element (skipped without building it).
struct Level<'a> {
    path: &'a [&'a [&'a str]],
    tally: &'a Tally,
}

impl<'de> DeserializeSeed<'de> for Level<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.path.is_empty() {
            <IgnoredAny as serde::Deserialize>::deserialize(deserializer)?;
            let count = self.tally.count.get() + 1;
            self.tally.count.set(count);
            if count > self.tally.limit {
                self.tally.over.set(true);
                return Err(de::Error::custom("over the record limit"));
            }
            return Ok(());
        }
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Level<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if self.path[0].contains(&key.as_ref()) {
                map.next_value_seed(Elements(Level { path: &self.path[1..], tally: self.tally }))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// An array whose every element is the next [`Level`] (`null` is an empty one).
struct Elements<'a>(Level<'a>);

impl<'de> DeserializeSeed<'de> for Elements<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Elements<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an array")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Level { path: self.0.path, tally: self.0.tally })?.is_some() {}
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(tag: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        prost::encoding::encode_varint(payload.len() as u64, &mut out);
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn counts_protobuf_log_records_without_decoding_them() {
        let scope = [field(0x0a, b"scope"), b"\x12\x00".repeat(3), field(0x1a, b"https://schema")].concat();
        let resource = [field(0x0a, b"resource"), field(0x12, &scope), field(0x12, &scope)].concat();
        let body = [field(0x0a, &resource), field(0x0a, &resource)].concat();
        assert_eq!(protobuf_log_records(&body, 100), Ok(12));
        assert_eq!(protobuf_log_records(&body, 12), Ok(12));
        assert_eq!(protobuf_log_records(&body, 11), Err(OverLimit));
        // A varint (field 3) and a fixed64 (field 4) beside them are skipped.
        let with_scalars = [b"\x18\x96\x01".as_slice(), b"\x21\x01\x02\x03\x04\x05\x06\x07\x08", &body].concat();
        assert_eq!(protobuf_log_records(&with_scalars, 100), Ok(12));
        assert_eq!(protobuf_log_records(&body[..body.len() - 3], 100), Ok(6), "a truncated body counts what it has");
        assert_eq!(protobuf_log_records(b"", 100), Ok(0));
    }

    #[test]
    fn counts_json_elements_along_a_path_and_stops_past_the_limit() {
        let body =
            br#"{"resourceLogs":[{"resource":{"x":[1,2]},"scopeLogs":[{"logRecords":[{},{"body":{"stringValue":"a"}}]},
            {"log_records":[{}]}]},{"scopeLogs":null}],"other":[{}]}"#;
        assert_eq!(json_elements(body, OTLP_JSON_LOG_RECORDS, 10), Ok(3));
        assert_eq!(json_elements(body, OTLP_JSON_LOG_RECORDS, 2), Err(OverLimit));
        let traces = br#"{"cluster":"lab","node":"n1","records":[{},{},{}]}"#;
        assert_eq!(json_elements(traces, &[&["records"]], 3), Ok(3));
        assert_eq!(json_elements(traces, &[&["records"]], 2), Err(OverLimit));
        assert_eq!(json_elements(b"[1, 2", &[&["records"]], 2), Ok(0), "not JSON of that shape: the decoder says so");
        let mut bomb = String::from(r#"{"records":["#);
        bomb.push_str(&"{},".repeat(100_000));
        bomb.push_str("{}]}");
        assert_eq!(json_elements(bomb.as_bytes(), &[&["records"]], 10_000), Err(OverLimit));
    }
}

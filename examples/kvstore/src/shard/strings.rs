//! The string commands beyond `GET`/`SET`/`INCRBY` on a shard: `GETEX`, `INCRBYFLOAT`,
//! `GETRANGE`, `SETRANGE`, `APPEND`, `STRLEN`, with Redis 7.0's answers and errors.

use super::{Answer, Entry, Shard, Ttl, Value};
use crate::resp::MAX_BULK;

/// Redis's text for a string that would grow past the largest value.
pub const TOO_LARGE: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// A float as Redis reads one (no blanks around it, not NaN).
pub fn parse_float(bytes: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty() || text.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    if lower.contains("nan") {
        return None;
    }
    text.parse::<f64>().ok()
}

/// A float as Redis writes `INCRBYFLOAT`'s result: plain decimal, no exponent, no trailing
/// zeros. Redis computes in `long double`; rounding to the 15 digits a double holds exactly
/// gives its text for the sums of short decimals that clients add (0.1 + 0.2 is 0.3).
pub fn format_float(v: f64) -> String {
    let rounded: f64 = format!("{v:.14e}").parse().unwrap_or(v);
    let text = format!("{rounded}");
    if text == "-0" { "0".into() } else { text }
}

impl Shard {
    pub(super) fn get_ex(&mut self, key: &[u8], ttl: Option<Ttl>, now: i64) -> Answer {
        let value = match self.live_str(key, now) {
            Ok(Some(v)) => v.clone(),
            Ok(None) => return Answer::Nil,
            Err(e) => return e,
        };
        let Some(e) = self.map.get_mut(key) else {
            return Answer::Nil;
        };
        match ttl {
            None | Some(Ttl::Keep) => {}
            Some(Ttl::Clear) => e.expires = None,
            Some(Ttl::Expire(when)) => {
                let at = when.resolve(now);
                if at <= now {
                    self.map.remove(key);
                } else {
                    e.expires = Some(at);
                    self.with_ttl += 1;
                }
            }
        }
        Answer::Bulk(value)
    }

    pub(super) fn incr_by_float(&mut self, key: Vec<u8>, by: f64, now: i64) -> Answer {
        let current = match self.live_str(&key, now) {
            Ok(None) => 0.0,
            Ok(Some(v)) => match parse_float(v) {
                Some(v) => v,
                None => return Answer::Error("ERR value is not a valid float".into()),
            },
            Err(e) => return e,
        };
        let next = current + by;
        if !next.is_finite() {
            return Answer::Error("ERR increment would produce NaN or Infinity".into());
        }
        let text = format_float(next).into_bytes();
        self.put_keeping_ttl(key, text.clone());
        Answer::Bulk(text)
    }

    /// Sets `key` to the string `value`, keeping its time to live if it has one.
    pub(super) fn put_keeping_ttl(&mut self, key: Vec<u8>, value: Vec<u8>) {
        match self.map.get_mut(&key) {
            Some(e) => e.value = Value::Str(value),
            None => {
                self.map.insert(key, Entry::string(value));
            }
        }
    }

    pub(super) fn get_range(&mut self, key: &[u8], start: i64, end: i64, now: i64) -> Answer {
        let v = match self.live_str(key, now) {
            Ok(Some(v)) => v,
            Ok(None) => return Answer::Bulk(Vec::new()),
            Err(e) => return e,
        };
        let len = v.len() as i64;
        if (start < 0 && end < 0 && start > end) || len == 0 {
            return Answer::Bulk(Vec::new());
        }
        let start = if start < 0 {
            (len + start).max(0)
        } else {
            start
        };
        let end = if end < 0 { (len + end).max(0) } else { end }.min(len - 1);
        if start > end {
            return Answer::Bulk(Vec::new());
        }
        Answer::Bulk(v[start as usize..=end as usize].to_vec())
    }

    pub(super) fn set_range(
        &mut self,
        key: Vec<u8>,
        offset: usize,
        value: &[u8],
        now: i64,
    ) -> Answer {
        let len = match self.live_str(&key, now) {
            Ok(v) => v.map(|v| v.len()),
            Err(e) => return e,
        };
        if value.is_empty() {
            return Answer::Int(len.unwrap_or(0) as i64);
        }
        if offset + value.len() > MAX_BULK {
            return Answer::Error(TOO_LARGE.into());
        }
        let mut bytes = match self.map.get_mut(&key) {
            Some(Entry {
                value: Value::Str(v) | Value::Raw(v),
                ..
            }) => std::mem::take(v),
            _ => Vec::new(),
        };
        if bytes.len() < offset + value.len() {
            bytes.resize(offset + value.len(), 0);
        }
        bytes[offset..offset + value.len()].copy_from_slice(value);
        let n = bytes.len();
        self.put_keeping_ttl(key.clone(), bytes);
        self.make_raw(&key);
        Answer::Int(n as i64)
    }

    pub(super) fn append(&mut self, key: Vec<u8>, value: &[u8], now: i64) -> Answer {
        let len = match self.live_str(&key, now) {
            Ok(v) => v.map_or(0, |v| v.len()),
            Err(e) => return e,
        };
        if len + value.len() > MAX_BULK {
            return Answer::Error(TOO_LARGE.into());
        }
        match self.map.get_mut(&key) {
            Some(e) => {
                if let Value::Str(v) | Value::Raw(v) = &mut e.value {
                    v.extend_from_slice(value);
                }
                // An existing string is changed in place: Redis's `raw` from then on.
                if let Value::Str(v) = &mut e.value {
                    e.value = Value::Raw(std::mem::take(v));
                }
            }
            None => self.put_keeping_ttl(key, value.to_vec()),
        }
        Answer::Int((len + value.len()) as i64)
    }

    /// Marks the string at `key` as changed in place.
    fn make_raw(&mut self, key: &[u8]) {
        if let Some(e) = self.map.get_mut(key)
            && let Value::Str(v) = &mut e.value
        {
            e.value = Value::Raw(std::mem::take(v));
        }
    }

    pub(super) fn str_len(&mut self, key: &[u8], now: i64) -> Answer {
        match self.live_str(key, now) {
            Ok(v) => Answer::Int(v.map_or(0, |v| v.len()) as i64),
            Err(e) => e,
        }
    }
}

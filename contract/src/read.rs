//! Reading a setting: from the environment ([`get`]) or from a given value ([`get_from`]), as a
//! typed value, with an error that names the variable, its value and what is allowed; and the
//! launcher's check of a `NAME=VALUE` against the table ([`check`]), with a "did you mean".
//!
//! A value that is unset or blank means the setting's default. A value that is not UTF-8 is an
//! error, never "unset": the user set it, and ignoring it would run with a default they did not
//! ask for.

use std::ffi::OsString;
use std::net::IpAddr;
use std::time::Duration;

use crate::setting::{Fallback, Setting, Value};

/// A setting whose value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    /// The variable.
    pub name: &'static str,
    /// Its value (lossily, when it is not UTF-8).
    pub value: String,
    /// What is allowed instead, starting with "expected".
    pub expected: String,
}

impl std::fmt::Display for SettingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}={:?} is not valid: {}",
            self.name, self.value, self.expected
        )
    }
}

impl std::error::Error for SettingError {}

/// A type a setting may be read as. `Option<T>` reads `None` for an unset setting whose default
/// is [`Fallback::Decided`]; reading such a setting as a bare `T`, or a setting as a type of
/// another kind, is a mistake in the reading code and panics naming the setting.
pub trait FromSetting: Sized {
    /// The value of `setting`, `None` when unset without a fixed default.
    fn from_value(setting: &Setting, value: Option<Value>) -> Self;
}

fn misread(setting: &Setting, what: &str) -> ! {
    panic!(
        "{} ({}) cannot be read as {what}: fix the reading code or the table",
        setting.name,
        setting.kind.type_name()
    )
}

fn present(setting: &Setting, value: Option<Value>, what: &str) -> Value {
    value.unwrap_or_else(|| misread(setting, &format!("{what} (it has no fixed default)")))
}

impl<T: FromSetting> FromSetting for Option<T> {
    fn from_value(setting: &Setting, value: Option<Value>) -> Self {
        value.map(|v| T::from_value(setting, Some(v)))
    }
}

impl FromSetting for bool {
    fn from_value(setting: &Setting, value: Option<Value>) -> Self {
        match present(setting, value, "bool") {
            Value::Switch(b) => b,
            _ => misread(setting, "bool"),
        }
    }
}

impl FromSetting for u64 {
    fn from_value(setting: &Setting, value: Option<Value>) -> Self {
        match present(setting, value, "a number") {
            Value::Number(n) => n,
            _ => misread(setting, "a number"),
        }
    }
}

/// Numbers narrower than `u64`: the table's range must fit the type.
macro_rules! narrow {
    ($($t:ty),*) => {$(
        impl FromSetting for $t {
            fn from_value(setting: &Setting, value: Option<Value>) -> Self {
                let n = u64::from_value(setting, value);
                <$t>::try_from(n).unwrap_or_else(|_| misread(setting, stringify!($t)))
            }
        }
    )*};
}
narrow!(usize, u32, u8);

impl FromSetting for Duration {
    fn from_value(setting: &Setting, value: Option<Value>) -> Self {
        match present(setting, value, "a duration") {
            Value::Seconds(s) => Duration::from_secs_f64(s),
            Value::Number(n) => Duration::from_secs(n),
            _ => misread(setting, "a duration"),
        }
    }
}

impl FromSetting for IpAddr {
    fn from_value(setting: &Setting, value: Option<Value>) -> Self {
        match present(setting, value, "an address") {
            Value::Address(a) => a,
            _ => misread(setting, "an address"),
        }
    }
}

impl FromSetting for &'static str {
    fn from_value(setting: &Setting, value: Option<Value>) -> Self {
        match present(setting, value, "a choice") {
            Value::Choice(w) => w,
            _ => misread(setting, "a choice"),
        }
    }
}

impl FromSetting for String {
    fn from_value(setting: &Setting, value: Option<Value>) -> Self {
        match present(setting, value, "text") {
            Value::Text(t) => t,
            Value::Choice(w) => w.to_string(),
            _ => misread(setting, "text"),
        }
    }
}

/// `setting` as the process environment gives it, or its default.
///
/// # Errors
/// A [`SettingError`] when the value is set, not blank, and not allowed (or not UTF-8).
pub fn get<T: FromSetting>(setting: &Setting) -> Result<T, SettingError> {
    let raw = std::env::var_os(setting.name);
    get_from(setting, raw.map(OsString::into_string))
}

/// `setting` from the environment, or its default when unset, blank or not allowed: for code
/// that runs after its layer has refused every bad value at start ([`check_env`]), so a bad
/// value cannot reach it.
pub fn value<T: FromSetting>(setting: &Setting) -> T {
    get(setting).unwrap_or_else(|_| default(setting))
}

/// `setting`'s default (see [`FromSetting`] for a setting without a fixed one).
pub fn default<T: FromSetting>(setting: &Setting) -> T {
    get_from(setting, None).unwrap_or_else(|e| unreachable!("a default is never read: {e}"))
}

/// Every setting of `settings` as the environment gives it: the first one set to a value it
/// does not take is an error. A layer calls it when it starts, before any of its code reads a
/// setting with [`value`].
///
/// # Errors
/// The [`SettingError`] of the first such setting.
pub fn check_env<'a>(settings: impl IntoIterator<Item = &'a Setting>) -> Result<(), SettingError> {
    for s in settings {
        if let Some(raw) = std::env::var_os(s.name) {
            get_from::<Option<Value>>(s, Some(raw.into_string()))?;
        }
    }
    Ok(())
}

impl FromSetting for Value {
    fn from_value(setting: &Setting, value: Option<Value>) -> Self {
        present(setting, value, "a value")
    }
}

/// `setting` from `raw` (`None`: unset; `Err`: set but not UTF-8), or its default: the reader
/// of callers that take their variables from elsewhere than the process environment.
///
/// # Errors
/// As [`get`].
pub fn get_from<T: FromSetting>(
    setting: &Setting,
    raw: Option<Result<String, OsString>>,
) -> Result<T, SettingError> {
    let text = match raw {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(v)) => {
            return Err(SettingError {
                name: setting.name,
                value: v.to_string_lossy().into_owned(),
                expected: "expected UTF-8 text".into(),
            });
        }
    };
    let value = match text.filter(|t| !t.trim().is_empty()) {
        Some(t) => Some(setting.kind.parse(&t).map_err(|expected| SettingError {
            name: setting.name,
            value: t.clone(),
            expected,
        })?),
        None => match setting.default {
            Fallback::Value(d) => Some(setting.kind.parse(d).unwrap_or_else(|e| {
                panic!(
                    "{}'s default {d:?} is not valid ({e}): fix the table",
                    setting.name
                )
            })),
            Fallback::Decided(_) => None,
        },
    };
    Ok(T::from_value(setting, value))
}

/// Why a launcher refuses a `NAME=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// A `GSM_*` name no setting has; the closest one, when one is close.
    Unknown {
        /// The name given.
        name: String,
        /// The setting it may have meant.
        suggestion: Option<&'static str>,
    },
    /// A known setting with a value it does not take.
    Invalid(SettingError),
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::Unknown { name, suggestion } => {
                write!(f, "{name} is not a Gossamer setting")?;
                match suggestion {
                    Some(s) => write!(f, "; did you mean {s}?"),
                    None => write!(f, " (docs/settings.md lists them)"),
                }
            }
            CheckError::Invalid(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for CheckError {}

/// Checks `name=value` against the table: names outside `GSM_*` pass, an unknown `GSM_*` name
/// or a value its setting does not take is refused. A blank value passes (it means the default).
///
/// # Errors
/// A [`CheckError`] saying which.
pub fn check(name: &str, value: &str) -> Result<(), CheckError> {
    if !name.starts_with("GSM_") {
        return Ok(());
    }
    let Some(setting) = crate::table::find(name) else {
        return Err(CheckError::Unknown {
            name: name.to_string(),
            suggestion: suggest(name),
        });
    };
    if value.trim().is_empty() {
        return Ok(());
    }
    setting.kind.parse(value).map(drop).map_err(|expected| {
        CheckError::Invalid(SettingError {
            name: setting.name,
            value: value.to_string(),
            expected,
        })
    })
}

/// The setting whose name is closest to `name`, if it is close: at most 2 edits for long names,
/// 1 for short ones (after `GSM_`), ties going to the first in the table.
pub fn suggest(name: &str) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    let budget = if upper.len() > 10 { 2 } else { 1 };
    crate::table::ALL
        .iter()
        .map(|s| (edits(&upper, s.name), s.name))
        .filter(|(d, _)| *d <= budget)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// The Levenshtein distance between `a` and `b` (insertions, deletions, substitutions).
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = (diag + usize::from(ca != *cb)).min(up + 1).min(row[j] + 1);
            diag = up;
        }
    }
    row[b.len()]
}

#[cfg(test)]
pub(crate) fn distance(a: &str, b: &str) -> usize {
    edits(a, b)
}

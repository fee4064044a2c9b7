//! gsmrun's environment as the plan reads it. [`super::prepare`] reads every variable through an
//! [`Environment`], never `std::env`: tests hand it any environment they like, and what a plan
//! holds depends on nothing but its arguments and this snapshot. `run` takes the snapshot once,
//! before preparing, and reads no variable after.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// A snapshot of environment variables: names and values as the kernel gave them (not
/// necessarily UTF-8).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    vars: BTreeMap<OsString, OsString>,
}

impl Environment {
    /// This process's environment, now.
    pub fn of_process() -> Environment {
        Environment::from_pairs(std::env::vars_os())
    }

    /// An environment of these variables; of a name given twice, the later value counts.
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Environment
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        Environment {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// The value of `name` when it is set and UTF-8, as `std::env::var` gives it.
    pub fn var(&self, name: &str) -> Option<String> {
        self.var_os(name)?.to_str().map(str::to_string)
    }

    /// The value of `name` when it is set, whatever its bytes.
    pub fn var_os(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// The names that are UTF-8, in byte order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.vars.keys().filter_map(|k| k.to_str())
    }

    /// The directory for temporary files, as `std::env::temp_dir` finds it on Unix: `TMPDIR`,
    /// else `/tmp`.
    pub fn temp_dir(&self) -> PathBuf {
        self.var_os("TMPDIR")
            .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
    }
}

//! What `gsmrun` and the Gossamer runtime agree on, written once for both: every `GSM_*`
//! setting (its name, type, default, allowed values, a line of doc and the layer that reads it),
//! a typed reader that refuses a bad value naming the variable, the value and what is allowed,
//! and the launch contract (the variables `gsmrun` sets, the stage bytes a rank reports, the
//! names of shared-memory segments, the fabric names).
//!
//! It only names, parses and checks; it reads the process environment only through [`get`] and
//! starts nothing. The reference page `docs/settings.md` is generated from [`table::ALL`] by
//! `cargo run -p gsm-contract --bin settings-doc`.

pub mod contract;
pub mod doc;
pub mod read;
pub mod setting;
pub mod table;

pub use read::{
    CheckError, FromSetting, SettingError, check, check_env, default, get, get_from, suggest, value,
};
pub use setting::{Fallback, Kind, Layer, Setting, Value};

#[cfg(test)]
mod tests;

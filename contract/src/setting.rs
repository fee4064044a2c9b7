//! One setting of the table: its name, the kind of value it takes, its default, its doc and the
//! layer that reads it; and how a value of each kind is parsed and described.
//!
//! It does not read the environment ([`crate::read`] does) and lists no settings
//! ([`crate::table`] does).

/// A `GSM_*` environment variable a user or `gsmrun` may set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    /// The variable, `GSM_…`.
    pub name: &'static str,
    /// What values it takes.
    pub kind: Kind,
    /// What holds when it is unset or blank.
    pub default: Fallback,
    /// What it does, in a sentence or two (the reference page shows it).
    pub doc: &'static str,
    /// Who reads it.
    pub layer: Layer,
}

/// The values a setting takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// On or off: `1`/`true`/`on`/`yes` or `0`/`false`/`off`/`no`, in any case.
    Switch,
    /// A whole number in decimal digits, no suffix, from `min` to `max`; `unit` names what is
    /// counted in messages ("workers").
    Count {
        /// Smallest value allowed.
        min: u64,
        /// Largest value allowed.
        max: u64,
        /// What is counted, plural.
        unit: &'static str,
    },
    /// Bytes, optionally with a `K`, `M` or `G` suffix (powers of 1024), from `min` to `max`,
    /// a multiple of `multiple`.
    Size {
        /// Smallest value allowed.
        min: u64,
        /// Largest value allowed.
        max: u64,
        /// The value must be a multiple of this (1: any).
        multiple: u64,
    },
    /// Seconds, decimals allowed, above 0 and at most `max`.
    Seconds {
        /// Largest value allowed.
        max: u64,
    },
    /// One of these words, in any case (the first spelling of each is the canonical one).
    Choice(&'static [&'static str]),
    /// An IP address (v4 or v6).
    Address,
    /// Any text; what it means is the reader's business (a log filter, a provider name).
    Text,
}

/// What holds when a setting is unset or blank (`export GSM_X=` keeps the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// This value, written as a user would write it; it must parse as the setting's kind.
    Value(&'static str),
    /// No fixed value: the reader decides, as said here (read it as an `Option`).
    Decided(&'static str),
}

/// Which layer reads a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Layer {
    /// `Config::from_env` (libgsm `config.rs`): a run's shape.
    Config,
    /// The runtime's start, its watch threads and its log (libgsm `runtime/`).
    Runtime,
    /// The workers' scheduler and idle rule (libgsm `worker/`).
    Worker,
    /// The fabrics between ranks (libgsm `fabric/`).
    Fabric,
    /// The collectives' switch points (`gsm-collectives`, `tuning.rs`).
    Collectives,
    /// Set by `gsmrun` or its rank wrapper for every rank: the launch contract, not for users.
    Launcher,
    /// Read by `gsmrun` itself.
    Gsmrun,
}

impl Layer {
    /// Every layer, in the order of the reference page.
    pub const ALL: [Layer; 7] = [
        Layer::Config,
        Layer::Runtime,
        Layer::Worker,
        Layer::Fabric,
        Layer::Collectives,
        Layer::Gsmrun,
        Layer::Launcher,
    ];

    /// Where the reading code is, for the reference page.
    pub fn reader(self) -> &'static str {
        match self {
            Layer::Config => "libgsm `config.rs` (`Config::from_env`)",
            Layer::Runtime => "libgsm `runtime/`",
            Layer::Worker => "libgsm `worker/`",
            Layer::Fabric => "libgsm `fabric/`",
            Layer::Collectives => "gsm-collectives `tuning.rs`",
            Layer::Launcher => "set by `gsmrun` and its rank wrapper; read by the runtime",
            Layer::Gsmrun => "`gsmrun`",
        }
    }

    /// A short title for the layer's section of the reference page.
    pub fn title(self) -> &'static str {
        match self {
            Layer::Config => "A run's shape (`Config`)",
            Layer::Runtime => "The runtime",
            Layer::Worker => "Workers",
            Layer::Fabric => "Fabrics",
            Layer::Collectives => "Collectives",
            Layer::Launcher => "The launch contract (set by `gsmrun`)",
            Layer::Gsmrun => "`gsmrun` itself",
        }
    }
}

/// A parsed value, checked against its setting's kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Of a [`Kind::Switch`].
    Switch(bool),
    /// Of a [`Kind::Count`] or [`Kind::Size`] (bytes).
    Number(u64),
    /// Of a [`Kind::Seconds`].
    Seconds(f64),
    /// Of a [`Kind::Choice`]: the canonical spelling.
    Choice(&'static str),
    /// Of a [`Kind::Address`].
    Address(std::net::IpAddr),
    /// Of a [`Kind::Text`], trimmed.
    Text(String),
}

/// A whole number in decimal digits; one too large for a `u64` is `u64::MAX`, so that the range
/// check names the range (a 30-digit count is out of range, not junk).
fn digits(v: &str) -> Option<u64> {
    (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .then(|| v.parse::<u64>().unwrap_or(u64::MAX))
}

/// Bytes with an optional `K`/`M`/`G` suffix.
fn size(v: &str) -> Option<u64> {
    let (num, shift) = match v.as_bytes().last()? {
        b'k' | b'K' => (&v[..v.len() - 1], 10),
        b'm' | b'M' => (&v[..v.len() - 1], 20),
        b'g' | b'G' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    Some(digits(num)?.saturating_mul(1 << shift))
}

/// `n` bytes as a user would write them: `64 KiB`, `1 GiB`, `4000 bytes`.
pub fn bytes(n: u64) -> String {
    match n {
        0 => "0".into(),
        1 => "1 byte".into(),
        n if n % (1 << 30) == 0 => format!("{} GiB", n >> 30),
        n if n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

impl Kind {
    /// What values are allowed, as the reference page and every error say it.
    pub fn allowed(&self) -> String {
        match *self {
            Kind::Switch => "1/true/on/yes or 0/false/off/no".into(),
            Kind::Count { min, max, unit } => {
                format!("a whole number of {unit} from {min} to {max}")
            }
            Kind::Size { min, max, multiple } => {
                let mut s = if max == u64::MAX {
                    format!("bytes (K/M/G suffixes), at least {}", bytes(min))
                } else {
                    format!("{} to {} (K/M/G suffixes)", bytes(min), bytes(max))
                };
                if multiple > 1 {
                    s.push_str(&format!(", a multiple of {multiple}"));
                }
                s
            }
            Kind::Seconds { max } => format!("seconds above 0, at most {max} (decimals allowed)"),
            Kind::Choice(words) => format!("one of {}", words.join(", ")),
            Kind::Address => "an IP address".into(),
            Kind::Text => "any text".into(),
        }
    }

    /// The type column of the reference page.
    pub fn type_name(&self) -> &'static str {
        match self {
            Kind::Switch => "switch",
            Kind::Count { .. } => "count",
            Kind::Size { .. } => "size",
            Kind::Seconds { .. } => "seconds",
            Kind::Choice(_) => "choice",
            Kind::Address => "address",
            Kind::Text => "text",
        }
    }

    /// `text` (not blank) parsed and checked; `Err` holds what is allowed instead.
    pub fn parse(&self, text: &str) -> Result<Value, String> {
        let t = text.trim();
        let refused = || Err(format!("expected {}", self.allowed()));
        match *self {
            Kind::Switch => match t.to_ascii_lowercase().as_str() {
                "1" | "true" | "on" | "yes" => Ok(Value::Switch(true)),
                "0" | "false" | "off" | "no" => Ok(Value::Switch(false)),
                _ => refused(),
            },
            Kind::Count { min, max, .. } => match digits(t) {
                Some(n) if (min..=max).contains(&n) => Ok(Value::Number(n)),
                _ => refused(),
            },
            Kind::Size { min, max, multiple } => match size(t) {
                Some(n) if (min..=max).contains(&n) && n % multiple.max(1) == 0 => {
                    Ok(Value::Number(n))
                }
                _ => refused(),
            },
            Kind::Seconds { max } => match t.parse::<f64>() {
                Ok(s) if s > 0.0 && s <= max as f64 => Ok(Value::Seconds(s)),
                _ => refused(),
            },
            Kind::Choice(words) => {
                let lower = t.to_ascii_lowercase();
                match words.iter().find(|w| **w == lower) {
                    Some(w) => Ok(Value::Choice(w)),
                    None => refused(),
                }
            }
            Kind::Address => t.parse().map(Value::Address).or_else(|_| refused()),
            Kind::Text => Ok(Value::Text(t.to_string())),
        }
    }
}

impl Setting {
    /// Whether a number set in code (not read from the environment) is one this setting allows:
    /// `Err` says what is allowed. Only counts and sizes hold numbers; any other kind refuses.
    pub fn check_number(&self, n: u64) -> Result<(), String> {
        let fits = match self.kind {
            Kind::Count { min, max, .. } => (min..=max).contains(&n),
            Kind::Size { min, max, multiple } => {
                (min..=max).contains(&n) && n % multiple.max(1) == 0
            }
            _ => false,
        };
        if fits {
            Ok(())
        } else {
            Err(format!("expected {}", self.kind.allowed()))
        }
    }

    /// The default as the reference page shows it.
    pub fn default_text(&self) -> &'static str {
        match self.default {
            Fallback::Value(v) | Fallback::Decided(v) => v,
        }
    }
}

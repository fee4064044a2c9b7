//! Redis's glob patterns (`KEYS`, `SCAN MATCH`, `CONFIG GET`): `*`, `?`, `[abc]`, `[^a-z]` and
//! `\` to take the next byte as it is, over binary strings.
//!
//! Matching is the greedy walk with one remembered `*` (a later `*` replaces the earlier one, as
//! whatever the earlier one would take the later one can take too), so it costs at most the
//! pattern's length times the string's, whatever the pattern: Redis's recursive matcher
//! backtracks exponentially on a run of `*` before a byte that does not match, and such a
//! pattern must not hold a worker.

/// One position of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// `*`: any run of bytes (consecutive stars are one).
    Star,
    /// `?`: any one byte.
    Any,
    /// A byte to equal (case-insensitively when asked).
    Byte(u8),
    /// `[...]`: one byte within (or, negated, outside) these inclusive ranges.
    Class {
        negated: bool,
        ranges: Vec<(u8, u8)>,
    },
}

/// A compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    tokens: Vec<Token>,
    nocase: bool,
}

impl Pattern {
    /// Compiles `pattern` as Redis reads it (an unterminated `[` takes the rest of the pattern,
    /// a trailing `\` is itself).
    pub fn new(pattern: &[u8], nocase: bool) -> Self {
        let mut tokens = Vec::with_capacity(pattern.len());
        let mut i = 0;
        while i < pattern.len() {
            let token = match pattern[i] {
                b'*' => {
                    while pattern.get(i + 1) == Some(&b'*') {
                        i += 1;
                    }
                    Token::Star
                }
                b'?' => Token::Any,
                b'[' => {
                    let (token, end) = class(pattern, i + 1, nocase);
                    i = end;
                    token
                }
                b'\\' if i + 1 < pattern.len() => {
                    i += 1;
                    Token::Byte(pattern[i])
                }
                b => Token::Byte(b),
            };
            tokens.push(token);
            i += 1;
        }
        Self { tokens, nocase }
    }

    /// Whether the pattern matches all of `s`.
    pub fn matches(&self, s: &[u8]) -> bool {
        let tokens = &self.tokens;
        let (mut p, mut i) = (0, 0);
        // After the last `*` seen: the token after it, and where in `s` it started to match.
        let mut star: Option<(usize, usize)> = None;
        while i < s.len() {
            match tokens.get(p) {
                Some(Token::Star) => {
                    star = Some((p + 1, i));
                    p += 1;
                }
                Some(t) if self.one(t, s[i]) => {
                    p += 1;
                    i += 1;
                }
                _ => match star {
                    // The star takes one more byte; the rest is matched again from there.
                    Some((after, from)) => {
                        star = Some((after, from + 1));
                        p = after;
                        i = from + 1;
                    }
                    None => return false,
                },
            }
        }
        tokens[p..].iter().all(|t| *t == Token::Star)
    }

    fn one(&self, token: &Token, c: u8) -> bool {
        let fold = |b: u8| {
            if self.nocase {
                b.to_ascii_lowercase()
            } else {
                b
            }
        };
        match token {
            Token::Star | Token::Any => true,
            Token::Byte(b) => fold(*b) == fold(c),
            Token::Class { negated, ranges } => {
                let c = fold(c);
                ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&c)) != *negated
            }
        }
    }
}

/// The class whose contents start at `from` (after its `[`), and the index of its `]` (or of
/// the pattern's last byte when it has none).
fn class(pattern: &[u8], from: usize, nocase: bool) -> (Token, usize) {
    let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    let mut i = from;
    let negated = pattern.get(i) == Some(&b'^');
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    loop {
        match pattern.get(i) {
            None => return (Token::Class { negated, ranges }, pattern.len() - 1),
            Some(b']') => return (Token::Class { negated, ranges }, i),
            Some(b'\\') if i + 1 < pattern.len() => {
                i += 1;
                ranges.push((fold(pattern[i]), fold(pattern[i])));
            }
            Some(&lo) if i + 2 < pattern.len() && pattern[i + 1] == b'-' => {
                let hi = pattern[i + 2];
                let (lo, hi) = (fold(lo.min(hi)), fold(lo.max(hi)));
                ranges.push((lo.min(hi), lo.max(hi)));
                i += 2;
            }
            Some(&b) => ranges.push((fold(b), fold(b))),
        }
        i += 1;
    }
}

/// Whether `pattern` matches all of `s` (see [`Pattern`]).
pub fn matches(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    Pattern::new(pattern, nocase).matches(s)
}

#[cfg(test)]
mod tests;

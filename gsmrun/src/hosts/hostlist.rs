//! Slurm hostlist expansion: `n[08-11]`, `rack[1-2]-n[1-2]`, `n[1,3-4]x`. This module turns one
//! parsed pattern into host names; it does not merge duplicates (that is the caller's merge rule).
//!
//! Slurm's rules, as in its `src/common/hostlist.c`, which we follow exactly:
//! - The zero padding of a range is the width of its low bound as written: `n[008-11]` gives
//!   n008..n011, `n[099-101]` gives n099 n100 n101, `n[8-011]` gives n8..n11.
//! - Several bracket groups give their cartesian product in Slurm's order: the last group varies
//!   fastest; the groups before it are expanded from the right, so for two groups the first varies
//!   slowest (`rack[1-2]-n[1-2]` → rack1-n1 rack1-n2 rack2-n1 rack2-n2) and for three groups
//!   `a[1-2]b[1-2]c[1-2]` the middle one is outermost, as Slurm's recursion does.
//! - Duplicates are kept (`n[1,1]` is n1 twice).
//!
//! Where we differ from Slurm, on purpose: an unclosed `[` (Slurm silently appends `]` and makes
//! a host literally named `n[1-2]`) and a descending range (`n[5-3]`) are errors. A `-` without a
//! high bound is a syntax error. One pattern expands to at most [`MAX_EXPANSION`] names (Slurm's
//! own `MAX_RANGE` is 64 Ki hosts per range), so `n[1-99999999]` is refused before any allocation.

use super::HostsError;
use super::grammar::Rule;
use super::report::Source;
use pest::iterators::Pair;

/// Most names one hostlist pattern may expand to (64 Ki, Slurm's `MAX_RANGE`).
pub const MAX_EXPANSION: u64 = 64 * 1024;
/// Longest host name accepted after expansion (DNS names are at most 253 characters).
pub const MAX_NAME_LEN: usize = 255;

struct Range {
    lo: u64,
    hi: u64,
    width: usize,
}

enum Piece<'a> {
    Lit(&'a str),
    Group(Vec<Range>),
}

/// Expand one `pattern` pair into names, in Slurm's order.
pub(crate) fn expand(src: &Source<'_>, pattern: Pair<'_, Rule>) -> Result<Vec<String>, HostsError> {
    let start = pattern.as_span().start();
    let whole = pattern.as_str();
    let mut pieces = Vec::new();
    for p in pattern.into_inner() {
        match p.as_rule() {
            Rule::name_chars => pieces.push(Piece::Lit(p.as_str())),
            Rule::group => {
                let mut ranges = Vec::new();
                for g in p.into_inner() {
                    match g.as_rule() {
                        Rule::unclosed_group => {
                            return Err(src.error(
                                g.as_span().start(),
                                g.as_str().chars().count(),
                                "this `[` is never closed",
                                "close the range with `]` (Slurm would silently make a host \
                                 literally named like this; gsmrun refuses); no spaces inside `[...]`",
                            ));
                        }
                        Rule::range => ranges.push(range(src, g)?),
                        _ => {}
                    }
                }
                pieces.push(Piece::Group(ranges));
            }
            _ => {}
        }
    }
    let groups: Vec<usize> = (0..pieces.len())
        .filter(|&i| matches!(pieces[i], Piece::Group(_)))
        .collect();
    // Count before allocating anything.
    let mut total: u64 = 1;
    for &gi in &groups {
        if let Piece::Group(rs) = &pieces[gi] {
            let n = rs.iter().fold(0u64, |acc, r| {
                acc.saturating_add((r.hi - r.lo).saturating_add(1))
            });
            total = total.saturating_mul(n);
        }
    }
    if total > MAX_EXPANSION {
        return Err(src.error(
            start,
            whole.chars().count(),
            &format!(
                "this host range expands to {total} names, more than the limit of {MAX_EXPANSION}"
            ),
            "check the bounds of the range; split a real allocation this large over several lines",
        ));
    }
    // Values of each group, formatted once.
    let values: Vec<Vec<String>> = groups
        .iter()
        .map(|&gi| match &pieces[gi] {
            Piece::Group(rs) => rs
                .iter()
                .flat_map(|r| (r.lo..=r.hi).map(move |v| format!("{v:0w$}", w = r.width)))
                .collect(),
            Piece::Lit(_) => Vec::new(),
        })
        .collect();
    // Nesting order, outermost first: groups k-2, k-3, …, 0, then k-1 (see the module doc).
    let k = groups.len();
    let order: Vec<usize> = if k >= 2 {
        (0..k - 1).rev().chain([k - 1]).collect()
    } else {
        (0..k).collect()
    };
    let mut idx = vec![0usize; k];
    let mut out = Vec::with_capacity(total as usize);
    loop {
        let mut name = String::new();
        let mut g = 0;
        for p in &pieces {
            match p {
                Piece::Lit(s) => name.push_str(s),
                Piece::Group(_) => {
                    name.push_str(&values[g][idx[g]]);
                    g += 1;
                }
            }
        }
        if name.len() > MAX_NAME_LEN {
            return Err(src.error(
                start,
                whole.chars().count(),
                &format!("host name longer than {MAX_NAME_LEN} characters"),
                "check the host name and the zero padding of its ranges",
            ));
        }
        out.push(name);
        // Odometer step over `order`, innermost last.
        let mut pos = order.len();
        loop {
            if pos == 0 {
                return Ok(out);
            }
            pos -= 1;
            let gi = order[pos];
            idx[gi] += 1;
            if idx[gi] < values[gi].len() {
                break;
            }
            idx[gi] = 0;
        }
    }
}

fn range(src: &Source<'_>, pair: Pair<'_, Rule>) -> Result<Range, HostsError> {
    let start = pair.as_span().start();
    let text = pair.as_str();
    let mut nums = pair.into_inner().filter(|p| p.as_rule() == Rule::number);
    let (lo_pair, hi_pair) = match (nums.next(), nums.next()) {
        (Some(lo), hi) => (lo, hi),
        (None, _) => {
            return Err(src.error(
                start,
                1,
                "empty range",
                "write a number such as `1` or `1-4`",
            ));
        }
    };
    let lo = number(src, &lo_pair)?;
    let hi = match &hi_pair {
        Some(h) => number(src, h)?,
        None => lo,
    };
    if lo > hi {
        return Err(src.error(
            start,
            text.chars().count(),
            &format!("descending range `{text}`"),
            &format!("write the low bound first: `{hi}-{lo}`"),
        ));
    }
    let width = lo_pair.as_str().len();
    if width > MAX_NAME_LEN {
        return Err(src.error(
            start,
            width,
            "number wider than a host name may be",
            "remove the extra zeros",
        ));
    }
    Ok(Range { lo, hi, width })
}

fn number(src: &Source<'_>, pair: &Pair<'_, Rule>) -> Result<u64, HostsError> {
    let s = pair.as_str();
    let digits = s.trim_start_matches('0');
    // Leading zeros do not make a number too large.
    if digits.is_empty() {
        return Ok(0);
    }
    digits.parse::<u64>().map_err(|_| {
        src.error(
            pair.as_span().start(),
            s.chars().count(),
            "number too large in a host range",
            "host numbers must fit in 64 bits; check the range",
        )
    })
}

//! `LCS`: the longest common subsequence of two strings by the textbook dynamic programme (a
//! table of the LCS lengths of every pair of prefixes, walked back from the end), as Redis 7.0
//! computes it, so the matches it reports and their order are Redis's. The table is bounded as
//! Redis bounds it (by `proto-max-bulk-len` bytes of 32-bit cells), which also bounds the time a
//! request holds its worker.

use crate::resp;

/// The table's bound in bytes (this store's `proto-max-bulk-len`).
const MAX_TABLE: u64 = crate::resp::MAX_BULK as u64;

/// `LCS`'s options: `LEN`, `IDX`, `MINMATCHLEN n`, `WITHMATCHLEN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    len: bool,
    idx: bool,
    min: u64,
    with_len: bool,
}

impl Options {
    /// The options after the two keys, or the error Redis answers for them (once the keys were
    /// found to be strings: Redis reads the keys first).
    pub fn parse(args: &[Vec<u8>]) -> Result<Self, String> {
        let mut o = Options::default();
        let mut i = 0;
        while i < args.len() {
            match args[i].to_ascii_uppercase().as_slice() {
                b"IDX" => o.idx = true,
                b"LEN" => o.len = true,
                b"WITHMATCHLEN" => o.with_len = true,
                b"MINMATCHLEN" if i + 1 < args.len() => {
                    let n = crate::shard::parse_i64(&args[i + 1])
                        .ok_or_else(|| crate::shard::NOT_INTEGER.to_string())?;
                    o.min = n.max(0) as u64;
                    i += 1;
                }
                _ => return Err("ERR syntax error".into()),
            }
            i += 1;
        }
        if o.len && o.idx {
            return Err("ERR If you want both the length and indexes, please just use IDX.".into());
        }
        Ok(o)
    }
}

/// A common run: `a[a0..=a1]` equals `b[b0..=b1]`.
type Range = (usize, usize, usize, usize);

/// Writes `LCS`'s reply for strings `a` and `b`.
pub fn reply(out: &mut Vec<u8>, a: &[u8], b: &[u8], o: Options) {
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    if cells.saturating_mul(4) > MAX_TABLE {
        resp::error(
            out,
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        );
        return;
    }
    let w = blen + 1;
    let mut t = vec![0u32; (alen + 1) * w];
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let total = t[alen * w + blen];
    if o.len {
        resp::integer(out, i64::from(total));
        return;
    }
    let (common, ranges) = walk_back(a, b, &t, w);
    if !o.idx {
        resp::bulk(out, &common);
        return;
    }
    let kept: Vec<Range> = ranges
        .into_iter()
        .filter(|r| o.min == 0 || (r.1 - r.0 + 1) as u64 >= o.min)
        .collect();
    resp::array(out, 4);
    resp::bulk(out, b"matches");
    resp::array(out, kept.len());
    for (a0, a1, b0, b1) in kept {
        resp::array(out, 2 + usize::from(o.with_len));
        for (s, e) in [(a0, a1), (b0, b1)] {
            resp::array(out, 2);
            resp::integer(out, s as i64);
            resp::integer(out, e as i64);
        }
        if o.with_len {
            resp::integer(out, (a1 - a0 + 1) as i64);
        }
    }
    resp::bulk(out, b"len");
    resp::integer(out, i64::from(total));
}

/// The common subsequence and its runs, from the end backwards, as Redis emits them.
fn walk_back(a: &[u8], b: &[u8], t: &[u32], w: usize) -> (Vec<u8>, Vec<Range>) {
    let alen = a.len();
    let mut idx = t[alen * w + b.len()] as usize;
    let mut common = vec![0u8; idx];
    let mut ranges = Vec::new();
    let (mut i, mut j) = (alen, b.len());
    // `alen` in `start.0` means no run is open.
    let (mut a0, mut a1, mut b0, mut b1) = (alen, 0, 0, 0);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            common[idx - 1] = a[i - 1];
            if a0 == alen {
                (a0, a1, b0, b1) = (i - 1, i - 1, j - 1, j - 1);
            } else if a0 == i && b0 == j {
                a0 -= 1;
                b0 -= 1;
            } else {
                emit = true;
            }
            if a0 == 0 || b0 == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if a0 != alen {
                emit = true;
            }
        }
        if emit {
            ranges.push((a0, a1, b0, b1));
            a0 = alen;
        }
    }
    (common, ranges)
}

//! The check suite shared by the single-process tests (`tests/single.rs`) and the multi-rank
//! example (`examples/coll_check.rs`): every collective on one team, at the sizes given, against
//! a sequential reference computed by every member from the same generated inputs.
//!
//! Inputs are generated from (member, index, salt), so every member can compute every other
//! member's contribution and the expected result without communication. Values stay below 1000
//! so sums are exact in `f64` and never wrap in `u64`.

#![allow(dead_code, reason = "each user of the suite calls a part of it")]

use gsm_collectives::op::{BitXor, Max, Min, Sum};
use gsm_collectives::{Error, Team};

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Member `m`'s contribution of `len` elements under `salt`.
pub fn input(m: usize, len: usize, salt: u64) -> Vec<u64> {
    let base = mix(salt ^ ((m as u64) << 40));
    (0..len as u64).map(|i| mix(base ^ i) % 1000).collect()
}

/// What passed, and where (for messages).
pub struct Tally {
    pub passed: usize,
    pub at: String,
}

impl Tally {
    fn ok(&mut self) {
        self.passed += 1;
    }
}

macro_rules! same {
    ($t:expr, $got:expr, $want:expr, $($what:tt)*) => {{
        let (g, w) = (&$got, &$want);
        if g != w {
            let what = format!($($what)*);
            let first = g.iter().zip(w.iter()).position(|(a, b)| a != b);
            panic!(
                "{}: {what}: result differs from the reference (lengths {} vs {}, first \
                 difference at {first:?})",
                $t.at,
                g.len(),
                w.len()
            );
        }
        $t.ok();
    }};
}

fn sum_of(n: usize, len: usize, salt: u64) -> Vec<u64> {
    let mut acc = vec![0u64; len];
    for m in 0..n {
        for (a, x) in acc.iter_mut().zip(input(m, len, salt)) {
            *a += x;
        }
    }
    acc
}

/// An affine map `x ↦ a·x + b` (wrapping): composition is associative, not commutative.
fn compose(f: [u64; 2], g: [u64; 2]) -> [u64; 2] {
    // First f, then g.
    [
        g[0].wrapping_mul(f[0]),
        g[0].wrapping_mul(f[1]).wrapping_add(g[1]),
    ]
}

/// Runs every plain-data collective with contributions of `len` elements (the gather family
/// and all-to-all use `len / size` per member once `len` exceeds 4096, so that every operation
/// moves about `len` elements per member).
pub fn plain(team: &Team, len: usize, t: &mut Tally) {
    let n = team.size();
    let p = Sizes {
        n,
        me: team.index(),
        len,
        salt: len as u64 * 7919 + team.sequence(),
        per: if len > 4096 { len / n } else { len },
    };
    team.barrier();
    t.ok();
    rooted(team, &p, t);
    allreduces(team, &p, t);
    scans(team, &p, t);
    gathers(team, &p, t);
    scatters(team, &p, t);
    alltoalls(team, &p, t);
}

/// What every part of [`plain`] computes its inputs from.
struct Sizes {
    n: usize,
    me: usize,
    len: usize,
    salt: u64,
    /// Elements per member for the gather family.
    per: usize,
}

impl Sizes {
    /// Member `m`'s length in the `v` variants.
    fn vlen(&self, m: usize) -> usize {
        self.per + m % 3
    }
}

/// Broadcast and reduce.
fn rooted(team: &Team, p: &Sizes, t: &mut Tally) {
    let Sizes {
        n, me, len, salt, ..
    } = *p;
    // broadcast, from the first and the last member.
    for root in [0, n - 1] {
        let mut buf = if me == root {
            input(root, len, salt)
        } else {
            vec![0; len]
        };
        team.broadcast(&mut buf, root).unwrap();
        same!(
            t,
            buf,
            input(root, len, salt),
            "broadcast of {len} from {root}"
        );
    }

    // reduce (to the middle member).
    let root = n / 2;
    let mine = input(me, len, salt);
    let mut out = vec![0u64; if me == root { len } else { 0 }];
    team.reduce(&mine, &mut out, Sum, root).unwrap();
    if me == root {
        same!(
            t,
            out,
            sum_of(n, len, salt),
            "reduce sum of {len} to {root}"
        );
    }
}

/// Allreduce over several types and operators.
fn allreduces(team: &Team, p: &Sizes, t: &mut Tally) {
    let Sizes {
        n, me, len, salt, ..
    } = *p;
    let mine = input(me, len, salt);
    let inputs: Vec<Vec<u64>> = (0..n).map(|m| input(m, len, salt)).collect();
    // allreduce: sums (u64 and f64), max of i64, xor, min through a closure, in place.
    let mut out = vec![0u64; len];
    team.allreduce(&mine, &mut out, Sum).unwrap();
    same!(t, out, sum_of(n, len, salt), "allreduce sum u64 of {len}");
    let fmine: Vec<f64> = mine.iter().map(|&x| x as f64).collect();
    let mut fout = vec![0f64; len];
    team.allreduce(&fmine, &mut fout, Sum).unwrap();
    let fwant: Vec<f64> = sum_of(n, len, salt).iter().map(|&x| x as f64).collect();
    same!(t, fout, fwant, "allreduce sum f64 of {len}");
    // Sums whose rounding depends on the order: every member must get the same bits.
    let inexact: Vec<f64> = mine
        .iter()
        .enumerate()
        .map(|(i, &x)| (x as f64 + 0.1) / 3.0 * (1.0 + me as f64 * 1e-3) + i as f64 * 1e-9)
        .collect();
    let mut iout = vec![0f64; len];
    team.allreduce(&inexact, &mut iout, Sum).unwrap();
    let mut first = iout.clone();
    team.broadcast(&mut first, 0).unwrap();
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
    same!(
        t,
        bits(&iout),
        bits(&first),
        "allreduce sum f64 of {len}: the same bits on every member"
    );
    let imine: Vec<i64> = mine.iter().map(|&x| x as i64 - 500).collect();
    let mut iout = vec![0i64; len];
    team.allreduce(&imine, &mut iout, Max).unwrap();
    let iwant: Vec<i64> = (0..len)
        .map(|i| (0..n).map(|m| inputs[m][i] as i64 - 500).max().unwrap())
        .collect();
    same!(t, iout, iwant, "allreduce max i64 of {len}");
    let mut xbuf = mine.clone();
    team.allreduce_in_place(&mut xbuf, BitXor);
    let xwant: Vec<u64> = (0..len)
        .map(|i| (0..n).fold(0, |a, m| a ^ inputs[m][i]))
        .collect();
    same!(t, xbuf, xwant, "allreduce_in_place xor of {len}");
    let mut cout = vec![0f64; len];
    team.allreduce(&fmine, &mut cout, |a: f64, b: f64| a.min(b))
        .unwrap();
    let mut mout = vec![0f64; len];
    team.allreduce(&fmine, &mut mout, Min).unwrap();
    same!(t, cout, mout, "allreduce min by closure and by Min, {len}");
}

/// Scan and exscan.
fn scans(team: &Team, p: &Sizes, t: &mut Tally) {
    let Sizes {
        n, me, len, salt, ..
    } = *p;
    let mine = input(me, len, salt);
    let inputs: Vec<Vec<u64>> = (0..n).map(|m| input(m, len, salt)).collect();
    // scan / exscan: sums, and an order-sensitive composition of affine maps.
    let mut sout = vec![0u64; len];
    team.scan(&mine, &mut sout, Sum).unwrap();
    same!(t, sout, sum_of(me + 1, len, salt), "scan sum of {len}");
    let mut eout = vec![7u64; len];
    let wrote = team.exscan(&mine, &mut eout, Sum).unwrap();
    assert_eq!(
        wrote,
        me > 0,
        "{}: exscan writes on every member but the first",
        t.at
    );
    if me > 0 {
        same!(t, eout, sum_of(me, len, salt), "exscan sum of {len}");
    } else {
        same!(
            t,
            eout,
            vec![7u64; len],
            "exscan leaves member 0's buffer alone"
        );
    }
    let amine: Vec<[u64; 2]> = mine.iter().map(|&x| [x | 1, x + me as u64]).collect();
    let mut aout = vec![[0u64; 2]; len];
    team.scan(&amine, &mut aout, compose).unwrap();
    let awant: Vec<[u64; 2]> = (0..len)
        .map(|i| {
            (1..=me).fold(
                {
                    let x = inputs[0][i];
                    [x | 1, x]
                },
                |acc, m| {
                    let x = inputs[m][i];
                    compose(acc, [x | 1, x + m as u64])
                },
            )
        })
        .collect();
    same!(t, aout, awant, "scan of a non-commutative operator, {len}");
}

/// Gather, gatherv, allgather and allgatherv.
fn gathers(team: &Team, p: &Sizes, t: &mut Tally) {
    let Sizes {
        n, me, salt, per, ..
    } = *p;
    let vlen = |m: usize| p.vlen(m);
    // gather / gatherv (to the last member).
    let root = n - 1;
    let pmine = input(me, per, salt ^ 1);
    let mut all = vec![0u64; if me == root { per * n } else { 0 }];
    team.gather(&pmine, &mut all, root).unwrap();
    if me == root {
        let want: Vec<u64> = (0..n).flat_map(|m| input(m, per, salt ^ 1)).collect();
        same!(t, all, want, "gather of {per} per member to {root}");
    }
    let vmine = input(me, vlen(me), salt ^ 2);
    let got = team.gatherv(&vmine, 0).unwrap();
    if me == 0 {
        let got = got.expect("the root gets the parts");
        let want: Vec<u64> = (0..n).flat_map(|m| input(m, vlen(m), salt ^ 2)).collect();
        same!(t, got.data, want, "gatherv data of about {per} per member");
        same!(
            t,
            got.counts(),
            (0..n).map(vlen).collect::<Vec<_>>(),
            "gatherv counts"
        );
    } else {
        assert!(
            got.is_none(),
            "{}: gatherv gives parts to the root only",
            t.at
        );
    }

    // allgather / allgatherv.
    let mut all = vec![0u64; per * n];
    team.allgather(&pmine, &mut all).unwrap();
    let want: Vec<u64> = (0..n).flat_map(|m| input(m, per, salt ^ 1)).collect();
    same!(t, all, want, "allgather of {per} per member");
    let got = team.allgatherv(&vmine);
    let want: Vec<u64> = (0..n).flat_map(|m| input(m, vlen(m), salt ^ 2)).collect();
    same!(t, got.data, want, "allgatherv of about {per} per member");
}

/// Scatter and scatterv.
fn scatters(team: &Team, p: &Sizes, t: &mut Tally) {
    let Sizes {
        n, me, salt, per, ..
    } = *p;
    let vlen = |m: usize| p.vlen(m);
    // scatter / scatterv (from member 0 and from the last).
    let root = n - 1;
    let src: Vec<u64> = (0..n).flat_map(|m| input(m, per, salt ^ 3)).collect();
    let mut part = vec![0u64; per];
    let send: &[u64] = if me == root { &src } else { &[] };
    team.scatter(send, &mut part, root).unwrap();
    same!(
        t,
        part,
        input(me, per, salt ^ 3),
        "scatter of {per} per member from {root}"
    );
    let vsrc: Vec<u64> = (0..n).flat_map(|m| input(m, vlen(m), salt ^ 4)).collect();
    let counts: Vec<usize> = (0..n).map(vlen).collect();
    let got = if me == 0 {
        team.scatterv(&vsrc, &counts, 0).unwrap()
    } else {
        team.scatterv::<u64>(&[], &[], 0).unwrap()
    };
    same!(
        t,
        got,
        input(me, vlen(me), salt ^ 4),
        "scatterv of about {per} per member"
    );
}

/// Alltoall and alltoallv: the part from i to j is input(i * n + j).
fn alltoalls(team: &Team, p: &Sizes, t: &mut Tally) {
    let Sizes {
        n,
        me,
        len,
        salt,
        per,
    } = *p;
    // alltoall / alltoallv: the part from i to j is input(i * n + j).
    let k = per / n.max(1) + usize::from(len % 2 == 1);
    let send: Vec<u64> = (0..n)
        .flat_map(|j| input(me * n + j, k, salt ^ 5))
        .collect();
    let mut recv = vec![0u64; k * n];
    team.alltoall(&send, &mut recv).unwrap();
    let want: Vec<u64> = (0..n)
        .flat_map(|i| input(i * n + me, k, salt ^ 5))
        .collect();
    same!(t, recv, want, "alltoall of {k} per pair");
    let vk = |i: usize, j: usize| k + (i + 2 * j) % 3;
    let send: Vec<u64> = (0..n)
        .flat_map(|j| input(me * n + j, vk(me, j), salt ^ 6))
        .collect();
    let counts: Vec<usize> = (0..n).map(|j| vk(me, j)).collect();
    let got = team.alltoallv(&send, &counts).unwrap();
    let want: Vec<u64> = (0..n)
        .flat_map(|i| input(i * n + me, vk(i, me), salt ^ 6))
        .collect();
    same!(t, got.data, want, "alltoallv of about {k} per pair");
    same!(
        t,
        got.counts(),
        (0..n).map(|i| vk(i, me)).collect::<Vec<_>>(),
        "alltoallv counts"
    );
}

/// The serde-based collectives on `String`s and `Vec<String>`s.
pub fn values(team: &Team, t: &mut Tally) {
    let n = team.size();
    let me = team.index();
    let name = |m: usize| vec![format!("member {m}"), "é".repeat(m % 4)];
    let all = team.allgather_value(name(me));
    same!(
        t,
        all,
        (0..n).map(name).collect::<Vec<_>>(),
        "allgather_value"
    );
    let root = n - 1;
    let b = team
        .broadcast_value((me == root).then(|| format!("from {root}")), root)
        .unwrap();
    assert_eq!(b, format!("from {root}"), "{}: broadcast_value", t.at);
    t.ok();
    let g = team.gather_value(name(me), 0).unwrap();
    if me == 0 {
        same!(
            t,
            g.unwrap(),
            (0..n).map(name).collect::<Vec<_>>(),
            "gather_value"
        );
    }
    let s = team
        .scatter_values((me == 0).then(|| (0..n).map(name).collect()), 0)
        .unwrap();
    same!(t, s, name(me), "scatter_values");
    let sent: Vec<String> = (0..n).map(|j| format!("{me}->{j}")).collect();
    let got = team.alltoall_values(sent).unwrap();
    same!(
        t,
        got,
        (0..n).map(|i| format!("{i}->{me}")).collect::<Vec<_>>(),
        "alltoall_values"
    );
    let longest = team.allreduce_value(
        name(me).concat(),
        |a, b| if b.len() > a.len() { b } else { a },
    );
    let want = (0..n)
        .map(|m| name(m).concat())
        .fold(String::new(), |a, b| if b.len() > a.len() { b } else { a });
    assert_eq!(longest.len(), want.len(), "{}: allreduce_value", t.at);
    t.ok();
}

/// Splits and sub-teams, and the errors a member gets for its own mistakes.
pub fn teams(team: &Team, t: &mut Tally) {
    let n = team.size();
    let me = team.index();
    // Even and odd members, in reverse order; the last member joins none.
    let colour = (me + 1 < n || n == 1).then_some((me % 2) as u64);
    let sub = team.split(colour, -(me as i64));
    match (colour, &sub) {
        (None, None) => t.ok(),
        (Some(c), Some(s)) => {
            let mut want: Vec<usize> = (0..n)
                .filter(|&m| (m + 1 < n || n == 1) && (m % 2) as u64 == c)
                .collect();
            want.reverse();
            let got: Vec<usize> = s
                .members()
                .iter()
                .map(|w| team.members().iter().position(|x| x == w).unwrap())
                .collect();
            same!(t, got, want, "split by parity, reversed");
            let mut total = [0u64];
            s.allreduce(&[me as u64], &mut total, Sum).unwrap();
            same!(
                t,
                total,
                [want.iter().map(|&m| m as u64).sum::<u64>()],
                "allreduce on a split team"
            );
        }
        other => panic!(
            "{}: split gave {:?} for colour {colour:?}",
            t.at,
            other.1.is_some()
        ),
    }
    let local = team.split_by_rank();
    let here = gossamer::rank();
    let want: Vec<_> = team
        .members()
        .iter()
        .copied()
        .filter(|&w| gossamer::rank_of(w) == here)
        .collect();
    same!(t, local.members().to_vec(), want, "split_by_rank");
    let mut count = [0u32];
    local.allreduce(&[1u32], &mut count, Sum).unwrap();
    same!(t, count, [want.len() as u32], "allreduce within a rank");
    let host = team.split_by_host();
    host.barrier();
    let mut hcount = [0u32];
    host.allreduce(&[1u32], &mut hcount, Sum).unwrap();
    same!(t, hcount, [host.size() as u32], "allreduce within a host");

    // Two teams in use at once by two fibers of each worker.
    let other = team.dup();
    let h = gossamer::spawn(move || {
        let mut s = [0u64];
        other.allreduce(&[1u64], &mut s, Sum).unwrap();
        other.barrier();
        s[0]
    });
    let mut s = [0u64];
    team.allreduce(&[2u64], &mut s, Sum).unwrap();
    let o = h.join();
    same!(t, [s[0], o], [2 * n as u64, n as u64], "two teams at once");

    // Errors for this member's own mistakes; nothing is sent, so the team stays in step.
    let mut short = [0u64; 1];
    let e = team.allreduce(&[1u64, 2], &mut short, Sum).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Length {
                op: "allreduce",
                got: 1,
                want: 2,
                ..
            }
        ),
        "{e}"
    );
    let e = team.broadcast(&mut short, n).unwrap_err();
    assert!(matches!(e, Error::BadRoot { root, .. } if root == n), "{e}");
    assert!(e.to_string().contains("not a member"), "{e}");
    if n != 1 {
        // A send buffer that is not a multiple of size() wants the next multiple, not 0.
        let mut r = [0u64; 1];
        let e = team.alltoall(&[1u64], &mut r).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Length {
                    op: "alltoall",
                    got: 1,
                    want,
                    ..
                } if want == n
            ),
            "{e}"
        );
    }
    let e = team.alltoallv(&[1u64], &[1]).unwrap_err();
    if n != 1 {
        assert!(
            matches!(
                e,
                Error::Length {
                    buffer: "counts",
                    ..
                }
            ),
            "{e}"
        );
    }
    t.ok();
    team.barrier();
}

// After `same!`, which it uses.
mod nonblocking;
pub use nonblocking::nonblocking;

//! The non-blocking collectives on one team: five outstanding at once, waited for in another
//! order than they were called, each against its sequential reference; and a caller that goes on
//! while its allreduce cannot be complete yet (the last member calls 50 ms late).

use super::*;
use std::time::Duration;

pub fn nonblocking(team: &Team, t: &mut Tally) {
    let (n, me) = (team.size(), team.index());
    let len = 1000;
    let salt = 0xb10c + team.sequence();
    let late = n - 1;
    if me == late {
        gossamer::sleep(Duration::from_millis(50));
    }
    let a = team.allreduce_async(input(me, len, salt), Sum);
    let b = team.allgather_async(vec![me as u64; 3]);
    let root_data = if me == 0 {
        input(0, len, salt + 1)
    } else {
        vec![0; len]
    };
    let c = team.broadcast_async(root_data, 0);
    let d = team.reduce_async(input(me, len, salt + 2), Max, n / 2);
    let e = team.barrier_async();
    if me != late {
        // Nothing has yielded since the calls: a call that did its collective before returning
        // would have waited for the late member, and its promise would be ready here.
        assert!(
            !a.is_ready() && !e.is_ready(),
            "{}: a non-blocking collective was complete before every member called it",
            t.at
        );
        t.ok();
    }
    e.wait();
    t.ok();
    let d = d.wait().unwrap();
    if me == n / 2 {
        let mut want = input(0, len, salt + 2);
        for m in 1..n {
            for (w, x) in want.iter_mut().zip(input(m, len, salt + 2)) {
                *w = (*w).max(x);
            }
        }
        same!(t, d, want, "reduce_async");
    } else {
        assert!(d.is_empty(), "{}: reduce_async off the root", t.at);
    }
    same!(
        t,
        c.wait().unwrap(),
        input(0, len, salt + 1),
        "broadcast_async"
    );
    let all: Vec<u64> = (0..n as u64).flat_map(|m| [m; 3]).collect();
    same!(t, b.wait().unwrap(), all, "allgather_async");
    same!(
        t,
        a.wait().unwrap(),
        sum_of(n, len, salt),
        "allreduce_async"
    );
    // The blocking calls go on from the sequence the non-blocking ones took.
    team.barrier();
    t.ok();
}

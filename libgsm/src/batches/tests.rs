//! Tests of `entrust_all` and `Batches` within one process (several workers).

use crate::{Batches, Config, entrust_all, finish_all, spmd};

#[test]
fn every_worker_gets_every_trust_and_batches_reach_their_owners() {
    let totals = spmd(Config::default().workers(3), |w| {
        let trusts = entrust_all(Vec::<u32>::new());
        assert_eq!(trusts.len(), 3);
        assert_eq!(trusts[w.id()].trustee().index(), w.id());
        let mut b: Batches<Vec<u32>, u32> = Batches::new(trusts.clone());
        for i in 0..300u32 {
            b.push(i as usize % 3, i + 1000 * w.id() as u32);
        }
        finish_all(|| b.send(|seen, items| seen.extend(items)));
        let mut mine = trusts[w.id()].apply(std::mem::take);
        mine.sort_unstable();
        mine
    })
    .unwrap();
    for (w, got) in totals.iter().enumerate() {
        // 100 items from each of the 3 workers, those congruent to w.
        assert_eq!(got.len(), 300, "worker {w}");
        assert!(
            got.iter().all(|i| (i % 1000) as usize % 3 == w),
            "worker {w}"
        );
    }
}

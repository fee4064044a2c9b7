//! The delegation kernels (`--engine gsm`) against the bulk-synchronous ones (`--engine
//! gsm-bsp`) on the same graph and roots, in one process of two workers: SSSP gives the same
//! distances bit for bit, and both kernels' trees (BFS and SSSP) pass the sequential validation
//! on the whole edge list.

use std::sync::Arc;

use graph500::bfs::NO_PARENT;
use graph500::csr::Csr;
use graph500::dist::graph::{LocalGraph, Partition};
use graph500::dist::{Bsp, Exchange, Kernels};
use graph500::gsm_engine::Delegation;
use graph500::gsm_engine::comm::Comm;
use graph500::kronecker::{KroneckerGenerator, share};
use graph500::roots::choose_roots;
use graph500::validate::{Claimed, validate};

const SCALE: u32 = 12;

#[test]
fn delegation_and_bulk_synchronous_kernels_agree_on_two_workers() {
    let mut config = gossamer::Config::default().workers(2);
    config.stack_size = config.stack_size.max(1 << 20);
    let checked = gossamer::spmd(config, |_| {
        let comm = Comm::world();
        let (n, m) = (1usize << SCALE, 16u64 << SCALE);
        let part = Partition::new(n, comm.size(), comm.rank());
        let (start, end) = share(m, comm.rank() as u64, comm.size() as u64);
        let mine = KroneckerGenerator::new(SCALE).range(start, end);
        let (mut bsp, mut deleg) = (Bsp::default(), Delegation::default());
        let mut g = LocalGraph::build(&comm, part, &mine, true);
        Kernels::<Comm>::prepare(&mut deleg, &mut g);
        let g = Arc::new(g);
        let all = KroneckerGenerator::new(SCALE).range(0, m);
        let csr = Csr::build(n, &[&all], true);
        let delta = graph500::sssp::delta_for(g.total_entries(), n);
        let counts = part.counts();
        let mut checked = 0;
        for root in choose_roots(SCALE, 6, |v| csr.degree(v) > 0) {
            let want = Kernels::sssp(&mut bsp, &comm, &g, root, delta);
            let got = deleg.sssp(&comm, &g, root, delta);
            let want = comm.all_gather_dists(&want.dist, &counts);
            let dist = comm.all_gather_dists(&got.dist, &counts);
            let parent = comm.all_gather_vertices(&got.parent, &counts);
            let same = want
                .iter()
                .zip(&dist)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "root {root}: the two kernels' distances differ");
            let reached = csr.component_edges(|v| parent[v as usize] != NO_PARENT);
            let claimed = Claimed {
                root,
                parent: &parent,
                dist: Some(&dist),
            };
            assert_eq!(
                validate(&claimed, &[&all], reached),
                Ok(reached),
                "SSSP from {root}"
            );
            for tree in [
                Kernels::bfs(&mut bsp, &comm, &g, root),
                deleg.bfs(&comm, &g, root),
            ] {
                let parent = comm.all_gather_vertices(&tree, &counts);
                let claimed = Claimed {
                    root,
                    parent: &parent,
                    dist: None,
                };
                assert_eq!(
                    validate(&claimed, &[&all], reached),
                    Ok(reached),
                    "BFS from {root}"
                );
            }
            checked += 1;
        }
        checked
    })
    .unwrap();
    assert_eq!(checked, vec![6, 6]);
}

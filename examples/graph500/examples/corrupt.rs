//! Checks that the distributed engines' validation rejects corrupted searches: run under
//! `gsmrun -np N [-t T]` (or alone) as `corrupt gsm|mpi SCALE`. On SCALE's graph every member
//! (a Gossamer worker, or an MPI rank) runs one BFS and one SSSP from the first root, validates
//! them untouched (must pass), then the last member unhooks a well-connected leaf from the BFS
//! tree (rule 4 must fail, found on whichever members hold its edges) and halves one SSSP
//! distance (the edge rules must fail). Member 0 prints each verdict; a process exits 1 if one of
//! its members' verdicts was wrong, so the job fails if any member disagrees.

use std::process::ExitCode;

use graph500::bfs::NO_PARENT;
use graph500::dist::Exchange;
use graph500::dist::graph::{LocalGraph, Partition};
use graph500::dist::{bfs, sssp, validate::validate};
use graph500::kronecker::{KroneckerGenerator, share};
use graph500::roots::choose_roots;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let scale: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(10);
    let wrong = match args.get(1).map(String::as_str) {
        Some("gsm") => {
            let config = gossamer::Config::from_env().expect("GSM_* settings parse");
            gossamer::spmd(config, move |_| {
                let comm = graph500::gsm_engine::comm::Comm::world();
                let wrong = check(&comm, scale);
                comm.barrier();
                wrong
            })
            .expect("the Gossamer job runs")
            .into_iter()
            .any(|w| w)
        }
        Some("mpi") => {
            let comm = graph500::mpi_engine::comm::Comm::init().expect("MPI starts");
            let wrong = check(&comm, scale);
            comm.barrier();
            wrong
        }
        _ => {
            eprintln!("usage: corrupt gsm|mpi SCALE");
            return ExitCode::from(2);
        }
    };
    if wrong {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Runs the searches and the corruptions on this member (an MPI rank or a Gossamer member);
/// returns whether a verdict was wrong.
fn check<C: Exchange>(comm: &C, scale: u32) -> bool {
    let (member, size) = (comm.rank(), comm.size());
    let n = 1usize << scale;
    let m = 16u64 << scale;
    let (start, end) = share(m, member as u64, size as u64);
    let list = KroneckerGenerator::new(scale).range(start, end);
    let part = Partition::new(n, size, member);
    let g = LocalGraph::build(comm, part, &list, true);
    let root = choose_roots(scale, 1, |v| {
        let owner = part.owner(v);
        comm.broadcast_bool(owner, owner == member && g.has_edge(v))
    })[0];
    let say = |line: String| {
        if member == 0 {
            println!("{line}");
        }
    };
    let mut wrong = false;
    // The vertex the last member corrupts: a leaf of the tree (so the tree itself stays whole and
    // the errors are the edge rules', found by the distributed part of validation) of highest
    // degree, so that its edges are spread over every member's edges.
    let victim = |parent: &[u32]| {
        let all = comm.all_gather_vertices(parent, &part.counts());
        let mut is_parent = vec![false; n];
        for &p in &all {
            if p != NO_PARENT {
                is_parent[p as usize] = true;
            }
        }
        (0..parent.len())
            .filter(|&i| parent[i] != NO_PARENT && !is_parent[part.global(i) as usize])
            .max_by_key(|&i| g.degree(i))
    };

    let parent = bfs::search(comm, &g, root, &mut bfs::Scratch::default());
    let count = g.component_edges(comm, |i| parent[i] != NO_PARENT);
    let clean = validate(comm, &g, &list, root, &parent, None, count);
    say(format!("BFS untouched: {clean:?}"));
    wrong |= clean.is_err();
    let mut bad = parent.clone();
    let i = victim(&bad);
    if member == size - 1 {
        let i = i.expect("the last member holds a leaf of the tree");
        eprintln!(
            "member {member}: unhooking vertex {} from the BFS tree",
            part.global(i)
        );
        bad[i] = NO_PARENT;
    }
    match validate(comm, &g, &list, root, &bad, None, count) {
        Ok(_) => {
            eprintln!("member {member}: the corrupted BFS was accepted");
            wrong = true;
        }
        Err(failure) => say(format!("BFS corrupted: rejected: {failure}")),
    }

    let delta = graph500::sssp::delta_for(g.total_entries(), n);
    let paths = sssp::search(comm, &g, root, delta, &mut sssp::Scratch::default());
    let count = g.component_edges(comm, |i| paths.parent[i] != NO_PARENT);
    let clean = validate(
        comm,
        &g,
        &list,
        root,
        &paths.parent,
        Some(&paths.dist),
        count,
    );
    say(format!("SSSP untouched: {clean:?}"));
    wrong |= clean.is_err();
    let mut dist = paths.dist.clone();
    let i = victim(&paths.parent);
    if member == size - 1 {
        let i = i.expect("the last member holds a leaf of the tree");
        eprintln!(
            "member {member}: halving the distance of vertex {}",
            part.global(i)
        );
        dist[i] *= 0.5;
    }
    match validate(comm, &g, &list, root, &paths.parent, Some(&dist), count) {
        Ok(_) => {
            eprintln!("member {member}: the corrupted SSSP was accepted");
            wrong = true;
        }
        Err(failure) => say(format!("SSSP corrupted: rejected: {failure}")),
    }
    wrong
}

//! The distributed Graph500 run, written once over [`Exchange`]: the kernels, graph building,
//! validation and the driver both distributed engines share.
//!
//! The MPI baseline ([`crate::mpi_engine`]) and the Gossamer engine ([`crate::gsm_engine`]) do
//! identical work step for step and differ only in how bytes move between the *members* of the
//! job: ranks through MPI in one, workers through the runtime's team collectives in the other. That
//! difference is the [`Exchange`] trait, which each engine's `comm` implements; everything else
//! lives in this module, generic over it and monomorphised per engine (no trait objects, so the
//! hot loops compile as they did when each engine had its own copy).
//!
//! - [`graph`]: the 1-D block [`Partition`] over the members and each member's rows of the CSR
//!   (kernel 1).
//! - [`bfs`]: level-synchronous, direction-optimising BFS (kernel 2).
//! - [`sssp`]: bulk-synchronous delta-stepping (kernel 3).
//! - [`validate`]: the rules, with the trees gathered and the edge rules distributed.
//! - [`run`]: the phases of a run, their timing, and the results block, with the search kernels
//!   an engine chooses ([`Kernels`]: [`Bsp`], or the Gossamer engine's delegation kernels).
//!
//! This module does not start or stop anything: initialising MPI or the runtime, choosing the
//! reporter and finalising are each engine's driver glue.

pub mod bfs;
pub mod graph;
pub mod levels;
pub mod sssp;
pub mod validate;

use std::io::IsTerminal as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use graph::{LocalGraph, Partition};

use crate::bfs::NO_PARENT;
use crate::cli::{Args, Kernel};
use crate::kronecker::{EdgeList, KroneckerGenerator, Vertex, share};
use crate::outcome::RunError;
use crate::report::{KernelRuns, Results};
use crate::roots::choose_roots_counted;

/// The bulk-synchronous collectives the distributed kernels use, between the members of a job
/// (MPI ranks, or Gossamer workers). Every method is collective except [`Self::rank`] and
/// [`Self::size`]: every member calls it, in the same order.
pub trait Exchange {
    /// Edges per member sent in one construction round of [`LocalGraph::build`]: bounds the
    /// exchange buffers, so that construction's peak memory is the edges and the rows, not the
    /// messages. Each engine picks its own (see its `comm`).
    const ROUND: usize;
    /// Bytes per vertex of the whole graph each member needs beyond its edges and rows, for the
    /// memory estimate checked before generating (see [`run`]).
    const BYTES_PER_VERTEX: f64;

    /// This member's index, `0..size()`.
    fn rank(&self) -> usize;
    /// The number of members.
    fn size(&self) -> usize;
    /// Waits until every member has called it.
    fn barrier(&self);
    /// Element-wise sum over the members.
    fn sum_u32(&self, mine: &[u32]) -> Vec<u32>;
    /// Element-wise sum over the members.
    fn sum_u64(&self, mine: &[u64]) -> Vec<u64>;
    /// Maximum over the members of one value.
    fn max_u64(&self, mine: u64) -> u64;
    /// Bitwise OR over the members, in place.
    fn or_in_place(&self, words: &mut [u64]);
    /// `value` as member `root` has it.
    fn broadcast_bool(&self, root: usize, value: bool) -> bool;
    /// All-gather of equal blocks: `all` is `size()` blocks of `mine.len()` words.
    fn all_gather_words(&self, mine: &[u64], all: &mut [u64]);
    /// Every member's `mine` (`counts[r]` vertices from member r), concatenated in member order.
    fn all_gather_vertices(&self, mine: &[Vertex], counts: &[usize]) -> Vec<Vertex>;
    /// Every member's `mine` (`counts[r]` distances from member r), concatenated in member order.
    fn all_gather_dists(&self, mine: &[f32], counts: &[usize]) -> Vec<f32>;
    /// Byte strings of every member, in member order.
    fn all_gather_bytes(&self, mine: &[u8]) -> Vec<Vec<u8>>;
    /// Personalised all-to-all of `u32` words: `send` holds the words for member 0, then for
    /// member 1, …, `send_counts[r]` of them for member r. The words received (from member 0
    /// first) replace `recv`'s contents.
    fn exchange(&self, send: &[u32], send_counts: &[usize], recv: &mut Vec<u32>);
    /// [`Self::exchange`], also returning the minimum over the members of `mine`, which travels
    /// with the words (so one exchange serves both).
    fn exchange_min(
        &self,
        send: &[u32],
        send_counts: &[usize],
        mine: u64,
        recv: &mut Vec<u32>,
    ) -> u64;
}

/// The search kernels a distributed engine runs over the graph: the bulk-synchronous ones of
/// [`bfs`] and [`sssp`] ([`Bsp`]), or the Gossamer engine's delegation kernels. Each call is
/// collective, and returns this member's part of the result.
pub trait Kernels<C: Exchange> {
    /// BFS from `root`: the parents of this member's vertices.
    fn bfs(&mut self, comm: &C, g: &Arc<LocalGraph>, root: Vertex) -> Vec<Vertex>;
    /// SSSP from `root` with bucket width `delta`: this member's parents and distances.
    fn sssp(&mut self, comm: &C, g: &Arc<LocalGraph>, root: Vertex, delta: f32)
    -> sssp::LocalPaths;
    /// Prepares this member's rows for the searches, as part of construction (timed with it).
    fn prepare(&mut self, _g: &mut LocalGraph) {}
}

/// The bulk-synchronous kernels, with their reusable buffers.
#[derive(Debug, Default)]
pub struct Bsp {
    bfs: bfs::Scratch,
    sssp: sssp::Scratch,
}

impl<C: Exchange> Kernels<C> for Bsp {
    fn bfs(&mut self, comm: &C, g: &Arc<LocalGraph>, root: Vertex) -> Vec<Vertex> {
        bfs::search(comm, g, root, &mut self.bfs)
    }

    fn sssp(
        &mut self,
        comm: &C,
        g: &Arc<LocalGraph>,
        root: Vertex,
        delta: f32,
    ) -> sssp::LocalPaths {
        sssp::search(comm, g, root, delta, &mut self.sssp)
    }
}

/// What every member needs of the arguments.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    /// log2 of the number of vertices.
    pub scale: u32,
    /// Edges per vertex.
    pub edgefactor: u32,
    /// Number of search roots.
    pub roots: u32,
    /// Whether to run kernel 2.
    pub bfs: bool,
    /// Whether to run kernel 3.
    pub sssp: bool,
    /// Whether to validate each search.
    pub validating: bool,
}

impl Plan {
    /// The plan the command line asks for.
    pub fn from_args(args: &Args) -> Self {
        Self {
            scale: args.scale,
            edgefactor: args.edgefactor,
            roots: args.roots,
            bfs: args.kernels.contains(&Kernel::Bfs),
            sssp: args.kernels.contains(&Kernel::Sssp),
            validating: !args.no_validate,
        }
    }
}

/// Bytes one member needs, roughly: its edges (12 bytes each), its rows (two entries of 8 bytes
/// per edge), the engine's per-vertex arrays ([`Exchange::BYTES_PER_VERTEX`] per vertex of the
/// graph), and the construction round's and the searches' messages (64 MiB).
fn estimated_bytes_per_member(n: f64, m: f64, members: f64, per_vertex: f64) -> f64 {
    (12.0 + 16.0) * m / members + per_vertex * n + 64.0 * (1u64 << 20) as f64
}

/// What a member tells the others before anything else (see [`agree`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct Intro {
    plan: Plan,
    host: String,
    /// Bytes available on its host (`None`: unknown).
    available: Option<f64>,
    /// Member 0's `--json` path and why it cannot be written there, if it cannot; `None` on the
    /// other members, which do not write it.
    json_refused: Option<(String, String)>,
}

/// Checks, on every member alike, that all were started with member 0's plan, that member 0 can
/// write the JSON results to `json` (its `--json`, if any), and that every host has the memory
/// its members need (`per_member` each); every member returns the same error otherwise. Checked
/// alone, a member refusing (its host short of memory, its arguments different) left the others
/// waiting for it in the first collective call, and different arguments on two ranks built a
/// wrong graph that validated (each rank generated the edges of its own edgefactor's share).
///
/// Only member 0 checks the JSON path, since only it writes the file (the reporter, see
/// `main`), and in a job over several hosts the others may not see its file system; the other
/// members' `--json` is not looked at, nor compared.
fn agree<C: Exchange>(
    comm: &C,
    plan: &Plan,
    per_member: f64,
    json: Option<&Path>,
) -> Result<(), RunError> {
    let json_refused = match json {
        Some(path) if comm.rank() == 0 => crate::outcome::check_json_path(path)
            .err()
            .map(|e| (path.display().to_string(), e.to_string())),
        _ => None,
    };
    let mine = Intro {
        plan: plan.clone(),
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default(),
        available: crate::outcome::available_bytes(),
        json_refused,
    };
    let bytes = postcard::to_allocvec(&mine).expect("a plan and a host name always encode");
    let all: Vec<Intro> = comm
        .all_gather_bytes(&bytes)
        .iter()
        .map(|b| postcard::from_bytes(b).expect("every member encodes its intro alike"))
        .collect();
    let first = &all[0].plan;
    if let Some((member, other)) = all.iter().enumerate().find(|(_, i)| i.plan != *first) {
        return Err(RunError::Mismatch {
            member,
            ours: format!("{first:?}"),
            theirs: format!("{:?}", other.plan),
        });
    }
    if let Some((path, reason)) = &all[0].json_refused {
        return Err(RunError::Json {
            path: path.into(),
            place: format!(" on host {} (member 0 writes it)", all[0].host),
            reason: reason.clone(),
        });
    }
    match short_host(&all, per_member) {
        Some((host, on_host, need, available)) => Err(RunError::TooLarge {
            scale: plan.scale,
            edgefactor: plan.edgefactor,
            need_gib: need / crate::outcome::GIB,
            available_gib: available / crate::outcome::GIB,
            place: format!("on host {host} for its {on_host} members"),
        }),
        None => Ok(()),
    }
}

/// The first host (in member order) whose members need more than it has available, `per_member`
/// bytes each: `(host, its members, need, available)`. Only the members of a host count against
/// it (every member of the job did, which refused runs spread over many hosts).
fn short_host(all: &[Intro], per_member: f64) -> Option<(String, usize, f64, f64)> {
    all.iter().find_map(|intro| {
        let on_host = all.iter().filter(|i| i.host == intro.host).count();
        let need = per_member * on_host as f64;
        let available = intro.available.filter(|&a| need > a)?;
        Some((intro.host.clone(), on_host, need, available))
    })
}

/// Runs every phase on this member (collective): generation, construction, roots, the kernels
/// the plan asks for. Every member returns the same results; timings are member 0's, each phase
/// starting after a barrier and ending with a collective. `json` is this member's `--json`:
/// member 0's is checked before anything else (see `agree`).
pub fn run<C: Exchange>(
    comm: &C,
    kernels: &mut impl Kernels<C>,
    plan: &Plan,
    json: Option<&Path>,
) -> Result<Results, RunError> {
    let me = comm.rank();
    let members = comm.size();
    let progress = me == 0 && std::io::stderr().is_terminal();
    let say = |msg: &dyn Fn() -> String| {
        if progress {
            eprintln!("{}", msg());
        }
    };
    let scale = plan.scale;
    let n = 1usize << scale;
    let m = u64::from(plan.edgefactor) << scale;
    let per_member =
        estimated_bytes_per_member(n as f64, m as f64, members as f64, C::BYTES_PER_VERTEX);
    agree(comm, plan, per_member, json)?;
    let part = Partition::new(n, members, me);

    comm.barrier();
    let t = Instant::now();
    let (start, end) = share(m, me as u64, members as u64);
    let list = KroneckerGenerator::new(scale).range(start, end);
    comm.barrier();
    let graph_generation = t.elapsed().as_secs_f64();
    say(&|| format!("graph_generation:               {graph_generation:.6} s"));

    comm.barrier();
    let t = Instant::now();
    let mut graph = LocalGraph::build(comm, part, &list, plan.sssp);
    kernels.prepare(&mut graph);
    let graph = Arc::new(graph);
    comm.barrier();
    let construction_time = t.elapsed().as_secs_f64();
    say(&|| format!("construction_time:              {construction_time:.6} s"));

    let (roots, census) = choose_roots_counted(scale, plan.roots as usize, |v| {
        let owner = part.owner(v);
        comm.broadcast_bool(owner, owner == me && graph.has_edge(v))
    });
    // Member 0 reports, and every member has the same census.
    if let Some(warning) = census.warning().filter(|_| me == 0) {
        gossamer::eprint_line(warning);
    }
    let mut results = Results {
        scale,
        edgefactor: plan.edgefactor,
        nbfs: roots.len(),
        graph_generation,
        num_mpi_processes: members,
        construction_time,
        bfs: None,
        sssp: None,
        roots: roots.clone(),
    };
    let ctx = Context {
        comm,
        graph: &graph,
        list: &list,
        validating: plan.validating,
        progress,
    };
    if plan.bfs {
        let search = |root: Vertex| (kernels.bfs(comm, &graph, root), None);
        results.bfs = Some(ctx.run_kernel("BFS", &roots, search)?);
    }
    if plan.sssp {
        let delta = crate::sssp::delta_for(graph.total_entries(), n);
        let search = |root: Vertex| {
            let p = kernels.sssp(comm, &graph, root, delta);
            (p.parent, Some(p.dist))
        };
        results.sssp = Some(ctx.run_kernel("SSSP", &roots, search)?);
    }
    Ok(results)
}

/// What every kernel's loop needs.
struct Context<'a, C> {
    comm: &'a C,
    graph: &'a LocalGraph,
    list: &'a EdgeList,
    validating: bool,
    progress: bool,
}

impl<C: Exchange> Context<'_, C> {
    /// One kernel over all roots: an untimed, validated warm-up, then the timed searches, each
    /// validated unless asked not to (as the other drivers do).
    fn run_kernel(
        &self,
        name: &'static str,
        roots: &[Vertex],
        search: impl FnMut(Vertex) -> crate::report::Searched,
    ) -> Result<KernelRuns, RunError> {
        let count = |parent: &[Vertex]| {
            self.graph
                .component_edges(self.comm, |i| parent[i] != NO_PARENT)
        };
        let check = |index: usize, root: Vertex, parent: &[Vertex], dist: Option<&[f32]>, m| {
            validate::validate(self.comm, self.graph, self.list, root, parent, dist, m).map_err(
                |failure| RunError::Invalid {
                    kernel: name,
                    root,
                    index,
                    failure,
                },
            )
        };
        crate::report::timed_searches(
            name,
            roots,
            self.validating,
            self.progress,
            search,
            count,
            check,
            || self.comm.barrier(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_short_of_memory_only_for_its_own_members() {
        let plan = Plan {
            scale: 10,
            edgefactor: 16,
            roots: 64,
            bfs: true,
            sssp: false,
            validating: true,
        };
        let intro = |host: &str, gib: f64| Intro {
            plan: plan.clone(),
            host: host.into(),
            available: Some(gib * crate::outcome::GIB),
            json_refused: None,
        };
        let gib = crate::outcome::GIB;
        // Four members over two hosts of 3 GiB each, 1 GiB per member: each host needs 2.
        let spread = [
            intro("a", 3.0),
            intro("a", 3.0),
            intro("b", 3.0),
            intro("b", 3.0),
        ];
        assert_eq!(short_host(&spread, gib), None);
        // Host b has only 1.5 GiB for its two members.
        let short = [
            intro("a", 3.0),
            intro("b", 1.5),
            intro("a", 3.0),
            intro("b", 1.5),
        ];
        assert_eq!(
            short_host(&short, gib),
            Some(("b".into(), 2, 2.0 * gib, 1.5 * gib))
        );
        // Unknown memory is never short.
        let unknown = [Intro {
            available: None,
            ..intro("c", 0.0)
        }];
        assert_eq!(short_host(&unknown, gib), None);
    }
}

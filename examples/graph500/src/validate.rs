//! Validation of one search with the specification's five rules, and its edge count.
//!
//! The rules, for a BFS (levels) or an SSSP (distances) result:
//! 1. the parent array is a tree rooted at the root, without cycles;
//! 2. each tree edge obeys the level rule (child = parent + 1) or the distance rule
//!    (child = parent + weight, in `f32`, exactly);
//! 3. every input edge obeys it: levels differ by at most one, or neither endpoint's distance
//!    exceeds the other's plus the weight;
//! 4. the tree spans the component: no input edge joins a reached and an unreached vertex;
//! 5. each parent is joined to its child by a real input edge (for SSSP, one whose weight gives
//!    the child's distance — rules 2 and 5 are checked together, as the reference does).
//!
//! The edge count m of the search is the number of non-self-loop input edges in the component,
//! duplicates counted; it must equal the count the search reported for TEPS.
//!
//! The work is split the way a distributed validation needs it: [`check_tree`] (rule 1, and the
//! labels the other rules use) over the vertices; [`check_edges`] (rules 3 and 4, the count, and
//! the confirmations of rule 5) over any range of input edges, producing an [`EdgeTally`]; tallies
//! [`merge`](EdgeTally::merge) cheaply (sums and a bitmap union, or across processes through
//! [`EdgeTally::confirmed_words_mut`] and the serialisable [`ValidationFailure`]); [`finish`]
//! checks rule 5 and the count. This module does not communicate: `check_tree` reads the whole
//! parent array, which a distributed engine must first gather (as the MPI baseline does) or
//! replace with pointer jumping.

use std::fmt;

use crate::bfs::NO_PARENT;
use crate::kronecker::{EdgeList, Vertex};

/// What a search claims, as validation sees it.
#[derive(Clone, Copy, Debug)]
pub struct Claimed<'a> {
    /// The search root.
    pub root: Vertex,
    /// `parent[root] = root`, [`NO_PARENT`] for unreached vertices.
    pub parent: &'a [Vertex],
    /// For SSSP, the distances (`f32::INFINITY` for unreached vertices); `None` for BFS.
    pub dist: Option<&'a [f32]>,
}

impl Claimed<'_> {
    fn reached(&self, v: Vertex) -> bool {
        self.parent[v as usize] != NO_PARENT
    }
}

/// One broken rule.
#[derive(Clone, Debug, PartialEq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum ValidationError {
    /// The arrays do not cover the graph.
    #[error("the search returned {got} entries for a graph of {expected} vertices")]
    WrongLength {
        /// Entries returned.
        got: usize,
        /// Vertices in the graph.
        expected: usize,
    },
    /// The root is not its own parent, or its distance is not 0.
    #[error("root {root} has parent {parent} and distance {dist} (want itself and 0)")]
    BadRoot {
        /// The root.
        root: Vertex,
        /// Its claimed parent.
        parent: Vertex,
        /// Its claimed distance (0 for BFS).
        dist: f32,
    },
    /// A parent is not a vertex.
    #[error("vertex {vertex} has parent {parent}, which is not a vertex")]
    ParentOutOfRange {
        /// The child.
        vertex: Vertex,
        /// Its claimed parent.
        parent: Vertex,
    },
    /// A reached vertex's distance is negative or not finite, or an unreached one's is finite.
    #[error("vertex {vertex} (reached: {reached}) has distance {dist}")]
    BadDistance {
        /// The vertex.
        vertex: Vertex,
        /// Whether it has a parent.
        reached: bool,
        /// Its claimed distance.
        dist: f32,
    },
    /// Rule 1: following parents from this vertex never reaches the root.
    #[error("rule 1: the parents of vertex {vertex} form a cycle or lead to an unreached vertex")]
    NotATree {
        /// A vertex on the broken chain.
        vertex: Vertex,
    },
    /// Rule 3: an input edge breaks the level or distance rule.
    #[error("rule 3: edge {u}-{v} (weight {weight}) joins labels {label_u} and {label_v}")]
    EdgeRule {
        /// One endpoint.
        u: Vertex,
        /// The other endpoint.
        v: Vertex,
        /// The edge's weight (1 for BFS).
        weight: f32,
        /// `u`'s level or distance.
        label_u: f32,
        /// `v`'s level or distance.
        label_v: f32,
    },
    /// Rule 4: an input edge joins a reached and an unreached vertex.
    #[error("rule 4: edge {reached}-{unreached} leaves the tree ({unreached} was not reached)")]
    NotSpanning {
        /// The reached endpoint.
        reached: Vertex,
        /// The unreached endpoint.
        unreached: Vertex,
    },
    /// Rules 2 and 5: no input edge joins this vertex to its parent with the right level or
    /// distance.
    #[error("rules 2/5: no edge joins vertex {vertex} to its parent {parent} with label {label}")]
    ParentNotJoined {
        /// The child.
        vertex: Vertex,
        /// Its claimed parent.
        parent: Vertex,
        /// The child's level or distance.
        label: f32,
    },
    /// The edge count reported for TEPS is not the component's.
    #[error("the search reported {reported} edges, the component has {counted}")]
    EdgeCount {
        /// Reported by the search.
        reported: u64,
        /// Counted by validation.
        counted: u64,
    },
}

/// How many errors a failure keeps verbatim (it counts them all).
const KEEP: usize = 8;

/// A failed validation: how many rules were broken, and the first few. Serialisable, so that a
/// distributed validation can gather the failures found on other processes.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ValidationFailure {
    /// The first errors found.
    pub errors: Vec<ValidationError>,
    /// All errors found.
    pub total: u64,
}

impl ValidationFailure {
    fn push(&mut self, e: ValidationError) {
        self.total += 1;
        if self.errors.len() < KEEP {
            self.errors.push(e);
        }
    }

    /// Adds another part's failures to this one (keeping the first few verbatim).
    pub fn absorb(&mut self, other: ValidationFailure) {
        for e in other.errors {
            if self.errors.len() < KEEP {
                self.errors.push(e);
            }
        }
        self.total += other.total;
    }

    fn into_result<T>(self, ok: T) -> Result<T, ValidationFailure> {
        if self.total == 0 { Ok(ok) } else { Err(self) }
    }
}

impl fmt::Display for ValidationFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "validation failed with {} error(s)", self.total)?;
        for e in &self.errors {
            write!(f, "; {e}")?;
        }
        if self.total > self.errors.len() as u64 {
            write!(f, "; …")?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationFailure {}

/// The per-vertex labels the edge rules compare: BFS levels derived from the tree, or the claimed
/// distances.
#[derive(Clone, Debug)]
pub enum Labels<'a> {
    /// Depth in the parent tree (`u32::MAX` for unreached vertices).
    Levels(Vec<u32>),
    /// Claimed SSSP distances.
    Distances(&'a [f32]),
}

impl Labels<'_> {
    fn as_f32(&self, v: Vertex) -> f32 {
        match self {
            Labels::Levels(l) => l[v as usize] as f32,
            Labels::Distances(d) => d[v as usize],
        }
    }
}

/// Rule 1 and the sanity of the arrays: the parents form a tree rooted at the root. Returns the
/// labels for the edge rules.
pub fn check_tree<'a>(c: &Claimed<'a>) -> Result<Labels<'a>, ValidationFailure> {
    let n = c.parent.len();
    let mut fail = ValidationFailure::default();
    if let Some(d) = c.dist {
        if d.len() != n {
            fail.push(ValidationError::WrongLength {
                got: d.len(),
                expected: n,
            });
            return Err(fail);
        }
    }
    if c.root as usize >= n {
        fail.push(ValidationError::WrongLength {
            got: n,
            expected: c.root as usize + 1,
        });
        return Err(fail);
    }
    let root_dist = c.dist.map_or(0.0, |d| d[c.root as usize]);
    if c.parent[c.root as usize] != c.root || root_dist != 0.0 {
        fail.push(ValidationError::BadRoot {
            root: c.root,
            parent: c.parent[c.root as usize],
            dist: root_dist,
        });
    }
    for (v, &p) in c.parent.iter().enumerate() {
        if p != NO_PARENT && p as usize >= n {
            fail.push(ValidationError::ParentOutOfRange {
                vertex: v as Vertex,
                parent: p,
            });
        }
    }
    if let Some(d) = c.dist {
        for (v, (&p, &dv)) in c.parent.iter().zip(d).enumerate() {
            let reached = p != NO_PARENT;
            let sane = if reached {
                dv.is_finite() && dv >= 0.0
            } else {
                dv == f32::INFINITY
            };
            if !sane {
                fail.push(ValidationError::BadDistance {
                    vertex: v as Vertex,
                    reached,
                    dist: dv,
                });
            }
        }
    }
    if fail.total > 0 {
        return Err(fail);
    }
    // Depths by walking each chain up to a vertex of known depth, each vertex walked once.
    const UNKNOWN: u32 = u32::MAX;
    const ON_PATH: u32 = u32::MAX - 1;
    let mut depth = vec![UNKNOWN; n];
    depth[c.root as usize] = 0;
    let mut path: Vec<Vertex> = Vec::new();
    for start in 0..n as Vertex {
        if c.parent[start as usize] == NO_PARENT || depth[start as usize] != UNKNOWN {
            continue;
        }
        path.clear();
        let mut x = start;
        let base = loop {
            match depth[x as usize] {
                ON_PATH => break None,
                UNKNOWN if c.parent[x as usize] == NO_PARENT => break None,
                UNKNOWN => {
                    depth[x as usize] = ON_PATH;
                    path.push(x);
                    x = c.parent[x as usize];
                }
                d => break Some(d),
            }
        };
        match base {
            Some(d) => {
                for (i, &y) in path.iter().rev().enumerate() {
                    depth[y as usize] = d + 1 + i as u32;
                }
            }
            None => {
                fail.push(ValidationError::NotATree { vertex: start });
                // Leave the chain marked so that later walks into it fail too.
            }
        }
    }
    if fail.total > 0 {
        return Err(fail);
    }
    Ok(match c.dist {
        None => Labels::Levels(depth),
        Some(d) => Labels::Distances(d),
    })
}

/// What [`check_edges`] found over some input edges.
#[derive(Clone, Debug)]
pub struct EdgeTally {
    /// Non-self-loop input edges with an endpoint in the component.
    pub component_edges: u64,
    /// Bit `v`: an input edge joins `v` to its parent with the right label.
    confirmed: Vec<u64>,
    failure: ValidationFailure,
}

impl EdgeTally {
    /// An empty tally for a graph of `num_vertices`.
    pub fn new(num_vertices: usize) -> Self {
        Self {
            component_edges: 0,
            confirmed: vec![0; num_vertices.div_ceil(64)],
            failure: ValidationFailure::default(),
        }
    }

    /// Adds another range's tally to this one.
    pub fn merge(&mut self, other: EdgeTally) {
        self.component_edges += other.component_edges;
        for (a, b) in self.confirmed.iter_mut().zip(&other.confirmed) {
            *a |= b;
        }
        self.failure.absorb(other.failure);
    }

    /// The rule-5 confirmations as a bitmap (bit `v` of word `v / 64`), for merging tallies
    /// across processes with a bitwise OR.
    pub fn confirmed_words_mut(&mut self) -> &mut [u64] {
        &mut self.confirmed
    }

    /// Takes the failures found so far out of the tally (for gathering them elsewhere).
    pub fn take_failure(&mut self) -> ValidationFailure {
        std::mem::take(&mut self.failure)
    }

    /// Adds failures found elsewhere to the tally.
    pub fn absorb_failure(&mut self, other: ValidationFailure) {
        self.failure.absorb(other);
    }

    fn confirm(&mut self, v: Vertex) {
        self.confirmed[v as usize / 64] |= 1 << (v % 64);
    }

    fn is_confirmed(&self, v: Vertex) -> bool {
        self.confirmed[v as usize / 64] >> (v % 64) & 1 == 1
    }
}

/// Rules 3 and 4 over one range of input edges, the edge count, and the confirmations of rule 5.
pub fn check_edges(c: &Claimed<'_>, labels: &Labels<'_>, list: &EdgeList) -> EdgeTally {
    let mut t = EdgeTally::new(c.parent.len());
    for (e, &w) in list.edges.iter().zip(&list.weights) {
        if e.is_self_loop() {
            continue;
        }
        let (u, v) = (e.u, e.v);
        match (c.reached(u), c.reached(v)) {
            (false, false) => continue,
            (true, false) => {
                t.failure.push(ValidationError::NotSpanning {
                    reached: u,
                    unreached: v,
                });
                continue;
            }
            (false, true) => {
                t.failure.push(ValidationError::NotSpanning {
                    reached: v,
                    unreached: u,
                });
                continue;
            }
            (true, true) => {}
        }
        t.component_edges += 1;
        let (ok, confirms_v, confirms_u, weight) = match labels {
            Labels::Levels(l) => {
                let (lu, lv) = (l[u as usize], l[v as usize]);
                (lu.abs_diff(lv) <= 1, lv == lu + 1, lu == lv + 1, 1.0)
            }
            Labels::Distances(d) => {
                let (du, dv) = (d[u as usize], d[v as usize]);
                (!(du + w < dv || dv + w < du), dv == du + w, du == dv + w, w)
            }
        };
        if !ok {
            t.failure.push(ValidationError::EdgeRule {
                u,
                v,
                weight,
                label_u: labels.as_f32(u),
                label_v: labels.as_f32(v),
            });
        }
        if confirms_v && c.parent[v as usize] == u {
            t.confirm(v);
        }
        if confirms_u && c.parent[u as usize] == v {
            t.confirm(u);
        }
    }
    t
}

/// Rule 5 over the merged tally, and the reported edge count. Returns the component's edge count.
pub fn finish(
    c: &Claimed<'_>,
    labels: &Labels<'_>,
    tally: EdgeTally,
    reported: u64,
) -> Result<u64, ValidationFailure> {
    let mut fail = ValidationFailure::default();
    for (v, &p) in c.parent.iter().enumerate() {
        let v = v as Vertex;
        if p != NO_PARENT && v != c.root && !tally.is_confirmed(v) {
            fail.push(ValidationError::ParentNotJoined {
                vertex: v,
                parent: p,
                label: labels.as_f32(v),
            });
        }
    }
    let counted = tally.component_edges;
    fail.absorb(tally.failure);
    if reported != counted {
        fail.push(ValidationError::EdgeCount { reported, counted });
    }
    fail.into_result(counted)
}

/// All five rules and the count over the whole edge list, on one core.
pub fn validate(
    c: &Claimed<'_>,
    lists: &[&EdgeList],
    reported: u64,
) -> Result<u64, ValidationFailure> {
    let labels = check_tree(c)?;
    let mut tally = EdgeTally::new(c.parent.len());
    for list in lists {
        tally.merge(check_edges(c, &labels, list));
    }
    finish(c, &labels, tally, reported)
}

//! Direction-optimising BFS on a team of threads (Beamer, Asanović and Patterson, SC 2012, as
//! GAPBS's `bfs.cc` runs it): top-down steps over a shared queue while the frontier's edges are
//! few, bottom-up steps over a frontier bitmap while they are many.
//!
//! Switching (the paper's heuristic): go bottom-up when the edges out of the frontier (`scout`)
//! exceed the edges still unexplored over α; come back once the frontier shrinks (it stops
//! growing and holds fewer than n/β vertices). Top-down claims a vertex with a compare-and-swap
//! on its parent; bottom-up gives each thread whole 64-vertex words, so a vertex and its bit have
//! one writer. Each step ends at a barrier, after which member 0 alone updates the control state.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicUsize, Ordering};

use ::graph500::bfs::NO_PARENT;
use ::graph500::csr::Csr;
use ::graph500::kronecker::Vertex;

use super::frontier::{BATCH, Bitmap, Queue};
use super::team::{self, Chunks};

/// Beamer's switching thresholds (the paper's values, as the example's sequential kernel).
const ALPHA: usize = 14;
const BETA: usize = 24;

/// Top-down steps take the queue in chunks of this many vertices.
const TD_CHUNK: usize = 64;
/// Bottom-up steps take the bitmap in chunks of this many words.
const BU_CHUNK: usize = 16;

/// The buffers of one search, kept from search to search (allocated once per graph).
#[derive(Debug)]
pub struct Space {
    queues: [Queue; 2],
    bitmaps: [Bitmap; 2],
}

impl Space {
    /// Buffers for searches over `g`.
    pub fn new(g: &Csr) -> Self {
        let n = g.num_vertices();
        Self {
            queues: [Queue::with_capacity(n), Queue::with_capacity(n)],
            bitmaps: [Bitmap::new(n), Bitmap::new(n)],
        }
    }
}

/// What the team does in the next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    TopDown,
    /// Converts the queue to the bitmap before the first bottom-up step.
    ToBitmap,
    BottomUp,
    /// Converts the bitmap back to the queue after the last bottom-up step.
    ToQueue,
    Done,
}

impl Phase {
    fn from_u8(b: u8) -> Self {
        [
            Phase::TopDown,
            Phase::ToBitmap,
            Phase::BottomUp,
            Phase::ToQueue,
            Phase::Done,
        ][b as usize]
    }
}

/// Member 0's bookkeeping between steps.
#[derive(Debug)]
struct Control {
    edges_to_check: usize,
    scout: usize,
    awake: usize,
}

/// The state the members share during one search.
struct Shared<'a> {
    g: &'a Csr,
    space: &'a Space,
    parent: Vec<AtomicU32>,
    phase: AtomicU8,
    /// Which queue is the current frontier; the other receives the next one.
    current: AtomicUsize,
    /// Which bitmap is the current frontier.
    front: AtomicUsize,
    chunks: Chunks,
    /// The step's sum over members: the degrees of the vertices found (top-down), or their
    /// number (bottom-up).
    found: AtomicUsize,
    control: Mutex<Control>,
}

/// BFS from `root` over `g` on `threads` threads: `parent[root] = root`, [`NO_PARENT`] for
/// unreached vertices.
pub fn search(g: &Csr, root: Vertex, threads: usize, space: &Space) -> Vec<Vertex> {
    let n = g.num_vertices();
    let parent: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(NO_PARENT)).collect();
    parent[root as usize].store(root, Ordering::Relaxed);
    space.queues[0].clear();
    space.queues[1].clear();
    space.queues[0].append(&mut vec![root]);
    let shared = Shared {
        g,
        space,
        parent,
        phase: AtomicU8::new(Phase::TopDown as u8),
        current: AtomicUsize::new(0),
        front: AtomicUsize::new(0),
        chunks: Chunks::default(),
        found: AtomicUsize::new(0),
        control: Mutex::new(Control {
            edges_to_check: g.num_entries(),
            scout: g.degree(root),
            awake: 0,
        }),
    };
    shared.decide_from_queue(&mut shared.control.lock().expect("not poisoned"));
    team::run(threads, |member, barrier| {
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            barrier.wait();
            let phase = Phase::from_u8(shared.phase.load(Ordering::Relaxed));
            match phase {
                Phase::Done => break,
                Phase::TopDown => shared.top_down(&mut batch),
                Phase::ToBitmap => {
                    shared.clear_front(member, threads);
                    barrier.wait();
                    shared.queue_to_bitmap();
                }
                Phase::BottomUp => shared.bottom_up(),
                Phase::ToQueue => shared.bitmap_to_queue(&mut batch),
            }
            barrier.wait();
            if member == 0 {
                shared.after(phase);
            }
        }
    });
    shared
        .parent
        .into_iter()
        .map(AtomicU32::into_inner)
        .collect()
}

impl Shared<'_> {
    fn queue(&self, which: usize) -> &Queue {
        &self.space.queues[which & 1]
    }

    fn bitmap(&self, which: usize) -> &Bitmap {
        &self.space.bitmaps[which & 1]
    }

    fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    /// With a non-empty queue as the frontier: the next step's direction (member 0).
    fn decide_from_queue(&self, c: &mut Control) {
        let current = self.queue(self.current.load(Ordering::Relaxed));
        if current.len() == 0 {
            self.set_phase(Phase::Done);
        } else if c.scout > c.edges_to_check / ALPHA {
            c.awake = current.len();
            self.set_phase(Phase::ToBitmap);
        } else {
            c.edges_to_check = c.edges_to_check.saturating_sub(c.scout);
            self.set_phase(Phase::TopDown);
        }
        self.chunks.reset();
        self.found.store(0, Ordering::Relaxed);
    }

    /// Member 0, after everyone finished `phase`: the next phase.
    fn after(&self, phase: Phase) {
        let mut c = self.control.lock().expect("only member 0 locks it");
        let found = self.found.load(Ordering::Relaxed);
        match phase {
            Phase::TopDown => {
                let now = self.current.load(Ordering::Relaxed) ^ 1;
                self.current.store(now, Ordering::Relaxed);
                self.queue(now ^ 1).clear();
                c.scout = found;
                self.decide_from_queue(&mut c);
            }
            Phase::ToBitmap => {
                self.queue(self.current.load(Ordering::Relaxed)).clear();
                self.set_phase(Phase::BottomUp);
            }
            Phase::BottomUp => {
                self.front.fetch_xor(1, Ordering::Relaxed);
                let old = std::mem::replace(&mut c.awake, found);
                let n = self.g.num_vertices();
                let again = found > 0 && (found >= old || found > n / BETA);
                self.set_phase(if again {
                    Phase::BottomUp
                } else {
                    Phase::ToQueue
                });
            }
            Phase::ToQueue => {
                c.scout = 1;
                self.decide_from_queue(&mut c);
                return;
            }
            Phase::Done => {}
        }
        self.chunks.reset();
        self.found.store(0, Ordering::Relaxed);
    }

    fn top_down(&self, batch: &mut Vec<Vertex>) {
        let current = self.queue(self.current.load(Ordering::Relaxed));
        let next = self.queue(self.current.load(Ordering::Relaxed) ^ 1);
        let mut scout = 0;
        while let Some(range) = self.chunks.next(TD_CHUNK, current.len()) {
            for i in range {
                let u = current.get(i);
                for &v in self.g.neighbors(u) {
                    let p = &self.parent[v as usize];
                    if p.load(Ordering::Relaxed) == NO_PARENT
                        && p.compare_exchange(NO_PARENT, u, Ordering::Relaxed, Ordering::Relaxed)
                            .is_ok()
                    {
                        scout += self.g.degree(v);
                        batch.push(v);
                        if batch.len() == BATCH {
                            next.append(batch);
                        }
                    }
                }
            }
        }
        next.append(batch);
        self.found.fetch_add(scout, Ordering::Relaxed);
    }

    fn clear_front(&self, member: usize, threads: usize) {
        let front = self.bitmap(self.front.load(Ordering::Relaxed));
        for i in team::share(front.num_words(), member, threads) {
            front.set_word(i, 0);
        }
    }

    fn queue_to_bitmap(&self) {
        let current = self.queue(self.current.load(Ordering::Relaxed));
        let front = self.bitmap(self.front.load(Ordering::Relaxed));
        while let Some(range) = self.chunks.next(TD_CHUNK * 16, current.len()) {
            for i in range {
                front.insert(current.get(i));
            }
        }
    }

    fn bottom_up(&self) {
        let which = self.front.load(Ordering::Relaxed);
        let (front, next) = (self.bitmap(which), self.bitmap(which ^ 1));
        let n = self.g.num_vertices();
        let mut awake = 0;
        while let Some(words) = self.chunks.next(BU_CHUNK, front.num_words()) {
            for w in words {
                let mut bits = 0u64;
                for v in w * 64..(w * 64 + 64).min(n) {
                    let p = &self.parent[v];
                    if p.load(Ordering::Relaxed) != NO_PARENT {
                        continue;
                    }
                    for &u in self.g.neighbors(v as Vertex) {
                        if front.contains(u) {
                            p.store(u, Ordering::Relaxed);
                            bits |= 1 << (v % 64);
                            awake += 1;
                            break;
                        }
                    }
                }
                next.set_word(w, bits);
            }
        }
        self.found.fetch_add(awake, Ordering::Relaxed);
    }

    fn bitmap_to_queue(&self, batch: &mut Vec<Vertex>) {
        let front = self.bitmap(self.front.load(Ordering::Relaxed));
        let queue = self.queue(self.current.load(Ordering::Relaxed));
        while let Some(words) = self.chunks.next(BU_CHUNK * 4, front.num_words()) {
            for w in words {
                let mut bits = front.word(w);
                while bits != 0 {
                    batch.push((w * 64) as Vertex + bits.trailing_zeros());
                    bits &= bits - 1;
                    if batch.len() == BATCH {
                        queue.append(batch);
                    }
                }
            }
        }
        queue.append(batch);
    }
}

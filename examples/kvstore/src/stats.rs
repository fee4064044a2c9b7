//! Calls per command, counted by each worker for the connections it serves (a thread-local
//! table, no atomics on the path of a request), and read by `INFO commandstats` through the
//! shard of every worker: a shard's operation runs on its own worker, so it reads that worker's
//! table.

use std::cell::RefCell;

thread_local! {
    /// Calls by row of the command table (`command::table`).
    static CALLS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Counts one call of the command at `row`.
pub fn count(row: usize) {
    CALLS.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() <= row {
            c.resize(row + 1, 0);
        }
        c[row] += 1;
    });
}

/// This worker's calls by row (rows past the end were never called).
pub fn calls() -> Vec<u64> {
    CALLS.with(|c| c.borrow().clone())
}

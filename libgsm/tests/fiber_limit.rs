//! A process can keep only so many fibers alive: each stack is two memory mappings and the
//! kernel allows `vm.max_map_count` per process. Meeting that limit is reported as that limit,
//! with its numbers and the remedies that work; it used to say "lower GSM_STACK_SIZE", which
//! changes nothing there. (Its own test binary: it fills the process's mappings.)

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;

use gossamer::{Config, WorkerId, spawn, spawn_on, yield_now};

#[test]
fn the_fiber_limit_of_a_process_is_named_as_the_kernels_mapping_limit() {
    let limit: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .expect("reading vm.max_map_count")
        .trim()
        .parse()
        .expect("vm.max_map_count is a number");
    if limit > 262_144 {
        eprintln!("vm.max_map_count is {limit}: too many fibers to reach it in a test; skipped");
        return;
    }
    let (alive, message, remote) = gossamer::run(
        Config::default().workers(2).stack_size(64 << 10),
        move || {
            let go = Rc::new(Cell::new(false));
            let mut fibers = Vec::new();
            let message = loop {
                assert!(
                    fibers.len() <= limit,
                    "{} fibers alive and no limit met",
                    fibers.len()
                );
                let g = go.clone();
                let started = catch_unwind(AssertUnwindSafe(|| {
                    spawn(move || {
                        while !g.get() {
                            yield_now();
                        }
                    })
                }));
                match started {
                    Ok(h) => fibers.push(h),
                    Err(p) => {
                        break p.downcast_ref::<String>().cloned().unwrap_or_default();
                    }
                }
            };
            let alive = fibers.len();
            // A fiber asked of another worker meets the same limit there: its join says so,
            // and the run goes on (that worker's poller panicked, which ended the run).
            let remote = spawn_on(WorkerId::new(1), || 7u32).try_join();
            go.set(true);
            for f in fibers {
                f.join();
            }
            // The stacks are back: fibers start again, here and there.
            assert_eq!(spawn(|| 7).join(), 7);
            assert_eq!(spawn_on(WorkerId::new(1), || 8u32).join(), 8);
            (alive, message, remote)
        },
    )
    .unwrap();
    eprintln!("{alive} fibers alive, then: {message}");
    assert!(
        alive > limit / 2 - 2000 && alive <= limit / 2,
        "{alive} fibers alive at the limit of {limit} mappings"
    );
    assert!(
        message.contains("vm.max_map_count")
            && message.contains(&format!("{limit}"))
            && message.contains("fibers can be alive at once")
            && !message.contains("GSM_STACK_SIZE"),
        "{message}"
    );
    match remote {
        Err(e) => assert!(e.to_string().contains("vm.max_map_count"), "{e}"),
        Ok(v) => panic!("a fiber started on worker 1 past the limit (it returned {v})"),
    }
    // The mappings it says the process holds are those the kernel counts: not past the limit.
    let held: usize = message
        .split("this process holds ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of mappings in: {message}"));
    assert!(
        held <= limit && held + 16 >= limit,
        "{held} of {limit}: {message}"
    );
}

//! A process can keep only so many fibers alive: each stack is two memory mappings and the
//! kernel allows `vm.max_map_count` per process. Meeting that limit is reported as that limit,
//! with its numbers and the remedies that work; it used to say "lower GSM_STACK_SIZE", which
//! changes nothing there. (Its own test binary: it fills the process's mappings.)

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

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
    // Where the refusal of a local `spawn` is reported: at the caller's `spawn` line.
    let at: Arc<Mutex<Option<(String, u32)>>> = Arc::default();
    let hook_at = Arc::clone(&at);
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        if text.contains("cannot allocate a fiber stack") {
            let l = info.location().map(|l| (l.file().to_string(), l.line()));
            hook_at.lock().unwrap().get_or_insert(l.unwrap_or_default());
        } else {
            default(info);
        }
    }));
    let spawn_line = Arc::new(AtomicU32::new(0));
    let line_of_spawn = Arc::clone(&spawn_line);
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
                spawn_line.store(line!() + 2, Ordering::SeqCst);
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
            // So does a burst of them, promptly: each refusal read /proc/self/maps again (18 ms
            // at the limit), and 2000 took half a minute.
            let burst = std::time::Instant::now();
            let refused: Vec<_> = (0..2000u32)
                .map(|i| spawn_on(WorkerId::new(1), move || i))
                .collect();
            for h in refused {
                assert!(h.try_join().is_err(), "a fiber started past the limit");
            }
            let burst = burst.elapsed();
            assert!(
                burst < std::time::Duration::from_secs(10),
                "2000 refused spawns took {burst:?}"
            );
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
    let _ = std::panic::take_hook();
    assert_eq!(
        at.lock().unwrap().clone(),
        Some((file!().to_string(), line_of_spawn.load(Ordering::SeqCst))),
        "the refusal is not reported at the caller's spawn"
    );
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

//! A misuse of the API panics at the caller's line, not at a line of the library: the entry
//! points are `#[track_caller]`, as `RefCell::borrow_mut` and `Option::unwrap` are, so the panic
//! report names the user's `apply`, `join`, `recv` or `spawn_on`. Before, every one of them named
//! a line of `libgsm/src`. One test in its own binary: it installs a panic hook.

use gossamer::{Config, WorkerId};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};

/// Every panic seen: (file, line, message).
type Seen = Arc<Mutex<Vec<(String, u32, String)>>>;

fn message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()))
        .unwrap_or_default()
}

/// The line at which the last panic whose message contains `text` was reported (a fiber's own
/// panic comes first, its `join` raises it again).
fn line_of(seen: &Seen, text: &str) -> (String, u32) {
    let seen = seen.lock().unwrap();
    let (file, line, _) = seen
        .iter()
        .rev()
        .find(|(_, _, m)| m.contains(text))
        .unwrap_or_else(|| panic!("no panic with {text:?} among {seen:?}"));
    (file.clone(), *line)
}

#[test]
fn misuses_of_the_api_panic_at_the_callers_line() {
    let seen: Seen = Arc::default();
    let hook_seen = Arc::clone(&seen);
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        let (file, line) = info
            .location()
            .map(|l| (l.file().to_string(), l.line()))
            .unwrap_or_default();
        let text = message(info.payload());
        hook_seen.lock().unwrap().push((file, line, text));
    }));
    let here = file!().to_string();
    let mut expected = Vec::new();

    // Outside any worker.
    let line = line!() + 1;
    let r = catch_unwind(|| gossamer::entrust(1u64));
    assert!(r.is_err());
    expected.push(("entrust was called outside a gossamer worker", line));

    let lines = gossamer::run(Config::default().workers(2), move || {
        let mut lines = Vec::new();
        let t = gossamer::entrust_on(WorkerId::new(1), || 0u64);

        let line = line!() + 1;
        let r = catch_unwind(AssertUnwindSafe(|| t.apply(|_| -> u64 { panic!("boom") })));
        assert!(r.is_err());
        lines.push(("gossamer: Trust::apply failed", line));

        let line = line!() + 1;
        let r = catch_unwind(|| gossamer::recv::<u64>(WorkerId::new(99), 0));
        assert!(r.is_err());
        lines.push(("gossamer::recv: worker 99 does not exist", line));

        let line = line!() + 1;
        let r = catch_unwind(|| gossamer::spawn_on(WorkerId::new(9), || 0u64));
        assert!(r.is_err());
        lines.push(("spawn_on: worker 9 does not exist", line));

        let h = gossamer::spawn(|| -> u64 { panic!("the fiber's own panic") });
        let line = line!() + 1;
        let r = catch_unwind(AssertUnwindSafe(|| h.join()));
        assert!(r.is_err());
        lines.push(("the fiber's own panic", line));

        // A blocking call inside a callback, where nothing may block.
        let t2 = gossamer::entrust(0u64);
        let t3 = gossamer::entrust_on(WorkerId::new(1), || 0u64);
        let blocked = Arc::new(Mutex::new(None));
        let b2 = Arc::clone(&blocked);
        let line = line!() + 4;
        t3.apply_then(
            |v| *v,
            move |_| {
                let r = catch_unwind(AssertUnwindSafe(|| t2.apply(|v| *v)));
                *b2.lock().unwrap() = Some(r.is_err());
            },
        );
        gossamer::wait_for(|| blocked.lock().unwrap().is_some());
        assert_eq!(*blocked.lock().unwrap(), Some(true));
        lines.push(("blocking call (apply/try_apply", line));
        lines
    })
    .expect("the run ends well");
    let _ = std::panic::take_hook();
    expected.extend(lines);
    for (text, line) in expected {
        assert_eq!(
            line_of(&seen, text),
            (here.clone(), line),
            "the panic with {text:?} must name the caller's line"
        );
    }
}

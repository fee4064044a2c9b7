use super::*;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn a_failure_reported_while_the_runtime_is_attached_is_delivered_once() {
    // The runtime is being attached (the lock held, as `attach` holds it) when a fabric
    // reports: the report must wait and then go to the runtime. Deciding before the lock
    // that there was no runtime yet, it was put in the box `attach` had already emptied.
    let h: Arc<Handoff<u32, u32>> = Arc::new(Handoff::default());
    let attaching = h.early.lock().unwrap();
    let h2 = h.clone();
    let reporter = std::thread::spawn(move || h2.report(7));
    std::thread::sleep(Duration::from_millis(50));
    h.runtime.set(1).unwrap();
    drop(attaching);
    assert_eq!(
        reporter.join().unwrap(),
        Some((1, 7)),
        "the failure was lost"
    );
    assert_eq!(h.attach(2), None, "the failure was kept as well");
    // Before the runtime exists, the first failure is kept for it.
    let h: Handoff<u32, u32> = Handoff::default();
    assert_eq!(h.report(3), None);
    assert_eq!(h.report(4), None);
    assert_eq!(h.attach(1), Some(3));
    assert_eq!(h.report(5), Some((1, 5)));
}

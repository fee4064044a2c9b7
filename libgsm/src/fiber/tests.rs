use super::*;
use std::rc::Rc;

#[test]
fn fibers_suspend_resume_and_recycle_stacks() {
    let mut pool = StackPool::new(64 * 1024);
    let log = Rc::new(Cell::new(0));
    let l2 = log.clone();
    let mut co = pool
        .fiber(move || {
            l2.set(1);
            suspend();
            l2.set(2);
        })
        .unwrap();
    assert!(co.resume(()).as_yield().is_some());
    clear_current();
    assert_eq!(log.get(), 1);
    assert!(co.resume(()).as_return().is_some());
    assert_eq!(log.get(), 2);
    pool.recycle(co);
    assert_eq!(pool.stacks.len(), 1);
    let co = pool.fiber(|| {}).unwrap();
    assert!(pool.stacks.is_empty());
    drop(co);
}

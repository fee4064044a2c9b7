use super::*;
use crate::Config;

fn forged<T: Send + 'static>(
    trustee: usize,
    idx: u32,
    gn: u32,
) -> std::mem::ManuallyDrop<Trust<T>> {
    std::mem::ManuallyDrop::new(Trust {
        home: home(trustee, crate::worker::core_or_panic("test").epoch()),
        idx,
        gn,
        ty: type_index::<T>(),
        id: 0,
        made: AtomicU64::new(0),
        senders: AtomicU64::new(0),
        _t: PhantomData,
    })
}

#[test]
fn a_request_naming_code_outside_the_text_is_refused_locally_and_remotely() {
    crate::run(Config::default().workers(2), || {
        let core = crate::worker::core_or_panic("test");
        // SAFETY: the pointer is only turned into a code offset (outside this binary's text)
        // and sent; the trustee must refuse it, never call it.
        let bogus = unsafe { std::mem::transmute::<usize, Trampoline>(16) };
        for w in 0..2 {
            match block_on::<u64>(core, w, bogus, 0, 0, Src::of(&()), None, false) {
                Err(DelegationError::Panicked(m)) => {
                    assert!(m.contains("outside this binary's text"), "{m}")
                }
                other => panic!("worker {w}: {other:?}"),
            }
        }
    })
    .unwrap();
}

#[test]
fn a_request_whose_captured_bytes_do_not_fit_its_closure_is_refused() {
    crate::run(Config::default().workers(2), || {
        let core = crate::worker::core_or_panic("test");
        for w in 0..2 {
            let t = entrust_on(WorkerId::new(w), || 5u64);
            let k = 7u64;
            let f = move |n: &mut u64| *n + k;
            let tramp = tramp_apply_of(&f, &t);
            // Three bytes where the closure needs eight.
            let r = block_on::<u64>(core, w, tramp, t.idx, t.gn, Src::of(&[1u8; 3]), None, false);
            match r {
                Err(DelegationError::Wire(m)) => assert!(m.contains("do not fit"), "{m}"),
                other => panic!("worker {w}: {other:?}"),
            }
            assert_eq!(t.apply(f), 12, "the property is untouched");
        }
    })
    .unwrap();
}

/// The trampoline `apply` would send for closure `f` on `t`.
fn tramp_apply_of<T: Send + 'static, U: Wire, F: FnOnce(&mut T) -> U + Copy>(
    _f: &F,
    _t: &Trust<T>,
) -> Trampoline {
    trampoline::<Apply<T, U, F>>()
}

/// Requests of one closure type to one trustee reach it in runs that one trampoline call
/// serves (`trust::serve::serve_run`): each must still be answered as if served alone, in
/// order, with its own property looked up, a dead name refused, and a property that a
/// closure of the run poisoned refusing the rest of the run.
#[test]
fn runs_of_requests_are_answered_as_if_served_one_by_one() {
    use std::cell::RefCell;
    use std::rc::Rc;
    const N: u32 = 3000;
    const PANIC_AT: u32 = 1004; // a request to `b` (1004 % 7 == 3)
    crate::run(Config::default().workers(2), || {
        let a = entrust_on(WorkerId::new(1), || 0u64);
        let b = entrust_on(WorkerId::new(1), || 0u64);
        // A name that never existed, of the same type: its records join the same runs.
        let dead = forged::<u64>(1, 1000, 1);
        let pick = |i: u32| match i % 7 {
            0..=2 | 6 => 0,
            3 | 4 => 1,
            _ => 2,
        };
        let log = Rc::new(RefCell::new(Vec::new()));
        for i in 0..N {
            let t: &Trust<u64> = [&a, &b, &*dead][pick(i)];
            let l = log.clone();
            t.try_apply_then(
                move |n: &mut u64| {
                    if i == PANIC_AT {
                        panic!("boom at {i}");
                    }
                    *n += 1;
                    *n
                },
                move |r| l.borrow_mut().push((i, r)),
            );
        }
        while log.borrow().len() < N as usize {
            crate::yield_now();
        }
        let mut counts = [0u64; 2];
        let mut expected = Vec::new();
        for i in 0..N {
            let p = pick(i);
            let r = if p == 2 {
                Err(DelegationError::DeadProperty)
            } else if p == 1 && i == PANIC_AT {
                Err(DelegationError::Panicked(format!("boom at {i}")))
            } else if p == 1 && i > PANIC_AT {
                Err(DelegationError::Poisoned)
            } else {
                counts[p] += 1;
                Ok(counts[p])
            };
            expected.push((i, r));
        }
        assert_eq!(*log.borrow(), expected);
        assert_eq!(a.apply(|n| *n), counts[0]);
    })
    .unwrap();
}

#[test]
fn stale_foreign_and_mistyped_names_get_dead_property_locally_and_remotely() {
    crate::run(Config::default().workers(2), || {
        for w in 0..2 {
            let real = entrust_on(WorkerId::new(w), || 5u64);
            let (idx, gn) = (real.idx, real.gn);
            // Foreign: an index the table never had.
            let t = forged::<u64>(w, 1000, 1);
            assert_eq!(
                t.try_apply(|n| *n).unwrap_err(),
                DelegationError::DeadProperty
            );
            // Mistyped: the right name read as another type.
            let t = forged::<u32>(w, idx, gn);
            assert_eq!(
                t.try_apply(|n| *n).unwrap_err(),
                DelegationError::DeadProperty
            );
            // Dead: the property is gone and its slot free (its name, type and generation
            // would all still match the key word of a trust of this process).
            drop(real);
            for _ in 0..1000 {
                crate::yield_now();
            }
            let t = forged::<u64>(w, idx, gn);
            assert_eq!(
                t.try_apply(|n| *n).unwrap_err(),
                DelegationError::DeadProperty
            );
            // Stale: the slot reused with a new generation.
            let _other = entrust_on(WorkerId::new(w), || 6u64);
            let t = forged::<u64>(w, idx, gn);
            assert_eq!(
                t.try_apply(|n| *n).unwrap_err(),
                DelegationError::DeadProperty
            );
            // An owned argument sent to a dead property comes back as an error (and is dropped
            // by the trampoline).
            let t = forged::<u64>(w, idx, gn);
            assert_eq!(
                t.try_apply_with(vec![1u8; 10], |_, v| v.len()).unwrap_err(),
                DelegationError::DeadProperty
            );
        }
    })
    .unwrap();
}

/// A property poisoned by a remote closure's panic refuses applies until its trustee resets it;
/// then applies from anywhere see the new value. Reset elsewhere than on the trustee panics,
/// naming the trustee.
#[test]
fn a_poisoned_property_is_reset_by_its_trustee() {
    crate::run(Config::default().workers(2), || {
        let t = crate::entrust_on(WorkerId::new(1), || vec![1u32, 2]);
        let r = t.try_apply(|v| -> usize { panic!("a bad update of {} values", v.len()) });
        assert!(matches!(r, Err(DelegationError::Panicked(_))), "{r:?}");
        assert_eq!(t.try_apply(|v| v.len()), Err(DelegationError::Poisoned));
        let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = t.reset(Vec::new());
        }))
        .expect_err("reset off the trustee");
        let msg = refused
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(msg.contains("the property lives on worker 1"), "{msg}");
        let old = crate::spawn_on_with(t.trustee(), t.clone(), |t: Trust<Vec<u32>>| {
            t.reset(vec![7]).map_err(|e| e.to_string())
        })
        .join();
        assert_eq!(old, Ok(vec![1, 2]));
        assert_eq!(t.apply(|v| v.clone()), vec![7]);
    })
    .unwrap();
}

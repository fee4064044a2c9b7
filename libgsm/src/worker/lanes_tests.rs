//! Unit tests of the lazily made rings between a rank's workers.

use super::lanes::Lanes;
use crate::wire::ring::RingLayout;

fn lanes(local: usize, base: usize) -> Lanes {
    Lanes::new(local, base, RingLayout::new(4, 64).expect("a valid layout"))
}

/// A ring made by a producer reaches its consumer once, on the lane it was made for, and a
/// published slot travels through it.
#[test]
fn a_ring_made_on_first_use_reaches_its_consumer_once() {
    let l = lanes(3, 10);
    assert!(l.arrivals(1).is_empty(), "no ring before the first use");
    let mut p = l.make(12, 11, true);
    let mut got = l.arrivals(1);
    assert_eq!(got.len(), 1);
    let (request, from, mut c) = got.pop().expect("one end");
    assert!(request);
    assert_eq!(from, 12);
    assert!(l.arrivals(1).is_empty(), "an end is handed over once");
    assert!(l.arrivals(0).is_empty() && l.arrivals(2).is_empty());
    let mut w = p.try_reserve().expect("room in a new ring");
    // SAFETY: the slot is written only here and read below through the consumer.
    let buf = unsafe { w.buf_uninit() };
    buf[0].write(7);
    w.publish(1);
    let slot = c.poll().expect("the published slot");
    // SAFETY: the byte was written above before publishing.
    assert_eq!(unsafe { slot.bytes_uninit()[0].assume_init() }, 7);
}

/// A mark is seen by the cheap look and taken once, naming the producer by its global id, on
/// its own lane only.
#[test]
fn marks_are_taken_once_on_their_lane() {
    let l = lanes(4, 8);
    assert!(!l.any(2));
    l.mark(9, 10, false);
    l.mark(11, 10, false);
    assert!(l.any(2));
    let mut requests = Vec::new();
    l.take(2, true, |g| requests.push(g));
    assert!(requests.is_empty(), "no request-lane mark was made");
    let mut responses = Vec::new();
    l.take(2, false, |g| responses.push(g));
    assert_eq!(responses, vec![9, 11]);
    assert!(!l.any(2), "taken marks are gone");
    let mut again = Vec::new();
    l.take(2, false, |g| again.push(g));
    assert!(again.is_empty());
}

//! loom models of the non-blocking reorder buffer (after Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream
//! Processing on Shared-Memory Multicores*; `src/order/reorder.rs`): two or three workers finishing
//! serials out of order, buffers of 1 and 2 slots (the full-buffer retry), and a negative control: without the two
//! `SeqCst` fences of the flag handshake, loom finds an interleaving that strands a unit (invariant I5).
//! Run with `make test-loom`.
#![cfg(loom)]

use loom::sync::{Arc, Mutex};
use loom::thread;
use windgate_core::order::reorder::{Reorder, ReorderBuffer, send_blocking};

fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Worker `w` sends `serials[w]` in order; afterwards every unit must be out, in serial order.
fn model(
    buffer: impl Fn() -> ReorderBuffer<u64> + Sync + Send + 'static,
    serials: &'static [&'static [u64]],
) {
    check(move || {
        let b = Arc::new(buffer());
        let out = Arc::new(Mutex::new(Vec::new()));
        let handles: Vec<_> = serials
            .iter()
            .map(|&mine| {
                let (b, out) = (b.clone(), out.clone());
                thread::spawn(move || {
                    for &s in mine {
                        send_blocking(&*b, s, s, &mut |u| out.lock().unwrap().push(u));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let mut want: Vec<u64> = serials.iter().flat_map(|s| s.iter().copied()).collect();
        want.sort();
        // I5: with no worker inside `send`, nothing is stranded; and the order is the serial order.
        assert_eq!(*out.lock().unwrap(), want);
        assert_eq!(b.next_serial(), want.len() as u64 + 1);
    });
}

#[test]
fn two_workers_out_of_order() {
    model(|| ReorderBuffer::new(2), &[&[2], &[1]]);
}

#[test]
fn full_buffer_of_one_slot() {
    model(|| ReorderBuffer::new(1), &[&[2], &[1, 3]]);
}

#[test]
fn interleaved_serials_two_slots() {
    model(|| ReorderBuffer::new(2), &[&[1, 3], &[2, 4]]);
}

#[test]
fn three_workers_no_spinning() {
    // A full buffer makes workers spin, which loom cannot bound with three threads: four slots here.
    model(|| ReorderBuffer::new(4), &[&[3], &[1], &[2]]);
}

/// The negative control: the paper's two-location flag handshake with release/acquire only; loom must find
/// the interleaving where the drainer clears the flag without seeing a deposit, stranding it.
#[test]
fn weak_ordering_strands_a_unit() {
    let result = std::panic::catch_unwind(|| {
        model(
            || ReorderBuffer::with_weak_ordering_for_tests(2),
            &[&[2], &[1]],
        );
    });
    assert!(result.is_err(), "loom should find the stranded unit");
}

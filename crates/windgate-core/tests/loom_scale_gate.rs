//! loom models of ScaleGate's insert / ready / advance races (`src/order/scale_gate.rs`, on the shared list of
//! `src/sync/rc_skiplist.rs`): 2 sources x 1-2 readers at 1-2 levels. Run with `RUSTFLAGS="--cfg loom" cargo test -p windgate-core --release --test loom_scale_gate`
//! (`make loom`).
//!
//! Readers poll a bounded number of times while the sources run (a spinning reader would make loom's search
//! unbounded), check that what they got is a prefix of the merge, then drain the rest after the sources
//! finished. Every interleaving of the concurrent part is explored up to `PREEMPTIONS` forced preemptions.
#![cfg(loom)]

use loom::thread;
use windgate_core::order::scale_gate::{NextItem, Reader, ScaleGate};

const PREEMPTIONS: usize = 2;
/// Polls a reader makes while the sources run.
const POLLS: usize = 3;

type Key = (u32, usize);

fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(PREEMPTIONS);
    b.check(f);
}

/// Up to `POLLS` items read while the sources may still be adding.
fn poll(r: &mut Reader<Key, u32>) -> Vec<Key> {
    let mut got = vec![];
    for _ in 0..POLLS {
        if let NextItem::Item(k, v) = r.next_ready() {
            assert_eq!(k.0, *v);
            got.push(k);
        }
    }
    got
}

/// The rest, once every source closed: no `Pending` may remain.
fn drain(r: &mut Reader<Key, u32>, got: &mut Vec<Key>) {
    loop {
        match r.next_ready() {
            NextItem::Item(k, v) => {
                assert_eq!(k.0, *v);
                got.push(k);
            }
            NextItem::Pending => panic!("pending after every source closed"),
            NextItem::End => return,
        }
    }
}

/// Every reader reads every item once, in key order; what it read early is a prefix of the merge.
fn model(levels: usize, readers: usize, items: [&'static [u32]; 2]) {
    check(move || {
        let (srcs, rdrs) = ScaleGate::new::<Key, u32>(2, readers, levels);
        let mut expected: Vec<Key> = items
            .iter()
            .enumerate()
            .flat_map(|(j, l)| l.iter().map(move |&k| (k, j)))
            .collect();
        expected.sort();
        let mut threads = vec![];
        for (j, mut src) in srcs.into_iter().enumerate() {
            let list = items[j];
            threads.push(thread::spawn(move || {
                for &k in list {
                    src.add((k, j), k);
                }
                src.close();
            }));
        }
        let mut rdrs: Vec<_> = rdrs.into_iter().collect();
        let early: Vec<Vec<Key>> = rdrs.iter_mut().map(poll).collect();
        for t in threads {
            t.join().unwrap();
        }
        for (r, mut got) in rdrs.iter_mut().zip(early) {
            drain(r, &mut got);
            assert_eq!(got, expected);
        }
    });
}

#[test]
fn one_level_one_reader() {
    model(1, 1, [&[1, 3], &[2]]);
}

#[test]
fn one_level_two_readers() {
    model(1, 2, [&[1], &[2]]);
}

#[test]
fn two_levels_equal_keys_at_one_spot() {
    model(2, 1, [&[2, 2], &[2]]);
}

/// A marker releases a source's latest item without a later item, and readers skip it.
#[test]
fn marker_releases() {
    check(|| {
        let (mut srcs, mut rdrs) = ScaleGate::new::<u32, u32>(2, 1, 2);
        let mut b = srcs.pop().unwrap();
        let mut a = srcs.pop().unwrap();
        let t = thread::spawn(move || {
            a.add(1, 1);
            a.advance(5);
            a
        });
        b.add(2, 2);
        b.advance(5);
        let mut got = vec![];
        while let NextItem::Item(k, _) = rdrs[0].next_ready() {
            got.push(k);
        }
        let _a = t.join().unwrap();
        while let NextItem::Item(k, _) = rdrs[0].next_ready() {
            got.push(k);
        }
        assert_eq!(got, vec![1, 2]);
    });
}

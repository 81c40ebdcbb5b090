//! loom models of ScaleGate's insert / ready / advance races (brief 002 §5.2): 2 sources x 1-2 readers at
//! 1-2 levels. Run with `RUSTFLAGS="--cfg loom" cargo test -p windgate-core --release --test loom_scale_gate`
//! (`make loom`).
#![cfg(loom)]

use loom::thread;
use windgate_core::order::scale_gate::{Next, ScaleGate};

/// Explores interleavings with at most `PREEMPTIONS` forced preemptions per execution (loom's bound; the
/// unbounded search of spinning readers does not finish).
const PREEMPTIONS: usize = 2;

fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(PREEMPTIONS);
    b.check(f);
}

fn read_all(
    r: &mut windgate_core::order::scale_gate::Reader<(u32, usize), u32>,
) -> Vec<(u32, usize)> {
    let mut got = vec![];
    loop {
        match r.next() {
            Next::Item(k, v) => {
                assert_eq!(k.0, *v);
                got.push(k);
            }
            Next::Pending => thread::yield_now(),
            Next::End => return got,
        }
    }
}

/// Every reader reads every item, in key order, and only once all sources are past it. Sources run on
/// spawned threads, the first reader on the model's main thread.
fn model(levels: usize, readers: usize, items: [&'static [u32]; 2]) {
    check(move || {
        let (srcs, rdrs) = ScaleGate::new::<(u32, usize), u32>(2, readers, levels);
        let mut expected: Vec<(u32, usize)> = items
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
        let mut rdrs = rdrs.into_iter();
        let mut first = rdrs.next().unwrap();
        let others: Vec<_> = rdrs
            .map(|mut r| thread::spawn(move || read_all(&mut r)))
            .collect();
        assert_eq!(read_all(&mut first), expected);
        for t in threads {
            t.join().unwrap();
        }
        for r in others {
            assert_eq!(r.join().unwrap(), expected);
        }
    });
}

#[test]
fn one_level_one_reader() {
    model(1, 1, [&[1, 3], &[2]]);
}

#[test]
fn one_level_two_readers() {
    model(1, 2, [&[1], &[1]]);
}

#[test]
fn two_levels_concurrent_inserts_at_one_spot() {
    model(2, 1, [&[2, 2], &[2]]);
}

/// A marker releases a source's latest item without a later item.
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
        let _a = t.join().unwrap();
        let r = &mut rdrs[0];
        let mut got = vec![];
        while let Next::Item(k, _) = r.next() {
            got.push(k);
        }
        assert_eq!(got, vec![1, 2]);
    });
}

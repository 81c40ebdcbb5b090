//! W-Hive edge cases in one thread: the half-open release rule, creation out of window order, close and end,
//! negative timestamps and gaps, a panicking updater, and reclamation (every node freed, shells bounded, a long
//! list dropped without overflowing the stack). `tests/w_hive.rs` runs real threads against an oracle and
//! `tests/loom_w_hive.rs` every interleaving of small cases.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicIsize, Ordering};

use windgate_core::aggregate::w_hive::{MAX_LEVELS, NextWinset, Output, Updater, WHive};
use windgate_core::time::WindowSpec;

fn spec(size: i64, slide: i64) -> WindowSpec {
    WindowSpec::new(size, Some(slide), 0).unwrap()
}

/// All winsets released now, and whether the end was reached.
fn drain<P: Default + Send>(out: &mut Output<P>) -> (Vec<(i64, Vec<P>)>, bool) {
    let mut got = vec![];
    loop {
        match out.next_ready() {
            NextWinset::Winset(w, p) => got.push((w, p)),
            NextWinset::Pending => return (got, false),
            NextWinset::End => return (got, true),
        }
    }
}

fn two<P: Default + Send>(spec: WindowSpec, levels: usize) -> (Updater<P>, Updater<P>, Output<P>) {
    let (mut ups, out) = WHive::with_levels(spec, 2, levels);
    let b = ups.pop().unwrap();
    let a = ups.pop().unwrap();
    (a, b, out)
}

/// Half-open windows: ts = end(j) is not in j, and j is released exactly when every updater reached end(j).
#[test]
fn release_rule_is_half_open_and_waits_for_every_updater() {
    let (mut a, mut b, mut out) = two::<u32>(spec(10, 10), 3);
    a.update(5, |w, p| {
        assert_eq!(w, 0);
        *p += 1
    });
    assert_eq!(drain(&mut out), (vec![], false)); // b has not started
    b.advance(9);
    a.advance(9);
    assert_eq!(drain(&mut out), (vec![], false)); // 9 < end(0) = 10
    b.advance(10);
    assert_eq!(drain(&mut out), (vec![], false)); // a is at 9
    a.update(10, |w, p| {
        assert_eq!(w, 1); // ts 10 is in window 1, not 0
        *p += 10
    });
    assert_eq!(drain(&mut out), (vec![(0, vec![1, 0])], false));
    b.update(19, |_, p| *p += 100);
    a.advance(20);
    assert_eq!(drain(&mut out), (vec![], false)); // b at 19 < end(1) = 20
    b.advance(20);
    assert_eq!(drain(&mut out), (vec![(1, vec![10, 100])], false));
    drop((a, b));
    assert_eq!(drain(&mut out), (vec![], true));
    assert_eq!(drain(&mut out), (vec![], true));
}

#[test]
fn out_of_order_creation_by_different_updaters() {
    for levels in 1..=MAX_LEVELS {
        let (mut ups, mut out) = WHive::with_levels::<Vec<i64>>(spec(10, 10), 3, levels);
        let mut c = ups.pop().unwrap();
        let mut b = ups.pop().unwrap();
        let mut a = ups.pop().unwrap();
        b.update(55, |_, p| p.push(55)); // window 5 first
        b.update(72, |_, p| p.push(72)); // then 7
        a.update(21, |_, p| p.push(21)); // then 2, before both
        a.update(61, |_, p| p.push(61)); // 6, between
        c.update(40, |_, p| p.push(40)); // 4, between 2 and 5
        c.update(57, |_, p| p.push(57)); // 5 again: c's slot of b's node
        assert_eq!(out.live_winsets(), 5);
        c.close();
        b.advance(80);
        // a is at 61: windows 2, 4, 5 (end 60) are released, 6 (end 70) is not.
        let (got, _) = drain(&mut out);
        assert_eq!(
            got,
            vec![
                (2, vec![vec![21], vec![], vec![]]),
                (4, vec![vec![], vec![], vec![40]]),
                (5, vec![vec![], vec![55], vec![57]]),
            ]
        );
        drop((a, b));
        assert_eq!(
            drain(&mut out),
            (
                vec![
                    (6, vec![vec![61], vec![], vec![]]),
                    (7, vec![vec![], vec![72], vec![]]),
                ],
                true
            )
        );
    }
}

#[test]
fn close_releases_and_end_follows() {
    let (mut a, b, mut out) = two::<u32>(spec(4, 2), 2);
    a.update(1, |_, p| *p += 1); // windows -1 [-2, 2) and 0 [0, 4)
    a.update(3, |_, p| *p += 1); // windows 0 and 1 [2, 6)
    assert_eq!(drain(&mut out), (vec![], false));
    b.close();
    // a is at 3: window -1 (end 2) is released, 0 (end 4) is not.
    assert_eq!(drain(&mut out), (vec![(-1, vec![1, 0])], false));
    a.close();
    let (got, end) = drain(&mut out);
    assert_eq!(got, vec![(0, vec![2, 0]), (1, vec![1, 0])]);
    assert!(end);
    assert_eq!(out.live_winsets(), 0);
}

#[test]
fn sliding_windows_several_per_ts_ascending() {
    // ts = 31, size 30, slide 3 -> windows 1..=10 (windows 0 and 11 end at 30 and start at 33).
    let (mut ups, mut out) = WHive::new::<Vec<i64>>(spec(30, 3), 1);
    let mut seen = vec![];
    ups[0].update(31, |w, p| {
        seen.push(w);
        p.push(31)
    });
    assert_eq!(seen, (1..=10).collect::<Vec<_>>());
    ups[0].update(32, |_, p| p.push(32));
    ups[0].update(33, |_, p| p.push(33)); // windows 2..=11
    drop(ups);
    let (got, end) = drain(&mut out);
    assert!(end);
    let ids: Vec<i64> = got.iter().map(|(w, _)| *w).collect();
    assert_eq!(ids, (1..=11).collect::<Vec<_>>());
    assert_eq!(got[0].1, vec![vec![31, 32]]);
    assert_eq!(got[5].1, vec![vec![31, 32, 33]]);
    assert_eq!(got[10].1, vec![vec![33]]);
}

#[test]
fn negative_timestamps_and_gaps() {
    let (mut ups, mut out) = WHive::new::<u32>(spec(10, 5), 1);
    ups[0].update(-7, |_, p| *p += 1); // windows -3 [-15, -5) and -2 [-10, 0)
    ups[0].update(1_000_000, |_, p| *p += 1); // windows 199_999 and 200_000: no nodes for the gap
    assert_eq!(out.live_winsets(), 4);
    let (got, end) = drain(&mut out);
    assert_eq!(got, vec![(-3, vec![1]), (-2, vec![1])]);
    assert!(!end);
    drop(ups);
    let (got, end) = drain(&mut out);
    assert_eq!(got, vec![(199_999, vec![1]), (200_000, vec![1])]);
    assert!(end);
}

#[test]
fn no_updaters_is_the_end() {
    let (ups, mut out) = WHive::new::<u32>(spec(10, 10), 0);
    assert!(ups.is_empty());
    assert_eq!(out.next_ready(), NextWinset::End);
}

#[test]
#[should_panic(expected = "must not decrease")]
fn decreasing_timestamps_panic() {
    let (mut ups, _out) = WHive::new::<u32>(spec(10, 10), 1);
    ups[0].update(5, |_, _| {});
    ups[0].update(4, |_, _| {});
}

#[test]
fn a_panicking_updater_closes_and_poisons() {
    let (mut ups, mut out) = WHive::new::<u32>(spec(10, 10), 2);
    let a = ups.remove(0);
    let r = std::thread::spawn(move || {
        let mut a = a;
        a.update(3, |_, p| *p += 1);
        panic!("boom");
    })
    .join();
    assert!(r.is_err());
    assert!(out.poisoned());
    drop(ups);
    assert_eq!(drain(&mut out), (vec![(0, vec![1, 0])], true));
    assert!(out.poisoned());
}

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// A partial counting its instances (every node has one per updater, so nodes are counted too).
struct Tracked(u64);

impl Default for Tracked {
    fn default() -> Self {
        LIVE.fetch_add(1, Ordering::Relaxed);
        Tracked(0)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Allocations equal frees, whoever drops first; shells do not pile up while the output keeps up; a long
/// unreleased list is freed without overflowing the stack. One test, since `LIVE` is global.
#[test]
fn every_node_is_freed() {
    for levels in 1..=MAX_LEVELS {
        // Lockstep updaters and a draining output: memory stays flat.
        let (mut a, mut b, mut out) = two::<Tracked>(spec(20, 5), levels);
        let mut max_nodes = 0;
        for ts in 0..10_000 {
            a.update(ts, |_, p| p.0 += 1);
            if ts % 3 == 0 {
                b.update(ts, |_, p| p.0 += 1);
            } else {
                b.advance(ts);
            }
            while let NextWinset::Winset(..) = out.next_ready() {}
            max_nodes = max_nodes.max(out.live_nodes());
        }
        // 4 live windows per ts, plus the anchors' slack (at most the nodes between two tall ones).
        eprintln!("levels {levels}: at most {max_nodes} nodes");
        assert!(max_nodes < 100, "levels {levels}: {max_nodes} nodes");
        drop(a);
        assert!(matches!(out.next_ready(), NextWinset::Pending));
        drop(b);
        let (got, end) = drain(&mut out);
        assert!(end && got.len() == 4);
        drop(got);
        // Only the output's cursor is left.
        assert_eq!(out.live_nodes(), 1);
        assert_eq!(out.live_winsets(), 0);
        drop(out);
        assert_eq!(LIVE.load(Ordering::Relaxed), 0, "levels {levels}");
    }
    // The output dropped first, updaters later; and updaters dropped with nothing released.
    for output_first in [true, false] {
        let (mut a, mut b, out) = two::<Tracked>(spec(10, 2), 2);
        for ts in 0..1000 {
            a.update(ts, |_, p| p.0 += 1);
            b.update(ts / 2, |_, p| p.0 += 1);
        }
        if output_first {
            drop(out);
            drop((a, b));
        } else {
            drop((a, b));
            drop(out);
        }
        assert_eq!(LIVE.load(Ordering::Relaxed), 0);
    }
    // 200k unreleased winsets (one updater never starts), dropped iteratively.
    let (mut a, b, out) = two::<Tracked>(spec(1, 1), 4);
    for ts in 0..200_000 {
        a.update(ts, |_, p| p.0 += 1);
    }
    assert_eq!(out.live_winsets(), 200_000);
    drop((a, b, out));
    assert_eq!(LIVE.load(Ordering::Relaxed), 0);
}

//! loom models of the W-Hive (`src/aggregate/w_hive.rs`, on the shared list of `src/sync/rc_skiplist.rs`):
//! 2 updaters x 1 output at 1-2 levels; a node-creation race on one window, progress publication against the
//! output's take, advance/close/End. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p windgate-core --release --test loom_w_hive` (`make test-loom`).
//!
//! The partials live in loom's `UnsafeCell`, so a winset taken while an updater can still write it (no
//! happens-before between the write and the take) is a causality violation that fails the model; the
//! negative control (Relaxed progress stores) shows that loom does catch it. The output polls a bounded number
//! of times while the updaters run (a spinning output would make loom's search unbounded), then drains the
//! rest after they closed; the whole sequence must equal the expected winsets, in order, once each. Every
//! interleaving of the concurrent part is explored up to `PREEMPTIONS` forced preemptions.
#![cfg(loom)]

use loom::thread;
use windgate_core::aggregate::w_hive::{Handles, NextWinset, Output, WHive};
use windgate_core::time::WindowSpec;

const PREEMPTIONS: usize = 2;
/// Polls the output makes while the updaters run.
const POLLS: usize = 2;

#[derive(Clone, Copy, Debug)]
enum Op {
    /// `update(ts)`, adding the value to every window of ts.
    Update(i64, u32),
    Advance(i64),
}

type Got = Vec<(i64, Vec<u32>)>;

fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(PREEMPTIONS);
    b.check(f);
}

fn poll(out: &mut Output<u32>, got: &mut Got) {
    for _ in 0..POLLS {
        if let NextWinset::Winset(w, p) = out.next_ready() {
            got.push((w, p));
        }
    }
}

/// The rest, once every updater closed: no `Pending` may remain.
fn drain(out: &mut Output<u32>, got: &mut Got) {
    loop {
        match out.next_ready() {
            NextWinset::Winset(w, p) => got.push((w, p)),
            NextWinset::Pending => panic!("pending after every updater closed"),
            NextWinset::End => return,
        }
    }
}

/// Two updaters run their scripts and close (by drop); the output's whole sequence must be `expected`.
fn run(
    make: fn(WindowSpec, usize, usize) -> Handles<u32>,
    spec: (i64, i64),
    levels: usize,
    scripts: [&'static [Op]; 2],
    expected: &'static [(i64, [u32; 2])],
) {
    check(move || {
        let spec = WindowSpec::new(spec.0, Some(spec.1), 0).unwrap();
        let (ups, mut out) = make(spec, 2, levels);
        let threads: Vec<_> = ups
            .into_iter()
            .zip(scripts)
            .map(|(mut up, script)| {
                thread::spawn(move || {
                    for &op in script {
                        match op {
                            Op::Update(ts, v) => up.update(ts, |_, p| *p += v),
                            Op::Advance(ts) => up.advance(ts),
                        }
                    }
                })
            })
            .collect();
        let mut got = vec![];
        poll(&mut out, &mut got);
        for t in threads {
            t.join().unwrap();
        }
        drain(&mut out, &mut got);
        let expected: Got = expected.iter().map(|(w, p)| (*w, p.to_vec())).collect();
        assert_eq!(got, expected);
        assert_eq!(out.live_winsets(), 0);
    });
}

fn model(
    spec: (i64, i64),
    levels: usize,
    scripts: [&'static [Op]; 2],
    expected: &'static [(i64, [u32; 2])],
) {
    run(WHive::with_levels, spec, levels, scripts, expected);
}

/// Both updaters create window 0 at once (insert-if-absent): one CAS wins, the loser uses its node.
#[test]
fn creation_race_one_level() {
    model(
        (1, 1),
        1,
        [&[Op::Update(0, 1)], &[Op::Update(0, 10)]],
        &[(0, [1, 10])],
    );
}

/// The same at 2 levels: updater 1's first node has height 2 (its seeded heights), so when it wins, the
/// upper level is linked while the output may already take the winset.
#[test]
fn creation_race_two_levels() {
    model(
        (1, 1),
        2,
        [&[Op::Update(0, 1)], &[Op::Update(0, 10)]],
        &[(0, [1, 10])],
    );
}

/// Sliding windows (size 2, slide 1: ts t is in windows t-1 and t): updater 0's progress to 1 releases
/// window -1 while it goes on writing window 0, which updater 1 writes too.
#[test]
fn progress_publication_against_the_take() {
    model(
        (2, 1),
        1,
        [&[Op::Update(0, 1), Op::Update(1, 1)], &[Op::Update(1, 10)]],
        &[(-1, [1, 0]), (0, [2, 10]), (1, [1, 10])],
    );
}

/// The same at 2 levels, where some nodes are tall (the updaters' seeded heights): upper-level links and
/// anchor moves (and the frees they cause) race with the output's take and cursor move.
#[test]
fn progress_publication_against_the_take_two_levels() {
    model(
        (2, 1),
        2,
        [&[Op::Update(0, 1), Op::Update(1, 1)], &[Op::Update(1, 10)]],
        &[(-1, [1, 0]), (0, [2, 10]), (1, [1, 10])],
    );
}

/// Advance without data releases (an updater's progress on tuples it skips), and the closes end the stream;
/// 2 levels.
#[test]
fn advance_close_end_two_levels() {
    model(
        (2, 2),
        2,
        [
            &[Op::Update(0, 1), Op::Advance(4)],
            &[Op::Advance(2), Op::Update(3, 10)],
        ],
        &[(0, [1, 0]), (1, [0, 10])],
    );
}

/// Negative control: with Relaxed progress stores the output's take of window -1 is not ordered after
/// updater 0's write, and loom must report the race.
#[test]
#[should_panic(expected = "Causality violation")]
fn negative_control_relaxed_progress_is_caught() {
    run(
        WHive::with_relaxed_progress,
        (2, 1),
        1,
        [&[Op::Update(0, 1), Op::Update(1, 1)], &[Op::Update(1, 10)]],
        &[(-1, [1, 0]), (0, [2, 10]), (1, [1, 10])],
    );
}

//! The W-Hive under real threads (a sequential oracle, then a stress loop): the output thread's merged winsets
//! must equal a sequential computation exactly, come out in window order, each once, and only once every
//! updater has passed their end. Two feeding patterns, on the same random tuples:
//! * **TuMLMC-like**: `U` updaters each read every tuple in the total order `(ts, source, seq)`, update only
//!   the keys hashed to them and advance on every other tuple;
//! * **WiML-like**: one updater per source, each updating with its own time-sorted tuples.
//!
//! The partial is a small per-key map of (count, sum, first/last by the total order). Release builds run a
//! stress loop of a few seconds (`cargo test --release --test w_hive`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use windgate_core::aggregate::w_hive::{NextWinset, Output, Updater, WHive};
use windgate_core::time::WindowSpec;

/// A tuple; the total order is `(ts, source, seq)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tuple {
    ts: i64,
    source: u32,
    seq: u32,
    key: u32,
    value: i64,
}

impl Tuple {
    fn order(&self) -> (i64, u32, u32) {
        (self.ts, self.source, self.seq)
    }
}

/// One key's aggregate in one window: every field combines exactly and commutatively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Agg {
    count: u64,
    sum: i64,
    /// `(order, value)` of the first and last tuple by the total order.
    first: ((i64, u32, u32), i64),
    last: ((i64, u32, u32), i64),
}

impl Agg {
    fn of(t: &Tuple) -> Agg {
        Agg {
            count: 1,
            sum: t.value,
            first: (t.order(), t.value),
            last: (t.order(), t.value),
        }
    }

    fn merge(&mut self, o: &Agg) {
        self.count += o.count;
        self.sum = self.sum.wrapping_add(o.sum);
        self.first = self.first.min(o.first);
        self.last = self.last.max(o.last);
    }
}

/// The partial: per-key aggregates.
type Part = BTreeMap<u32, Agg>;

fn add(p: &mut Part, t: &Tuple) {
    p.entry(t.key)
        .and_modify(|a| a.merge(&Agg::of(t)))
        .or_insert_with(|| Agg::of(t));
}

fn owner(key: u32, updaters: usize) -> usize {
    (key.wrapping_mul(0x9E37_79B1) >> 7) as usize % updaters
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    TuMlMc { updaters: usize },
    WiMl,
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct Case {
    spec: WindowSpec,
    levels: usize,
    /// Per source, sorted by ts (ties within a source in seq order).
    sources: Vec<Vec<Tuple>>,
    jitter: u64,
}

fn random_case(seed: u64) -> Case {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let size = 1 + r.below(12) as i64;
    let slide = 1 + r.below(size as u64) as i64;
    let offset = r.below(slide as u64) as i64 - if r.below(2) == 0 { 0 } else { 7 };
    let spec = WindowSpec::new(size, Some(slide), offset).unwrap();
    let n = 1 + r.below(8) as usize;
    let keys = 1 + r.below(6) as u32;
    let base = r.below(100) as i64 - 50;
    let max_len = [5, 40, 300][r.below(3) as usize];
    let sources = (0..n)
        .map(|j| {
            let len = r.below(max_len + 1) as usize;
            let mut ts = base + r.below(10) as i64;
            (0..len)
                .map(|i| {
                    // Mostly small steps (ties), sometimes a gap of many windows.
                    ts += match r.below(20) {
                        0 => 5 * size + r.below(50) as i64,
                        1..=8 => 0,
                        _ => r.below(3) as i64,
                    };
                    Tuple {
                        ts,
                        source: j as u32,
                        seq: i as u32,
                        key: r.below(keys as u64) as u32,
                        value: r.below(2001) as i64 - 1000,
                    }
                })
                .collect()
        })
        .collect();
    Case {
        spec,
        levels: 1 + r.below(4) as usize,
        sources,
        jitter: r.next(),
    }
}

/// The sequential computation: every non-empty window with its per-key aggregates, in window order.
fn oracle(spec: &WindowSpec, tuples: &[Tuple]) -> Vec<(i64, Part)> {
    let mut windows: BTreeMap<i64, Part> = BTreeMap::new();
    for t in tuples {
        let (lo, hi) = spec.windows_of_ts(t.ts);
        for w in lo..=hi {
            add(windows.entry(w).or_default(), t);
        }
    }
    windows.into_iter().collect()
}

/// Updater thread body: `marks[id]` is stored before every progress step (and `i64::MAX` before closing), so
/// the output can check from outside that a released window's end is at or below every updater's mark.
fn feed(mut up: Updater<Part>, tuples: &[Tuple], mode: Mode, marks: &[AtomicI64], jitter: u64) {
    let id = up.id();
    let mut rng = Rng(jitter ^ (id as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
    for t in tuples {
        marks[id].store(t.ts, Ordering::SeqCst);
        let mine = match mode {
            Mode::TuMlMc { updaters } => owner(t.key, updaters) == id,
            Mode::WiMl => true,
        };
        if mine {
            up.update(t.ts, |_, p| add(p, t));
        } else {
            up.advance(t.ts);
        }
        if rng.below(16) == 0 {
            thread::yield_now();
        }
    }
    marks[id].store(i64::MAX, Ordering::SeqCst);
    up.close();
}

/// Output thread body: merges each winset's partials and checks the release rule against the marks.
fn collect(
    mut out: Output<Part>,
    mode: Mode,
    marks: &[AtomicI64],
) -> (Vec<(i64, Part)>, Output<Part>) {
    let spec = *out.spec();
    let mut got: Vec<(i64, Part)> = vec![];
    loop {
        match out.next_ready() {
            NextWinset::Winset(w, parts) => {
                let end = spec.window_end(w);
                for (u, m) in marks.iter().enumerate() {
                    let m = m.load(Ordering::SeqCst);
                    assert!(
                        m >= end,
                        "window {w} (end {end}) released at mark {m} of {u}"
                    );
                }
                let mut merged = Part::new();
                for (u, part) in parts.into_iter().enumerate() {
                    for (k, a) in part {
                        if let Mode::TuMlMc { updaters } = mode {
                            // One updater per key: a (window, key) is never split.
                            assert_eq!(owner(k, updaters), u, "key {k} in updater {u}'s partial");
                            assert!(!merged.contains_key(&k));
                        }
                        merged.entry(k).and_modify(|m| m.merge(&a)).or_insert(a);
                    }
                }
                assert!(!merged.is_empty(), "an empty winset {w}");
                got.push((w, merged));
            }
            NextWinset::Pending => thread::yield_now(),
            NextWinset::End => break,
        }
    }
    assert!(!out.poisoned());
    assert_eq!(out.live_winsets(), 0);
    (got, out)
}

fn run(case: &Case, mode: Mode) {
    let mut all: Vec<Tuple> = case.sources.iter().flatten().copied().collect();
    all.sort_by_key(Tuple::order);
    let expected = oracle(&case.spec, &all);
    let updaters = match mode {
        Mode::TuMlMc { updaters } => updaters,
        Mode::WiMl => case.sources.len(),
    };
    let (ups, out) = WHive::with_levels::<Part>(case.spec, updaters, case.levels);
    let marks: Vec<AtomicI64> = (0..updaters).map(|_| AtomicI64::new(i64::MIN)).collect();
    let (got, out) = thread::scope(|s| {
        for up in ups {
            let tuples: &[Tuple] = match mode {
                Mode::TuMlMc { .. } => &all,
                Mode::WiMl => &case.sources[up.id()],
            };
            let marks = &marks;
            s.spawn(move || feed(up, tuples, mode, marks, case.jitter));
        }
        let marks = &marks;
        s.spawn(move || collect(out, mode, marks)).join().unwrap()
    });
    // Window order, each once, every value exact.
    assert_eq!(got, expected, "{mode:?} levels {}", case.levels);
    // The updaters released their anchors when they closed (after their last progress store, so only once
    // they are joined): only the output's cursor is left.
    assert_eq!(out.live_nodes(), 1);
}

fn run_seed(seed: u64) {
    let case = random_case(seed);
    let updaters = 1 + (seed % 8) as usize;
    let result = std::panic::catch_unwind(|| {
        run(&case, Mode::TuMlMc { updaters });
        run(&case, Mode::WiMl);
    });
    if let Err(e) = result {
        eprintln!("failing seed: {seed}");
        std::panic::resume_unwind(e);
    }
}

#[test]
fn merged_winsets_equal_the_sequential_oracle() {
    let cases = if cfg!(debug_assertions) { 60 } else { 300 };
    for seed in 0..cases {
        run_seed(seed);
    }
}

/// Every updater count 1..=8 on one larger case with many windows per tuple.
#[test]
fn every_updater_count_on_a_sliding_case() {
    let spec = WindowSpec::new(30, Some(3), 0).unwrap();
    let mut r = Rng(99);
    let sources: Vec<Vec<Tuple>> = (0..4)
        .map(|j| {
            let mut ts = 0;
            (0..2000)
                .map(|i| {
                    ts += r.below(3) as i64;
                    Tuple {
                        ts,
                        source: j,
                        seq: i,
                        key: r.below(50) as u32,
                        value: r.below(100) as i64,
                    }
                })
                .collect()
        })
        .collect();
    for (updaters, levels) in (1..=8).zip([1, 2, 3, 4, 2, 2, 3, 4]) {
        let case = Case {
            spec,
            levels,
            sources: sources.clone(),
            jitter: updaters as u64,
        };
        run(&case, Mode::TuMlMc { updaters });
    }
    let case = Case {
        spec,
        levels: 2,
        sources,
        jitter: 5,
    };
    run(&case, Mode::WiMl);
}

/// Random cases for a few seconds in release builds (a fraction of a second in debug ones).
#[test]
fn stress() {
    let budget = if cfg!(debug_assertions) {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(4)
    };
    let start = Instant::now();
    let mut seed = 1_000_000;
    while start.elapsed() < budget {
        run_seed(seed);
        seed += 1;
    }
    eprintln!("stress: {} random cases", seed - 1_000_000);
}

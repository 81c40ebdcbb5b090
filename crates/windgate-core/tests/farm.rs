//! Determinism of the pane farm, RRCPA, the line baselines HSA and RRA and the ring baselines HOA and RRCA
//! (`docs/architecture.md#determinism`): for any thread count, pane-level query (PLQ) scheduler, window scheduler,
//! forced or adaptive pane splitting, batch split, bursty arrival and disorder within the lateness bound, each
//! returns the reference engine's rows in the same order, bit for bit.

mod common;

use std::time::Duration;

use common::{Case, case, run, run_with};
use proptest::prelude::*;
use windgate_core::aggregate::{FarmOptions, Strategy};
use windgate_core::runtime::{PaneSchedulerKind, WindowSchedulerKind};

const THREADS: [usize; 5] = [1, 2, 3, 4, 8];
const SCHEDULERS: [PaneSchedulerKind; 4] = [
    PaneSchedulerKind::AsPid,
    PaneSchedulerKind::As,
    PaneSchedulerKind::PbRr,
    PaneSchedulerKind::TbRr,
];

/// Bursty arrival: most rows crowd into a few instants, so some panes are much larger than others.
fn bursty(mut c: Case, centre: i64) -> Case {
    for (i, r) in c.rows.iter_mut().enumerate() {
        if i % 4 != 0 {
            r.ts = centre + (r.ts - centre) / 8;
        }
    }
    if let Some(k) = c.lateness {
        // Keep the disorder within K: arrival order is event order perturbed by at most K.
        c.rows.sort_by_key(|r| r.ts);
        let n = c.rows.len();
        for i in 0..n.saturating_sub(1) {
            if c.rows[i + 1].ts - c.rows[i].ts <= k && (c.rows[i].iv & 1) == 1 {
                c.rows.swap(i, i + 1);
            }
        }
    }
    c
}

fn farm_opts(
    scheduler: PaneSchedulerKind,
    win: WindowSchedulerKind,
    split: Option<u64>,
) -> FarmOptions {
    FarmOptions {
        scheduler,
        window_scheduler: win,
        split_threshold: split,
        sample_interval: Duration::from_millis(1),
        ..FarmOptions::default()
    }
}

fn check_all_configs(c: &Case, seed: u64) -> Result<(), TestCaseError> {
    let reference = run(c, Strategy::Reference, false);
    // Every thread count with a rotating choice of scheduler, window scheduler and forced splitting.
    for (i, &threads) in THREADS.iter().enumerate() {
        let k = seed as usize + i;
        let sched = SCHEDULERS[k % SCHEDULERS.len()];
        let win = if k.is_multiple_of(2) {
            WindowSchedulerKind::WinFb
        } else {
            WindowSchedulerKind::WinRr
        };
        let split = if (k / 2).is_multiple_of(2) {
            Some(1 + (seed % 3))
        } else {
            None
        };
        let got = run_with(c, true, |o| {
            o.strategy = Strategy::Farm;
            o.threads = Some(threads);
            o.farm = farm_opts(sched, win, split);
        });
        prop_assert_eq!(
            &got,
            &reference,
            "threads={} scheduler={:?} window={:?} split={:?}",
            threads,
            sched,
            win,
            split
        );
        let rrcpa = run_with(c, true, |o| {
            o.strategy = Strategy::Rrcpa;
            o.threads = Some(threads);
        });
        prop_assert_eq!(&rrcpa, &reference, "rrcpa threads={}", threads);
        let line = if k.is_multiple_of(2) {
            Strategy::Hsa
        } else {
            Strategy::Rra
        };
        let got = run_with(c, true, |o| {
            o.strategy = line;
            o.threads = Some(threads);
        });
        prop_assert_eq!(&got, &reference, "{:?} threads={}", line, threads);
        // Over the cases (random seeds) each ring approach meets every thread count.
        let ring = if (k / 2).is_multiple_of(2) {
            Strategy::Hoa
        } else {
            Strategy::Rrca
        };
        let got = run_with(c, true, |o| {
            o.strategy = ring;
            o.threads = Some(threads);
        });
        prop_assert_eq!(&got, &reference, "{:?} threads={}", ring, threads);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(150), ..ProptestConfig::default() })]

    #[test]
    fn farm_equals_reference(c in case(), seed in any::<u64>()) {
        check_all_configs(&c, seed)?;
    }

    #[test]
    fn farm_equals_reference_under_bursts(c in case(), seed in any::<u64>(), centre in -40i64..40) {
        check_all_configs(&bursty(c, centre), seed)?;
    }

    /// Both ring approaches at every thread count on the same case (the rotation above spreads them).
    #[test]
    fn ring_baselines_equal_reference(c in case()) {
        let reference = run(&c, Strategy::Reference, false);
        for ring in [Strategy::Hoa, Strategy::Rrca] {
            for threads in THREADS {
                let got = run_with(&c, true, |o| {
                    o.strategy = ring;
                    o.threads = Some(threads);
                });
                prop_assert_eq!(&got, &reference, "{:?} threads={}", ring, threads);
            }
        }
    }

    #[test]
    fn every_scheduler_pair_with_forced_splitting(c in case(), threads in 2usize..5) {
        let reference = run(&c, Strategy::Reference, false);
        for sched in SCHEDULERS {
            for win in [WindowSchedulerKind::WinFb, WindowSchedulerKind::WinRr] {
                let got = run_with(&c, true, |o| {
                    o.strategy = Strategy::Farm;
                    o.threads = Some(threads);
                    o.farm = farm_opts(sched, win, Some(1));
                });
                prop_assert_eq!(&got, &reference, "{:?} {:?}", sched, win);
            }
        }
    }
}

/// Long windows over a spread-out stream: up to 300 panes a window and slides of one pane or several, so the
/// farm's window level builds windows in blocks (from 6 panes a window on) with chunks of every shape.
fn long_windows(mut c: Case, size: i64, slide: i64) -> Case {
    for r in &mut c.rows {
        r.ts *= 5;
    }
    c.lateness = c.lateness.map(|k| k * 5);
    c.size = size;
    c.slide = 1 + (slide - 1) % size;
    c
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(100), ..ProptestConfig::default() })]

    #[test]
    fn farm_long_windows_equal_reference(
        c in case(),
        size in 6i64..300,
        slide in 1i64..40,
        threads in 1usize..5,
        rr in any::<bool>(),
    ) {
        let c = long_windows(c, size, slide);
        let reference = run(&c, Strategy::Reference, false);
        let win = if rr { WindowSchedulerKind::WinRr } else { WindowSchedulerKind::WinFb };
        let got = run_with(&c, true, |o| {
            o.strategy = Strategy::Farm;
            o.threads = Some(threads);
            o.farm = farm_opts(PaneSchedulerKind::AsPid, win, None);
        });
        prop_assert_eq!(&got, &reference, "threads={} window={:?}", threads, win);
    }
}

/// The long run: many random cases at every thread count (release mode keeps it to seconds).
#[test]
fn stress_many_random_cases() {
    let cases = if cfg!(debug_assertions) { 30 } else { 500 };
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        ..ProptestConfig::default()
    });
    runner
        .run(&(case(), any::<u64>()), |(c, seed)| {
            check_all_configs(&c, seed)
        })
        .unwrap();
}

/// The properties above would pass vacuously if the farm never split a pane or used one worker: check that it
/// does both when forced.
#[test]
fn forced_splitting_spreads_panes_over_workers() {
    use windgate_core::aggregate::{Span, WindowAggregateOptions, WindowAggregator};
    let c = Case {
        size: 10,
        slide: 5,
        offset: 0,
        lateness: Some(0),
        rows: (0..4000)
            .map(|i| common::Row {
                ts: i / 20,
                key: Some((i % 3) as i32),
                v: Some(i as f64),
                iv: i,
            })
            .collect(),
        cuts: vec![],
    };
    let mut opts = WindowAggregateOptions::new("ts", Span::Units(c.size), common::aggs());
    opts.slide = Some(Span::Units(c.slide));
    opts.by = vec!["k".into()];
    opts.strategy = Strategy::Farm;
    opts.threads = Some(4);
    opts.farm = farm_opts(
        PaneSchedulerKind::AsPid,
        WindowSchedulerKind::WinFb,
        Some(7),
    );
    opts.lateness = windgate_core::aggregate::LatenessOpt::Bound(Span::Units(0));
    let mut agg = WindowAggregator::new(opts).unwrap();
    for chunk in c.rows.chunks(500) {
        agg.push(&common::batch(chunk), 0).unwrap();
    }
    agg.flush().unwrap();
    let s = agg.stats();
    let farm = s.farm.expect("farm stats");
    assert_eq!(s.strategy, "farm");
    assert!(farm.panes_split > 0, "{farm:?}");
    assert!(farm.split_factor > 1.5, "{farm:?}");
    assert!(
        farm.plq_busy_ns.iter().filter(|&&b| b > 0).count() >= 2,
        "{farm:?}"
    );
    assert!(farm.punctuations > 0);
    let reference = run(&c, Strategy::Reference, false);
    let farm_out = run_with(&c, true, |o| {
        o.strategy = Strategy::Farm;
        o.threads = Some(4);
        o.farm = farm_opts(
            PaneSchedulerKind::AsPid,
            WindowSchedulerKind::WinFb,
            Some(7),
        );
    });
    assert_eq!(farm_out, reference);
}

#[test]
fn line_and_ring_baselines_on_a_small_stream() {
    let c = Case {
        size: 10,
        slide: 5,
        offset: 0,
        lateness: Some(2),
        rows: (0..200)
            .map(|i| common::Row {
                ts: i / 3,
                key: Some((i % 4) as i32),
                v: Some(i as f64),
                iv: i,
            })
            .collect(),
        cuts: vec![50, 120],
    };
    let reference = run(&c, Strategy::Reference, false);
    for strategy in [Strategy::Rra, Strategy::Hsa, Strategy::Hoa, Strategy::Rrca] {
        for threads in THREADS {
            let got = run_with(&c, true, |o| {
                o.strategy = strategy;
                o.threads = Some(threads);
            });
            assert_eq!(got, reference, "{strategy:?} threads={threads}");
        }
    }
}

//! Pane-level query (PLQ) emitter scheduling, as in Mencagli et al., *Parallel Continuous Preference Queries over
//! Out-of-Order and Bursty Data Streams*: which worker aggregates which rows of which pane.
//!
//! * `PB_RR`: a whole pane to one worker, rotating in the order panes first arrive (splitting factor 1).
//! * `TB_RR`: rows round-robin over the workers, a block of [`TB_BLOCK`] rows at a time (the paper deals single
//!   tuples; the columnar kernels want runs, and a block still spreads every pane over every worker).
//! * `AS`: Algorithm 1 with `theta = theta_b`.
//! * `AS_PID`: Algorithm 1 with `theta = alpha * theta_b`, `alpha` from the PID (set in [`PaneScheduler::set_alpha`]).
//!
//! The paper's Algorithm 1 is implemented with the bookkeeping its listing leaves out: a pane's active partition
//! takes rows until it holds `theta`; then the pane continues on the least-loaded worker (LLW), re-activating that
//! worker's partition if it already holds one (for another `theta` rows: re-activating it at `i_sizes[w] + 1` rows
//! would split again on the next row). `theta_b` is the mean plus standard deviation of the sizes of every
//! partition closed so far (cumulative Welford, as the authors' code). No splitting happens during warm-up (the
//! first panes).
//!
//! Whatever the decisions, the query's result is the same: partitions of a pane are combined exactly
//! (`docs/architecture.md#determinism`). Only timing (the LLW's queue lengths, the PID) changes who computes what.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// Rows per round-robin block of `TB_RR`.
pub const TB_BLOCK: u32 = 1024;

/// Panes whose rows may never be split: the warm-up of the authors' code (no splitting before a punctuation
/// has closed a few panes, so `theta_b` means something).
const WARMUP_PANES: u64 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PaneSchedulerKind {
    PbRr,
    TbRr,
    As,
    AsPid,
}

impl PaneSchedulerKind {
    pub const NAMES: [&str; 4] = ["as_pid", "as", "pb_rr", "tb_rr"];

    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "pb_rr" => Self::PbRr,
            "tb_rr" => Self::TbRr,
            "as" => Self::As,
            "as_pid" => Self::AsPid,
            other => {
                return Err(Error::param(
                    "scheduler",
                    format!(
                        "unknown pane scheduler {other:?}; expected one of {:?}",
                        Self::NAMES
                    ),
                ));
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::PbRr => "pb_rr",
            Self::TbRr => "tb_rr",
            Self::As => "as",
            Self::AsPid => "as_pid",
        }
    }
}

/// `PD[i]`: where pane i's rows went.
#[derive(Debug, Clone)]
struct PaneDesc {
    a_worker: u8,
    a_rows: u64,
    /// Rows sent to each worker (0: not a holder).
    sizes: Vec<u64>,
}

/// Welford over partition sizes.
#[derive(Debug, Clone, Default)]
struct Welford {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Welford {
    fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    fn mean_plus_std(&self) -> f64 {
        if self.n < 2 {
            return self.mean;
        }
        self.mean + (self.m2 / (self.n - 1) as f64).sqrt()
    }
}

/// Counters for `stats`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchedulerStats {
    pub panes_closed: u64,
    pub partitions_closed: u64,
    /// Panes that had more than one partition.
    pub panes_split: u64,
    pub theta_b: f64,
}

impl SchedulerStats {
    /// `sigma_s`: the mean number of partitions per pane.
    pub fn split_factor(&self) -> f64 {
        if self.panes_closed == 0 {
            1.0
        } else {
            self.partitions_closed as f64 / self.panes_closed as f64
        }
    }
}

pub struct PaneScheduler {
    kind: PaneSchedulerKind,
    workers: usize,
    /// `PB_RR`'s and `TB_RR`'s rotation; also the LLW scan's starting point.
    next: usize,
    tb_left: u32,
    pd: BTreeMap<i64, PaneDesc>,
    sizes: Welford,
    alpha: f64,
    /// A fixed threshold instead of `alpha * theta_b` (tests force splitting with a tiny one).
    fixed_theta: Option<u64>,
    warm_panes: u64,
    stats: SchedulerStats,
}

impl PaneScheduler {
    pub fn new(kind: PaneSchedulerKind, workers: usize, fixed_theta: Option<u64>) -> Self {
        assert!((1..=u8::MAX as usize).contains(&workers));
        Self {
            kind,
            workers,
            next: 0,
            tb_left: TB_BLOCK,
            pd: BTreeMap::new(),
            sizes: Welford::default(),
            alpha: 1.0,
            fixed_theta,
            warm_panes: 0,
            stats: SchedulerStats::default(),
        }
    }

    pub fn kind(&self) -> PaneSchedulerKind {
        self.kind
    }

    pub fn set_alpha(&mut self, alpha: f64) {
        self.alpha = alpha;
    }

    pub fn stats(&self) -> SchedulerStats {
        SchedulerStats {
            theta_b: self.sizes.mean_plus_std(),
            ..self.stats.clone()
        }
    }

    /// The current split threshold in rows (`u64::MAX`: no splitting).
    fn theta(&self) -> u64 {
        if let Some(t) = self.fixed_theta {
            return t.max(1);
        }
        if self.warm_panes < WARMUP_PANES {
            return u64::MAX;
        }
        let base = self.sizes.mean_plus_std();
        let alpha = if self.kind == PaneSchedulerKind::AsPid {
            self.alpha
        } else {
            1.0
        };
        (alpha * base).max(1.0) as u64
    }

    /// The least-loaded worker by `load` (rows queued), scanning from the one after the last pick.
    fn llw(&mut self, load: &[u64]) -> u8 {
        let n = self.workers;
        let mut best = self.next % n;
        for k in 1..n {
            let w = (self.next + k) % n;
            if load[w] < load[best] {
                best = w;
            }
        }
        self.next = best + 1;
        best as u8
    }

    /// Assigns a run of `rows` consecutive rows of pane `pane`; calls `out(worker, count)` for each piece, in
    /// row order. `load[w]` is worker w's queued rows; the pieces assigned here are added to it.
    pub fn assign_run(
        &mut self,
        pane: i64,
        mut rows: u32,
        load: &mut [u64],
        mut out: impl FnMut(u8, u32),
    ) {
        match self.kind {
            PaneSchedulerKind::TbRr => {
                while rows > 0 {
                    let take = rows.min(self.tb_left);
                    let w = self.next % self.workers;
                    out(w as u8, take);
                    load[w] += take as u64;
                    rows -= take;
                    self.tb_left -= take;
                    if self.tb_left == 0 {
                        self.tb_left = TB_BLOCK;
                        self.next = w + 1;
                    }
                }
                self.record(pane, None, 0, false);
            }
            PaneSchedulerKind::PbRr => {
                let w = match self.pd.get(&pane) {
                    Some(d) => d.a_worker,
                    None => {
                        let w = (self.next % self.workers) as u8;
                        self.next = w as usize + 1;
                        w
                    }
                };
                self.record(pane, Some(w), rows as u64, false);
                load[w as usize] += rows as u64;
                out(w, rows);
            }
            PaneSchedulerKind::As | PaneSchedulerKind::AsPid => {
                let theta = self.theta();
                while rows > 0 {
                    // Keep filling the active partition, or start a new activation of theta rows on the LLW.
                    let (w, room, fresh) = match self.pd.get(&pane) {
                        Some(d) if d.a_rows < theta => (d.a_worker, theta - d.a_rows, false),
                        _ => (self.llw(load), theta, true),
                    };
                    let take = room.min(rows as u64) as u32;
                    self.record(pane, Some(w), take as u64, fresh);
                    load[w as usize] += take as u64;
                    out(w, take);
                    rows -= take;
                }
            }
        }
    }

    /// Books `rows` of `pane` on worker `w`; `fresh` starts a new activation there (a re-activated worker's
    /// partition grows by up to theta more rows, so that a split always moves a useful amount of work). `TB_RR`
    /// keeps no descriptor sizes (every worker holds a partition of every pane); it only counts panes.
    fn record(&mut self, pane: i64, w: Option<u8>, rows: u64, fresh: bool) {
        let n = self.workers;
        let d = self.pd.entry(pane).or_insert_with(|| PaneDesc {
            a_worker: w.unwrap_or(0),
            a_rows: 0,
            sizes: vec![0; n],
        });
        let Some(w) = w else {
            return;
        };
        if fresh || d.a_worker != w {
            d.a_worker = w;
            d.a_rows = 0;
        }
        d.a_rows += rows;
        d.sizes[w as usize] += rows;
    }

    /// A punctuation closed every pane below `frontier`: purge their descriptors into the statistics.
    pub fn close_below(&mut self, frontier: i64) {
        while let Some(entry) = self.pd.first_entry() {
            if *entry.key() >= frontier {
                break;
            }
            let d = entry.remove();
            self.stats.panes_closed += 1;
            self.warm_panes += 1;
            let parts = if self.kind == PaneSchedulerKind::TbRr {
                self.workers as u64
            } else {
                let mut parts = 0;
                for &s in d.sizes.iter().filter(|&&s| s > 0) {
                    self.sizes.add(s as f64);
                    parts += 1;
                }
                parts
            };
            self.stats.partitions_closed += parts;
            self.stats.panes_split += (parts > 1) as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(s: &mut PaneScheduler, pane: i64, rows: u32, load: &mut [u64]) -> Vec<(u8, u32)> {
        let mut v = vec![];
        s.assign_run(pane, rows, load, |w, n| v.push((w, n)));
        v
    }

    #[test]
    fn pb_rr_keeps_a_pane_on_one_worker_and_rotates() {
        let mut s = PaneScheduler::new(PaneSchedulerKind::PbRr, 3, None);
        let mut load = vec![0; 3];
        assert_eq!(run(&mut s, 0, 10, &mut load), vec![(0, 10)]);
        assert_eq!(run(&mut s, 1, 10, &mut load), vec![(1, 10)]);
        assert_eq!(run(&mut s, 0, 5, &mut load), vec![(0, 5)]);
        assert_eq!(run(&mut s, 2, 1, &mut load), vec![(2, 1)]);
        assert_eq!(run(&mut s, 3, 1, &mut load), vec![(0, 1)]);
        s.close_below(4);
        assert_eq!(s.stats().split_factor(), 1.0);
    }

    #[test]
    fn tb_rr_deals_blocks() {
        let mut s = PaneScheduler::new(PaneSchedulerKind::TbRr, 2, None);
        let mut load = vec![0; 2];
        let got = run(&mut s, 0, 3 * TB_BLOCK, &mut load);
        assert_eq!(got, vec![(0, TB_BLOCK), (1, TB_BLOCK), (0, TB_BLOCK)]);
        s.close_below(1);
        assert_eq!(s.stats().split_factor(), 2.0);
    }

    #[test]
    fn forced_threshold_splits_to_the_least_loaded_and_reactivates() {
        let mut s = PaneScheduler::new(PaneSchedulerKind::AsPid, 2, Some(4));
        let mut load = vec![0, 100];
        // 4 rows fill worker 0's partition; the next activations go to the LLW, still worker 0 (4 < 100).
        let got = run(&mut s, 7, 10, &mut load);
        let total: u32 = got.iter().map(|p| p.1).sum();
        assert_eq!(total, 10);
        assert_eq!(got[0], (0, 4));
        // Make worker 1 the least loaded: the pane splits there.
        load[0] = 1000;
        let got = run(&mut s, 7, 6, &mut load);
        assert_eq!(got, vec![(0, 2), (1, 4)]);
        s.close_below(8);
        let st = s.stats();
        assert_eq!(st.panes_closed, 1);
        assert_eq!(st.panes_split, 1);
        assert_eq!(st.partitions_closed, 2);
    }

    #[test]
    fn theta_b_is_mean_plus_std_and_warmup_blocks_splitting() {
        let mut s = PaneScheduler::new(PaneSchedulerKind::As, 2, None);
        let mut load = vec![0; 2];
        for p in 0..WARMUP_PANES as i64 {
            assert_eq!(
                run(&mut s, p, 100_000, &mut load).len(),
                1,
                "no split in warm-up"
            );
        }
        s.close_below(WARMUP_PANES as i64);
        assert_eq!(s.stats().theta_b, 100_000.0);
        let got = run(&mut s, 10, 250_000, &mut load);
        assert!(got.len() >= 2, "{got:?}");
    }
}

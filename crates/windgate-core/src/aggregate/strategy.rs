//! The window-aggregation strategy registry: every `strategy=` name, its engine's constructor, one line of
//! documentation and its capabilities, in one table. Parsing, the operator's checks, the bindings' listing,
//! the CLI's choices and the README's list all read it; a new strategy is one row here plus its engine module.

use super::baselines::line::{LineEngine, LineKind};
use super::baselines::multiway::{Design, MultiwayEngine};
use super::baselines::ring::{RingEngine, RingKind};
use super::baselines::rrcpa;
use super::parallel::{self, farm};
use crate::registry::{Capabilities, Role, strategies, unknown_strategy};

/// How a strategy's engine is built.
#[derive(Clone, Copy)]
pub(crate) enum Build {
    /// Resolved by the operator once it knows the input (see `WindowAggregator`): the pane engine, the sharded
    /// engine or the farm.
    Auto,
    /// The single-threaded pane engine.
    Pane,
    /// The reference engine.
    Reference,
    /// A parallel engine, run by [`parallel::Driver`].
    Parallel(parallel::Build),
    /// The key-partitioned engine, [`parallel::shard::ShardEngine`] (it numbers keys on its workers, so it
    /// is not a [`parallel::ParallelEngine`]).
    Shard,
}

const SERIAL: Capabilities = Capabilities::SERIAL;
const PARALLEL: Capabilities = Capabilities::PARALLEL;
const BASELINE: Capabilities = Capabilities::PARALLEL.role(Role::Baseline);
const MULTIWAY: Capabilities = BASELINE.sorted_sources();

strategies! {
    /// Which engine runs a window aggregation. Every strategy returns the reference engine's rows in the same
    /// order, bit for bit.
    pub enum Strategy in STRATEGIES: Build, unknown = unknown_strategy {
        /// The fastest engine for the call: the pane engine; for large tables, time ranges side by side if sorted by time, else the shard; the farm for large pushes.
        Auto = "auto", Build::Auto, PARALLEL.farm_options();
        /// The plain single-threaded engine written from the definition: the tests' oracle.
        Reference = "reference", Build::Reference, SERIAL.role(Role::Reference);
        /// The single-threaded pane engine: panes of gcd(size, slide); long windows through per-key two stacks (O(1) combines per window).
        Pane = "pane", Build::Pane, SERIAL;
        /// The parallel pane farm (Mencagli et al. 2017): worker farms for panes and for windows, adaptive splitting.
        Farm = "farm", Build::Parallel(farm::build), PARALLEL.farm_options();
        /// Key-partitioned pane engines (Beicht): each worker numbers, lifts and emits the keys hashing to it.
        Shard = "shard", Build::Shard, PARALLEL;
        /// Beicht's round-robin-cyclic pane-based approach: pane p on worker p mod P, windows passed along a line.
        Rrcpa = "rrcpa", Build::Parallel(rrcpa::build), BASELINE;
        /// Beicht's handshake approach: every row visits a line of workers, each owning windows by hash.
        Hsa = "hsa", Build::Parallel(|a| LineEngine::build(LineKind::Hsa, a)), BASELINE;
        /// Beicht's round-robin approach: every row visits a line of workers, window k owned by worker k mod P.
        Rra = "rra", Build::Parallel(|a| LineEngine::build(LineKind::Rra, a)), BASELINE;
        /// Beicht's hash-once approach: HSA's ownership on a ring of workers, the hash computed once at ingress.
        Hoa = "hoa", Build::Parallel(|a| RingEngine::build(RingKind::Hoa, a)), BASELINE;
        /// Beicht's round-robin-cyclic approach: RRA's ownership on HOA's ring of workers.
        Rrca = "rrca", Build::Parallel(|a| RingEngine::build(RingKind::Rrca, a)), BASELINE;
        /// Cederman et al.'s MQ baseline: a locked queue per time-sorted source, merged by one output thread.
        Mq = "mq", Build::Parallel(|a| MultiwayEngine::build(Design::Mq, a)), MULTIWAY;
        /// MQ with lock-free queues, to show that the locks are not the whole cost.
        MqLf = "mqlf", Build::Parallel(|a| MultiwayEngine::build(Design::MqLf, a)), MULTIWAY;
        /// Cederman et al.'s TuMLSC: sources merged through a T-Gate, windows updated by the output thread.
        TuMlSc = "tumlsc", Build::Parallel(|a| MultiwayEngine::build(Design::TuMlSc, a)), MULTIWAY;
        /// Cederman et al.'s TuMLMC: a T-Gate read by `threads` key-partitioned updaters of a W-Hive.
        TuMlMc = "tumlmc", Build::Parallel(|a| MultiwayEngine::build(Design::TuMlMc(a.threads), a)), MULTIWAY;
        /// Cederman et al.'s WiML: each source's input thread updates the W-Hive directly, no merge.
        WiMl = "wiml", Build::Parallel(|a| MultiwayEngine::build(Design::WiMl, a)), MULTIWAY;
    }
}

impl Strategy {
    /// Merges time-sorted sources itself, an input thread per source (the multiway designs).
    pub fn is_multiway(self) -> bool {
        self.about().caps.sorted_sources
    }

    /// Threads a resolved strategy runs on: `threads` workers for the parallel engines; for the multiway
    /// designs an input thread per source and the output thread (TuMLMC: and its `threads` updaters).
    pub(crate) fn threads(self, sources: usize, threads: usize) -> usize {
        match self {
            Strategy::TuMlMc => sources + threads + 1,
            _ if self.is_multiway() => sources + 1,
            _ if self.is_parallel() => threads,
            _ => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Strategy;

    /// The capabilities the operator's checks read.
    #[test]
    fn window_aggregate_capabilities() {
        assert!(!Strategy::Pane.is_parallel() && Strategy::Farm.is_parallel());
        assert!(Strategy::Mq.is_multiway() && !Strategy::Farm.is_multiway());
        assert_eq!(Strategy::TuMlMc.threads(3, 2), 6);
        assert_eq!(Strategy::WiMl.threads(3, 2), 4);
        assert_eq!(Strategy::Rrcpa.threads(3, 2), 2);
        assert_eq!(Strategy::Reference.threads(3, 2), 1);
    }
}

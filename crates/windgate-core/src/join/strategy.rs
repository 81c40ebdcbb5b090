//! The band-join strategy registry: every `strategy=` name with one line of documentation and its
//! capabilities, in one table (see [`crate::registry`]). The operator builds each strategy's engine in
//! `BandJoiner::ensure_engine`, one exhaustive match over this enum.

use crate::registry::{Capabilities, Role, strategies};

strategies! {
    /// Which engine runs the join; every one returns the reference's rows in the same order.
    pub enum JoinStrategy in JOIN_STRATEGIES: () {
        /// `scalejoin` with more than one thread, else `serial`.
        Auto = "auto", (), Capabilities::PARALLEL;
        /// ScaleGate in, `threads` processing threads, ScaleGate out (Gulisano et al., ScaleJoin).
        ScaleJoin = "scalejoin", (), Capabilities::PARALLEL;
        /// One processing thread's logic run inline on the caller's thread (no gates, no threads).
        Serial = "serial", (), Capabilities::SERIAL;
        /// The nested-loop three-step join over the merged stream: the oracle.
        Reference = "reference", (), Capabilities::SERIAL.role(Role::Reference);
    }
}

impl JoinStrategy {
    /// The engine `auto` stands for with `threads` threads.
    pub fn resolve(self, threads: usize) -> Self {
        match self {
            JoinStrategy::Auto if threads > 1 => JoinStrategy::ScaleJoin,
            JoinStrategy::Auto => JoinStrategy::Serial,
            s => s,
        }
    }
}

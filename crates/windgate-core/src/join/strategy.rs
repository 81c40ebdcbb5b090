//! The band-join strategy registry: every `strategy=` name with one line of documentation and its
//! capabilities and its engine's constructor, in one table (see [`crate::registry`]).

use super::engine::{self, Build};
use crate::registry::{Capabilities, Role, expected_one_of, strategies};

strategies! {
    /// Which engine runs the join; every one returns the reference's rows in the same order.
    pub enum JoinStrategy in JOIN_STRATEGIES: Build, unknown = expected_one_of {
        /// `scalejoin` with more than one thread, else `serial`.
        Auto = "auto", engine::auto, Capabilities::PARALLEL;
        /// ScaleGate in, `threads` processing threads, ScaleGate out (Gulisano et al., ScaleJoin).
        ScaleJoin = "scalejoin", engine::scale_join, Capabilities::PARALLEL;
        /// One processing thread's logic run inline on the caller's thread (no gates, no threads).
        Serial = "serial", engine::serial, Capabilities::SERIAL;
        /// The nested-loop three-step join over the merged stream: the oracle.
        Reference = "reference", engine::reference, Capabilities::SERIAL.role(Role::Reference);
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

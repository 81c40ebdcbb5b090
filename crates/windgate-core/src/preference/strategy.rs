//! The preference-query strategy registry: every `strategy=` name with one line of documentation and its
//! capabilities, in one table (see [`crate::registry`]). The operator builds each strategy's engine from its
//! [`EngineKind`] column.

use super::engine::EngineKind;
use crate::registry::{Capabilities, Role, strategies, unknown_strategy};

/// How a strategy's engine is built: `None` for `auto` (the farm when `threads > 1`, else the pane engine).
pub(crate) type Build = Option<EngineKind>;

strategies! {
    /// Which engine runs a preference query.
    pub enum PreferenceStrategy in PREFERENCE_STRATEGIES: Build, unknown = unknown_strategy {
        /// The farm when `threads > 1`, else the pane engine.
        Auto = "auto", None, Capabilities::PARALLEL.farm_options();
        /// Brute force by the definition, over every pair of each window's rows: the tests' oracle.
        Reference = "reference", Some(EngineKind::Reference), Capabilities::SERIAL.role(Role::Reference);
        /// Each window recomputed from its rows with the incremental kernel (Mencagli et al. 2017's baseline).
        Recompute = "recompute", Some(EngineKind::Recompute), Capabilities::SERIAL.role(Role::Baseline);
        /// Pane-based pane-level and window-level queries on the caller's thread.
        Pane = "pane", Some(EngineKind::Pane), Capabilities::SERIAL;
        /// The parallel pane farm (Mencagli et al. 2017): worker farms for panes and for windows.
        Farm = "farm", Some(EngineKind::Farm), Capabilities::PARALLEL.farm_options();
    }
}

impl PreferenceStrategy {
    /// The strategy whose row builds `engine` (what `auto` resolved to, for `stats`).
    pub(crate) fn of_engine(engine: EngineKind) -> Self {
        PREFERENCE_STRATEGIES
            .iter()
            .find(|e| e.engine == Some(engine))
            .map_or(PreferenceStrategy::Auto, |e| e.strategy)
    }
}

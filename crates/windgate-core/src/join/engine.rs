//! The band join's engines and their constructors, which the strategy registry ([`super::strategy`]) names:
//! ScaleJoin's processing threads, one processing thread's logic inline, or the reference join.

use super::options::{Bounds, Predicate, Semantics};
use super::processor::{Processor, Restored};
use super::reference::ReferenceJoin;
use super::scale_join::ScaleJoin;
use crate::error::Result;

/// A running join engine. The operator feeds each kind its own way (tuples inline, through the gates, or
/// to the oracle), so this stays an enum: three engines, matched where the feeding differs.
pub(crate) enum Engine {
    Inline(Box<Processor>),
    Reference(Box<ReferenceJoin>),
    Threads(Box<ScaleJoin>),
}

/// What a join engine is built from, fixed once the first side is bound.
pub(crate) struct EngineArgs<'a> {
    pub(crate) bounds: Bounds,
    pub(crate) semantics: Semantics,
    pub(crate) on: &'a [Predicate],
    /// The band predicates' widths, in `on` order.
    pub(crate) eps: &'a [f64],
    pub(crate) has_eq: bool,
    pub(crate) index: bool,
    pub(crate) threads: usize,
    /// A checkpoint's windows and position counter, when the engine continues from one.
    pub(crate) restored: Option<&'a Restored>,
}

/// Builds one join engine: the constructor column of the strategy registry.
pub(crate) type Build = fn(&EngineArgs<'_>) -> Result<Engine>;

/// `scalejoin` with more than one thread, else `serial`.
pub(crate) fn auto(a: &EngineArgs<'_>) -> Result<Engine> {
    if a.threads > 1 {
        scale_join(a)
    } else {
        serial(a)
    }
}

/// ScaleGate in, `threads` processing threads, ScaleGate out.
pub(crate) fn scale_join(a: &EngineArgs<'_>) -> Result<Engine> {
    let n = a.threads;
    let join = ScaleJoin::start(n, |id| {
        let mut p = Processor::new(id, n, a.bounds, a.semantics, a.eps, a.has_eq, a.index);
        if let Some(r) = a.restored {
            p.load(r);
        }
        p
    })?;
    Ok(Engine::Threads(Box::new(join)))
}

/// One processing thread's logic on the caller's thread.
pub(crate) fn serial(a: &EngineArgs<'_>) -> Result<Engine> {
    let mut p = Processor::new(0, 1, a.bounds, a.semantics, a.eps, a.has_eq, a.index);
    if let Some(r) = a.restored {
        p.load(r);
    }
    Ok(Engine::Inline(Box::new(p)))
}

/// The nested-loop oracle.
pub(crate) fn reference(a: &EngineArgs<'_>) -> Result<Engine> {
    let mut r = ReferenceJoin::new(a.bounds, a.semantics, a.on);
    if let Some(w) = a.restored {
        r.load(w);
    }
    Ok(Engine::Reference(Box::new(r)))
}

//! The lock-free building blocks: the atomics, cells and `Arc` of the lock-free structures, switched to loom's
//! under `--cfg loom` so that the loom models (`tests/loom_*.rs`) explore every interleaving of the real code,
//! and the reference-counted skip list that ScaleGate and W-Hive share ([`rc_skiplist`]).

pub(crate) mod rc_skiplist;

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::Arc;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering,
};

#[cfg(not(loom))]
pub(crate) use std::sync::Arc;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering,
};

/// `std::cell::UnsafeCell` with loom's closure API, so that the same code runs in both builds and loom checks
/// every access for a happens-before edge.
#[cfg(not(loom))]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    /// Calls `f` with a raw pointer to the value; the caller's protocol makes the access exclusive.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

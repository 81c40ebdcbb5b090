//! Ordering machinery: watermarks and late rows ([`kslack`], [`admission`]), ordered emission of work finished
//! out of order ([`reorder`]), per-partition exclusive work queues (`hybrid_queue`) and the lock-free merge
//! of sorted sources into a deterministic ready stream ([`scale_gate`]).

pub mod admission;
pub(crate) mod hybrid_queue;
pub mod kslack;
pub mod reorder;
pub mod scale_gate;

//! Ordering machinery: watermarks and late rows ([`kslack`]) and the lock-free merge of sorted sources into a
//! deterministic ready stream ([`scale_gate`]).

pub mod kslack;
pub mod scale_gate;

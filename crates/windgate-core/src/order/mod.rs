//! Ordering machinery: watermarks and late rows ([`kslack`]); the gates and reorder buffers of later issues
//! live here too.

pub mod kslack;

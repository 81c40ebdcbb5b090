//! Thread plumbing shared by every engine that starts threads: naming and starting workers, reading a panic's
//! message, idling a polling thread, and how many threads a call runs on.

use std::any::Any;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};

/// Most worker threads of one operator (and sources of a design that runs a thread per source). Worker ids
/// fit in a `u8` beside a reserved "not routed" value.
pub const MAX_THREADS: usize = 254;

/// The threads a call runs on: `threads`, or every core.
pub(crate) fn resolve_threads(threads: Option<usize>) -> usize {
    threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Starts a named worker thread. The system may refuse (too many threads, too little memory): that is an error
/// for the caller, which drops what it had started (the workers see their channels close and exit).
pub(crate) fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|e| {
            Error::new(
                ErrorKind::Poisoned,
                format!("could not start worker thread {name}: {e} (too many threads, or too little memory?)"),
            )
        })
}

/// The message of a caught panic (`panic!("...")` carries a `&str` or a `String`).
pub fn panic_message(p: &Box<dyn Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// A polling thread's step when it found nothing to do: spin, then yield, then park for at most `max` (the
/// producers unpark it when they add work). `busy` resets the backoff.
pub(crate) fn idle_step(backoff: &crossbeam_utils::Backoff, busy: bool, max: Duration) {
    if busy {
        backoff.reset();
    } else if backoff.is_completed() {
        std::thread::park_timeout(max);
    } else {
        backoff.snooze();
    }
}

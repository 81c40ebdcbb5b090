//! Cooperative interruption: long kernels ask `check` every little while whether the caller wants them to stop.
//!
//! The core knows nothing of Python. A binding that wants Ctrl-C honoured runs its work inside [`scope`] with a
//! hook (for PyO3: take the GIL for a moment and run the signal handlers). Kernels call `check` as often as
//! they like — between slices of a batch, every few thousand windows of an emission, in every wait loop of the
//! caller's thread — and it consults the hook at most once per [`PERIOD`], so a call costs a clock read.
//!
//! Only the thread that entered the scope is ever interrupted: worker threads never call the hook (they have no
//! business with the caller's signals); the caller's thread checks while it waits for them. A kernel that gets
//! [`ErrorKind::Interrupted`] from `check` returns it unchanged; the operator then decides whether its state is
//! still whole (interrupted between slices of a push: yes) or must be poisoned (interrupted mid-emission).

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};

/// How often the hook is consulted at most: often enough that Ctrl-C feels immediate, rarely enough that taking
/// the GIL costs nothing measurable.
pub const PERIOD: Duration = Duration::from_millis(20);

/// What a binding installs: `Err` (of any kind; `check` reports it as [`ErrorKind::Interrupted`]) to stop.
pub type Hook = fn() -> Result<()>;

thread_local! {
    static HOOK: Cell<Option<Hook>> = const { Cell::new(None) };
    static NEXT: Cell<Option<Instant>> = const { Cell::new(None) };
    /// The flag of [`scope_until`] on this thread.
    static STOP: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Runs `f` with `hook` consulted by every `check` on this thread (nested scopes restore the outer hook).
pub fn scope<T>(hook: Hook, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Hook>);
    impl Drop for Restore {
        fn drop(&mut self) {
            HOOK.with(|h| h.set(self.0));
        }
    }
    let _restore = Restore(HOOK.with(|h| h.replace(Some(hook))));
    NEXT.with(|n| n.set(Some(Instant::now() + PERIOD)));
    f()
}

/// Runs `f` with every `check` on this thread reporting an interrupt once `stop` is set: how a worker thread
/// doing part of the caller's call (the batch function's time ranges) stops with it, although only the
/// caller's thread hears Ctrl-C.
pub(crate) fn scope_until<T>(stop: Arc<AtomicBool>, f: impl FnOnce() -> T) -> T {
    STOP.with(|s| s.replace(Some(stop)));
    let out = scope(stopped, f);
    STOP.with(|s| s.replace(None));
    out
}

fn stopped() -> Result<()> {
    let set = STOP.with(|s| {
        s.borrow()
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    });
    if set {
        Err(interrupted("another part of the call stopped"))
    } else {
        Ok(())
    }
}

/// `Err(Interrupted)` if the caller asked to stop; cheap enough to call every few microseconds of work.
#[inline]
pub(crate) fn check() -> Result<()> {
    let Some(hook) = HOOK.with(Cell::get) else {
        return Ok(());
    };
    let now = Instant::now();
    if NEXT.with(Cell::get).is_some_and(|next| now < next) {
        return Ok(());
    }
    NEXT.with(|n| n.set(Some(now + PERIOD)));
    hook().map_err(|e| match e.kind() {
        ErrorKind::Interrupted => e,
        _ => interrupted(e.message()),
    })
}

/// The error every interrupted kernel returns.
pub fn interrupted(why: &str) -> Error {
    Error::new(ErrorKind::Interrupted, format!("interrupted: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stop() -> Result<()> {
        Err(Error::new(ErrorKind::Input, "Ctrl-C"))
    }

    #[test]
    fn a_worker_stops_when_its_flag_is_set() {
        let flag = Arc::new(AtomicBool::new(false));
        scope_until(flag.clone(), || {
            std::thread::sleep(PERIOD + Duration::from_millis(5));
            assert!(check().is_ok());
            flag.store(true, Ordering::Relaxed);
            std::thread::sleep(PERIOD + Duration::from_millis(5));
            assert_eq!(check().unwrap_err().kind(), ErrorKind::Interrupted);
        });
    }

    #[test]
    fn no_scope_never_interrupts() {
        assert!(check().is_ok());
    }

    #[test]
    fn the_hook_is_consulted_once_per_period_and_restored() {
        scope(stop, || {
            // The first period has not passed yet.
            assert!(check().is_ok());
            std::thread::sleep(PERIOD + Duration::from_millis(5));
            let e = check().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Interrupted);
            // Other threads are never interrupted.
            std::thread::spawn(|| assert!(check().is_ok()))
                .join()
                .unwrap();
        });
        std::thread::sleep(PERIOD + Duration::from_millis(5));
        assert!(check().is_ok());
    }
}

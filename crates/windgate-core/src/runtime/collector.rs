//! The collector: windows come back from worker threads in any order; it releases them in window order once
//! a progress report says that every window up to that id has been sent. Every engine with worker threads
//! (the pane farm, RRCPA, the line, ring and multiway designs) reports to one.

use std::collections::BTreeMap;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::error::{Error, ErrorKind, Result};
use crate::threads::panic_message;

/// Messages to the collector.
pub(crate) enum OutMsg<W> {
    Window(i64, W),
    /// Every window up to this id has been sent.
    Progress(i64),
    Failed(String),
}

/// Runs a worker thread's body; a panic becomes an [`OutMsg::Failed`] naming `who`, which the caller's
/// collector turns into an operator error instead of a hang (`docs/architecture.md`, "Contracts": errors).
pub(crate) fn report_panic<W>(
    out: &Sender<OutMsg<W>>,
    who: impl FnOnce() -> String,
    body: impl FnOnce(),
) {
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        let _ = out.send(OutMsg::Failed(format!(
            "{} panicked: {}",
            who(),
            panic_message(&panic)
        )));
    }
}

pub(crate) struct Collector<W> {
    rx: Receiver<OutMsg<W>>,
    /// Windows received and not yet released.
    ready: BTreeMap<i64, W>,
    progress: i64,
    failed: Option<String>,
}

impl<W> Collector<W> {
    pub fn new(rx: Receiver<OutMsg<W>>) -> Self {
        Self {
            rx,
            ready: BTreeMap::new(),
            progress: i64::MIN,
            failed: None,
        }
    }

    /// Releases the windows up to `until`, in order. With `wait`, blocks until all of them are there (the panes
    /// they need must have been punctuated); otherwise takes what has arrived. `threads` are checked while
    /// waiting so that a dead worker is an error, not a hang.
    pub fn collect(
        &mut self,
        until: i64,
        wait: bool,
        threads: &[JoinHandle<()>],
    ) -> Result<Vec<(i64, W)>> {
        self.check()?;
        loop {
            let msg = if wait && self.progress < until {
                // The caller's Ctrl-C is honoured while it waits (the operator is poisoned by its caller).
                crate::interrupt::check()?;
                match self.rx.recv_timeout(crate::interrupt::PERIOD) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => {
                        if threads.iter().any(|t| t.is_finished()) {
                            return Err(self.fail("a worker thread stopped".into()));
                        }
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(self.fail("the workers stopped".into()));
                    }
                }
            } else {
                self.rx.try_recv().ok()
            };
            match msg {
                Some(OutMsg::Window(j, w)) => {
                    self.ready.insert(j, w);
                }
                Some(OutMsg::Progress(p)) => self.progress = self.progress.max(p),
                Some(OutMsg::Failed(why)) => return Err(self.fail(why)),
                None => break,
            }
        }
        let last = until.min(self.progress);
        let mut done = vec![];
        while let Some(entry) = self.ready.first_entry() {
            if *entry.key() > last {
                break;
            }
            done.push(entry.remove_entry());
        }
        Ok(done)
    }

    pub fn check(&self) -> Result<()> {
        match &self.failed {
            Some(why) => Err(Error::new(ErrorKind::Poisoned, why.clone())),
            None => Ok(()),
        }
    }

    /// Marks the workers failed, preferring a worker's own report to `why`.
    pub fn fail(&mut self, why: String) -> Error {
        let why = self
            .rx
            .try_iter()
            .find_map(|m| match m {
                OutMsg::Failed(w) => Some(w),
                _ => None,
            })
            .unwrap_or(why);
        self.failed = Some(why.clone());
        Error::new(ErrorKind::Poisoned, why)
    }
}

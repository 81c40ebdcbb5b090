//! Worker threads kept between calls, for work a call hands to another core and waits for (the batch
//! function's time ranges).
//!
//! Why: a thread started for one call begins with an empty allocator heap, so its allocations land on pages
//! the process has not touched since they were returned to the system, and each first touch zeroes a page
//! (`perf`: 4-5% of a time range's time in the kernel's page clearing on a steady run, more after a call that
//! freed much memory). A kept thread reuses its own freed memory from one call to the next.
//!
//! A job never waits behind another: it goes to a thread that is idle, or to a new one, so that calls from
//! several threads at once each get their own. Threads are only ever added (as many as the most jobs that ran
//! at once) and wait on a channel when idle. A job that panics is caught on its thread, which lives on.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::error::{Error, ErrorKind, Result};
use crate::threads::panic_message;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// The kept threads: a channel of jobs and how many threads wait on it unclaimed.
struct Pool {
    jobs: Sender<Job>,
    waiting: Receiver<Job>,
    /// Threads blocked (or about to block) on the channel that no job has been promised to. A submitter
    /// claims one by taking 1 before it sends; a thread adds 1 each time it goes back to wait.
    idle: AtomicUsize,
}

/// The process's pool, with the id of the process that made it: a child forked from a process with kept
/// threads has none of them (`fork` copies only the calling thread), so it makes a pool of its own rather
/// than hand jobs to threads that are not there.
static POOL: Mutex<Option<(u32, Arc<Pool>)>> = Mutex::new(None);

fn pool() -> Arc<Pool> {
    let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
    let pid = std::process::id();
    match &*pool {
        Some((made_by, p)) if *made_by == pid => p.clone(),
        _ => {
            let (jobs, waiting) = crossbeam_channel::unbounded();
            let p = Arc::new(Pool {
                jobs,
                waiting,
                idle: AtomicUsize::new(0),
            });
            *pool = Some((pid, p.clone()));
            p
        }
    }
}

/// A job's result, once its thread has finished it.
pub(crate) struct Task<T> {
    result: Receiver<std::thread::Result<T>>,
    got: Option<std::thread::Result<T>>,
}

impl<T> Task<T> {
    /// Whether the job has finished, waiting at most `timeout` for it.
    pub(crate) fn done_within(&mut self, timeout: Duration) -> bool {
        if self.got.is_none() {
            match self.result.recv_timeout(timeout) {
                Ok(r) => self.got = Some(r),
                Err(RecvTimeoutError::Timeout) => return false,
                Err(RecvTimeoutError::Disconnected) => self.got = Some(Err(Box::new(LOST))),
            }
        }
        true
    }

    /// The job's result, waiting for it; an error of kind `Poisoned` if it panicked.
    pub(crate) fn join(mut self) -> Result<T> {
        if self.got.is_none() {
            self.got = Some(self.result.recv().unwrap_or_else(|_| Err(Box::new(LOST))));
        }
        let got = self.got.take().expect("just received");
        got.map_err(|p| {
            let why = format!("a worker thread panicked: {}", panic_message(&p));
            Error::new(ErrorKind::Poisoned, why)
        })
    }
}

/// The panic message of a job whose thread went away without an answer (it cannot: the job's panic is
/// caught, and the threads never exit).
const LOST: &str = "the worker thread ended without finishing its job";

/// Runs `job` on a kept thread, idle or new (named `windgate-worker-N`); an error of kind `Internal` when a
/// new thread is needed and the system refuses it.
pub(crate) fn run<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> Result<Task<T>> {
    let (tx, result) = crossbeam_channel::bounded(1);
    let job: Job = Box::new(move || {
        // The caller may have gone (it never does before the result comes): then the result is dropped.
        let _ = tx.send(catch_unwind(AssertUnwindSafe(job)));
    });
    let pool = pool();
    let claimed = (pool.idle)
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .is_ok();
    if claimed {
        pool.jobs.send(job).expect("the pool keeps its receiver");
    } else {
        start_thread(pool, job)?;
    }
    Ok(Task { result, got: None })
}

/// Starts a kept thread with its first job; it then waits on the pool's channel for the next.
fn start_thread(pool: Arc<Pool>, first: Job) -> Result<()> {
    static STARTED: AtomicUsize = AtomicUsize::new(0);
    let n = STARTED.fetch_add(1, Ordering::Relaxed);
    std::thread::Builder::new()
        .name(format!("windgate-worker-{n}"))
        .spawn(move || {
            first();
            loop {
                pool.idle.fetch_add(1, Ordering::AcqRel);
                match pool.waiting.recv() {
                    Ok(job) => job(),
                    Err(_) => return,
                }
            }
        })
        .map(drop)
        .map_err(|e| {
            Error::new(
                ErrorKind::Internal,
                format!("could not start a thread: {e}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_and_threads_are_kept() {
        let first = run(|| std::thread::current().name().map(String::from)).unwrap();
        let name = first.join().unwrap().unwrap();
        assert!(name.starts_with("windgate-worker-"), "{name}");
        // Many jobs at once each get a thread (none waits behind another: they meet at a barrier).
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
        let tasks: Vec<_> = (0..4)
            .map(|i| {
                let b = barrier.clone();
                run(move || {
                    b.wait();
                    i * 10
                })
                .unwrap()
            })
            .collect();
        let got: Vec<i32> = tasks.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(got, vec![0, 10, 20, 30]);
    }

    #[test]
    fn a_panicking_job_is_an_error_and_its_thread_lives_on() {
        let t = run(|| -> i32 { panic!("boom") }).unwrap();
        let e = t.join().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Poisoned);
        assert!(e.message().contains("boom"), "{}", e.message());
        let mut t = run(|| 7).unwrap();
        while !t.done_within(Duration::from_millis(5)) {}
        assert_eq!(t.join().unwrap(), 7);
    }
}

//! Pane-level query (PLQ) workers (Algorithm 2 of Mencagli et al., *Parallel Continuous Preference Queries over
//! Out-of-Order and Bursty Data Streams*): each keeps the partial results of the pane partitions it was given and, on a
//! punctuation, ships every partition below it to the window-level query (WLQ) emitter, then acknowledges the
//! punctuation.
//!
//! The acknowledgement replaces the paper's partition counts: channels are FIFO per sender, so once every
//! worker has acknowledged frontier `F`, the WLQ emitter holds every partition of every pane below `F`.

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use super::{FarmQuery, Routed, WlqIn};
use crate::runtime::collector::OutMsg;
use crate::runtime::monitor::WorkerCounters;
use crate::threads::panic_message;

/// What the emitter sends a PLQ worker, in-band on one FIFO channel.
pub enum PlqMsg<C> {
    /// Rows of a routed chunk in `ranges`; `count` of them are this worker's.
    Rows {
        routed: Arc<Routed<C>>,
        ranges: Vec<(usize, usize)>,
        count: u64,
    },
    /// Panes below this id are closed.
    Punct(i64),
}

pub(super) fn run<Q: FarmQuery, S>(
    query: Arc<Q>,
    me: u8,
    rx: Receiver<PlqMsg<Q::Chunk>>,
    wlq: Sender<WlqIn<Q, S>>,
    out: Sender<OutMsg<Q::Done>>,
    counters: Arc<WorkerCounters>,
) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut state = query.new_worker();
        for msg in rx.iter() {
            let t0 = Instant::now();
            let rows = match msg {
                PlqMsg::Rows {
                    routed,
                    ranges,
                    count,
                } => {
                    for (lo, hi) in ranges {
                        query.ingest(&mut state, &routed, lo..hi, me);
                    }
                    count
                }
                PlqMsg::Punct(frontier) => {
                    let mut failed = false;
                    query.close_below(&mut state, frontier, &mut |pane, part| {
                        failed |= wlq
                            .send(WlqIn::Part {
                                pane,
                                part: Arc::new(part),
                            })
                            .is_err();
                    });
                    if failed
                        || wlq
                            .send(WlqIn::Ack {
                                worker: me,
                                frontier,
                            })
                            .is_err()
                    {
                        return;
                    }
                    0
                }
            };
            counters.add(t0.elapsed(), rows);
        }
    }));
    if let Err(panic) = result {
        let _ = out.send(OutMsg::Failed(format!(
            "PLQ worker {me} panicked: {}",
            panic_message(&panic)
        )));
    }
    // The emitter stops once every PLQ worker has said goodbye, whatever happened here.
    let _ = wlq.send(WlqIn::Exit);
}

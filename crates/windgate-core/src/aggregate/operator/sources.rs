//! Sources: each one's K-slack, arrival counter and credits (the rows it pushed that are not yet final while
//! another source holds the watermark back).

use super::*;

pub(super) struct Source {
    pub(super) kslack: KSlack,
    pub(super) seq: u64,
    pub(super) closed: bool,
    /// Credits: rows pushed and not yet final, as (the source's watermark after the push,
    /// rows); a chunk is released once the operator's watermark reaches it.
    pub(super) pending: VecDeque<(i64, u64)>,
    pub(super) pending_rows: u64,
    /// A bound the caller guarantees: no row of this source still to come has a time below it. The batch
    /// function over in-memory input knows every row in advance and promises the least time still to come,
    /// so windows close as soon as they are exact instead of at the end (the result does not change).
    pub(super) promised: Option<i64>,
}

impl Source {
    pub(super) fn release(&mut self, watermark: i64) {
        while let Some(&(wm, rows)) = self.pending.front() {
            if wm > watermark {
                break;
            }
            self.pending.pop_front();
            self.pending_rows -= rows;
        }
    }
}

impl WindowAggregator {
    /// Refuses a push of a source that already has `credits` rows pending while *another* source holds
    /// the watermark back (the caller must feed that one, or close it). Nothing is consumed, so the
    /// operator stays usable and the same batch can be pushed again. A source with nothing pending may push
    /// any batch, and a source that holds the watermark back itself is never refused: that would deadlock.
    pub(super) fn check_credits(&mut self, source: usize, rows: u64) -> Result<()> {
        let Some(limit) = self
            .opts
            .credits
            .filter(|_| self.sources.len() > 1 && !self.deferred)
        else {
            return Ok(());
        };
        let wm = self.watermark().unwrap_or(i64::MIN);
        for s in &mut self.sources {
            s.release(wm);
        }
        let me = &self.sources[source];
        if me.pending_rows == 0 || me.pending_rows + rows <= limit {
            return Ok(());
        }
        let mine = me.kslack.watermark();
        let laggards: Vec<String> = (0..self.sources.len())
            .filter(|&j| j != source && !self.sources[j].closed)
            .filter(|&j| match (self.sources[j].kslack.watermark(), mine) {
                (None, _) => true,
                (Some(theirs), Some(mine)) => theirs < mine,
                (Some(_), None) => false,
            })
            .map(|j| j.to_string())
            .collect();
        if laggards.is_empty() {
            return Ok(());
        }
        self.stats.backpressured += 1;
        Err(Error::new(
            ErrorKind::Backpressure,
            format!(
                "source {source} has {} rows pending (credits={limit}) while source(s) {} hold the \
                 watermark back: push or close those first, then push this batch again (it was not consumed)",
                me.pending_rows,
                laggards.join(", ")
            ),
        ))
    }

    pub(super) fn note_pending(&mut self, source: usize, rows: u64) {
        if self.opts.credits.is_none() || self.sources.len() < 2 || rows == 0 {
            return;
        }
        let s = &mut self.sources[source];
        let wm = s.kslack.watermark().unwrap_or(i64::MIN);
        s.pending.push_back((wm, rows));
        s.pending_rows += rows;
    }
}

//! What a run reports: per operator the items in and out, the worker time (so cost `c_i` and selectivity
//! `s_i` can be read off), the allotments the scheduler made, and the latency markers.

use std::time::Duration;

use super::operator::OpKind;

/// One operator's counters over a run.
#[derive(Debug, Clone, PartialEq)]
pub struct OpStats {
    pub name: String,
    pub kind: OpKind,
    /// Items processed (inputs of this operator, not counting markers).
    pub inputs: u64,
    /// Items emitted.
    pub outputs: u64,
    /// Worker time spent processing this operator's items.
    pub busy: Duration,
    /// Times a worker was allotted to the operator.
    pub allotments: u64,
    /// Most workers ever allotted to it at once (at most its maximum degree of parallelism).
    pub max_workers: usize,
    /// Deposits the reorder buffer refused because it was full (the worker retried).
    pub refused: u64,
}

impl OpStats {
    pub(crate) fn new(name: &str, kind: OpKind) -> Self {
        Self {
            name: name.to_string(),
            kind,
            inputs: 0,
            outputs: 0,
            busy: Duration::ZERO,
            allotments: 0,
            max_workers: 0,
            refused: 0,
        }
    }

    /// Average cost per input item.
    pub fn cost(&self) -> Option<Duration> {
        (self.inputs > 0).then(|| self.busy / self.inputs.min(u32::MAX as u64) as u32)
    }

    /// Outputs per input.
    pub fn selectivity(&self) -> Option<f64> {
        (self.inputs > 0).then(|| self.outputs as f64 / self.inputs as f64)
    }
}

/// A run's report.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineStats {
    /// `"parallel"` or `"sequential"`.
    pub executor: &'static str,
    pub threads: usize,
    pub scheduler: &'static str,
    pub reorder: &'static str,
    pub partitioning: &'static str,
    pub inputs: u64,
    pub outputs: u64,
    pub elapsed: Duration,
    pub ops: Vec<OpStats>,
    /// Processing latency of each marker (first operator start to egress), in arrival order.
    pub latencies: Vec<Duration>,
}

impl PipelineStats {
    /// Mean latency of the markers between the 20th and 80th percentile of arrival (as the paper measures
    /// latency: drops start-up and shut-down).
    pub fn trimmed_latency(&self) -> Option<Duration> {
        let n = self.latencies.len();
        let (lo, hi) = (n / 5, n - n / 5);
        let kept = &self.latencies[lo..hi.max(lo)];
        (!kept.is_empty()).then(|| kept.iter().sum::<Duration>() / kept.len() as u32)
    }

    /// Input items per second of wall time.
    pub fn throughput(&self) -> f64 {
        self.inputs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

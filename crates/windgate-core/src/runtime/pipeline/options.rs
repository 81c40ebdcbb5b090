//! How a pipeline runs: workers, the scheduling heuristic, the reorder and partitioning schemes, and the
//! constants that Prasaad, Ramalingam, Rajan, *Scaling Ordered Stream Processing on Shared-Memory Multicores*
//! leave open (the reorder buffer size S, the time slice τ, QST's constant C, CT's window W), each with the
//! value chosen here and why.

use std::time::Duration;

use crate::error::{Error, Result};

/// Which schedulable operator a free worker takes next (the paper's dynamic scheduling heuristics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedulerPolicy {
    /// Current-Throughput (eq. 3, as printed: normalised by `cs_i`): the operator with the fewest
    /// ingress-equivalent tuples processed in the current window. The paper's best for throughput.
    #[default]
    Ct,
    /// CT normalised by the *input* ratio `cs_{i-1}` (the paper divides by `cs_i`, which looks like a slip): does
    /// not under-schedule
    /// filters or over-schedule flat-maps.
    CtInput,
    /// Last-in-Pipeline: the latest operator with work. The paper's best for latency.
    Lp,
    /// Queue-Size-Throttling (eq. 1): the earliest operator whose output queue is under its threshold.
    Qst,
    /// Estimated-Time (eq. 2): the operator needing the most worker time to drain its worklist.
    Et,
}

impl SchedulerPolicy {
    pub const NAMES: [&'static str; 5] = ["ct", "ct_input", "lp", "qst", "et"];

    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "ct" => Self::Ct,
            "ct_input" => Self::CtInput,
            "lp" => Self::Lp,
            "qst" => Self::Qst,
            "et" => Self::Et,
            _ => {
                return Err(Error::param(
                    "scheduler",
                    format!("expected one of {:?}, got {name:?}", Self::NAMES),
                ));
            }
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Ct => "ct",
            Self::CtInput => "ct_input",
            Self::Lp => "lp",
            Self::Qst => "qst",
            Self::Et => "et",
        }
    }
}

/// How stateless and partitioned operators put their outputs back in order (the paper's reordering schemes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReorderScheme {
    /// The non-blocking reorder buffer (Fig. 4): depositing never waits for draining.
    #[default]
    NonBlocking,
    /// One lock for deposit and drain (Fig. 2): the baseline.
    Locked,
}

impl ReorderScheme {
    pub fn parse(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "nonblocking" | "non_blocking" | "non-blocking" => Ok(Self::NonBlocking),
            "locked" | "lock" | "lock_based" => Ok(Self::Locked),
            _ => Err(Error::param(
                "reorder",
                format!("expected \"nonblocking\" or \"locked\", got {name:?}"),
            )),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::NonBlocking => "nonblocking",
            Self::Locked => "locked",
        }
    }
}

/// How partitioned operators share partitions among workers (the paper's partitioning schemes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Partitioning {
    /// The hybrid queue (Fig. 7): any worker serves any partition, in master-queue (arrival) order.
    #[default]
    Hybrid,
    /// PARTITIONED-QUEUE: partition `p` belongs to worker slot `p mod slots`, `slots = min(p, threads)`.
    Partitioned,
}

impl Partitioning {
    pub fn parse(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "hybrid" => Ok(Self::Hybrid),
            "partitioned" => Ok(Self::Partitioned),
            _ => Err(Error::param(
                "partitioning",
                format!("expected \"hybrid\" or \"partitioned\", got {name:?}"),
            )),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Hybrid => "hybrid",
            Self::Partitioned => "partitioned",
        }
    }
}

/// Options of a parallel run.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineOptions {
    /// Worker threads (one per core by default). The caller's thread feeds the input and collects the
    /// output besides.
    pub threads: usize,
    pub scheduler: SchedulerPolicy,
    pub reorder: ReorderScheme,
    pub partitioning: Partitioning,
    /// Reorder buffer slots `S` per operator (rounded up to a power of two). 1 is legal (and slow).
    pub reorder_slots: usize,
    /// The time slice τ a worker spends on one allotment; converted to `τ / c_i` items.
    pub time_slice: Duration,
    /// CT's tumbling window `W`.
    pub ct_window: Duration,
    /// QST's capacity `C` (eq. 1), in items.
    pub qst_capacity: usize,
    /// A latency marker after every this many input items (0: none). Markers flow through every operator in
    /// order and record processing latency (first operator start to egress).
    pub marker_every: u64,
    /// Input items admitted to the first operator's worklist and not yet taken: the caller waits above
    /// this, so memory stays bounded when the pipeline is slower than the input.
    pub max_pending: usize,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        Self {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            scheduler: SchedulerPolicy::Ct,
            reorder: ReorderScheme::NonBlocking,
            partitioning: Partitioning::Hybrid,
            reorder_slots: 1024,
            // Long enough to amortise the scheduler lock over many cheap items, short enough to react
            // within a millisecond.
            time_slice: Duration::from_micros(500),
            ct_window: Duration::from_millis(20),
            qst_capacity: 4096,
            marker_every: 1000,
            max_pending: 1 << 16,
        }
    }
}

impl PipelineOptions {
    pub fn validate(&self) -> Result<()> {
        if self.threads == 0 || self.threads > 1024 {
            return Err(Error::param(
                "threads",
                format!("expected 1 to 1024, got {}", self.threads),
            ));
        }
        if self.reorder_slots == 0 || self.reorder_slots > 1 << 24 {
            return Err(Error::param(
                "reorder_slots",
                format!("expected 1 to 2^24, got {}", self.reorder_slots),
            ));
        }
        if self.time_slice.is_zero() {
            return Err(Error::param("time_slice", "expected a positive duration"));
        }
        if self.ct_window.is_zero() {
            return Err(Error::param("ct_window", "expected a positive duration"));
        }
        if self.qst_capacity == 0 {
            return Err(Error::param("qst_capacity", "expected at least 1"));
        }
        if self.max_pending == 0 {
            return Err(Error::param("max_pending", "expected at least 1"));
        }
        Ok(())
    }
}

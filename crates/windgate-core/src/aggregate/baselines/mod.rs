//! Research baselines: engines kept to reproduce the papers' comparisons, never picked by `strategy="auto"`.
//! The strategy registry marks them `baseline`; production code does not import this module.
//!
//! * [`line`], [`ring`] and [`rrcpa`]: Beicht's HSA and RRA (a line of processing units), HOA and RRCA (a
//!   ring) and RRCPA (panes round-robin over a line), from the master's thesis on disjoint parallelization of
//!   sliding-window aggregation (see `docs/architecture.md`, "Papers"). RRCPA is the thesis' own proposal; `auto`
//!   never picks it (the pane farm covers the same ground and takes the farm's options), so it stays to
//!   reproduce the thesis' comparisons.
//! * [`multiway`]: the multiway designs of Cederman, Gulisano, Nikolakopoulos, Papatriantafilou, Tsigas,
//!   *Efficient data streaming multiway aggregation through concurrent algorithmic designs and new abstract data
//!   types*: the paper's baselines MQ and MQ-LF and its designs TuMLSC, TuMLMC and WiML. They need time-sorted
//!   sources, which the operator's own multi-source merge does not, so `auto` does not pick them either.

pub(crate) mod line;
pub(crate) mod multiway;
pub(crate) mod ring;
pub(crate) mod rrcpa;

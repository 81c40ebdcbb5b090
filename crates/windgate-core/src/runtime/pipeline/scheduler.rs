//! Scheduling heuristics (in progress).

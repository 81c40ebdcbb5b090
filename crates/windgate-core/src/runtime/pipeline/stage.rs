//! Per-operator runtime (in progress).

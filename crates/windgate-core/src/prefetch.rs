//! Software prefetch for the passes that read a column for the first time.
//!
//! Why: on the machines windgate is measured on (virtual machines with two cores), a plain sequential pass over
//! a column that is not in cache runs at well under 1 GB/s: the hardware prefetchers do not keep up, and each
//! row waits for its cache line. Asking for the lines a few kilobytes ahead made such a pass four to five times
//! faster. Only the first pass over a column needs it; the passes after it read from cache.

/// How far ahead of the row being read a pass asks for, in bytes: far enough to cover the memory latency at
/// the pass's speed, near enough that the lines are still in L1/L2 when the pass gets there.
pub(crate) const AHEAD_BYTES: usize = 2048;

/// Hints that `slice[i]` will be read soon. Any `i` is fine, past the end included: nothing is read.
#[inline(always)]
pub(crate) fn prefetch<T>(slice: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let p = slice.as_ptr().wrapping_add(i) as *const i8;
        // SAFETY: a prefetch is a hint: it never faults and reads nothing the program can observe, whatever the
        // address (this one may lie past the end of the slice: `wrapping_add` makes no claim on it); `sse` is
        // part of every x86_64 target.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (slice, i);
}

/// Rows of `T` in [`AHEAD_BYTES`].
#[inline(always)]
pub(crate) const fn ahead<T>() -> usize {
    AHEAD_BYTES / std::mem::size_of::<T>()
}

/// Calls `f(i, &values[i])` for every row, asking for the rows [`AHEAD_BYTES`] ahead once per cache line.
#[inline(always)]
pub(crate) fn each_prefetched<T>(values: &[T], mut f: impl FnMut(usize, &T)) {
    let line = (64 / std::mem::size_of::<T>().max(1)).max(1);
    let ahead = ahead::<T>();
    for (c, chunk) in values.chunks(line).enumerate() {
        let base = c * line;
        prefetch(values, base + ahead);
        for (k, v) in chunk.iter().enumerate() {
            f(base + k, v);
        }
    }
}

/// The least and greatest of `ts` (`None` if empty), in eight independent lanes (one running minimum is a chain
/// of dependent compares) and asking for the column ahead: the caller's thread runs this over every row of a
/// batch (admission, the batch function's plan), so it must run at the speed of memory.
pub(crate) fn min_max(ts: &[i64]) -> Option<(i64, i64)> {
    if ts.is_empty() {
        return None;
    }
    let mut lo = [i64::MAX; 8];
    let mut hi = [i64::MIN; 8];
    let chunks = ts.chunks_exact(8);
    let rest = chunks.remainder();
    for (j, c) in chunks.enumerate() {
        prefetch(ts, j * 8 + ahead::<i64>());
        for k in 0..8 {
            lo[k] = lo[k].min(c[k]);
            hi[k] = hi[k].max(c[k]);
        }
    }
    for &t in rest {
        lo[0] = lo[0].min(t);
        hi[0] = hi[0].max(t);
    }
    Some((
        lo.into_iter().min().unwrap_or(i64::MAX),
        hi.into_iter().max().unwrap_or(i64::MIN),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn min_max_of_any_length() {
        for n in 0..40i64 {
            let ts: Vec<i64> = (0..n).map(|i| (i * 37) % 23 - 11).collect();
            let want = ts.iter().min().map(|&lo| (lo, *ts.iter().max().unwrap()));
            assert_eq!(super::min_max(&ts), want, "{n}");
        }
    }
}

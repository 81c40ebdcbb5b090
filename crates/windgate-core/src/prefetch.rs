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

/// Defines `fn $name($args) -> $ret` as `$portable`, compiled a second time for AVX2 and chosen at run time
/// (checked once per call, a cached flag): the first passes over a column are block reductions the compiler
/// vectorises, but the baseline x86-64 target has no 64-bit vector compare (SSE4.2's `pcmpgtq`), so there
/// they run as scalar compares.
macro_rules! with_avx2 {
    ($(#[$doc:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),+) -> $ret:ty = $portable:ident;) => {
        $(#[$doc])*
        $vis fn $name($($arg: $ty),+) -> $ret {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($arg: $ty),+) -> $ret {
                    $portable($($arg),+)
                }
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: `avx2` is the portable body compiled with AVX2 enabled; the CPU was just found
                    // to support AVX2, which is all `target_feature` asks of the caller.
                    return unsafe { avx2($($arg),+) };
                }
            }
            $portable($($arg),+)
        }
    };
}
pub(crate) use with_avx2;

with_avx2! {
    /// The least and greatest of `ts` (`None` if empty), in eight independent lanes (one running minimum is a
    /// chain of dependent compares) and asking for the column ahead: the caller's thread runs this over every
    /// row of a batch (admission, the batch function's plan), so it must run at the speed of memory.
    pub(crate) fn min_max(ts: &[i64]) -> Option<(i64, i64)> = min_max_lanes;
}

with_avx2! {
    /// [`min_max`] and whether `ts` never decreases, in one pass: each block's extremes, then its order
    /// while the block is in L1. The batch function's plan reads every piece's times this way, so that the
    /// pane engine can find a sorted piece's pane runs by search (`SortedRuns`) instead of a second pass.
    pub(crate) fn min_max_sorted(ts: &[i64]) -> Option<(i64, i64, bool)> = min_max_sorted_blocks;
}

with_avx2! {
    /// The largest biased exponent of the finite values of `values` (0 when there are none, NaN and infinities
    /// counting as 0): the first pass of the exact float sum's batch lane over a value column.
    pub(crate) fn largest_finite_exponent(values: &[f64]) -> u64 = largest_finite_exponent_blocks;
}

with_avx2! {
    /// The greatest of `ids` (0 if empty): a fold the compiler vectorises, with AVX2's unsigned 32-bit maxima
    /// where the CPU has them (the baseline x86-64 target has none, and compiles a compare and a select a row).
    pub(crate) fn greatest_u32(ids: &[u32]) -> u32 = greatest_u32_fold;
}

#[inline(always)]
fn greatest_u32_fold(ids: &[u32]) -> u32 {
    ids.iter().fold(0, |m, &k| m.max(k))
}

with_avx2! {
    /// Whether `ts` never decreases: a block reduction (no early exit, so it vectorises). The time ranges ask
    /// it of the rows where two ranges meet, and of a whole input their sorted cut refused.
    pub(crate) fn non_decreasing(ts: &[i64]) -> bool = non_decreasing_blocks;
}

#[inline(always)]
fn largest_finite_exponent_blocks(values: &[f64]) -> u64 {
    let mut top = 0;
    each_block_prefetched(values, |block| {
        // A local maximum per block: the compiler vectorises a reduction into a local, not into `top`.
        let mut block_top = 0;
        for &x in block {
            let biased = (x.to_bits() >> 52) & 0x7ff;
            block_top = block_top.max(if biased == 0x7ff { 0 } else { biased });
        }
        top = top.max(block_top);
    });
    top
}

#[inline(always)]
fn non_decreasing_blocks(ts: &[i64]) -> bool {
    let mut ok = true;
    let mut prev = ts.first().copied().unwrap_or(i64::MIN);
    each_block_prefetched(ts, |block| {
        // A local flag per block, and the step into the block from the one before.
        let mut block_ok = prev <= block[0];
        for w in block.windows(2) {
            block_ok &= w[0] <= w[1];
        }
        ok &= block_ok;
        prev = block[block.len() - 1];
    });
    ok
}

/// The portable body of [`min_max_sorted`].
#[inline(always)]
fn min_max_sorted_blocks(ts: &[i64]) -> Option<(i64, i64, bool)> {
    let &first = ts.first()?;
    let (mut lo, mut hi, mut ok, mut prev) = (i64::MAX, i64::MIN, true, first);
    each_block_prefetched(ts, |block| {
        let (mut block_lo, mut block_hi) = (i64::MAX, i64::MIN);
        for &t in block {
            block_lo = block_lo.min(t);
            block_hi = block_hi.max(t);
        }
        let mut block_ok = prev <= block[0];
        for w in block.windows(2) {
            block_ok &= w[0] <= w[1];
        }
        (lo, hi, ok) = (lo.min(block_lo), hi.max(block_hi), ok & block_ok);
        prev = block[block.len() - 1];
    });
    Some((lo, hi, ok))
}

/// The portable body of [`min_max`], inlined into each compilation of it.
#[inline(always)]
fn min_max_lanes(ts: &[i64]) -> Option<(i64, i64)> {
    if ts.is_empty() {
        return None;
    }
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    each_block_prefetched(ts, |block| {
        let (mut block_lo, mut block_hi) = (i64::MAX, i64::MIN);
        for &t in block {
            block_lo = block_lo.min(t);
            block_hi = block_hi.max(t);
        }
        (lo, hi) = (lo.min(block_lo), hi.max(block_hi));
    });
    Some((lo, hi))
}

/// Calls `reduce` on blocks of a few cache lines of `values`, asking for each block's lines ahead first: the
/// shape of a first pass the compiler vectorises (a prefetch inside the reduction loop would keep it scalar).
#[inline(always)]
fn each_block_prefetched<T>(values: &[T], mut reduce: impl FnMut(&[T])) {
    const BLOCK: usize = 256;
    let line = (64 / std::mem::size_of::<T>().max(1)).max(1);
    for (j, block) in values.chunks(BLOCK).enumerate() {
        for at in (0..BLOCK).step_by(line) {
            prefetch(values, j * BLOCK + at + ahead::<T>());
        }
        reduce(block);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn non_decreasing_of_any_length() {
        for n in [0usize, 1, 2, 255, 256, 257, 1000] {
            let ts: Vec<i64> = (0..n as i64).map(|i| i / 3).collect();
            assert!(super::non_decreasing(&ts));
            for at in [1, n / 2, 255, 256, n.saturating_sub(1)] {
                if at >= 1 && at < n {
                    let mut bad = ts.clone();
                    bad[at] = bad[at - 1] - 1;
                    assert!(!super::non_decreasing(&bad), "n {n} at {at}");
                }
            }
        }
    }

    proptest::proptest! {
        /// The one-pass extremes and order are `min_max`'s and `non_decreasing`'s, for columns across blocks
        /// with a step down anywhere (or none).
        #[test]
        fn min_max_sorted_is_both(
            n in 0usize..700,
            step in proptest::prelude::any::<u8>(),
            down in proptest::option::of(0usize..700),
        ) {
            let mut ts: Vec<i64> = (0..n as i64).map(|i| i * (step as i64 % 4) - 300).collect();
            if let Some(at) = down.filter(|&at| at < n) {
                ts[at] -= 1 + step as i64;
            }
            let want = super::min_max(&ts).map(|(lo, hi)| (lo, hi, super::non_decreasing(&ts)));
            proptest::prop_assert_eq!(super::min_max_sorted(&ts), want);
        }
    }

    proptest::proptest! {
        /// The vectorised greatest id is the plain maximum, for any length and values up to `u32::MAX`.
        #[test]
        fn greatest_u32_is_the_maximum(
            ids in proptest::collection::vec(
                proptest::prop_oneof![0u32..100, proptest::prelude::any::<u32>()],
                0..100,
            ),
        ) {
            let want = ids.iter().copied().max().unwrap_or(0);
            proptest::prop_assert_eq!(super::greatest_u32(&ids), want);
        }
    }

    #[test]
    fn min_max_of_any_length() {
        let extremes = [i64::MIN, 3, i64::MAX, -1, 0, i64::MIN + 1, 7, 7, 2];
        for cut in 0..=extremes.len() {
            let ts = &extremes[..cut];
            let want = ts.iter().min().map(|&lo| (lo, *ts.iter().max().unwrap()));
            assert_eq!(super::min_max(ts), want);
            assert_eq!(super::min_max_lanes(ts), want);
        }
        for n in 0..40i64 {
            let ts: Vec<i64> = (0..n).map(|i| (i * 37) % 23 - 11).collect();
            let want = ts.iter().min().map(|&lo| (lo, *ts.iter().max().unwrap()));
            assert_eq!(super::min_max(&ts), want, "{n}");
            assert_eq!(super::min_max_lanes(&ts), want, "{n}");
        }
    }
}

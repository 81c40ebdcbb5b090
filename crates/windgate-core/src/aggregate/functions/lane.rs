//! The batch lane of exact float sums: a kernel that adds a batch's values into per-slot [`ExactSum`]s at the
//! cost of a shift and an integer add per row.
//!
//! Every finite double is an integer multiple of 2^-1074. Within one chunk of rows, the values within
//! [`LANE_SHIFT`] binades of the chunk's largest are shifted to one shared resolution and summed as integers
//! into a per-slot `i128`; once per chunk each touched slot's integer goes into its exact sum
//! (`ExactSum::add_scaled`). Zeros, subnormals, NaN, infinities and values far below the chunk's largest take
//! the exact sum's own add. The sum is exact either way, so the bits are those of adding row by row.
//!
//! `sum` and `mean` use it. `var` and `std` do not: their squares' low halves lie about 53 binades below the
//! high ones, so most miss the lane, and routing them through it measured 1816 instructions a row against
//! 1409 for lifting row by row (`agg_scaling`, mean+std+min+max+first+last).

use arrow_buffer::NullBuffer;

use super::each_valid_value;
use crate::exact_sum::ExactSum;

/// A mantissa (53 bits) shifted by at most this much stays below 2^109, so [`LANE_ROWS`] of them sum below
/// 2^126 in an `i128`.
const LANE_SHIFT: i64 = 126 - 53 - 17;
const LANE_ROWS: usize = 1 << 17;
const FRACTION: u64 = (1 << 52) - 1;

/// The lane's per-slot integer sums (zero between calls) and the slots a chunk touched.
#[derive(Debug, Default)]
pub(super) struct BatchLane {
    lane: Vec<i128>,
    touched: Vec<u32>,
}

impl BatchLane {
    /// Adds `v[i]` to `sums[slots[i]]` for every row with a slot and a non-null value, and calls `row(slot)`
    /// for each (the caller's count).
    pub(super) fn add(
        &mut self,
        sums: &mut [ExactSum],
        slots: &[u32],
        v: &[f64],
        nulls: Option<&NullBuffer>,
        mut row: impl FnMut(usize),
    ) {
        self.lane.resize(sums.len(), 0);
        for start in (0..slots.len()).step_by(LANE_ROWS) {
            let end = slots.len().min(start + LANE_ROWS);
            let values = &v[start..end];
            let anchor = (largest_biased_exponent(values) - 1 - LANE_SHIFT).max(0);
            let (lane, touched) = (&mut self.lane, &mut self.touched);
            let nulls = nulls.map(|b| b.slice(start, end - start));
            each_valid_value(&slots[start..end], values, nulls.as_ref(), |s, x| {
                row(s);
                let bits = x.to_bits();
                let d = ((bits >> 52) & 0x7ff) as i64 - 1 - anchor;
                if (d as u64) <= LANE_SHIFT as u64 {
                    let m = ((bits & FRACTION) | (1 << 52)) as i64;
                    let sign = (bits as i64) >> 63;
                    if lane[s] == 0 {
                        touched.push(s as u32);
                    }
                    lane[s] += (((m ^ sign) - sign) as i128) << d;
                } else {
                    sums[s].add(x);
                }
            });
            for &s in touched.iter() {
                let term = std::mem::take(&mut lane[s as usize]);
                sums[s as usize].add_scaled(term, anchor as u16);
            }
            touched.clear();
        }
    }
}

/// The largest biased exponent of the finite values (0 when there are none). The first pass over the column,
/// so it asks for the memory ahead (see [`crate::prefetch`]).
fn largest_biased_exponent(values: &[f64]) -> i64 {
    let mut top = 0;
    crate::prefetch::each_prefetched(values, |_, x| {
        let biased = ((x.to_bits() >> 52) & 0x7ff) as i64;
        if biased != 0x7ff {
            top = top.max(biased);
        }
    });
    top
}

//! Partitioning rows by key: which of `shards` owners holds each row's key tuple, the same answer for the same
//! tuple in every batch, on every thread.
//!
//! Every worker of a key-partitioned engine reads the whole batch and keeps its own rows, so the caller's thread
//! does no per-row work (Beicht, *Disjoint Parallelization of Sliding-Window Streaming Aggregation*: disjoint
//! key partitions need no merge of partial states). The selection is branch-free (a row's index is written, and
//! the count advanced by whether it is ours), because with random keys "is this row mine" is a coin toss the
//! branch predictor cannot learn.

use arrow_array::{Array, ArrayRef};
use arrow_row::{RowConverter, SortField};
use arrow_schema::DataType;

use super::{KEY_ORDER, is_single_int};
use foldhash::fast::FixedState;
use std::hash::BuildHasher;

use crate::arrow_io::as_i64;
use crate::error::Result;
use crate::prefetch::{ahead, each_prefetched, prefetch};

/// Assigns rows to shards by their key tuple.
pub(crate) struct KeySharder {
    /// `None`: no key columns, every row on shard 0.
    converter: Option<RowConverter>,
    single_int: bool,
    hasher: FixedState,
    shards: u32,
}

impl KeySharder {
    /// A sharder of key columns of these types over `shards` owners.
    pub(crate) fn new(types: &[DataType], shards: usize) -> Result<Self> {
        let opts = KEY_ORDER;
        let single_int = is_single_int(types);
        let converter = if types.is_empty() || single_int {
            None
        } else {
            let fields = types
                .iter()
                .map(|t| SortField::new_with_options(t.clone(), opts));
            Some(RowConverter::new(fields.collect())?)
        };
        Ok(Self {
            converter,
            single_int,
            hasher: FixedState::with_seed(0x5a4d),
            shards: shards.max(1) as u32,
        })
    }

    /// Appends to `out` the index of every row of `columns` (`rows` rows) that shard `me` owns and `keep`
    /// admits, in row order.
    pub(crate) fn select(
        &self,
        columns: &[ArrayRef],
        rows: usize,
        keep: Option<&[bool]>,
        me: u32,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let start = out.len();
        out.resize(start + rows, 0);
        let picked = &mut out[start..];
        let mut n = 0;
        let keep_at = |i: usize| keep.is_none_or(|k| k[i]);
        if self.shards == 1 {
            for i in 0..rows {
                picked[n] = i as u32;
                n += keep_at(i) as usize;
            }
        } else if self.single_int {
            let values = as_i64(&columns[0], "by")?;
            let nulls = columns[0].logical_nulls().filter(|n| n.null_count() > 0);
            if nulls.is_none() && keep.is_none() {
                // The common case, kept free of per-row checks; the first pass over the key column, so it asks
                // for the column ahead of itself.
                each_prefetched(&values, |i, &v| {
                    picked[n] = i as u32;
                    n += (self.of_int(v) == me) as usize;
                });
                out.truncate(start + n);
                return Ok(());
            }
            for i in 0..rows {
                prefetch(&values, i + ahead::<i64>());
                // The null key lives on shard 0.
                let valid = nulls.as_ref().is_none_or(|nl| nl.is_valid(i));
                let shard = if valid { self.of_int(values[i]) } else { 0 };
                picked[n] = i as u32;
                n += (shard == me && keep_at(i)) as usize;
            }
        } else if let Some(converter) = &self.converter {
            let encoded = converter.convert_columns(columns)?;
            for (i, row) in encoded.iter().enumerate() {
                let shard = self.reduce(self.hasher.hash_one(row.as_ref()));
                picked[n] = i as u32;
                n += (shard == me && keep_at(i)) as usize;
            }
        } else {
            // No key columns: one key, on shard 0.
            for i in 0..rows {
                picked[n] = i as u32;
                n += (me == 0 && keep_at(i)) as usize;
            }
        }
        out.truncate(start + n);
        Ok(())
    }

    /// The shard of an integer key: a multiplicative hash, its high bits mapped onto `0..shards`.
    #[inline]
    fn of_int(&self, v: i64) -> u32 {
        let h = (v as u64 ^ 0x5a4d_5a4d).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.reduce(h)
    }

    /// `0..shards` from a hash's high 32 bits (Lemire's multiply-shift instead of a division).
    #[inline]
    fn reduce(&self, h: u64) -> u32 {
        (((h >> 32) * self.shards as u64) >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};
    use std::sync::Arc;

    /// Every kept row is selected by exactly one shard, the same shard for equal keys, in row order.
    #[test]
    fn shards_partition_the_kept_rows() {
        let ints: ArrayRef = Arc::new(Int64Array::from(
            (0..200)
                .map(|i| (i % 7 != 3).then_some(i % 13))
                .collect::<Vec<_>>(),
        ));
        let strs: ArrayRef = Arc::new(StringArray::from(
            (0..200).map(|i| format!("k{}", i % 11)).collect::<Vec<_>>(),
        ));
        let keep: Vec<bool> = (0..200).map(|i| i % 5 != 0).collect();
        for (types, cols) in [
            (vec![DataType::Int64], vec![ints.clone()]),
            (vec![DataType::Utf8, DataType::Int64], vec![strs, ints]),
            (vec![], vec![]),
        ] {
            for shards in 1..4u32 {
                let s = KeySharder::new(&types, shards as usize).unwrap();
                let mut owner = vec![None; 200];
                for me in 0..shards {
                    let mut out = vec![];
                    s.select(&cols, 200, Some(&keep), me, &mut out).unwrap();
                    assert!(out.windows(2).all(|w| w[0] < w[1]));
                    for i in out {
                        assert!(owner[i as usize].replace(me).is_none());
                    }
                }
                for (i, o) in owner.iter().enumerate() {
                    assert_eq!(o.is_some(), keep[i]);
                }
            }
        }
    }
}

//! Group keys in Arrow's row format, shared by every operator: any number of columns of (almost) any type
//! become one byte string per row that compares like the columns (nulls first), and decodes back to columns.
//!
//! Two shapes of the same mechanism, for two kinds of state:
//! * [`KeyDict`] interns whole key tuples to dense `u32` ids in order of first appearance and sorts them into
//!   output order on demand, with a no-encoding path for a single integer column: operators that keep their
//!   per-key state in vectors indexed by id (window aggregation, the band join's equality keys, the
//!   preference queries).
//! * [`RowCodec`] encodes and decodes chosen columns with per-column sort options, with [`ByteRows`] to store
//!   encoded rows back to back and [`hash_key`] to partition by them: the columnar pipeline's operators, whose
//!   state is keyed by the bytes themselves and which sort by arbitrary columns.
//!
//! [`KeySharder`] assigns rows to the workers of a key-partitioned engine by their key tuple.

mod codec;
mod dict;
mod shard;

pub(crate) use codec::{ByteRows, RowCodec, column_index, hash_key};
pub(crate) use dict::NO_KEY;
pub use dict::{KeyDict, KeyOrder};
pub(crate) use shard::KeySharder;

/// The order of keys in the row format: ascending, nulls first (the output order of every operator).
const KEY_ORDER: arrow_schema::SortOptions = arrow_schema::SortOptions {
    descending: false,
    nulls_first: true,
};

/// Whether the key is a single integer column: the shape that skips the row encoding on the hot path.
fn is_single_int(types: &[arrow_schema::DataType]) -> bool {
    use arrow_schema::DataType::*;
    matches!(types, [Int8 | Int16 | Int32 | Int64])
}

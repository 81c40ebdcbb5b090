//! The key dictionary: each distinct combination of the `by` columns gets a dense id in order of first
//! appearance.
//!
//! Keys are kept in the arrow-row format, whose byte order is the column order with nulls first: sorting ids
//! by their row bytes gives the output order `(window_start, by...)` (`docs/architecture.md`, "Contracts":
//! determinism) for any key types, and decoding rows rebuilds the key columns with their original types. A
//! single integer key column, the common case, skips the row encoding on the hot path.

use arrow_array::{Array, ArrayRef};
use arrow_row::{RowConverter, SortField};
use arrow_schema::DataType;

use super::{KEY_ORDER, is_single_int};
use foldhash::fast::FixedState;
use hashbrown::{HashMap, HashTable};
use std::hash::BuildHasher;

use crate::arrow_io::as_i64;
use crate::error::{Error, Result};

const DENSE: usize = 1 << 16;
/// Rows of known small keys looked up before one test of them all (see `KeyDict::known_dense_prefix`).
const ID_BLOCK: usize = 8;
/// The id [`KeyDict::retain`] maps a forgotten key to.
pub(crate) const NO_KEY: u32 = u32::MAX;

pub struct KeyDict {
    names: Vec<String>,
    converter: Option<RowConverter>,
    hasher: FixedState,
    /// Ids by row bytes (generic path).
    table: HashTable<u32>,
    /// Ids by value (single integer column path) and the id of the null key.
    by_int: HashMap<i64, u32, FixedState>,
    null_id: Option<u32>,
    single_int: bool,
    /// Ids of small non-negative values (`0..DENSE`), the common shape of ids: an array lookup, no hashing.
    dense: Vec<u32>,
    /// Row bytes of key `i`: `arena[offsets[i]..offsets[i + 1]]`.
    arena: Vec<u8>,
    offsets: Vec<usize>,
    /// Sort position of each key, and the keys in that order; recomputed when keys were added.
    ranks: Vec<u32>,
    sorted: Vec<u32>,
    /// The `by` columns of keys `0..n` decoded, for [`Self::emitted_columns`]; ids only grow between calls
    /// (new keys are appended), so this stays valid until [`Self::retain`] renumbers them.
    decoded: Vec<ArrayRef>,
}

/// Key ids in output order: `ranks[id]` is a key's position, `sorted[pos]` the key at a position.
#[derive(Debug, Clone, Copy)]
pub struct KeyOrder<'a> {
    pub ranks: &'a [u32],
    pub sorted: &'a [u32],
}

impl KeyDict {
    /// A dictionary for the `by` columns with these types; no columns means one key for every row.
    pub fn new(names: Vec<String>, types: Vec<DataType>) -> Result<Self> {
        let opts = KEY_ORDER;
        let single_int = is_single_int(&types);
        let converter = if types.is_empty() {
            None
        } else {
            Some(RowConverter::new(
                types
                    .into_iter()
                    .map(|t| SortField::new_with_options(t, opts))
                    .collect(),
            )?)
        };
        Ok(Self {
            names,
            converter,
            hasher: FixedState::with_seed(0x5eed),
            table: HashTable::new(),
            by_int: HashMap::with_hasher(FixedState::with_seed(0x5eed)),
            null_id: None,
            single_int,
            dense: Vec::new(),
            arena: Vec::new(),
            offsets: vec![0],
            ranks: Vec::new(),
            sorted: Vec::new(),
            decoded: Vec::new(),
        })
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn len(&self) -> usize {
        if self.converter.is_none() {
            1
        } else {
            self.offsets.len() - 1
        }
    }

    /// The key id of every row of `columns` (the `by` columns of one batch, `rows` rows).
    pub fn ids(&mut self, columns: &[ArrayRef], rows: usize) -> Result<Vec<u32>> {
        if self.converter.is_none() {
            return Ok(vec![0; rows]);
        }
        if self.single_int {
            return self.ids_single_int(&columns[0]);
        }
        let encoded = self
            .converter
            .as_ref()
            .expect("checked above")
            .convert_columns(columns)?;
        let mut ids = Vec::with_capacity(rows);
        for row in encoded.iter() {
            ids.push(self.intern(row.as_ref()));
        }
        Ok(ids)
    }

    /// The key id of rows `rows` of `columns` (the `by` columns of one batch), in the order given: what
    /// [`Self::ids`] of those rows taken out would return, without taking them out (the sharded engine's
    /// workers number only their own rows of each batch).
    pub(crate) fn ids_at(&mut self, columns: &[ArrayRef], rows: &[u32]) -> Result<Vec<u32>> {
        if self.converter.is_none() {
            return Ok(vec![0; rows.len()]);
        }
        if self.single_int {
            return self.ids_single_int_rows(&columns[0], rows.iter().map(|&i| i as usize));
        }
        let idx = arrow_array::UInt32Array::from(rows.to_vec());
        let taken = (columns.iter())
            .map(|c| arrow_select::take::take(c.as_ref(), &idx, None))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        self.ids(&taken, rows.len())
    }

    fn ids_single_int(&mut self, column: &ArrayRef) -> Result<Vec<u32>> {
        let mut ids = self.known_dense_prefix(column)?;
        if ids.len() < column.len() {
            let rest = self.ids_single_int_at(column, ids.len()..column.len())?;
            ids.extend(rest);
        }
        Ok(ids)
    }

    /// The ids of rows `rows` of a single integer column: the known small keys' array lookup as far as it
    /// goes ([`Self::known_dense_ids`]), the general way from the first row it cannot number.
    fn ids_single_int_rows(
        &mut self,
        column: &ArrayRef,
        rows: impl ExactSizeIterator<Item = usize> + Clone,
    ) -> Result<Vec<u32>> {
        let mut ids = self.known_dense_ids(column, rows.clone())?;
        if ids.len() < rows.len() {
            let rest = self.ids_single_int_at(column, rows.skip(ids.len()))?;
            ids.extend(rest);
        }
        Ok(ids)
    }

    /// The ids of `rows` of a single integer column as long as each is a small non-negative value seen
    /// before, the common case once a stream's keys are known: one array lookup a row and no other test. Stops
    /// at the first row that is not (the caller numbers it and the rest the general way); empty when the
    /// column has nulls.
    fn known_dense_ids(
        &self,
        column: &ArrayRef,
        rows: impl ExactSizeIterator<Item = usize>,
    ) -> Result<Vec<u32>> {
        if self.dense.is_empty() || column.logical_null_count() > 0 {
            return Ok(Vec::new());
        }
        let values = as_i64(column, &self.names[0])?;
        let mut ids = Vec::with_capacity(rows.len());
        // Often the first pass over the key column: ask for its rows ahead (see `crate::prefetch`).
        let ahead = crate::prefetch::ahead::<i64>();
        for i in rows {
            if i % 8 == 0 {
                crate::prefetch::prefetch(&values[..], i + ahead);
            }
            match self.dense.get(values[i] as u64 as usize) {
                Some(&id) if id != NO_KEY => ids.push(id),
                _ => break,
            }
        }
        Ok(ids)
    }

    /// [`Self::known_dense_ids`] of a whole column: blocks of [`ID_BLOCK`] rows with one test for the block
    /// (the lookups are independent, so they overlap), then row by row from the block where an unknown key
    /// stops the run.
    fn known_dense_prefix(&self, column: &ArrayRef) -> Result<Vec<u32>> {
        if self.dense.is_empty() || column.logical_null_count() > 0 {
            return Ok(Vec::new());
        }
        let values = as_i64(column, &self.names[0])?;
        let dense = &self.dense[..];
        let mut ids = Vec::with_capacity(values.len());
        dense_id_blocks(&values[..], dense, &mut ids);
        let tail = values[ids.len()..].iter();
        let known = tail.map_while(|&v| {
            dense
                .get(v as u64 as usize)
                .copied()
                .filter(|&id| id != NO_KEY)
        });
        ids.extend(known);
        Ok(ids)
    }

    /// The ids of rows `rows` of a single integer column.
    fn ids_single_int_at(
        &mut self,
        column: &ArrayRef,
        rows: impl ExactSizeIterator<Item = usize>,
    ) -> Result<Vec<u32>> {
        let values = as_i64(column, &self.names[0])?;
        let nulls = column.logical_nulls().filter(|n| n.null_count() > 0);
        let mut ids = Vec::with_capacity(rows.len());
        // New keys get their ids now and their row bytes once the batch is read, in one conversion (a
        // conversion per new key cost more than everything else when a batch brings many new keys).
        let base = self.offsets.len() as u32 - 1;
        let mut fresh: Vec<u32> = Vec::new();
        // Runs of equal keys are common (sorted or clustered input): remember the last lookup.
        let mut last: Option<(i64, u32)> = None;
        for i in rows {
            let v = values[i];
            if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                let id = *self.null_id.get_or_insert_with(|| {
                    fresh.push(i as u32);
                    base + fresh.len() as u32 - 1
                });
                ids.push(id);
                continue;
            }
            if let Some((lv, lid)) = last
                && lv == v
            {
                ids.push(lid);
                continue;
            }
            if let Some(&id) = self.dense.get(v as u64 as usize)
                && id != NO_KEY
            {
                ids.push(id);
                continue;
            }
            let id = match self.by_int.get(&v) {
                Some(&id) => id,
                None => {
                    fresh.push(i as u32);
                    let id = base + fresh.len() as u32 - 1;
                    self.by_int.insert(v, id);
                    if (0..DENSE as i64).contains(&v) {
                        if self.dense.is_empty() {
                            self.dense = vec![NO_KEY; DENSE];
                        }
                        self.dense[v as usize] = id;
                    }
                    id
                }
            };
            last = Some((v, id));
            ids.push(id);
        }
        self.push_rows_of(column, &fresh)?;
        Ok(ids)
    }

    /// Encodes rows `rows` of a single column and stores them as new keys, in order.
    fn push_rows_of(&mut self, column: &ArrayRef, rows: &[u32]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let picked = arrow_select::take::take(
            column.as_ref(),
            &arrow_array::UInt32Array::from(rows.to_vec()),
            None,
        )?;
        let encoded = self
            .converter
            .as_ref()
            .expect("keyed")
            .convert_columns(&[picked])?;
        for row in encoded.iter() {
            self.push_bytes(row.as_ref());
        }
        Ok(())
    }

    fn intern(&mut self, bytes: &[u8]) -> u32 {
        let hash = self.hasher.hash_one(bytes);
        let (arena, offsets) = (&self.arena, &self.offsets);
        let key_bytes = |id: u32| &arena[offsets[id as usize]..offsets[id as usize + 1]];
        if let Some(&id) = self.table.find(hash, |&id| key_bytes(id) == bytes) {
            return id;
        }
        let id = self.push_bytes(bytes);
        let (arena, offsets, hasher) = (&self.arena, &self.offsets, &self.hasher);
        self.table.insert_unique(hash, id, |&id| {
            hasher.hash_one(&arena[offsets[id as usize]..offsets[id as usize + 1]])
        });
        id
    }

    fn push_bytes(&mut self, bytes: &[u8]) -> u32 {
        let id = (self.offsets.len() - 1) as u32;
        self.arena.extend_from_slice(bytes);
        self.offsets.push(self.arena.len());
        id
    }

    fn bytes(&self, id: u32) -> &[u8] {
        &self.arena[self.offsets[id as usize]..self.offsets[id as usize + 1]]
    }

    /// Every key id, ordered by row bytes. Keys of at most 16 bytes (one or two integer columns, short
    /// strings) sort as `(bytes packed big-endian into a u128, length)` pairs, which orders them as their
    /// bytes do (a key that is a prefix of another is shorter, and comes first): integer comparisons instead
    /// of a `memcmp` call per comparison, several times faster over millions of keys.
    fn sorted_ids(&self) -> Vec<u32> {
        let n = self.len() as u32;
        if (0..n).all(|id| self.bytes(id).len() <= 16) {
            let mut packed: Vec<(u128, u8, u32)> = (0..n)
                .map(|id| {
                    let b = self.bytes(id);
                    let mut word = [0u8; 16];
                    word[..b.len()].copy_from_slice(b);
                    (u128::from_be_bytes(word), b.len() as u8, id)
                })
                .collect();
            packed.sort_unstable();
            return packed.into_iter().map(|(.., id)| id).collect();
        }
        let mut sorted: Vec<u32> = (0..n).collect();
        sorted.sort_unstable_by(|&a, &b| self.bytes(a).cmp(self.bytes(b)));
        sorted
    }

    /// The row bytes of key `id`, as another dictionary of the same columns takes them in [`Self::intern_rows`]
    /// (empty without `by` columns, whose one key is id 0 everywhere).
    pub(crate) fn key_bytes(&self, id: u32) -> &[u8] {
        if self.converter.is_none() {
            return &[];
        }
        self.bytes(id)
    }

    /// The ids of keys given by their row bytes ([`Self::key_bytes`] of a dictionary of the same columns), new
    /// ones added in order. The sharded engine's workers number keys with dictionaries of their own; the
    /// operator's dictionary learns a worker's keys this way, once per key, so that output keys are decoded
    /// and ordered in one place whichever worker saw them.
    pub(crate) fn intern_rows(&mut self, rows: &[&[u8]]) -> Result<Vec<u32>> {
        let Some(converter) = &self.converter else {
            return Ok(vec![0; rows.len()]);
        };
        if rows.is_empty() {
            return Ok(vec![]);
        }
        if self.single_int {
            // The integer path keys its maps by value, not bytes: decode the rows and look the values up.
            let parser = converter.parser();
            let parsed: Vec<_> = rows.iter().map(|r| parser.parse(r)).collect();
            let column = converter.convert_rows(parsed)?.remove(0);
            return self.ids_single_int(&column);
        }
        Ok(rows.iter().map(|r| self.intern(r)).collect())
    }

    /// The output order of keys (ascending by the `by` columns, nulls first), recomputed when keys were added.
    pub fn order(&mut self) -> KeyOrder<'_> {
        let n = self.len();
        if self.ranks.len() != n || self.sorted.len() != n {
            let sorted = if self.converter.is_some() {
                self.sorted_ids()
            } else {
                (0..n as u32).collect()
            };
            self.ranks = vec![0; n];
            for (rank, &id) in sorted.iter().enumerate() {
                self.ranks[id as usize] = rank as u32;
            }
            self.sorted = sorted;
        }
        KeyOrder {
            ranks: &self.ranks,
            sorted: &self.sorted,
        }
    }

    /// The `by` columns for these key ids, in order.
    ///
    /// An emission repeats each key once per window: each distinct key is decoded once, and the columns are
    /// gathered from those by index (decoding row bytes costs several times a gather).
    pub fn columns(&self, ids: &[u32]) -> Result<Vec<ArrayRef>> {
        let Some(converter) = &self.converter else {
            return Ok(vec![]);
        };
        let mut place = vec![NO_KEY; self.len()];
        let mut distinct: Vec<u32> = Vec::new();
        let indices: Vec<u32> = (ids.iter())
            .map(|&id| {
                let p = &mut place[id as usize];
                if *p == NO_KEY {
                    *p = distinct.len() as u32;
                    distinct.push(id);
                }
                *p
            })
            .collect();
        let decoded = self.decode(converter, distinct.iter().copied())?;
        if distinct.len() == ids.len() {
            return Ok(decoded);
        }
        let indices = arrow_array::UInt32Array::from(indices);
        (decoded.iter())
            .map(|c| arrow_select::take::take(c, &indices, None).map_err(Error::output))
            .collect()
    }

    /// [`Self::columns`] for an emission, which names the same keys window after window: the columns are
    /// gathered from every key decoded once and kept, rather than from the distinct keys decoded again at each
    /// call. The kept columns are extended by the keys added since, when there are at most as many keys in all
    /// as twice the ids asked for (a stream of ever new keys would otherwise copy them all at every call;
    /// then the keys asked for are decoded as [`Self::columns`] does).
    pub fn emitted_columns(&mut self, ids: &[u32]) -> Result<Vec<ArrayRef>> {
        let Some(converter) = &self.converter else {
            return Ok(vec![]);
        };
        let n = self.len();
        let known = self.decoded.first().map_or(0, |c| c.len());
        if self.decoded.is_empty() || ids.iter().any(|&id| id as usize >= known) {
            if n > 2 * ids.len() {
                return self.columns(ids);
            }
            let fresh = self.decode(converter, known as u32..n as u32)?;
            self.decoded = if self.decoded.is_empty() {
                fresh
            } else {
                (self.decoded.iter().zip(&fresh))
                    .map(|(old, new)| arrow_select::concat::concat(&[old.as_ref(), new.as_ref()]))
                    .collect::<std::result::Result<_, _>>()
                    .map_err(Error::output)?
            };
        }
        let indices = arrow_array::UInt32Array::from(ids.to_vec());
        (self.decoded.iter())
            .map(|c| arrow_select::take::take(c, &indices, None).map_err(Error::output))
            .collect()
    }

    /// The `by` columns of the given keys, decoded from their row bytes.
    fn decode(
        &self,
        converter: &RowConverter,
        ids: impl Iterator<Item = u32>,
    ) -> Result<Vec<ArrayRef>> {
        let parser = converter.parser();
        let rows: Vec<_> = ids.map(|id| parser.parse(self.bytes(id))).collect();
        converter.convert_rows(rows).map_err(Error::output)
    }

    /// Forgets every key whose `live[id]` is false (keys that hold no open state) and renumbers the rest
    /// densely, keeping their relative order; returns `remap[old id] = new id` (`u32::MAX` for forgotten
    /// keys). A key seen again later gets a fresh id, so memory follows the open state, not the stream.
    pub fn retain(&mut self, live: &[bool]) -> Vec<u32> {
        let n = self.len();
        let mut remap = vec![NO_KEY; n];
        if self.converter.is_none() {
            remap.fill(0);
            return remap;
        }
        let (old_arena, old_offsets) = (
            std::mem::take(&mut self.arena),
            std::mem::replace(&mut self.offsets, vec![0]),
        );
        for id in (0..n).filter(|&id| live.get(id).copied().unwrap_or(false)) {
            remap[id] = self.push_bytes(&old_arena[old_offsets[id]..old_offsets[id + 1]]);
        }
        self.table.clear();
        if !self.single_int {
            let (arena, offsets, hasher) = (&self.arena, &self.offsets, &self.hasher);
            let bytes = |id: u32| &arena[offsets[id as usize]..offsets[id as usize + 1]];
            for id in 0..(offsets.len() - 1) as u32 {
                self.table
                    .insert_unique(hasher.hash_one(bytes(id)), id, |&i| {
                        hasher.hash_one(bytes(i))
                    });
            }
        }
        self.by_int.retain(|_, id| {
            *id = remap[*id as usize];
            *id != NO_KEY
        });
        self.by_int.shrink_to_fit();
        self.null_id = self
            .null_id
            .map(|id| remap[id as usize])
            .filter(|&id| id != NO_KEY);
        for d in &mut self.dense {
            if *d != NO_KEY {
                *d = remap[*d as usize];
            }
        }
        self.arena.shrink_to_fit();
        self.offsets.shrink_to_fit();
        // The output order is recomputed for the new ids, and the kept columns decoded again.
        self.ranks.clear();
        self.sorted.clear();
        self.decoded.clear();
        remap
    }
}

/// Appends the ids of `values` from the `dense` table, [`ID_BLOCK`] rows at a time, up to the first block
/// with a key the table does not hold: the lookups of a block are independent, so they overlap. With AVX2 a
/// block is two range tests, one gather and one test for a missing key ([`dense_id_gather`]).
fn dense_id_blocks(values: &[i64], dense: &[u32], ids: &mut Vec<u32>) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU was just found to support AVX2, all that `target_feature` asks of the caller.
        unsafe { dense_id_gather(values, dense, ids) };
        return;
    }
    dense_id_blocks_portable(values, dense, ids)
}

/// [`dense_id_blocks`] with AVX2: a block's eight keys are tested to lie in the table as 64-bit lanes,
/// narrowed to 32-bit indices and looked up by one gather. The portable loop costs some nine instructions a
/// row (a bounds test and a load each); this, about two (`perf` put the key ids at 6% of a count+sum+max
/// query before).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dense_id_gather(values: &[i64], dense: &[u32], ids: &mut Vec<u32>) {
    use std::arch::x86_64::*;
    const _: () = assert!(ID_BLOCK == 8, "a block is two vectors of four keys");
    // The gather's indices are 32-bit: the table holds keys below 65536, but a longer one is not gathered.
    if dense.len() > i32::MAX as usize {
        return dense_id_blocks_portable(values, dense, ids);
    }
    let len = _mm256_set1_epi64x(dense.len() as i64);
    let below_zero = _mm256_set1_epi64x(-1);
    let no_key = _mm256_set1_epi32(NO_KEY as i32);
    // Each 64-bit lane's low half (the index, below `len`) to the vector's low 128 bits.
    let low_halves = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    ids.reserve(values.len());
    for block in values.chunks_exact(ID_BLOCK) {
        let at = block.as_ptr().cast::<__m256i>();
        // SAFETY: `block` holds eight i64: the two unaligned loads of four read inside it.
        let (a, b) = unsafe { (_mm256_loadu_si256(at), _mm256_loadu_si256(at.add(1))) };
        let inside = |v| {
            _mm256_and_si256(
                _mm256_cmpgt_epi64(v, below_zero),
                _mm256_cmpgt_epi64(len, v),
            )
        };
        if _mm256_movemask_epi8(_mm256_and_si256(inside(a), inside(b))) != -1 {
            break;
        }
        let index = _mm256_set_m128i(
            _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(b, low_halves)),
            _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(a, low_halves)),
        );
        // SAFETY: every index lies in `0..dense.len()` (tested above, and `dense.len()` fits an i32), so
        // each lane reads four bytes inside `dense`.
        let got = unsafe { _mm256_i32gather_epi32::<4>(dense.as_ptr().cast::<i32>(), index) };
        if _mm256_movemask_epi8(_mm256_cmpeq_epi32(got, no_key)) != 0 {
            break;
        }
        // SAFETY: `reserve` made room for every row, so the eight ids written past the length lie inside the
        // allocation, and the length then covers them, all written.
        unsafe {
            _mm256_storeu_si256(ids.as_mut_ptr().add(ids.len()).cast::<__m256i>(), got);
            ids.set_len(ids.len() + ID_BLOCK);
        }
    }
}

/// The portable body of [`dense_id_blocks`].
#[inline(always)]
fn dense_id_blocks_portable(values: &[i64], dense: &[u32], ids: &mut Vec<u32>) {
    let ahead = crate::prefetch::ahead::<i64>();
    for (b, block) in values.chunks_exact(ID_BLOCK).enumerate() {
        crate::prefetch::prefetch(values, b * ID_BLOCK + ahead);
        let mut got = [NO_KEY; ID_BLOCK];
        for (id, &v) in got.iter_mut().zip(block) {
            *id = dense.get(v as u64 as usize).copied().unwrap_or(NO_KEY);
        }
        if got.contains(&NO_KEY) {
            break;
        }
        ids.extend_from_slice(&got);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int32Array, StringArray};
    use std::sync::Arc;

    #[test]
    fn single_int_keys_with_null_sort_nulls_first() {
        let mut d = KeyDict::new(vec!["k".into()], vec![DataType::Int32]).unwrap();
        let col: ArrayRef = Arc::new(Int32Array::from(vec![Some(5), None, Some(-3), Some(5)]));
        assert_eq!(d.ids(&[col], 4).unwrap(), vec![0, 1, 2, 0]);
        assert_eq!(d.order().ranks, &[2, 0, 1]);
        assert_eq!(d.order().sorted, &[1, 2, 0]);
        let back = d.columns(&[1, 2, 0]).unwrap();
        assert_eq!(
            back[0].as_ref(),
            &Int32Array::from(vec![None, Some(-3), Some(5)]) as &dyn Array
        );
    }

    proptest::proptest! {
        /// The gathered ids are the portable loop's: the same run of known keys, up to the block of the first
        /// key outside the table, negative, or at an entry without a key.
        #[test]
        fn dense_ids_gathered_as_looked_up(
            dense in proptest::collection::vec(
                proptest::prop_oneof![9 => 0u32..50, 1 => proptest::strategy::Just(NO_KEY)],
                0..80,
            ),
            values in proptest::collection::vec(
                proptest::prop_oneof![
                    30 => 0i64..80,
                    1 => -3i64..0,
                    1 => proptest::prelude::any::<i64>(),
                ],
                0..120,
            ),
        ) {
            let (mut gathered, mut looked_up) = (vec![], vec![]);
            dense_id_blocks(&values, &dense, &mut gathered);
            dense_id_blocks_portable(&values, &dense, &mut looked_up);
            proptest::prop_assert_eq!(gathered, looked_up);
        }
    }

    proptest::proptest! {
        /// Integer keys get their first appearance's number, on the array lookup of known small keys as on
        /// the general path (new keys, negative and large values, nulls), for whole batches and for picked rows.
        #[test]
        fn single_int_ids_number_keys_by_first_appearance(
            batches in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::option::weighted(0.95, proptest::prop_oneof![0i64..20, -5i64..0, proptest::strategy::Just(1i64 << 40)]),
                    0..40,
                ),
                1..5,
            ),
            picked_every in 1usize..4,
        ) {
            let mut whole = KeyDict::new(vec!["k".into()], vec![DataType::Int64]).unwrap();
            let mut picked = KeyDict::new(vec!["k".into()], vec![DataType::Int64]).unwrap();
            let (mut seen, mut seen_picked) = (Vec::new(), Vec::new());
            let number = |seen: &mut Vec<Option<i64>>, v: Option<i64>| {
                seen.iter().position(|&s| s == v).unwrap_or_else(|| {
                    seen.push(v);
                    seen.len() - 1
                }) as u32
            };
            for batch in &batches {
                let col: ArrayRef = Arc::new(arrow_array::Int64Array::from(batch.clone()));
                let want: Vec<u32> = batch.iter().map(|&v| number(&mut seen, v)).collect();
                proptest::prop_assert_eq!(whole.ids(std::slice::from_ref(&col), batch.len()).unwrap(), want);
                let rows: Vec<u32> = (0..batch.len() as u32).step_by(picked_every).collect();
                let want: Vec<u32> =
                    rows.iter().map(|&i| number(&mut seen_picked, batch[i as usize])).collect();
                proptest::prop_assert_eq!(picked.ids_at(std::slice::from_ref(&col), &rows).unwrap(), want);
            }
        }
    }

    /// The kept columns of emissions give what decoding the keys asked for gives: as keys are added between
    /// calls, after keys are forgotten and renumbered, and when there are too many keys to keep them.
    #[test]
    fn emitted_columns_equal_the_decoded_keys() {
        let mut d = KeyDict::new(
            vec!["k".into(), "s".into()],
            vec![DataType::Int32, DataType::Utf8],
        )
        .unwrap();
        let add = |d: &mut KeyDict, k: Vec<Option<i32>>, s: Vec<Option<&str>>| {
            let n = k.len();
            let cols: Vec<ArrayRef> = vec![
                Arc::new(Int32Array::from(k)),
                Arc::new(StringArray::from(s)),
            ];
            d.ids(&cols, n).unwrap()
        };
        let same = |d: &mut KeyDict, ids: &[u32]| {
            let want = d.columns(ids).unwrap();
            assert_eq!(d.emitted_columns(ids).unwrap(), want, "ids {ids:?}");
        };
        // Nothing kept yet, and no key asked for: still a column per `by` column.
        same(&mut d, &[]);
        add(
            &mut d,
            vec![Some(1), None, Some(1)],
            vec![Some("a"), Some("b"), None],
        );
        same(&mut d, &[]);
        same(&mut d, &[0, 1, 2, 0, 2, 1]);
        same(&mut d, &[2, 2]);
        // Keys added since: the kept columns are extended.
        add(&mut d, vec![Some(7), Some(1)], vec![Some("z"), Some("a")]);
        same(&mut d, &[3, 0, 3, 1, 2, 3]);
        // Renumbered: the kept columns are decoded again for the new ids.
        let remap = d.retain(&[false, true, false, true]);
        assert_eq!((remap[1], remap[3]), (0, 1));
        same(&mut d, &[1, 0, 1]);
        // Many more keys than asked for: decoded as `columns` does, nothing kept for the new ones.
        let many: Vec<Option<i32>> = (100..200).map(Some).collect();
        add(&mut d, many, vec![Some("m"); 100]);
        same(&mut d, &[101, 0]);
        same(&mut d, &[]);
    }

    /// Keys learned by their bytes from another dictionary get the ids, order and columns they would have
    /// had if the rows had come here, on both paths (one integer column, and the generic one).
    #[test]
    fn intern_rows_of_another_dictionary() {
        for (dt, col) in [
            (
                DataType::Int32,
                Arc::new(Int32Array::from(vec![Some(7), None, Some(-2), Some(7)])) as ArrayRef,
            ),
            (
                DataType::Utf8,
                Arc::new(StringArray::from(vec![
                    Some("b"),
                    None,
                    Some("a"),
                    Some("b"),
                ])) as ArrayRef,
            ),
        ] {
            let mut worker = KeyDict::new(vec!["k".into()], vec![dt.clone()]).unwrap();
            let local = worker.ids(std::slice::from_ref(&col), 4).unwrap();
            let mut global = KeyDict::new(vec!["k".into()], vec![dt.clone()]).unwrap();
            // One key known already (as a streaming operator's own `ids` would have added it).
            global.ids(&[col.slice(2, 1)], 1).unwrap();
            let bytes: Vec<&[u8]> = (0..worker.len() as u32)
                .map(|i| worker.key_bytes(i))
                .collect();
            let ids = global.intern_rows(&bytes).unwrap();
            assert_eq!(ids, vec![1, 2, 0]);
            let back = global.columns(&local.iter().map(|&l| ids[l as usize]).collect::<Vec<_>>());
            assert_eq!(back.unwrap()[0].as_ref(), col.as_ref());
            assert_eq!(global.order().sorted, &[2, 0, 1]);
        }
        let mut none = KeyDict::new(vec![], vec![]).unwrap();
        assert_eq!(none.intern_rows(&[&[], &[]]).unwrap(), vec![0, 0]);
    }

    #[test]
    fn composite_keys() {
        let mut d = KeyDict::new(
            vec!["a".into(), "b".into()],
            vec![DataType::Utf8, DataType::Int32],
        )
        .unwrap();
        let a: ArrayRef = Arc::new(StringArray::from(vec!["x", "y", "x", "x"]));
        let b: ArrayRef = Arc::new(Int32Array::from(vec![1, 1, 1, 0]));
        assert_eq!(d.ids(&[a, b], 4).unwrap(), vec![0, 1, 0, 2]);
        assert_eq!(d.order().ranks, &[1, 2, 0]);
    }
}

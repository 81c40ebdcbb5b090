//! Keys and sort orders in Arrow's row format: any number of columns of (almost) any type become one byte
//! string per row that compares like the columns (nulls first) and hashes to a partition. Operators keep
//! per-key state under these bytes and decode them back into columns when they emit.

use std::hash::{BuildHasher, Hasher};

use arrow_array::{ArrayRef, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_row::{RowConverter, RowParser, Rows, SortField};
use arrow_schema::{Field, Schema, SortOptions};

use crate::error::{Error, ErrorKind, Result};

/// Encodes chosen columns of a batch to rows and back.
pub(crate) struct RowCodec {
    converter: RowConverter,
    parser: RowParser,
    indices: Vec<usize>,
    fields: Vec<Field>,
}

impl std::fmt::Debug for RowCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowCodec")
            .field("indices", &self.indices)
            .finish()
    }
}

impl RowCodec {
    /// The named columns, ascending with nulls first; `param` names the parameter in errors.
    pub fn new(schema: &Schema, names: &[String], param: &str) -> Result<Self> {
        let cols = names
            .iter()
            .map(|n| Ok((column_index(schema, n, param)?, SortOptions::default())))
            .collect::<Result<Vec<_>>>()?;
        Self::with_options(schema, &cols, param)
    }

    /// Columns by index, each with its sort options.
    pub fn with_options(
        schema: &Schema,
        cols: &[(usize, SortOptions)],
        param: &str,
    ) -> Result<Self> {
        let fields: Vec<Field> = cols
            .iter()
            .map(|(i, _)| schema.field(*i).clone().with_nullable(true))
            .collect();
        let sort: Vec<SortField> = cols
            .iter()
            .zip(&fields)
            .map(|((_, o), f)| SortField::new_with_options(f.data_type().clone(), *o))
            .collect();
        if !RowConverter::supports_fields(&sort) {
            let names: Vec<String> = fields
                .iter()
                .map(|f| format!("'{}' ({})", f.name(), f.data_type()))
                .collect();
            return Err(Error::new(
                ErrorKind::ColumnType,
                format!(
                    "{param}: columns {} cannot be used as keys or sort columns",
                    names.join(", ")
                ),
            ));
        }
        let converter = RowConverter::new(sort)?;
        let parser = converter.parser();
        Ok(Self {
            converter,
            parser,
            indices: cols.iter().map(|(i, _)| *i).collect(),
            fields,
        })
    }

    pub fn encode(&self, batch: &RecordBatch) -> Result<Rows> {
        let cols: Vec<ArrayRef> = self
            .indices
            .iter()
            .map(|i| batch.column(*i).clone())
            .collect();
        Ok(self.converter.convert_columns(&cols)?)
    }

    /// `rows` (encoded by this codec) in the order `indices`.
    pub fn permute(&self, rows: &Rows, indices: &[u32]) -> Rows {
        let bytes: usize = indices
            .iter()
            .map(|&i| rows.row(i as usize).data().len())
            .sum();
        let mut out = self.converter.empty_rows(indices.len(), bytes);
        for &i in indices {
            out.push(rows.row(i as usize));
        }
        out
    }

    /// Columns back from encoded rows (bytes this codec produced).
    pub fn decode<'a>(&self, rows: impl IntoIterator<Item = &'a [u8]>) -> Result<Vec<ArrayRef>> {
        self.converter
            .convert_rows(rows.into_iter().map(|b| self.parser.parse(b)))
            .map_err(Error::output)
    }

    /// The output fields of the decoded columns (nullable).
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// `"user_id=42"` (or `"a=1, b=x"`), for error messages.
    pub fn describe(&self, bytes: &[u8]) -> String {
        let Ok(cols) = self.decode([bytes]) else {
            return "?".into();
        };
        let opts = FormatOptions::default().with_null("null");
        self.fields
            .iter()
            .zip(&cols)
            .map(|(f, c)| {
                let v = ArrayFormatter::try_new(c.as_ref(), &opts)
                    .map(|fmt| fmt.value(0).to_string())
                    .unwrap_or_else(|_| "?".into());
                format!("{}={v}", f.name())
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The column's index, or an error naming the parameter and the columns there are.
pub(crate) fn column_index(schema: &Schema, name: &str, param: &str) -> Result<usize> {
    schema.index_of(name).map_err(|_| {
        let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        Error::column_not_found(param, name, &names)
    })
}

/// A fixed-seed hash of a key's bytes: the same partition for a key in every run and process.
pub(crate) fn hash_key(bytes: &[u8]) -> u64 {
    let mut h = foldhash::fast::FixedState::with_seed(0x5eed_0001).build_hasher();
    h.write(bytes);
    h.finish()
}

/// Encoded rows stored back to back (one allocation for many keys or values), in push order.
#[derive(Debug, Default)]
pub(crate) struct ByteRows {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl ByteRows {
    pub fn push(&mut self, row: &[u8]) {
        self.data.extend_from_slice(row);
        self.ends.push(self.data.len());
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(self.ends.iter()).map(|(s, &e)| &self.data[s..e])
    }
}

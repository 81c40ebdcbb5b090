//! Arrow in and out, for every operator: reading the time, key and value columns of a batch with the checks
//! the error contract asks for (`docs/architecture.md`, "Contracts"), and building output columns of the
//! input's types.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, ArrayRef, RecordBatch, make_array};
use arrow_buffer::{BooleanBuffer, NullBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit as ArrowUnit};

use crate::error::{Error, ErrorKind, Result};
use crate::time::TimeUnit;

/// Finds a column by name, or says which columns exist. `param` is the parameter that named it.
pub fn column<'a>(batch: &'a RecordBatch, name: &str, param: &str) -> Result<&'a ArrayRef> {
    batch.column_by_name(name).ok_or_else(|| {
        let names: Vec<String> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        Error::column_not_found(param, name, &names)
    })
}

/// Fails when `name` names more than one column of `schema` (a reference would be ambiguous, as in Spark).
pub fn check_unambiguous(schema: &SchemaRef, name: &str, param: &str) -> Result<()> {
    let count = schema.fields().iter().filter(|f| f.name() == name).count();
    if count > 1 {
        return Err(Error::param(
            param,
            format!("column '{name}' appears {count} times in the input; rename the duplicates"),
        ));
    }
    Ok(())
}

/// Fails when two columns of `schema` share a name: operators that carry every input column into their output
/// (the preference queries, the join) would otherwise emit ambiguous columns. `param` names the input.
pub fn check_unique_names(schema: &SchemaRef, param: &str) -> Result<()> {
    let fields = schema.fields();
    for (i, f) in fields.iter().enumerate() {
        if fields[..i].iter().any(|g| g.name() == f.name()) {
            return check_unambiguous(schema, f.name(), param);
        }
    }
    Ok(())
}

/// `schema` with dictionary-encoded fields replaced by their value types (what [`decode_dictionaries`] gives).
pub fn plain_schema(schema: &SchemaRef) -> SchemaRef {
    if !schema.fields().iter().any(|f| is_dictionary(f.data_type())) {
        return schema.clone();
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Dictionary(_, value) => {
                f.as_ref().clone().with_data_type(value.as_ref().clone())
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `batch` with dictionary-encoded columns (pandas Categorical, Arrow dictionaries) decoded to their values,
/// so that operators see one type per logical column; a batch without dictionaries is returned as is.
pub fn decode_dictionaries(batch: &RecordBatch) -> Result<RecordBatch> {
    if !batch
        .schema()
        .fields()
        .iter()
        .any(|f| is_dictionary(f.data_type()))
    {
        return Ok(batch.clone());
    }
    let schema = plain_schema(batch.schema_ref());
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| match c.data_type() {
            DataType::Dictionary(..) => Ok(arrow_cast::cast(c, f.data_type())?),
            _ => Ok(c.clone()),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(schema, columns)?)
}

fn is_dictionary(dt: &DataType) -> bool {
    matches!(dt, DataType::Dictionary(..))
}

/// The unit a time column's values are in, or an error if it cannot be a time column.
pub fn time_unit(dt: &DataType, column: &str) -> Result<TimeUnit> {
    use DataType::*;
    Ok(match dt {
        Timestamp(ArrowUnit::Second, _) => TimeUnit::Second,
        Timestamp(ArrowUnit::Millisecond, _) | Date64 => TimeUnit::Millisecond,
        Timestamp(ArrowUnit::Microsecond, _) => TimeUnit::Microsecond,
        Timestamp(ArrowUnit::Nanosecond, _) => TimeUnit::Nanosecond,
        Date32 => TimeUnit::Day,
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 => TimeUnit::Plain,
        other => {
            return Err(Error::column_type(
                column,
                format!(
                    "the time column must be an integer, timestamp or date column, got {other}"
                ),
            ));
        }
    })
}

/// A column's values as i64 (integers and temporal types), zero-copy for 64-bit types.
pub fn as_i64(array: &ArrayRef, column: &str) -> Result<ScalarBuffer<i64>> {
    use DataType::*;
    let dt = array.data_type();
    let physical_i64 = matches!(dt, Int64 | Timestamp(..) | Date64 | Time64(_) | Duration(_));
    if physical_i64 {
        let data = array.to_data();
        return Ok(ScalarBuffer::new(
            data.buffers()[0].clone(),
            data.offset(),
            data.len(),
        ));
    }
    if *dt == UInt64 {
        let v = array.as_primitive::<arrow_array::types::UInt64Type>();
        if let Some(i) = v
            .iter()
            .position(|x| x.is_some_and(|x| x > i64::MAX as u64))
        {
            return Err(Error::column_type(
                column,
                format!("UInt64 value {} at row {i} exceeds int64", v.value(i)),
            ));
        }
    }
    let target = if matches!(dt, Date32 | Time32(_)) {
        Int32
    } else {
        Int64
    };
    let mut arr = array.clone();
    if target == Int32 {
        let data = arr.to_data().into_builder().data_type(Int32).build()?;
        arr = make_array(data);
    }
    let cast = arrow_cast::cast(&arr, &Int64)?;
    Ok(cast.as_primitive::<Int64Type>().values().clone())
}

/// A column's values as f64, zero-copy for Float64.
pub fn as_f64(array: &ArrayRef) -> Result<ScalarBuffer<f64>> {
    if *array.data_type() == DataType::Float64 {
        return Ok(array.as_primitive::<Float64Type>().values().clone());
    }
    let cast = arrow_cast::cast(array, &DataType::Float64)?;
    Ok(cast.as_primitive::<Float64Type>().values().clone())
}

/// Largest integer magnitude float64 holds exactly.
pub const EXACT_INT: i64 = 1 << 53;

/// A numeric column as float64 for comparisons (`purpose` says which, in errors). Integers must be exact in
/// float64: `row(i)` names row i in the error for one that is not.
pub fn exact_f64(
    col: &ArrayRef,
    name: &str,
    purpose: &str,
    row: impl Fn(usize) -> String,
) -> Result<Vec<f64>> {
    if col.data_type().is_integer() {
        let v = as_i64(col, name)?;
        if let Some(i) = v.iter().position(|x| x.unsigned_abs() > EXACT_INT as u64) {
            return Err(Error::column_type(
                name,
                format!(
                    "{purpose} compare as float64, exact for integers up to 2^53; {} holds {}",
                    row(i),
                    v[i]
                ),
            ));
        }
        return Ok(v.iter().map(|&x| x as f64).collect());
    }
    Ok(as_f64(col)?.to_vec())
}

/// `None` when every flag is true, so that all-valid outputs carry no null buffer.
pub fn null_buffer_from(valid: impl Iterator<Item = bool>) -> Option<NullBuffer> {
    let buffer = BooleanBuffer::from_iter(valid);
    (buffer.count_set_bits() != buffer.len()).then(|| NullBuffer::new(buffer))
}

/// Turns an Int64 column back into `target` (an integer or i64/i32-backed temporal type).
pub fn int_column_as(array: ArrayRef, target: &DataType) -> Result<ArrayRef> {
    use DataType::*;
    match target {
        Int64 => Ok(array),
        Timestamp(..) | Date64 | Time64(_) | Duration(_) => Ok(make_array(
            array
                .to_data()
                .into_builder()
                .data_type(target.clone())
                .build()
                .map_err(Error::output)?,
        )),
        Date32 | Time32(_) => {
            let narrow = arrow_cast::cast(&array, &Int32).map_err(Error::output)?;
            Ok(make_array(
                narrow
                    .to_data()
                    .into_builder()
                    .data_type(target.clone())
                    .build()
                    .map_err(Error::output)?,
            ))
        }
        _ => arrow_cast::cast(&array, target).map_err(Error::output),
    }
}

/// Turns a Float64 column into `target` (Float32 round-trips exactly: its values came from Float32).
pub fn float_column_as(array: ArrayRef, target: &DataType) -> Result<ArrayRef> {
    arrow_cast::cast(&array, target).map_err(Error::output)
}

/// Checks that a later batch (or another source) agrees with the first one on the columns the operator reads.
pub fn check_same_type(
    first: &SchemaRef,
    batch: &RecordBatch,
    name: &str,
    what: &str,
) -> Result<()> {
    let (Ok(a), Ok(b)) = (
        first.field_with_name(name),
        batch.schema_ref().field_with_name(name),
    ) else {
        return Ok(()); // a missing column is reported by `column`
    };
    if a.data_type() != b.data_type() {
        return Err(Error::new(
            ErrorKind::SchemaMismatch,
            format!(
                "column '{name}': {what} has type {}, but the first batch had {}",
                b.data_type(),
                a.data_type()
            ),
        ));
    }
    Ok(())
}

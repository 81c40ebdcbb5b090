//! The aggregate operator's input side: an aggregate's input column of a batch read as its value class.

use arrow_array::ArrayRef;

use super::function::ValueClass;
use super::state::InputValues;
use crate::arrow_io::{as_f64, as_i64};
use crate::error::Result;

/// Reads an aggregate's input column as its value class (`validity_only` for `count(col)`, which reads no
/// values).
pub(crate) fn input_values(
    array: &ArrayRef,
    class: ValueClass,
    validity_only: bool,
    column: &str,
) -> Result<InputValues> {
    let nulls = array.logical_nulls();
    if validity_only {
        return Ok(InputValues::Validity(nulls));
    }
    Ok(match class {
        ValueClass::Int => InputValues::Int(as_i64(array, column)?, nulls),
        ValueClass::Float => InputValues::Float(as_f64(array)?, nulls),
    })
}

//! Reading and building the three Arrow string layouts (Utf8, LargeUtf8, Utf8View) through one
//! interface, for string keys and string MIN/MAX.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, LargeStringArray, StringArray, StringViewArray};
use arrow::datatypes::DataType;

use crate::error::{GrouperError, Result};

/// Uniform byte access to a string column.
pub(crate) enum ByteColumn<'a> {
    Utf8(&'a StringArray),
    Large(&'a LargeStringArray),
    View(&'a StringViewArray),
}

impl<'a> ByteColumn<'a> {
    /// The column, or an error naming `what` when `array` holds no strings.
    pub(crate) fn new(array: &'a ArrayRef, what: &'static str) -> Result<Self> {
        Ok(match array.data_type() {
            DataType::Utf8 => Self::Utf8(array.as_string()),
            DataType::LargeUtf8 => Self::Large(array.as_string()),
            DataType::Utf8View => Self::View(array.as_string_view()),
            t => {
                return Err(GrouperError::UnsupportedType {
                    what,
                    data_type: t.clone(),
                })
            }
        })
    }

    /// The bytes of row `r`, or `None` when it is NULL.
    #[inline]
    pub(crate) fn get(&self, r: usize) -> Option<&'a [u8]> {
        match self {
            Self::Utf8(a) => a.is_valid(r).then(|| a.value(r).as_bytes()),
            Self::Large(a) => a.is_valid(r).then(|| a.value(r).as_bytes()),
            Self::View(a) => a.is_valid(r).then(|| a.value(r).as_bytes()),
        }
    }
}

/// A string array of `data_type` (Utf8, LargeUtf8 or Utf8View) holding `values`; fails when a
/// value is not UTF-8.
pub(crate) fn string_array<'a>(
    data_type: &DataType,
    values: impl Iterator<Item = Option<&'a [u8]>>,
) -> Result<ArrayRef> {
    let strings = values
        .map(|v| v.map(std::str::from_utf8).transpose())
        .collect::<std::result::Result<Vec<Option<&str>>, _>>()
        .map_err(|e| {
            GrouperError::InvalidInput(format!("invalid UTF-8 in a string result: {e}"))
        })?;
    Ok(match data_type {
        DataType::LargeUtf8 => Arc::new(LargeStringArray::from(strings)),
        DataType::Utf8View => Arc::new(StringViewArray::from(strings)),
        _ => Arc::new(StringArray::from(strings)),
    })
}

//! A string key column's rows as dictionary codes, whatever its layout: Utf8 and LargeUtf8 as
//! views over their own buffers, Utf8View as it is, and dictionary-encoded columns (a Parquet
//! scan's columns of few values) through their values; and the dictionary a codec is planned
//! with, seeded from the first rows.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, DictionaryArray, StringViewArray};
use arrow::datatypes::{DataType, Int32Type};
use rayon::prelude::*;

use super::dictionary::Dictionary;
use super::views::{view_codes, NULL_SLOT};
use crate::error::Result;
use crate::strings::ByteColumn;

/// Codes of string key column `array` in `dict` (`NULL_SLOT` for a NULL), whatever its layout;
/// `None` when a value is past `capacity` or the column holds no strings
/// ([`is_string_column`]).
pub(super) fn string_codes(dict: &Dictionary, array: &ArrayRef, capacity: u64) -> Option<Vec<u32>> {
    match array.as_dictionary_opt::<Int32Type>() {
        Some(d) => dictionary_key_codes(dict, d, capacity),
        None => view_codes(dict, string_views(array)?.as_ref(), capacity),
    }
}

/// Whether [`string_codes`] reads `array`: Utf8, LargeUtf8, Utf8View, or those
/// dictionary-encoded with Int32 keys.
pub(crate) fn is_string_column(array: &ArrayRef) -> bool {
    let strings =
        |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    match array.data_type() {
        DataType::Dictionary(k, v) => **k == DataType::Int32 && strings(v),
        t => strings(t),
    }
}

/// A string column as Utf8View, for [`view_codes`]: borrowed when it is one; a Utf8 or
/// LargeUtf8 column gets views over its own value buffer (no byte is copied), so its short
/// strings code through the dictionary's map of inline views too, with no hash of their bytes
/// and no `memcmp`. Coding them through the dictionary's hash of the bytes took a quarter of
/// db-benchmark q3's time on 2 threads (1e5 strings `id0000000001`.., in memory as Utf8).
/// `None` for any other type.
fn string_views(array: &ArrayRef) -> Option<Cow<'_, StringViewArray>> {
    Some(match array.data_type() {
        DataType::Utf8View => Cow::Borrowed(array.as_string_view()),
        DataType::Utf8 => Cow::Owned(StringViewArray::from(array.as_string::<i32>())),
        DataType::LargeUtf8 => Cow::Owned(StringViewArray::from(array.as_string::<i64>())),
        _ => return None,
    })
}

/// Codes of a dictionary-encoded string key column (`NULL_SLOT` for a NULL), as a Parquet
/// scan reads a column of few values for the fused pipeline: the dictionary's values are
/// coded once ([`view_codes`]) and each row takes its value's code by its key, where a plain
/// column builds and codes a view per row (with TPC-H Q1's two flags, the views' decoding,
/// coding and filtering were a tenth of the query from Parquet). `None` when a value is
/// outside the codec's capacity.
fn dictionary_key_codes(
    dict: &Dictionary,
    array: &DictionaryArray<Int32Type>,
    capacity: u64,
) -> Option<Vec<u32>> {
    let values = string_views(array.values())?;
    let value_codes = view_codes(dict, &values, capacity)?;
    // A DictionaryArray's valid keys index its values (arrow checks it when one is built);
    // a NULL key, whatever it holds, is NULL.
    let code = |k: i32| {
        usize::try_from(k)
            .ok()
            .and_then(|k| value_codes.get(k).copied())
            .unwrap_or(NULL_SLOT)
    };
    let keys = array.keys();
    Some(match keys.nulls().filter(|n| n.null_count() > 0) {
        None => keys.values().iter().map(|&k| code(k)).collect(),
        Some(n) => keys
            .values()
            .iter()
            .zip(n.iter())
            .map(|(&k, valid)| if valid { code(k) } else { NULL_SLOT })
            .collect(),
    })
}

/// `keys` with every dictionary-encoded column cast to its declared type in `types` (what a
/// row converter or a kept batch takes); the columns themselves when none is.
pub(crate) fn as_declared<'a>(
    keys: &'a [ArrayRef],
    types: &[DataType],
) -> Result<Cow<'a, [ArrayRef]>> {
    if !keys
        .iter()
        .any(|k| matches!(k.data_type(), DataType::Dictionary(..)))
    {
        return Ok(Cow::Borrowed(keys));
    }
    keys.iter()
        .zip(types)
        .map(|(k, t)| match k.data_type() {
            DataType::Dictionary(..) => Ok(arrow::compute::cast(k, t)?),
            _ => Ok(Arc::clone(k)),
        })
        .collect::<Result<Vec<_>>>()
        .map(Cow::Owned)
}

/// A dictionary of the distinct strings of column `c` of `batches`, seeded in parallel over the
/// batches (the dictionary's shards take concurrent appends): seeding all of a buffered input on
/// one thread took a quarter of db-benchmark q10's time on 2 threads.
pub(super) fn seeded_dictionary(batches: &[&[ArrayRef]], c: usize) -> Result<Arc<Dictionary>> {
    let dict = Arc::new(Dictionary::new());
    batches.par_iter().try_for_each(|b| -> Result<()> {
        // A dictionary-encoded column: its values (a Parquet column chunk's dictionary).
        let column = match b[c].as_any_dictionary_opt() {
            Some(d) => d.values(),
            None => &b[c],
        };
        if let Some(views) = column.as_string_view_opt() {
            // Equal views are equal strings: hash 16 bytes per row, and each
            // distinct string once.
            let mut seen = hashbrown::HashSet::new();
            dict.extend(
                (0..views.len())
                    .filter(|&r| views.is_valid(r) && seen.insert(views.views()[r]))
                    .map(|r| views.value(r).as_bytes()),
            );
            return Ok(());
        }
        let col = ByteColumn::new(column, "group key")?;
        dict.extend((0..column.len()).filter_map(|r| col.get(r)));
        Ok(())
    })?;
    Ok(dict)
}

//! How packed key words look to the GPU's code generator: each column's code, NULL slot and
//! weight in the word ([`PackedColumn`]), and a string column's dictionary codes computed on
//! the host, so a kernel packs words exactly as [`KeyCodec::encode`] does on the CPU.

use arrow::array::ArrayRef;
use arrow::datatypes::DataType;

use super::columns::{is_string_column, string_codes};
use super::views::NULL_SLOT;
use super::{Codec, ColumnPlan, KeyCodec, Layout};
use crate::error::Result;
use crate::strings::ByteColumn;

/// How one key column enters a packed word, as the GPU code generator reads it: the kernel
/// computes `(code + nulls) * mult` per column and adds the terms, exactly as
/// [`KeyCodec::encode`] does on the CPU, so words decode with the same codec.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedColumn {
    /// The key column's type.
    pub data_type: DataType,
    /// How its values become codes.
    pub kind: PackedKind,
    /// Whether code 0 is NULL's (values then start at 1).
    pub nulls: bool,
    /// The column's weight in the word.
    pub mult: u64,
}

/// The code of a value in a [`PackedColumn`].
#[derive(Debug, Clone, PartialEq)]
pub enum PackedKind {
    /// `ordinal(value) - min` (see [`ordinal`]).
    Ordinal {
        /// The smallest ordinal covered.
        min: i128,
    },
    /// `value as u64`.
    Bool,
    /// A dictionary code computed on the host ([`KeyCodec::dictionary_codes`]).
    Dictionary,
}

impl KeyCodec {
    /// The per-column packing, or `None` for the interned layout (domain over 2^64).
    pub fn packed_columns(&self) -> Option<Vec<PackedColumn>> {
        let Layout::Packed(cols) = &self.layout else {
            return None;
        };
        Some(
            cols.iter()
                .map(|c| PackedColumn {
                    data_type: c.data_type.clone(),
                    kind: match &c.codec {
                        Codec::Ordinal { min, .. } => PackedKind::Ordinal { min: *min },
                        Codec::Bool => PackedKind::Bool,
                        Codec::Bytes { .. } => PackedKind::Dictionary,
                    },
                    nulls: c.nulls,
                    mult: c.mult,
                })
                .collect(),
        )
    }

    /// The dictionary codes of string key column `c` (NULL stays NULL), or `None` when a value
    /// is outside the codec (the dictionary is full) or the column is not a string column.
    pub fn dictionary_codes(&self, c: usize, array: &ArrayRef) -> Result<Option<Vec<u32>>> {
        let Layout::Packed(cols) = &self.layout else {
            return Ok(None);
        };
        let Some(ColumnPlan {
            codec: Codec::Bytes { dict, capacity },
            ..
        }) = cols.get(c)
        else {
            return Ok(None);
        };
        if !is_string_column(array) {
            // Not a string column: the error names its type.
            ByteColumn::new(array, "group key")?;
            return Ok(None);
        }
        // A NULL row's code is 0.
        Ok(string_codes(dict, array, *capacity).map(|codes| {
            codes
                .into_iter()
                .map(|c| if c == NULL_SLOT { 0 } else { c })
                .collect()
        }))
    }
}

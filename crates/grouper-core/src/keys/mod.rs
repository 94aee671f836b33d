//! Key normalization: every group key (one column or several, any supported type, NULLs
//! included) becomes one `u64` *word* per row, so strategies only ever hash, compare and index
//! 64-bit integers (DESIGN §2 "Keys").
//!
//! ```text
//!  column       code per row                          range
//!  integer/date ordinal - min (+1 if NULLs, NULL = 0)  max - min + 1 (+1)
//!  float        total-order bits, as above            as above
//!  boolean      0/1 (+1 if NULLs)                     2 (+1)
//!  string       rank in the column's dictionary (+1)  distinct values (+1)
//!
//!  word = code_0 + range_0 * (code_1 + range_1 * (code_2 + ...))     (mixed radix)
//! ```
//!
//! Mixed radix packs tighter than bit fields (TPC-H Q1's two flags: 3 × 2 = 6 words), and the
//! product of the ranges, the *domain*, is exactly the size a perfect (direct-index) table needs
//! (Tomé §3.3). When the domain exceeds 2^64 the key takes the general path: each row's composite
//! key is encoded with `arrow-row` and interned in a dictionary, whose code is the word. Either way
//! the encoding is order-preserving, so the sort strategy yields groups in key order.

mod dictionary;
pub mod ordinal;

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, LargeStringArray, PrimitiveArray, StringArray,
    StringViewArray,
};
use arrow::datatypes::{ArrowPrimitiveType, DataType};
use arrow::row::{RowConverter, SortField};
use rayon::prelude::*;

pub use dictionary::Dictionary;
use ordinal::Ordinal;

use crate::error::{GrouperError, Result};
use crate::input::InputBatch;
use crate::with_ordinal_type;

/// Whether grouper handles group keys of this type.
pub fn supports(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Boolean | DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    ) || with_ordinal_type!(t, T => { let _ = std::marker::PhantomData::<T>; true }, _ => false)
}

/// How one column's values become codes.
#[derive(Debug)]
enum Codec {
    /// Primitive values: `code = ordinal - min`.
    Ordinal { min: i128 },
    /// Booleans: `code = value as u64`.
    Bool,
    /// Strings: `code = rank in the dictionary`.
    Bytes(Dictionary),
}

/// One key column's place in the mixed-radix word.
#[derive(Debug)]
struct ColumnPlan {
    data_type: DataType,
    codec: Codec,
    /// 1 when the column has NULLs (code 0 is NULL, values shift up by one), else 0.
    null_offset: u64,
    /// Number of distinct codes (may exceed 2^64, which forces the interned path).
    range: u128,
    /// The weight of this column's code in the word.
    mult: u64,
}

/// The general path: composite keys in `arrow-row` format, interned.
struct Interned {
    converter: RowConverter,
    rows: Dictionary,
}

enum Layout {
    Packed(Vec<ColumnPlan>),
    Interned(Interned),
}

/// How keys were encoded: decodes words back into key columns.
pub struct KeyCodec {
    layout: Layout,
    domain: u64,
}

/// The key words of every morsel, and the codec that produced them.
pub struct EncodedKeys {
    /// `words[m][r]` is the key word of row `r` of morsel `m`.
    pub words: Vec<Vec<u64>>,
    /// The encoding.
    pub codec: KeyCodec,
}

impl KeyCodec {
    /// Number of distinct words the encoding can produce: words lie in `0..domain`.
    pub fn domain(&self) -> u64 {
        self.domain
    }

    /// Whether keys took the general (interned) path.
    pub fn is_interned(&self) -> bool {
        matches!(self.layout, Layout::Interned(_))
    }

    /// Decodes key words into one array per key column.
    pub fn decode(&self, words: &[u64]) -> Result<Vec<ArrayRef>> {
        match &self.layout {
            Layout::Packed(cols) => cols.iter().map(|c| decode_column(c, words)).collect(),
            Layout::Interned(i) => {
                let parser = i.converter.parser();
                let rows = words.iter().map(|&w| parser.parse(i.rows.value(w as u32)));
                Ok(i.converter.convert_rows(rows)?)
            }
        }
    }
}

/// Encodes the keys of all morsels (in parallel on the current rayon pool).
pub fn encode(morsels: &[InputBatch], key_types: &[DataType]) -> Result<EncodedKeys> {
    for t in key_types {
        if !supports(t) {
            return Err(GrouperError::UnsupportedType {
                what: "group key",
                data_type: t.clone(),
            });
        }
    }
    let mut cols = Vec::with_capacity(key_types.len());
    for (c, t) in key_types.iter().enumerate() {
        cols.push(plan_column(morsels, c, t)?);
    }
    let mut domain: u128 = 1;
    for col in &mut cols {
        col.mult = domain.min(u64::MAX as u128) as u64;
        domain = domain.saturating_mul(col.range);
    }
    if domain <= u64::MAX as u128 {
        let words = morsels
            .par_iter()
            .map(|m| encode_packed(&cols, m))
            .collect::<Result<Vec<_>>>()?;
        return Ok(EncodedKeys {
            words,
            codec: KeyCodec {
                layout: Layout::Packed(cols),
                domain: domain as u64,
            },
        });
    }
    encode_interned(morsels, key_types)
}

fn plan_column(morsels: &[InputBatch], c: usize, t: &DataType) -> Result<ColumnPlan> {
    let has_nulls = morsels.par_iter().any(|m| m.keys[c].null_count() > 0);
    let null_offset = has_nulls as u64;
    let (codec, distinct) = match t {
        DataType::Boolean => (Codec::Bool, 2u128),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let dict = Dictionary::build(
                morsels
                    .par_iter()
                    .map(|m| ByteColumn::new(&m.keys[c]).into_valid_iter()),
            );
            let n = dict.len() as u128;
            (Codec::Bytes(dict), n)
        }
        _ => with_ordinal_type!(t, T => {
            match ordinal_min_max::<T>(morsels, c) {
                Some((min, max)) => (Codec::Ordinal { min }, max.abs_diff(min) + 1),
                None => (Codec::Ordinal { min: 0 }, 0),
            }
        }, _ => unreachable!("checked by supports()")),
    };
    Ok(ColumnPlan {
        data_type: t.clone(),
        codec,
        null_offset,
        range: (distinct + null_offset as u128).max(1),
        mult: 0,
    })
}

fn ordinal_min_max<T: ArrowPrimitiveType>(morsels: &[InputBatch], c: usize) -> Option<(i128, i128)>
where
    T::Native: Ordinal,
{
    morsels
        .par_iter()
        .filter_map(|m| {
            let a = m.keys[c].as_primitive::<T>();
            let mut it = a.iter().flatten().map(Ordinal::to_ord);
            let first = it.next()?;
            Some(it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v))))
        })
        .reduce_with(|a, b| (a.0.min(b.0), a.1.max(b.1)))
}

fn encode_packed(cols: &[ColumnPlan], morsel: &InputBatch) -> Result<Vec<u64>> {
    let mut words = vec![0u64; morsel.num_rows()];
    for (col, array) in cols.iter().zip(&morsel.keys) {
        let off = col.null_offset;
        let mult = col.mult;
        let nulls = array.logical_nulls();
        let mut put = |code_of: &dyn Fn(usize) -> u64| {
            for (r, w) in words.iter_mut().enumerate() {
                if nulls.as_ref().is_none_or(|n| n.is_valid(r)) {
                    *w += (code_of(r) + off) * mult;
                }
            }
        };
        match &col.codec {
            Codec::Bool => {
                let a: &BooleanArray = array.as_boolean();
                put(&|r| a.value(r) as u64);
            }
            Codec::Bytes(dict) => {
                let a = ByteColumn::new(array);
                // Every valid value was seen when the dictionary was built.
                put(&|r| dict.code(a.value(r)).unwrap_or(0) as u64);
            }
            Codec::Ordinal { min } => {
                let min = *min;
                with_ordinal_type!(&col.data_type, T => {
                    encode_ordinal::<T>(&mut words, array, min, off, mult, nulls.as_ref());
                }, _ => unreachable!())
            }
        }
    }
    Ok(words)
}

/// The hot loop of the common case (integer keys): a tight loop per column, no dynamic calls.
#[inline]
fn encode_ordinal<T: ArrowPrimitiveType>(
    words: &mut [u64],
    array: &ArrayRef,
    min: i128,
    off: u64,
    mult: u64,
    nulls: Option<&arrow::buffer::NullBuffer>,
) where
    T::Native: Ordinal,
{
    let values = array.as_primitive::<T>().values();
    match nulls {
        Some(n) if n.null_count() > 0 => {
            for (r, (w, v)) in words.iter_mut().zip(values.iter()).enumerate() {
                if n.is_valid(r) {
                    *w += ((v.to_ord() - min) as u64 + off).wrapping_mul(mult);
                }
            }
        }
        _ => {
            for (w, v) in words.iter_mut().zip(values.iter()) {
                *w = w.wrapping_add(((v.to_ord() - min) as u64 + off).wrapping_mul(mult));
            }
        }
    }
}

fn encode_interned(morsels: &[InputBatch], key_types: &[DataType]) -> Result<EncodedKeys> {
    let fields = key_types
        .iter()
        .map(|t| SortField::new(t.clone()))
        .collect();
    let converter = RowConverter::new(fields)?;
    let rows = morsels
        .par_iter()
        .map(|m| converter.convert_columns(&m.keys))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let dict = Dictionary::build(rows.par_iter().map(|r| r.iter().map(|row| row.data())));
    let words = rows
        .par_iter()
        .map(|r| {
            r.iter()
                .map(|row| dict.code(row.data()).unwrap_or(0) as u64)
                .collect()
        })
        .collect();
    let domain = dict.len().max(1) as u64;
    Ok(EncodedKeys {
        words,
        codec: KeyCodec {
            layout: Layout::Interned(Interned {
                converter,
                rows: dict,
            }),
            domain,
        },
    })
}

fn decode_column(col: &ColumnPlan, words: &[u64]) -> Result<ArrayRef> {
    let code = |w: u64| -> Option<u64> {
        let c = (w / col.mult) % col.range as u64;
        if col.null_offset == 1 && c == 0 {
            None
        } else {
            Some(c - col.null_offset)
        }
    };
    Ok(match &col.codec {
        Codec::Bool => Arc::new(
            words
                .iter()
                .map(|&w| code(w).map(|c| c == 1))
                .collect::<BooleanArray>(),
        ),
        Codec::Bytes(dict) => {
            let strings = words
                .iter()
                .map(|&w| {
                    code(w)
                        .map(|c| std::str::from_utf8(dict.value(c as u32)))
                        .transpose()
                })
                .collect::<std::result::Result<Vec<Option<&str>>, _>>()
                .map_err(|e| GrouperError::InvalidInput(format!("string key: {e}")))?;
            match col.data_type {
                DataType::LargeUtf8 => Arc::new(LargeStringArray::from(strings)),
                DataType::Utf8View => Arc::new(StringViewArray::from(strings)),
                _ => Arc::new(StringArray::from(strings)),
            }
        }
        Codec::Ordinal { min } => with_ordinal_type!(&col.data_type, T => {
            let array: PrimitiveArray<T> = words
                .iter()
                .map(|&w| code(w).map(|c| <T as ArrowPrimitiveType>::Native::from_ord(min + c as i128)))
                .collect();
            Arc::new(array.with_data_type(col.data_type.clone())) as ArrayRef
        }, _ => unreachable!()),
    })
}

/// Uniform byte access to the three string layouts.
enum ByteColumn<'a> {
    Utf8(&'a StringArray),
    Large(&'a LargeStringArray),
    View(&'a StringViewArray),
}

impl<'a> ByteColumn<'a> {
    fn new(array: &'a ArrayRef) -> Self {
        match array.data_type() {
            DataType::LargeUtf8 => Self::Large(array.as_string()),
            DataType::Utf8View => Self::View(array.as_string_view()),
            _ => Self::Utf8(array.as_string()),
        }
    }

    #[inline]
    fn value(&self, r: usize) -> &'a [u8] {
        match self {
            Self::Utf8(a) => a.value(r).as_bytes(),
            Self::Large(a) => a.value(r).as_bytes(),
            Self::View(a) => a.value(r).as_bytes(),
        }
    }

    fn into_valid_iter(self) -> impl Iterator<Item = &'a [u8]> {
        let (len, nulls) = match &self {
            Self::Utf8(a) => (a.len(), a.nulls().cloned()),
            Self::Large(a) => (a.len(), a.nulls().cloned()),
            Self::View(a) => (a.len(), a.nulls().cloned()),
        };
        (0..len)
            .filter(move |&r| nulls.as_ref().is_none_or(|n| n.is_valid(r)))
            .map(move |r| self.value(r))
    }
}

//! Key normalization: every group key (one column or several, any supported type, NULLs
//! included) becomes one `u64` *word* per row, so strategies only ever hash, compare and index
//! 64-bit integers (docs/ARCHITECTURE.md, "Data flow").
//!
//! ```text
//!  column       code per row (+1, NULL = 0, if NULLs) range (+1 if NULLs)
//!  integer/date ordinal - min                         max - min + 1
//!  float        total-order bits, as above           as above
//!  boolean      value                                2
//!  string       dictionary code                      dictionary capacity
//!
//!  word = code_0 + range_0 * (code_1 + range_1 * (code_2 + ...))     (mixed radix)
//! ```
//!
//! Mixed radix packs tighter than bit fields (TPC-H Q1's two one-letter flags pack into a domain
//! of a few hundred words), and the product of the ranges, the *domain*, is exactly the size a
//! perfect (direct-index) table needs (Tomé §3.3). When the domain exceeds 2^64 the key takes the
//! general path: each row's composite key is encoded with `arrow-row` and interned in a
//! dictionary, whose code is the word.
//!
//! Batches stream in, so a codec is planned from the first batch and *widened* when a later
//! batch holds a value outside it ([`KeyCodec::encode`] returns `None`): ordinal ranges grow past
//! the new extreme by an eighth of their span, dictionary capacities double, and the layout turns
//! interned if the domain no longer fits. Each widening is a new codec; workers re-encode the key
//! words of their groups (decode with the old codec, encode with the new), which happens
//! O(log range) times at most.

mod columns;
mod dictionary;
mod hashed_values;
pub mod ordinal;
mod packed;
mod view_column;
mod view_map;
mod views;
mod wide;

use std::sync::Arc;

use rayon::prelude::*;

use arrow::array::{
    new_empty_array, Array, ArrayRef, AsArray, BooleanArray, PrimitiveArray, UInt32Array,
};
use arrow::compute::take;
use arrow::datatypes::DataType;
use arrow::row::{RowConverter, SortField};

pub(crate) use columns::as_declared;
pub(crate) use columns::is_string_column;
use columns::{add_dictionary_terms, seeded_dictionary, string_codes};
pub use dictionary::{Dictionary, ROW_SHARDS};
pub use hashed_values::HashedValues;
use ordinal::{encode_ordinal, Ordinal};
pub use packed::{PackedColumn, PackedKind};
use view_column::ViewColumn;
use views::{add_one_byte_terms, NULL_SLOT};
use wide::Halves;
pub use wide::KeyRows;

use crate::error::{GrouperError, Result};
use crate::strings::string_array;
use crate::with_ordinal_type;

/// Whether grouper handles group keys of this type.
pub fn supports(t: &DataType) -> bool {
    coded_without_bounds(t)
        || with_ordinal_type!(t, T => { let _ = std::marker::PhantomData::<T>; true }, _ => false)
}

/// Whether keys of type `t` get their codes without knowing their range: booleans, and strings
/// (dictionary codes). Every other key type needs bounds from statistics to be planned before
/// its rows are read ([`KeyCodec::plan_bounded`]).
pub fn coded_without_bounds(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Boolean | DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

/// Smallest dictionary capacity (codes reserved) of a string column or interned key.
const MIN_CAPACITY: u64 = 64;

/// How one column's values become codes.
#[derive(Debug, Clone)]
enum Codec {
    /// Primitive values in `min..=max`: `code = ordinal - min + 1`.
    Ordinal { min: i128, max: i128 },
    /// Booleans: `code = value + 1`.
    Bool,
    /// Strings: `code = dictionary code + 1`, at most `capacity` distinct values.
    Bytes {
        dict: Arc<Dictionary>,
        capacity: u64,
    },
}

/// One key column's place in the mixed-radix word.
#[derive(Debug, Clone)]
struct ColumnPlan {
    data_type: DataType,
    codec: Codec,
    /// Whether code 0 is reserved for NULL (values then start at 1).
    nulls: bool,
    /// Number of codes, NULL's included.
    range: u128,
    /// The weight of this column's code in the word.
    mult: u64,
}

impl ColumnPlan {
    fn new(data_type: DataType, codec: Codec, nulls: bool) -> Self {
        let values = match &codec {
            Codec::Ordinal { min, max } => max.abs_diff(*min) + 1,
            Codec::Bool => 2,
            Codec::Bytes { capacity, .. } => *capacity as u128,
        };
        Self {
            data_type,
            codec,
            nulls,
            range: values + nulls as u128,
            mult: 0,
        }
    }
}

#[derive(Debug, Clone)]
enum Layout {
    Packed(Vec<ColumnPlan>),
    /// Composite keys in `arrow-row` format (or as two packed words, `halves`), interned; the
    /// word is the dictionary code.
    Interned {
        converter: Arc<RowConverter>,
        rows: Arc<Dictionary>,
        capacity: u64,
        halves: Option<Arc<Halves>>,
    },
}

/// A key encoding: encodes key columns into words and decodes words back.
#[derive(Debug, Clone)]
pub struct KeyCodec {
    key_types: Vec<DataType>,
    layout: Layout,
    domain: u64,
}

impl KeyCodec {
    /// A codec covering every key in `batches` (each a slice of key columns), with room for
    /// growth in its dictionaries.
    pub fn plan(key_types: &[DataType], batches: &[&[ArrayRef]]) -> Result<Self> {
        Self::plan_with(key_types, batches, true)
    }

    /// A codec covering exactly the keys in `batches`, without growth room: the smallest
    /// domain, for direct-index tables sized from it (the GPU's perfect strategies). A later
    /// batch outside it widens it as usual.
    pub fn plan_exact(key_types: &[DataType], batches: &[&[ArrayRef]]) -> Result<Self> {
        Self::plan_with(key_types, batches, false)
    }

    /// A codec planned before the input is read (streaming from a scan): ordinal columns cover
    /// `bounds` (from the source's statistics; `None` where unknown is an error), string
    /// columns take a dictionary seeded with `sample`'s values and room for as many again
    /// (a power of two, at least 4), and `may_null` columns reserve NULL's code. Packed
    /// layouts only. A later value outside it fails [`KeyCodec::covers`] or
    /// [`KeyCodec::dictionary_codes`].
    pub fn plan_bounded(
        key_types: &[DataType],
        bounds: &[Option<(i128, i128)>],
        may_null: &[bool],
        sample: &[&[ArrayRef]],
    ) -> Result<Self> {
        let mut cols = Vec::with_capacity(key_types.len());
        for (c, t) in key_types.iter().enumerate() {
            let codec = match t {
                DataType::Boolean => Codec::Bool,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                    let dict = seeded_dictionary(sample, c)?;
                    let capacity = (2 * dict.len() as u64).max(4).next_power_of_two();
                    Codec::Bytes { dict, capacity }
                }
                t if supports(t) => {
                    let (min, max) = bounds.get(c).copied().flatten().ok_or_else(|| {
                        GrouperError::Unsupported(format!(
                            "group key {c} ({t}) has no bounds in the source's statistics"
                        ))
                    })?;
                    Codec::Ordinal { min, max }
                }
                t => {
                    return Err(GrouperError::UnsupportedType {
                        what: "group key",
                        data_type: t.clone(),
                    })
                }
            };
            let nulls = may_null.get(c).copied().unwrap_or(true);
            cols.push(ColumnPlan::new(t.clone(), codec, nulls));
        }
        let codec = Self::pack(key_types, cols)?;
        match codec.layout {
            Layout::Packed(_) => Ok(codec),
            Layout::Interned { .. } => Err(GrouperError::Unsupported(
                "group keys whose bounds span more than 2^64 values".into(),
            )),
        }
    }

    /// Whether key column `c`'s `array` lies within the codec: ordinal values within its
    /// range, NULLs only where it reserved a code (string values are checked when coded).
    pub fn covers(&self, c: usize, array: &ArrayRef) -> bool {
        let Layout::Packed(cols) = &self.layout else {
            return false;
        };
        let Some(col) = cols.get(c) else {
            return false;
        };
        if !col.nulls && array.logical_null_count() > 0 {
            return false;
        }
        match &col.codec {
            Codec::Ordinal { min, max } => {
                ordinal_min_max(array).is_none_or(|(lo, hi)| lo >= *min && hi <= *max)
            }
            Codec::Bool | Codec::Bytes { .. } => true,
        }
    }

    /// Codes string key column `c` may take (its dictionary's capacity), or `None`.
    pub fn dictionary_capacity(&self, c: usize) -> Option<u64> {
        let Layout::Packed(cols) = &self.layout else {
            return None;
        };
        match &cols.get(c)?.codec {
            Codec::Bytes { capacity, .. } => Some(*capacity),
            _ => None,
        }
    }

    /// This codec with room for `codes` values in its one string column's dictionary, when it
    /// packs exactly one and its domain stays within `max_domain`: a direct-index table over a
    /// growing dictionary is otherwise rebuilt at every doubling of its capacity, each worker's
    /// groups decoded and coded again (db-benchmark's `id3` at a million strings: 7 doublings
    /// from the first batch's 16,384, a fifth of the query). `None` when there is nothing to
    /// reserve or no room within the bound.
    pub fn with_dictionary_room(&self, codes: u64, max_domain: u64) -> Result<Option<Self>> {
        let Layout::Packed(cols) = &self.layout else {
            return Ok(None);
        };
        let strings: Vec<usize> = (0..cols.len())
            .filter(|&c| matches!(cols[c].codec, Codec::Bytes { .. }))
            .collect();
        let [c] = strings[..] else {
            return Ok(None);
        };
        let Codec::Bytes { dict, capacity } = &cols[c].codec else {
            return Ok(None);
        };
        if codes <= *capacity {
            return Ok(None);
        }
        let mut grown = cols.clone();
        grown[c] = ColumnPlan::new(
            cols[c].data_type.clone(),
            Codec::Bytes {
                dict: Arc::clone(dict),
                capacity: codes,
            },
            cols[c].nulls,
        );
        let codec = Self::pack(&self.key_types, grown)?;
        Ok(
            (matches!(codec.layout, Layout::Packed(_)) && codec.domain <= max_domain)
                .then_some(codec),
        )
    }

    fn plan_with(key_types: &[DataType], batches: &[&[ArrayRef]], headroom: bool) -> Result<Self> {
        let codec = Self::pack(key_types, Self::columns(key_types, batches, headroom)?)?;
        if let Layout::Interned { rows, .. } = &codec.layout {
            // In parallel over the batches: the dictionary's shards take the appends.
            batches.par_iter().try_for_each(|b| -> Result<()> {
                let r = codec.rows(b, b.first().map_or(0, |k| k.len()))?;
                rows.encode((0..r.num_rows()).map(|i| Some(r.row(i))), u64::MAX);
                Ok(())
            })?;
        }
        Ok(codec.with_interned_capacity())
    }

    /// A codec over every key of `batches` for a buffered strategy, which reads all its input
    /// before it groups: as [`KeyCodec::plan`], but an interned layout's dictionary, of
    /// `shards` shards, starts empty and open (codes up to 2^32), so that each row is interned
    /// once, as it is encoded or by partitioned aggregation a shard a partition
    /// ([`KeyCodec::row_dictionary`]), not once to plan and again to encode (db-benchmark q10
    /// at 3e7 rows: 11.6 s of 29 planning). Keys whose columns split into two packed words
    /// are interned as those ([`wide`]). [`KeyCodec::sealed`] closes it.
    pub fn plan_open(
        key_types: &[DataType],
        batches: &[&[ArrayRef]],
        shards: usize,
    ) -> Result<Self> {
        let cols = Self::columns(key_types, batches, true)?;
        let mut codec = Self::pack(key_types, cols.clone())?;
        if let Layout::Interned {
            rows,
            capacity,
            halves,
            ..
        } = &mut codec.layout
        {
            *rows = Arc::new(Dictionary::with_shards(shards));
            *capacity = 1 << 32;
            *halves = Halves::split(key_types, &cols)?.map(Arc::new);
            codec.domain = *capacity;
        }
        Ok(codec)
    }

    /// This codec with an interned layout's capacity and domain set to the codes its
    /// dictionary handed out, with room as [`KeyCodec::plan`] leaves.
    pub fn sealed(mut self) -> Self {
        if let Layout::Interned { rows, capacity, .. } = &mut self.layout {
            *capacity = (2 * rows.code_bound() as u64).max(MIN_CAPACITY);
            self.domain = *capacity;
        }
        self
    }

    /// The dictionary of an interned layout's rows (`None` when packed).
    pub fn row_dictionary(&self) -> Option<&Dictionary> {
        match &self.layout {
            Layout::Interned { rows, .. } => Some(rows),
            Layout::Packed(_) => None,
        }
    }

    /// The bytes of `keys` (`rows` rows) that an interned layout interns.
    pub fn rows(&self, keys: &[ArrayRef], rows: usize) -> Result<KeyRows> {
        if let Some(h) = wide::halves_of(self) {
            return Ok(KeyRows::Fixed(h.rows(keys, rows)?));
        }
        Ok(KeyRows::Arrow(
            self.row_converter()?
                .convert_columns(&as_declared(keys, &self.key_types)?)?,
        ))
    }

    /// Each key column's codec over `batches`' keys, before packing.
    fn columns(
        key_types: &[DataType],
        batches: &[&[ArrayRef]],
        headroom: bool,
    ) -> Result<Vec<ColumnPlan>> {
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
            let codec = match t {
                DataType::Boolean => Codec::Bool,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                    let dict = seeded_dictionary(batches, c)?;
                    let capacity = if headroom {
                        (2 * dict.len() as u64).max(MIN_CAPACITY)
                    } else {
                        (dict.len() as u64).max(1)
                    };
                    Codec::Bytes { dict, capacity }
                }
                _ => {
                    let (min, max) = batches
                        .par_iter()
                        .filter_map(|b| ordinal_min_max(&b[c]))
                        .reduce_with(|a, b| (a.0.min(b.0), a.1.max(b.1)))
                        .unwrap_or((0, 0));
                    Codec::Ordinal { min, max }
                }
            };
            let nulls = batches.par_iter().any(|b| b[c].logical_null_count() > 0);
            cols.push(ColumnPlan::new(t.clone(), codec, nulls));
        }
        Ok(cols)
    }

    /// Mixed-radix layout of `cols`, or the interned layout if the domain exceeds 2^64.
    fn pack(key_types: &[DataType], mut cols: Vec<ColumnPlan>) -> Result<Self> {
        let mut domain: u128 = 1;
        for col in &mut cols {
            col.mult = domain.min(u64::MAX as u128) as u64;
            domain = domain.saturating_mul(col.range);
        }
        if domain <= 1u128 << 64 {
            return Ok(Self {
                key_types: key_types.to_vec(),
                layout: Layout::Packed(cols),
                domain: domain.min(u64::MAX as u128) as u64,
            });
        }
        let fields = key_types
            .iter()
            .map(|t| SortField::new(t.clone()))
            .collect();
        Ok(Self {
            key_types: key_types.to_vec(),
            layout: Layout::Interned {
                converter: Arc::new(RowConverter::new(fields)?),
                rows: Arc::new(Dictionary::sharded()),
                capacity: MIN_CAPACITY,
                halves: None,
            },
            domain: MIN_CAPACITY,
        })
    }

    fn with_interned_capacity(mut self) -> Self {
        if let Layout::Interned { rows, capacity, .. } = &mut self.layout {
            *capacity = (*capacity).max(2 * rows.code_bound() as u64);
            self.domain = *capacity;
        }
        self
    }

    fn row_converter(&self) -> Result<&RowConverter> {
        match &self.layout {
            Layout::Interned { converter, .. } => Ok(converter),
            Layout::Packed(_) => Err(GrouperError::InvalidInput("not an interned codec".into())),
        }
    }

    /// Number of distinct words the codec can produce: words lie in `0..domain`.
    pub fn domain(&self) -> u64 {
        self.domain
    }

    /// Whether the domain counts codes of dictionaries that grow as new keys arrive (a string
    /// column, interned composite keys): then it bounds only the keys seen so far, not the
    /// groups to come.
    pub fn has_dictionary(&self) -> bool {
        match &self.layout {
            Layout::Interned { .. } => true,
            Layout::Packed(cols) => cols.iter().any(|c| matches!(c.codec, Codec::Bytes { .. })),
        }
    }

    /// Bytes held by the codec's dictionaries (string columns, interned composite keys).
    pub fn dictionary_bytes(&self) -> usize {
        match &self.layout {
            Layout::Interned { rows, .. } => rows.memory_bytes(),
            Layout::Packed(cols) => cols
                .iter()
                .map(|c| match &c.codec {
                    Codec::Bytes { dict, .. } => dict.memory_bytes(),
                    _ => 0,
                })
                .sum(),
        }
    }

    /// The same layout over empty dictionaries (their capacities kept): after a spill, the
    /// keys seen so far left memory with their groups, and so do their codes.
    pub fn emptied(&self) -> Self {
        let layout = match &self.layout {
            Layout::Interned {
                converter,
                capacity,
                halves,
                ..
            } => Layout::Interned {
                converter: Arc::clone(converter),
                rows: Arc::new(Dictionary::sharded()),
                capacity: *capacity,
                halves: halves.clone(),
            },
            Layout::Packed(cols) => Layout::Packed(
                cols.iter()
                    .map(|c| match &c.codec {
                        Codec::Bytes { capacity, .. } => ColumnPlan {
                            codec: Codec::Bytes {
                                dict: Arc::new(Dictionary::new()),
                                capacity: *capacity,
                            },
                            ..c.clone()
                        },
                        _ => c.clone(),
                    })
                    .collect(),
            ),
        };
        Self {
            key_types: self.key_types.clone(),
            layout,
            domain: self.domain,
        }
    }

    /// The words of a batch's keys, or `None` when a key falls outside this codec (then
    /// [`KeyCodec::widen`] makes one that covers it).
    pub fn encode(&self, keys: &[ArrayRef], rows: usize) -> Result<Option<Vec<u64>>> {
        match &self.layout {
            Layout::Packed(cols) => {
                let mut words = vec![0u64; rows];
                for (col, array) in cols.iter().zip(keys) {
                    if !encode_column(col, array, &mut words) {
                        return Ok(None);
                    }
                }
                Ok(Some(words))
            }
            Layout::Interned {
                rows: dict,
                capacity,
                ..
            } => {
                let r = self.rows(keys, rows)?;
                Ok(dict
                    .encode((0..r.num_rows()).map(|i| Some(r.row(i))), *capacity)
                    .map(|codes| codes.into_iter().map(|c| c.unwrap_or(0) as u64).collect()))
            }
        }
    }

    /// A codec covering this one's keys and those of `keys`, grown with headroom.
    pub fn widen(&self, keys: &[ArrayRef]) -> Result<Self> {
        let batch_rows = keys.first().map_or(0, |k| k.len() as u64);
        match &self.layout {
            Layout::Interned {
                converter,
                rows,
                capacity,
                halves,
            } => Ok(Self {
                key_types: self.key_types.clone(),
                layout: Layout::Interned {
                    converter: Arc::clone(converter),
                    rows: Arc::clone(rows),
                    capacity: (2 * capacity).max(rows.code_bound() as u64 + batch_rows),
                    halves: halves.clone(),
                },
                domain: 0,
            }
            .with_interned_capacity()
            .with_domain_from_capacity()),
            Layout::Packed(cols) => {
                let mut grown = Vec::with_capacity(cols.len());
                for (col, array) in cols.iter().zip(keys) {
                    let codec = match &col.codec {
                        Codec::Bool => Codec::Bool,
                        Codec::Bytes { dict, capacity } => Codec::Bytes {
                            dict: Arc::clone(dict),
                            capacity: (2 * capacity).max(dict.len() as u64 + array.len() as u64),
                        },
                        Codec::Ordinal { min, max } => match ordinal_min_max(array) {
                            None => col.codec.clone(),
                            Some((lo, hi)) => {
                                // Grow past the new extreme by an eighth of the span: enough
                                // that sorted input widens O(log range) times, little enough
                                // that a direct-index domain does not double needlessly.
                                let span = ((max - min) / 8).max(1);
                                let (tmin, tmax) = ordinal_bounds(&col.data_type);
                                Codec::Ordinal {
                                    min: if lo < *min {
                                        lo.saturating_sub(span).max(tmin)
                                    } else {
                                        *min
                                    },
                                    max: if hi > *max {
                                        hi.saturating_add(span).min(tmax)
                                    } else {
                                        *max
                                    },
                                }
                            }
                        },
                    };
                    let nulls = col.nulls || array.logical_null_count() > 0;
                    grown.push(ColumnPlan::new(col.data_type.clone(), codec, nulls));
                }
                Self::pack(&self.key_types, grown)
            }
        }
    }

    fn with_domain_from_capacity(mut self) -> Self {
        if let Layout::Interned { capacity, .. } = &self.layout {
            self.domain = *capacity;
        }
        self
    }

    /// Readies the string columns' dictionaries for decoding many words at once (a query's
    /// result): each builds its values as one array, which [`KeyCodec::decode`] takes rows
    /// from ([`Dictionary::build_values_array`]).
    pub fn prepare_decode(&self) -> Result<()> {
        let cols = match &self.layout {
            Layout::Packed(cols) => cols.iter().collect::<Vec<_>>(),
            Layout::Interned { .. } => match wide::halves_of(self) {
                Some(h) => return h.prepare_decode(),
                None => return Ok(()),
            },
        };
        for c in cols {
            if let Codec::Bytes { dict, .. } = &c.codec {
                dict.build_values_array(&c.data_type)?;
            }
        }
        Ok(())
    }

    /// Decodes key words into one array per key column.
    pub fn decode(&self, words: &[u64]) -> Result<Vec<ArrayRef>> {
        match &self.layout {
            Layout::Packed(cols) => cols.iter().map(|c| decode_column(c, words)).collect(),
            Layout::Interned {
                converter,
                rows,
                halves,
                ..
            } => {
                if words.is_empty() {
                    return Ok(self.key_types.iter().map(new_empty_array).collect());
                }
                let codes: Vec<u32> = words.iter().map(|&w| w as u32).collect();
                rows.with_values(&codes, |values| match halves {
                    Some(h) => h.decode(&values),
                    None => {
                        let parser = converter.parser();
                        Ok(converter.convert_rows(values.into_iter().map(|v| parser.parse(v)))?)
                    }
                })
            }
        }
    }
}

/// The range of ordinals a type can hold.
fn ordinal_bounds(t: &DataType) -> (i128, i128) {
    with_ordinal_type!(t, T => {
        (
            <T as ArrowPrimitiveType>::Native::min_ordinal(),
            <T as ArrowPrimitiveType>::Native::max_ordinal(),
        )
    }, _ => (i128::MIN, i128::MAX))
}

/// Smallest and largest ordinal of `array`'s valid values (`None`: none, or not ordinal).
pub fn ordinal_min_max(array: &ArrayRef) -> Option<(i128, i128)> {
    with_ordinal_type!(array.data_type(), T => {
        let a = array.as_primitive::<T>();
        let mut it = a.iter().flatten().map(Ordinal::to_ord);
        let first = it.next()?;
        Some(it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v))))
    }, _ => None)
}

/// Adds one column's codes into `words`; `false` when a value is outside the codec.
fn encode_column(col: &ColumnPlan, array: &ArrayRef, words: &mut [u64]) -> bool {
    let mult = col.mult;
    let nulls = array.logical_nulls();
    if !col.nulls && nulls.as_ref().is_some_and(|n| n.null_count() > 0) {
        return false;
    }
    let off = col.nulls as u64;
    match &col.codec {
        Codec::Bool => {
            let a: &BooleanArray = array.as_boolean();
            for (r, w) in words.iter_mut().enumerate() {
                if nulls.as_ref().is_none_or(|n| n.is_valid(r)) {
                    *w += (a.value(r) as u64 + off) * mult;
                }
            }
            true
        }
        Codec::Bytes { dict, capacity } => {
            if let Some(fits) = array
                .as_string_view_opt()
                .and_then(|a| {
                    let a = ViewColumn::of_views(a);
                    add_one_byte_terms(dict, &a, *capacity, (off, mult), words)
                })
                .or_else(|| add_dictionary_terms(dict, array, *capacity, (off, mult), words))
            {
                return fits;
            }
            let Some(codes) = string_codes(dict, array, *capacity) else {
                return false;
            };
            for (w, c) in words.iter_mut().zip(codes) {
                if c != NULL_SLOT {
                    *w += (c as u64 + off) * mult;
                }
            }
            true
        }
        Codec::Ordinal { min, max } => with_ordinal_type!(&col.data_type, T => {
            encode_ordinal::<T>(words, array, *min, max.abs_diff(*min), off, mult, nulls.as_ref())
        }, _ => false),
    }
}

fn decode_column(col: &ColumnPlan, words: &[u64]) -> Result<ArrayRef> {
    let range = col.range as u64;
    let off = col.nulls as u64;
    let code = |w: u64| -> Option<u64> {
        let c = match range {
            0 => w / col.mult, // a range of 2^64 (wrapped to 0): the column is the whole word
            r => (w / col.mult) % r,
        };
        (off == 0 || c != 0).then(|| c - off)
    };
    Ok(match &col.codec {
        Codec::Bool => Arc::new(
            words
                .iter()
                .map(|&w| code(w).map(|c| c == 1))
                .collect::<BooleanArray>(),
        ),
        Codec::Bytes { dict, .. } => {
            let codes: Vec<Option<u64>> = words.iter().map(|&w| code(w)).collect();
            let below = codes.iter().flatten().max().map_or(0, |&c| c as usize + 1);
            if let Some(values) = dict.values_array(&col.data_type, below) {
                let codes: UInt32Array = codes.iter().map(|c| c.map(|c| c as u32)).collect();
                return Ok(take(&values, &codes, None)?);
            }
            let present: Vec<u32> = codes.iter().flatten().map(|&c| c as u32).collect();
            dict.with_values(&present, |values| {
                let mut it = values.into_iter();
                string_array(
                    &col.data_type,
                    codes.iter().map(|c| c.and_then(|_| it.next())),
                )
            })?
        }
        Codec::Ordinal { min, .. } => with_ordinal_type!(&col.data_type, T => {
            let array: PrimitiveArray<T> = words
                .iter()
                .map(|&w| code(w).map(|c| <T as ArrowPrimitiveType>::Native::from_ord(min + c as i128)))
                .collect();
            Arc::new(array.with_data_type(col.data_type.clone())) as ArrayRef
        }, _ => unreachable!("checked by supports()")),
    })
}

#[cfg(test)]
mod tests;

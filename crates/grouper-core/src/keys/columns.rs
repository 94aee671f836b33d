//! A string key column's rows as dictionary codes, whatever its layout: Utf8 and LargeUtf8 as
//! views over their own buffers, Utf8View as it is, and dictionary-encoded columns (a Parquet
//! scan's columns of few values) through their values; and the dictionary a codec is planned
//! with, seeded from the first rows.

use std::borrow::Cow;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::{Array, ArrayRef, AsArray, DictionaryArray};
use arrow::datatypes::{DataType, Int32Type};
use hashbrown::hash_table::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};
use rayon::prelude::*;

use super::dictionary::Dictionary;
use super::view_column::ViewColumn;
use super::view_map::{inline_view, view_hash};
use super::views::{view_codes, NULL_SLOT};
use crate::error::Result;
use crate::strings::ByteColumn;
use crate::trace;

/// Codes of string key column `array` in `dict` (`NULL_SLOT` for a NULL), whatever its layout;
/// `None` when a value is past `capacity` or the column holds no strings
/// ([`is_string_column`]).
pub(super) fn string_codes(dict: &Dictionary, array: &ArrayRef, capacity: u64) -> Option<Vec<u32>> {
    match array.as_dictionary_opt::<Int32Type>() {
        Some(d) => dictionary_key_codes(dict, d, capacity),
        None => view_codes(dict, &ViewColumn::new(array)?, capacity),
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
    let value_codes = view_codes(dict, &ViewColumn::new(array.values())?, capacity)?;
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

/// Adds each row's term of a packed key word, `(code + off) * mult`, into `words`, for a
/// dictionary-encoded string key column without NULL keys: its values coded once, each row's
/// term read by its key, in one pass and no codes array ([`dictionary_key_codes`] and then a
/// pass adding them in: TPC-H Q1's two flags from Parquet, ~5% of its CPU time on 2 threads).
/// `None` for any other column (the caller codes it through [`string_codes`]), `Some(false)`
/// when a value's code would be at or past `capacity`.
pub(super) fn add_dictionary_terms(
    dict: &Dictionary,
    array: &ArrayRef,
    capacity: u64,
    (off, mult): (u64, u64),
    words: &mut [u64],
) -> Option<bool> {
    let array = array.as_dictionary_opt::<Int32Type>()?;
    let keys = array.keys();
    if keys.nulls().is_some_and(|n| n.null_count() > 0) {
        return None;
    }
    let Some(value_codes) = view_codes(dict, &ViewColumn::new(array.values())?, capacity) else {
        return Some(false);
    };
    // A NULL value (no term, as a NULL key) adds nothing; so would a key past the values,
    // which arrow rules out when it builds the array.
    let term: Vec<u64> = value_codes
        .iter()
        .map(|&c| match c {
            NULL_SLOT => 0,
            c => (u64::from(c) + off) * mult,
        })
        .collect();
    for (w, &k) in words.iter_mut().zip(keys.values()) {
        *w += usize::try_from(k)
            .ok()
            .and_then(|k| term.get(k))
            .copied()
            .unwrap_or(0);
    }
    Some(true)
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

/// Stripes [`seeded_dictionary`] gathers the distinct values in, each under its own lock.
const STRIPES: usize = 64;

/// A distinct value where it first appears (its batch in the high 32 bits, its row in the
/// low), and its bytes.
type First<'a> = (u64, &'a [u8]);

/// One stripe's distinct values: short ones by their inline view (16 bytes compared, no
/// pointer followed), longer ones by their hash and bytes.
#[derive(Default)]
struct Stripe<'a> {
    short: HashTable<(u128, First<'a>)>,
    long: HashTable<(u64, First<'a>)>,
}

/// A dictionary of the distinct strings of column `c` of `batches`, coded in order of first
/// appearance (batch by batch, row by row). The values are first made distinct in parallel,
/// in [`STRIPES`] sets by hash, each under its own lock, then put in that order and the
/// dictionary built from them at once ([`Dictionary::from_distinct`]): appends straight into
/// the dictionary (one map, one write lock) from every thread serialised them, ~0.35 s of
/// db-benchmark q3 over a million strings (1e7 rows, 16 threads, the buffered `partitioned`
/// plan) against ~0.09 s for DataFusion's whole query.
pub(super) fn seeded_dictionary(batches: &[&[ArrayRef]], c: usize) -> Result<Arc<Dictionary>> {
    let hasher = DefaultHashBuilder::default();
    let stripes: Vec<Mutex<Stripe>> = (0..STRIPES).map(|_| Mutex::default()).collect();
    // Bits the stripes' own tables do not use (their low bits pick a bucket, the top seven
    // tag it).
    let stripe = |h: u64| (h >> 32) as usize % STRIPES;
    // Each thread's buffers are kept from batch to batch (a few dozen distinct values a
    // batch made their allocations cost as much as the sets).
    let buffers = || {
        let short: Vec<Vec<(u64, u128, First)>> = vec![Vec::new(); STRIPES];
        let long: Vec<Vec<(u64, First)>> = vec![Vec::new(); STRIPES];
        (short, long, hashbrown::HashSet::new())
    };
    batches.par_iter().enumerate().try_for_each_init(
        buffers,
        |(short, long, seen), (i, b)| -> Result<()> {
            let batch = (i as u64) << 32;
            each_batch_value(&b[c], seen, |r, v| {
                let first = (batch | r as u64, v);
                match inline_view(v) {
                    Some(view) => {
                        let h = view_hash(view);
                        short[stripe(h)].push((h, view, first));
                    }
                    None => {
                        let h = hasher.hash_one(v);
                        long[stripe(h)].push((h, first));
                    }
                }
            })?;
            for (s, (short, long)) in stripes.iter().zip(short.iter_mut().zip(long.iter_mut())) {
                if short.is_empty() && long.is_empty() {
                    continue;
                }
                let mut s = s.lock().unwrap_or_else(PoisonError::into_inner);
                // One probe a value, found or placed.
                for (h, view, first) in short.drain(..) {
                    match s.short.entry(h, |e| e.0 == view, |e| view_hash(e.0)) {
                        Entry::Occupied(mut e) => e.get_mut().1 .0 = e.get().1 .0.min(first.0),
                        Entry::Vacant(e) => {
                            e.insert((view, first));
                        }
                    }
                }
                for (h, first) in long.drain(..) {
                    match s.long.entry(h, |e| e.1 .1 == first.1, |e| e.0) {
                        Entry::Occupied(mut e) => e.get_mut().1 .0 = e.get().1 .0.min(first.0),
                        Entry::Vacant(e) => {
                            e.insert((h, first));
                        }
                    }
                }
            }
            Ok(())
        },
    )?;
    let mut firsts: Vec<First> = stripes
        .into_par_iter()
        .flat_map_iter(|s| {
            let s = s.into_inner().unwrap_or_else(PoisonError::into_inner);
            let short = s.short.into_iter().map(|e| e.1);
            short.chain(s.long.into_iter().map(|e| e.1))
        })
        .collect();
    trace::event(|| format!("dictionary: {} distinct strings gathered", firsts.len()));
    // No two values first appear at one place: the order is total.
    firsts.par_sort_unstable_by_key(|f| f.0);
    trace::event(|| "dictionary: in order of first appearance".into());
    let chunk = firsts
        .len()
        .div_ceil(4 * rayon::current_num_threads())
        .max(1 << 12);
    let parts: Vec<Vec<&[u8]>> = firsts
        .par_chunks(chunk)
        .map(|c| c.iter().map(|f| f.1).collect())
        .collect();
    Ok(Arc::new(Dictionary::from_distinct(&parts)))
}

/// Calls `f` with the row and value of each non-NULL row of string column `array` (a
/// dictionary-encoded one's values), each distinct view of a Utf8View column at its first row
/// only (equal views are equal strings: 16 bytes hashed a row, not the bytes; `seen` is
/// emptied first).
fn each_batch_value<'a>(
    array: &'a ArrayRef,
    seen: &mut hashbrown::HashSet<u128>,
    mut f: impl FnMut(usize, &'a [u8]),
) -> Result<()> {
    let column = match array.as_any_dictionary_opt() {
        Some(d) => d.values(),
        None => array,
    };
    if let Some(views) = column.as_string_view_opt() {
        seen.clear();
        (0..views.len())
            .filter(|&r| views.is_valid(r) && seen.insert(views.views()[r]))
            .for_each(|r| f(r, views.value(r).as_bytes()));
        return Ok(());
    }
    let col = ByteColumn::new(column, "group key")?;
    (0..column.len()).for_each(|r| {
        if let Some(v) = col.get(r) {
            f(r, v)
        }
    });
    Ok(())
}

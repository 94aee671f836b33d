//! The prepared-input cache: a query repeated over the same in-memory table reuses its planned
//! keys, dictionary codes and encoded, pinned chunk images (Tomé times Q1 from compressed
//! columns already in memory; this is how grouper gets there from an Arrow table), and a
//! resident input its device copy, so `resident` uploads once for every query over the same
//! arrays rather than once a query (at SF 100, Q1's 600M rows took ~9 s to prepare and upload
//! against a 1.9 s kernel, every run).
//!
//! An input is known by the identity of its arrays (the addresses of each column's buffers,
//! with offset, length and type: Arrow buffers are immutable; DataFusion re-slices a table's
//! batches on every scan, so the arrays are new but their buffers are not), the query and the
//! options that shape the images. Entries hold those buffers, so an address cannot be reused by
//! other data while its entry lives. Least recently used entries go first when the owned bytes
//! (images, codes, a resident input's device copy) pass the caller's limit. At most one
//! resident input is kept: device memory is every query's, so a new resident input replaces the
//! kept one, which [`drop_resident`] frees before the new one uploads.

use std::sync::{Arc, Mutex};

use arrow::array::{ArrayData, RecordBatch};

use crate::prepare::PreparedInput;
use crate::query::{GpuOptions, GpuQuery};

/// What identifies a prepared input.
pub(crate) struct InputKey {
    query: GpuQuery,
    arrays: Vec<ArrayData>,
    batch_rows: usize,
    compress: bool,
    memory_limit: Option<u64>,
    cpu_filter: bool,
    resident: bool,
}

impl InputKey {
    pub(crate) fn new(query: &GpuQuery, batches: &[RecordBatch], opts: &GpuOptions) -> Self {
        Self {
            query: query.clone(),
            arrays: batches
                .iter()
                .flat_map(|b| b.columns().iter().map(|a| a.to_data()))
                .collect(),
            // The chunks' rows: a resident input's depend on whether the tuner times them.
            batch_rows: crate::prepare::launch_rows(opts),
            compress: opts.compress,
            memory_limit: opts.memory_limit,
            cpu_filter: opts.cpu_filter,
            resident: opts.resident,
        }
    }

    fn matches(&self, other: &Self) -> bool {
        self.batch_rows == other.batch_rows
            && self.compress == other.compress
            && self.memory_limit == other.memory_limit
            && self.cpu_filter == other.cpu_filter
            && self.resident == other.resident
            && self.arrays.len() == other.arrays.len()
            && self
                .arrays
                .iter()
                .zip(&other.arrays)
                .all(|(a, b)| a.ptr_eq(b))
            && self.query == other.query
    }
}

/// Most inputs kept (each holds its arrays alive).
const MAX_ENTRIES: usize = 16;

struct Entry<T> {
    key: InputKey,
    value: T,
    bytes: u64,
    used: u64,
}

/// Entries by recency of use, each keeping a `T` (a prepared input; a number in the tests).
struct Cache<T> {
    entries: Vec<Entry<T>>,
    clock: u64,
}

impl<T: Clone> Cache<T> {
    const fn new() -> Self {
        Self {
            entries: Vec::new(),
            clock: 0,
        }
    }

    fn lookup(&mut self, key: &InputKey) -> Option<T> {
        self.clock += 1;
        let now = self.clock;
        let e = self.entries.iter_mut().find(|e| e.key.matches(key))?;
        e.used = now;
        Some(e.value.clone())
    }

    fn insert(&mut self, key: InputKey, value: T, bytes: u64, limit: u64) {
        self.clock += 1;
        let now = self.clock;
        // The same input again, or (resident) the one resident input kept so far.
        self.entries
            .retain(|e| !(e.key.matches(&key) || key.resident && e.key.resident));
        if bytes > limit {
            return;
        }
        self.entries.push(Entry {
            key,
            value,
            bytes,
            used: now,
        });
        while self.entries.iter().map(|e| e.bytes).sum::<u64>() > limit
            || self.entries.len() > MAX_ENTRIES
        {
            let Some(oldest) = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.used)
                .map(|(i, _)| i)
            else {
                break;
            };
            self.entries.swap_remove(oldest);
        }
    }

    fn drop_resident(&mut self) {
        self.entries.retain(|e| !e.key.resident);
    }
}

static CACHE: Mutex<Cache<Arc<PreparedInput>>> = Mutex::new(Cache::new());

/// The prepared input of `key`, if cached.
pub(crate) fn lookup(key: &InputKey) -> Option<Arc<PreparedInput>> {
    CACHE.lock().ok()?.lookup(key)
}

/// Keeps `input` for `key`, evicting the least recently used entries beyond `limit` owned bytes
/// (an input larger than the limit is not kept) and, for a resident input, the one kept
/// before.
pub(crate) fn insert(key: InputKey, input: Arc<PreparedInput>, bytes: u64, limit: u64) {
    if let Ok(mut c) = CACHE.lock() {
        c.insert(key, input, bytes, limit);
    }
}

/// Drops the kept resident input (its device memory is freed once no run holds it): called
/// before another resident input uploads, so the two are never on the device at once.
pub(crate) fn drop_resident() {
    if let Ok(mut c) = CACHE.lock() {
        c.drop_resident();
    }
}

/// Drops every cached input (their pinned and device memory is freed).
pub fn clear() {
    if let Ok(mut c) = CACHE.lock() {
        c.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    fn key(batches: &[RecordBatch]) -> InputKey {
        key_with(batches, &GpuOptions::default())
    }

    fn key_with(batches: &[RecordBatch], opts: &GpuOptions) -> InputKey {
        let query = GpuQuery {
            columns: vec![DataType::Int64],
            filter: None,
            keys: vec![0],
            aggregates: vec![],
        };
        InputKey::new(&query, batches, opts)
    }

    fn column(n: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let a: ArrayRef = Arc::new(Int64Array::from((0..n).collect::<Vec<i64>>()));
        RecordBatch::try_new(schema, vec![a]).unwrap()
    }

    fn resident() -> GpuOptions {
        GpuOptions {
            resident: true,
            ..Default::default()
        }
    }

    /// A resident input is another input than the batched one over the same arrays (and a
    /// tuned one than an untuned one: other chunks); one
    /// resident input is kept at a time (a new one replaces it), beside any batched ones; and
    /// least recently used entries go first past the byte limit.
    #[test]
    fn one_resident_input_is_kept_beside_the_batched_ones() {
        let (a, b) = (column(10), column(20));
        let slice = |x: &RecordBatch| std::slice::from_ref(x).to_vec();
        assert!(!key(&slice(&a)).matches(&key_with(&slice(&a), &resident())));
        // Tuned, a resident input keeps the tuner's chunks: another input.
        let tuned = GpuOptions {
            tune: Some(Default::default()),
            ..resident()
        };
        assert!(!key_with(&slice(&a), &tuned).matches(&key_with(&slice(&a), &resident())));
        let mut c: Cache<u32> = Cache::new();
        c.insert(key(&slice(&a)), 1, 10, 100);
        c.insert(key_with(&slice(&a), &resident()), 2, 10, 100);
        assert_eq!(c.lookup(&key(&slice(&a))), Some(1));
        assert_eq!(c.lookup(&key_with(&slice(&a), &resident())), Some(2));
        // Another resident input replaces the first; the batched one stays.
        c.insert(key_with(&slice(&b), &resident()), 3, 10, 100);
        assert_eq!(c.lookup(&key_with(&slice(&a), &resident())), None);
        assert_eq!(c.lookup(&key_with(&slice(&b), &resident())), Some(3));
        assert_eq!(c.lookup(&key(&slice(&a))), Some(1));
        c.drop_resident();
        assert_eq!(c.lookup(&key_with(&slice(&b), &resident())), None);
        assert_eq!(c.entries.len(), 1);
        // Past the limit the least recently used go: a (used last) stays, b goes.
        c.insert(key(&slice(&b)), 4, 60, 100);
        assert_eq!(c.lookup(&key(&slice(&a))), Some(1));
        c.insert(key(&[column(5)]), 5, 35, 100);
        assert_eq!(c.lookup(&key(&slice(&b))), None);
        assert_eq!(c.lookup(&key(&slice(&a))), Some(1));
        // An input over the limit is not kept.
        c.insert(key(&[column(6)]), 6, 101, 100);
        assert_eq!(c.entries.len(), 2);
    }

    #[test]
    fn inputs_are_known_by_their_buffers() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let a: ArrayRef = Arc::new(Int64Array::from((0..100).collect::<Vec<i64>>()));
        let batch = |arr: ArrayRef| RecordBatch::try_new(Arc::clone(&schema), vec![arr]).unwrap();
        // A scan re-slices the same buffers into new arrays: the same input.
        let first = key(&[batch(a.slice(0, 50)), batch(a.slice(50, 50))]);
        let again = key(&[batch(a.slice(0, 50)), batch(a.slice(50, 50))]);
        assert!(first.matches(&again));
        // Other slices, or equal values in other buffers, are other inputs.
        assert!(!first.matches(&key(&[batch(a.slice(0, 40)), batch(a.slice(40, 60))])));
        let copy: ArrayRef = Arc::new(Int64Array::from((0..100).collect::<Vec<i64>>()));
        assert!(!first.matches(&key(&[batch(copy.slice(0, 50)), batch(copy.slice(50, 50))])));
    }
}

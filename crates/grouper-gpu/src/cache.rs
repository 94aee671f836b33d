//! The prepared-input cache: a query repeated over the same in-memory table reuses its planned
//! keys, dictionary codes and encoded, pinned chunk images (Tomé times Q1 from compressed
//! columns already in memory; this is how grouper gets there from an Arrow table).
//!
//! An input is known by the identity of its arrays (the addresses of each column's buffers,
//! with offset, length and type: Arrow buffers are immutable; DataFusion re-slices a table's
//! batches on every scan, so the arrays are new but their buffers are not), the query and the
//! options that shape the images. Entries hold those buffers, so an address cannot be reused by
//! other data while its entry lives. Least recently used entries go first when the owned bytes
//! (images, codes) pass the caller's limit.

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
}

impl InputKey {
    pub(crate) fn new(query: &GpuQuery, batches: &[RecordBatch], opts: &GpuOptions) -> Self {
        Self {
            query: query.clone(),
            arrays: batches
                .iter()
                .flat_map(|b| b.columns().iter().map(|a| a.to_data()))
                .collect(),
            batch_rows: opts.batch_rows,
            compress: opts.compress,
            memory_limit: opts.memory_limit,
            cpu_filter: opts.cpu_filter,
        }
    }

    fn matches(&self, other: &Self) -> bool {
        self.batch_rows == other.batch_rows
            && self.compress == other.compress
            && self.memory_limit == other.memory_limit
            && self.cpu_filter == other.cpu_filter
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

struct Entry {
    key: InputKey,
    input: Arc<PreparedInput>,
    bytes: u64,
    used: u64,
}

struct Cache {
    entries: Vec<Entry>,
    clock: u64,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache {
    entries: Vec::new(),
    clock: 0,
});

/// The prepared input of `key`, if cached.
pub(crate) fn lookup(key: &InputKey) -> Option<Arc<PreparedInput>> {
    let mut c = CACHE.lock().ok()?;
    c.clock += 1;
    let now = c.clock;
    let e = c.entries.iter_mut().find(|e| e.key.matches(key))?;
    e.used = now;
    Some(Arc::clone(&e.input))
}

/// Keeps `input` for `key`, evicting the least recently used entries beyond `limit` owned bytes
/// (an input larger than the limit is not kept).
pub(crate) fn insert(key: InputKey, input: Arc<PreparedInput>, bytes: u64, limit: u64) {
    let Ok(mut c) = CACHE.lock() else {
        return;
    };
    c.clock += 1;
    let now = c.clock;
    c.entries.retain(|e| !e.key.matches(&key));
    if bytes > limit {
        return;
    }
    c.entries.push(Entry {
        key,
        input,
        bytes,
        used: now,
    });
    while c.entries.iter().map(|e| e.bytes).sum::<u64>() > limit || c.entries.len() > MAX_ENTRIES {
        let Some(oldest) = c
            .entries
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.used)
            .map(|(i, _)| i)
        else {
            break;
        };
        c.entries.swap_remove(oldest);
    }
}

/// Drops every cached input (their pinned memory is freed).
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
        let query = GpuQuery {
            columns: vec![DataType::Int64],
            filter: None,
            keys: vec![0],
            aggregates: vec![],
        };
        InputKey::new(&query, batches, &GpuOptions::default())
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

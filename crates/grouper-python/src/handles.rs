//! Objects passed between datafusion-python and grouper by number instead of by value.
//!
//! datafusion-python hands its logical plan to grouper's planner as bytes and takes the
//! physical plan back as bytes (DataFusion's FFI query planner). Both libraries live in one
//! process, so what the bytes cannot carry (an in-memory table, a planned subtree with its
//! open files) is kept here and the bytes carry its number: the decoding side takes it out.
//! Each entry is taken once; an entry whose bytes are never decoded (a plan that failed half
//! way) stays until the process ends, so the table is bounded and the oldest go first.

use std::collections::BTreeMap;
use std::sync::Mutex;

use datafusion::error::{DataFusionError, Result};

/// Entries kept at most: far more than one plan's tables and nodes in flight at once.
const CAPACITY: usize = 4096;

/// A table of objects by number.
pub struct Handles<T> {
    /// Marks bytes written by this table, so that foreign bytes are refused, not misread.
    tag: [u8; 4],
    entries: Mutex<(u64, BTreeMap<u64, T>)>,
}

impl<T> Handles<T> {
    /// An empty table whose handles start with `tag`.
    pub const fn new(tag: [u8; 4]) -> Self {
        Self {
            tag,
            entries: Mutex::new((0, BTreeMap::new())),
        }
    }

    /// Keeps `value` and writes its handle to `buf`.
    pub fn put(&self, value: T, buf: &mut Vec<u8>) {
        let mut guard = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (next, map) = &mut *guard;
        *next += 1;
        map.insert(*next, value);
        while map.len() > CAPACITY {
            map.pop_first();
        }
        buf.extend_from_slice(&self.tag);
        buf.extend_from_slice(&next.to_le_bytes());
    }

    /// Whether `buf` is a handle of this table.
    pub fn owns(&self, buf: &[u8]) -> bool {
        buf.len() == 12 && buf.starts_with(&self.tag)
    }

    /// Takes the value whose handle `buf` is.
    pub fn take(&self, buf: &[u8]) -> Result<T> {
        let id = buf
            .get(4..12)
            .filter(|_| self.owns(buf))
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| DataFusionError::Internal("not a grouper handle".into()))?;
        let mut guard = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        guard.1.remove(&id).ok_or_else(|| {
            DataFusionError::Internal(format!(
                "grouper handle {id} was already taken or dropped (a plan decoded twice?)"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_gives_its_value_once() {
        let table = Handles::new(*b"test");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        table.put("a", &mut a);
        table.put("b", &mut b);
        assert!(table.owns(&a));
        assert!(!Handles::<&str>::new(*b"othr").owns(&a));
        assert_eq!(table.take(&b).unwrap(), "b");
        assert_eq!(table.take(&a).unwrap(), "a");
        assert!(table.take(&a).is_err());
        assert!(table.take(b"testshort").is_err());
    }

    #[test]
    fn the_oldest_go_past_capacity() {
        let table = Handles::new(*b"test");
        let mut first = Vec::new();
        table.put(0, &mut first);
        for i in 1..=CAPACITY {
            table.put(i, &mut Vec::new());
        }
        assert!(table.take(&first).is_err());
    }
}

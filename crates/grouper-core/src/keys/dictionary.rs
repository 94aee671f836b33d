//! Append-only dictionaries of byte strings: strings (and whole composite keys that do not pack
//! into 64 bits) become dense codes so they join the fixed-width key path.
//!
//! Codes are handed out in order of first appearance and never change, so workers can keep
//! encoding while the dictionary grows: a new string only appends. One dictionary is shared by
//! all workers of a query behind a read-write lock; a batch takes the read lock once for its
//! lookups and the write lock only if it brings values not seen before.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::DataType;

use arrow::buffer::NullBuffer;
use hashbrown::{DefaultHashBuilder, HashTable};
use std::sync::Arc;

use crate::error::{GrouperError, Result};
use crate::strings::string_array;
use rayon::prelude::*;

use super::hashed_values::HashedValues;
use super::view_map::{
    inline_view, is_inline, region_of, ViewMap, EMPTY, INLINE_MAX, MIN_SLOTS, REGIONS,
};

#[derive(Debug)]
struct Inner {
    /// The values in order of their local indexes, with their hashes (0 for a short value of
    /// a one-shard dictionary, which has none).
    values: HashedValues,
    /// Local index (position in `values`) of each value longer than a view holds inline, by
    /// hash.
    index: HashTable<u32>,
    /// Local index of each short value, by its view: Utf8View keys look their rows up here
    /// with no hash of their bytes and no `memcmp` ([`Dictionary::inline_codes`]); a key of a
    /// million short strings (db-benchmark's `id3` at 1e8 rows) found a quarter of them in each
    /// worker's own cache of them and hashed, probed and compared the rest batch by batch.
    inline: ViewMap,
}

impl Inner {
    fn new(slots: usize) -> Self {
        Self {
            values: HashedValues::default(),
            index: HashTable::new(),
            inline: ViewMap::with_slots(slots),
        }
    }

    fn len(&self) -> usize {
        self.values.len()
    }
}

/// A value of [`Dictionary::from_distinct`], with its view if it is short (for the map of
/// views) or else its hash (for the index): a short value's hash is never used.
type Placed<'a> = (&'a [u8], Result<u128, u64>);

/// Shards of a dictionary of interned composite keys ([`Dictionary::sharded`]).
pub const ROW_SHARDS: usize = 64;

/// A concurrent, append-only dictionary from byte strings to `u32` codes.
///
/// One shard (strings of a key column) hands out dense codes in order of first appearance.
/// Several (interned composite keys, nearly all distinct: every batch appends) keep each value
/// in the shard its hash picks, under that shard's lock, so workers appending at once rarely
/// wait for each other; a code is `local index × shards + shard`, nearly dense when the hash
/// spreads values evenly.
#[derive(Debug)]
pub struct Dictionary {
    shards: Vec<RwLock<Inner>>,
    hasher: DefaultHashBuilder,
    /// Unique to this dictionary in the process: what a worker thread's cache of its codes
    /// ([`super::views`]) is kept for.
    id: u64,
    /// Values as an Arrow array of a string type, with that type
    /// ([`Dictionary::build_values_array`]).
    array: Mutex<Option<(DataType, ArrayRef)>>,
}

/// The next [`Dictionary`]'s id.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

impl Default for Dictionary {
    fn default() -> Self {
        Self::with_shards(1)
    }
}

impl Dictionary {
    /// An empty dictionary with dense codes.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty dictionary of [`ROW_SHARDS`] shards, for values most batches bring anew.
    pub fn sharded() -> Self {
        Self::with_shards(ROW_SHARDS)
    }

    /// An empty dictionary of `n` shards (at least one).
    pub fn with_shards(n: usize) -> Self {
        // A string column's one shard starts its map of short values at the size that keeps a
        // few values apart ([`MIN_SLOTS`]); the shards of interned rows, rarely short, start
        // small (64 of 20 KiB each were written for every interned plan).
        let slots = if n > 1 { 2 } else { MIN_SLOTS };
        Self {
            shards: (0..n.max(1))
                .map(|_| RwLock::new(Inner::new(slots)))
                .collect(),
            hasher: DefaultHashBuilder::default(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            array: Mutex::new(None),
        }
    }

    /// A one-shard dictionary of the values of `parts`, which must all be distinct, coded in
    /// their order, built in parallel: the values' hashes taken a part a task, the map of short
    /// values filled a run of slots a task ([`ViewMap::from_regions`]); only longer values are
    /// copied and indexed by one thread.
    pub(super) fn from_distinct(parts: &[Vec<&[u8]>]) -> Self {
        let dict = Self::new();
        let placed: Vec<Vec<Placed>> = parts
            .par_iter()
            .map(|part| {
                part.iter()
                    .map(|&v| (v, inline_view(v).ok_or_else(|| dict.hash(v))))
                    .collect()
            })
            .collect();
        // Each part's short values, as (view, code) by the run of slots their home is in.
        let firsts: Vec<u32> = placed
            .iter()
            .scan(0u32, |n, p| {
                let first = *n;
                *n += p.len() as u32;
                Some(first)
            })
            .collect();
        let routed: Vec<Vec<Vec<(u128, u32)>>> = placed
            .par_iter()
            .zip(&firsts)
            .map(|(part, &first)| {
                let mut by_region = vec![Vec::new(); REGIONS];
                for (i, (_, key)) in part.iter().enumerate() {
                    if let Ok(view) = *key {
                        by_region[region_of(view)].push((view, first + i as u32));
                    }
                }
                by_region
            })
            .collect();
        let by_region: Vec<Vec<(u128, u32)>> = (0..REGIONS)
            .into_par_iter()
            .map(|r| routed.iter().flat_map(|p| p[r].iter().copied()).collect())
            .collect();
        let mut inner = dict.shards[0]
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        inner.inline = ViewMap::from_regions(&by_region);
        let count = placed.iter().map(Vec::len).sum();
        let bytes = placed.iter().flatten().map(|(v, _)| v.len()).sum();
        inner.values = HashedValues::with_capacity(count, bytes);
        for (v, key) in placed.into_iter().flatten() {
            let local = inner.values.push(key.err().unwrap_or(0), v);
            if let Err(h) = key {
                let Inner { index, values, .. } = &mut *inner;
                index.insert_unique(h, local, |&c| values.hash(c as usize));
            }
        }
        drop(inner);
        dict
    }

    /// This dictionary's id, unique in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    fn shard(&self, i: usize) -> RwLockReadGuard<'_, Inner> {
        self.shards[i]
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        (0..self.shards.len()).map(|i| self.shard(i).len()).sum()
    }

    /// One past the largest code handed out: the length for one shard; for several, the
    /// fullest shard's length times the shards.
    pub fn code_bound(&self) -> usize {
        let n = self.shards.len();
        match n {
            1 => self.len(),
            _ => n * (0..n).map(|i| self.shard(i).len()).max().unwrap_or(0),
        }
    }

    /// Bytes held (values, their ends and hashes, and the index), for memory accounting: a dictionary is
    /// shared by a query's workers, so no worker's groups count it.
    pub fn memory_bytes(&self) -> usize {
        (0..self.shards.len())
            .map(|i| {
                let s = self.shard(i);
                s.values.memory_bytes()
                    + s.index.capacity() * (std::mem::size_of::<u32>() + 1)
                    + s.inline.memory_bytes()
            })
            .sum()
    }

    /// Whether the dictionary is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The shard of a hash: bits the tables' probing (low bits) and tags (top bits) leave.
    fn shard_of(&self, h: u64) -> usize {
        ((h >> 32) as usize) % self.shards.len()
    }

    /// The code of local index `local` in shard `shard`.
    pub fn code(&self, shard: usize, local: u32) -> u64 {
        u64::from(local) * self.shards.len() as u64 + shard as u64
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The hash of `v` and the shard it belongs in, for [`Dictionary::intern_in_shard`].
    pub fn place(&self, v: &[u8]) -> (u64, usize) {
        let h = self.hash(v);
        (h, self.shard_of(h))
    }

    /// Interns `values` that all belong in `shard` (each with its hash from
    /// [`Dictionary::place`]) under the shard's write lock, taken once: each value's local
    /// index in the shard into `out` (cleared first; its code is [`Dictionary::code`]).
    /// Returns the shard's number of values. For a task that owns its shard (partitioned
    /// aggregation over interned rows): local indexes are dense, so they serve as group ids.
    pub fn intern_in_shard<'a>(
        &self,
        shard: usize,
        values: impl Iterator<Item = (u64, &'a [u8])>,
        out: &mut Vec<u32>,
    ) -> usize {
        let mut inner = self.shards[shard]
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        out.clear();
        for (h, v) in values {
            let local = match find(&inner, h, v) {
                Some(local) => local,
                None => self.append(&mut inner, h, v),
            };
            out.push(local);
        }
        inner.len()
    }

    /// Codes of `values` (`None` rows stay `None`), appending unseen values while their codes
    /// stay below `capacity`. Returns `None` when a code would be at or past `capacity`: a
    /// value it would append, or one another worker already appended under a wider codec (the
    /// dictionary is shared by every version of a query's codec, so a worker still on an
    /// older, narrower one must widen or catch up, never use such a code). Each shard's lock
    /// is taken once for reading, and once for writing if its rows bring new values.
    pub fn encode<'a>(
        &self,
        values: impl Iterator<Item = Option<&'a [u8]>> + Clone,
        capacity: u64,
    ) -> Option<Vec<Option<u32>>> {
        let values: Vec<Option<&[u8]>> = values.collect();
        let n = self.shards.len();
        let hashes: Vec<u64> = values
            .iter()
            .map(|v| v.map_or(0, |v| self.hash(v)))
            .collect();
        // Rows by shard (counting sort), so each shard is locked once per batch.
        let by_shard: Vec<Vec<u32>> = match n {
            1 => vec![(0..values.len() as u32).collect()],
            _ => {
                let mut b = vec![Vec::new(); n];
                for (r, h) in hashes.iter().enumerate() {
                    if values[r].is_some() {
                        b[self.shard_of(*h)].push(r as u32);
                    }
                }
                b
            }
        };
        let mut out: Vec<Option<u32>> = vec![None; values.len()];
        for (shard, rows) in by_shard.iter().enumerate() {
            if rows.is_empty() {
                continue;
            }
            let mut missing = false;
            {
                let inner = self.shard(shard);
                for &r in rows {
                    let (r, h) = (r as usize, hashes[r as usize]);
                    let Some(v) = values[r] else { continue };
                    match find(&inner, h, v) {
                        Some(local) => {
                            let code = self.code(shard, local);
                            if code >= capacity {
                                return None;
                            }
                            out[r] = Some(code as u32);
                        }
                        None => missing = true,
                    }
                }
            }
            if !missing {
                continue;
            }
            let mut inner = self.shards[shard]
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            for &r in rows {
                let (r, h) = (r as usize, hashes[r as usize]);
                let Some(v) = values[r] else { continue };
                if out[r].is_some() {
                    continue;
                }
                let local = match find(&inner, h, v) {
                    Some(local) => local,
                    None => {
                        if self.code(shard, inner.len() as u32) >= capacity {
                            return None;
                        }
                        self.append(&mut inner, h, v)
                    }
                };
                let code = self.code(shard, local);
                if code >= capacity {
                    return None;
                }
                out[r] = Some(code as u32);
            }
        }
        Some(out)
    }

    /// Appends `values` that are absent (used to seed a dictionary); returns the new length.
    /// Each shard is read under one shared lock, and locked for writing once, only when some
    /// value is new: seeding from many threads at once took the one shard of a string column's
    /// dictionary for writing at every row (db-benchmark q10 on 16 threads: 7.6 s, against 3 s
    /// seeded on one thread).
    pub fn extend<'a>(&self, values: impl Iterator<Item = &'a [u8]>) -> usize {
        let mut by_shard: Vec<Vec<(u64, &[u8])>> = vec![Vec::new(); self.shards.len()];
        for v in values {
            let h = self.hash(v);
            by_shard[self.shard_of(h)].push((h, v));
        }
        for (s, values) in by_shard.iter().enumerate() {
            let absent: Vec<(u64, &[u8])> = {
                let inner = self.shard(s);
                values
                    .iter()
                    .filter(|(h, v)| find(&inner, *h, v).is_none())
                    .copied()
                    .collect()
            };
            if absent.is_empty() {
                continue;
            }
            let mut inner = self.shards[s]
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            for (h, v) in absent {
                if find(&inner, h, v).is_none() {
                    self.append(&mut inner, h, v);
                }
            }
        }
        self.len()
    }

    /// The hash of `v` that picks its shard and probes the shard's `index`: none (0) for a
    /// short value of a one-shard dictionary, which needs neither.
    fn hash(&self, v: &[u8]) -> u64 {
        match self.shards.len() == 1 && v.len() <= INLINE_MAX {
            true => 0,
            false => self.hasher.hash_one(v),
        }
    }

    fn append(&self, inner: &mut Inner, h: u64, v: &[u8]) -> u32 {
        let local = inner.values.push(h, v);
        let Inner {
            values,
            index,
            inline,
        } = inner;
        match inline_view(v) {
            Some(view) => {
                inline.get_or_insert(view, local);
            }
            None => {
                index.insert_unique(h, local, |&c| values.hash(c as usize));
            }
        }
        local
    }

    /// Codes of the rows of a Utf8View column whose short strings this dictionary holds, into
    /// `out`, under one read lock and with one probe a row; every other row that is not NULL
    /// (a long string, a value not yet here, and every row of a dictionary of several shards,
    /// whose shard needs the hash of the bytes) is pushed to `rest`, and its slot in `out`, like
    /// a NULL's, holds [`EMPTY`]. Returns the largest code given, if any.
    pub(super) fn inline_codes(
        &self,
        views: &[u128],
        nulls: Option<&NullBuffer>,
        out: &mut [u32],
        rest: &mut Vec<usize>,
    ) -> Option<u32> {
        let valid = |r: usize| nulls.is_none_or(|n| n.is_valid(r));
        if self.shards.len() != 1 {
            rest.extend((0..views.len()).filter(|&r| valid(r)));
            return None;
        }
        let inner = self.shard(0);
        let map = &inner.inline;
        // A map past the caches is read in two passes: first every row's home slots, no loop
        // waiting on a load to go on (many rows' loads in flight at once), then the rows they
        // did not answer probe on, one at a time.
        let large = map.is_large();
        if large {
            map.get_near_all(views, out);
        }
        let mut top = None;
        for (r, (o, &view)) in out.iter_mut().zip(views).enumerate() {
            if !valid(r) {
                *o = EMPTY;
                continue;
            }
            // A long string's view (its length past 12) equals no short one's: it found none.
            let near = (large && *o != EMPTY).then_some(*o);
            match near.or_else(|| is_inline(view).then(|| map.get(view)).flatten()) {
                Some(local) => {
                    *o = local;
                    top = top.max(Some(local));
                }
                None => {
                    *o = EMPTY;
                    rest.push(r);
                }
            }
        }
        top
    }

    /// Whether the map of short values is large ([`ViewMap::is_large`]).
    #[cfg(test)]
    pub(super) fn inline_is_large(&self) -> bool {
        self.shard(0).inline.is_large()
    }

    /// Builds and keeps the values of a one-shard dictionary (codes are positions) as one array
    /// of string type `data_type`, for decoding a result's keys ([`Dictionary::values_array`]):
    /// taking each row from it replaces building each row's string anew (validated, collected,
    /// then appended), which took most of the decode (db-benchmark q10 at 1e8 rows on 16
    /// threads: 1.4 s to decode 1e8 groups' keys, DataFusion's whole query 1.8 s). Built only
    /// for a final decode ([`super::KeyCodec::prepare_decode`]): a worker re-keying its groups
    /// while the dictionary grows would build the whole dictionary for a share of it.
    pub fn build_values_array(&self, data_type: &DataType) -> Result<()> {
        if self.shards.len() != 1 {
            return Err(GrouperError::InvalidInput(
                "the values of a sharded dictionary are not in code order".into(),
            ));
        }
        if self.values_array(data_type, self.len()).is_some() {
            return Ok(());
        }
        let array = {
            let inner = self.shard(0);
            string_array(
                data_type,
                (0..inner.len()).map(|i| Some(inner.values.get(i))),
            )?
        };
        let mut cache = self.array.lock().unwrap_or_else(PoisonError::into_inner);
        if cache
            .as_ref()
            .is_none_or(|(t, a)| t != data_type || a.len() < array.len())
        {
            *cache = Some((data_type.clone(), array));
        }
        Ok(())
    }

    /// The kept values array of `data_type`, when it holds every code below `codes` (codes
    /// never change, so an array built before later values were added still serves).
    pub fn values_array(&self, data_type: &DataType, codes: usize) -> Option<ArrayRef> {
        let cache = self.array.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .as_ref()
            .filter(|(t, a)| t == data_type && a.len() >= codes)
            .map(|(_, a)| Arc::clone(a))
    }

    /// Calls `f` with the value of each code.
    pub fn with_values<R>(&self, codes: &[u32], f: impl FnOnce(Vec<&[u8]>) -> R) -> R {
        let n = self.shards.len();
        let guards: Vec<RwLockReadGuard<'_, Inner>> = (0..n).map(|i| self.shard(i)).collect();
        f(codes
            .iter()
            .map(|&c| {
                let (local, shard) = (c as usize / n, c as usize % n);
                guards[shard].values.get(local)
            })
            .collect())
    }
}

/// The local index of `v` (hash `h`, unused for a short value) in a shard.
fn find(inner: &Inner, h: u64, v: &[u8]) -> Option<u32> {
    match inline_view(v) {
        Some(view) => inner.inline.get(view),
        None => inner
            .index
            .find(h, |&c| {
                inner.values.hash(c as usize) == h && inner.values.get(c as usize) == v
            })
            .copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(v: &[&'static str]) -> Vec<Option<&'static [u8]>> {
        v.iter().map(|s| Some(s.as_bytes())).collect()
    }

    #[test]
    fn codes_are_stable_and_capacity_is_respected() {
        let d = Dictionary::new();
        let a = some(&["pear", "apple", "pear"]);
        assert_eq!(
            d.encode(a.iter().copied(), 10).unwrap(),
            vec![Some(0), Some(1), Some(0)]
        );
        let b = [Some(&b"fig"[..]), None, Some(&b"apple"[..])];
        assert_eq!(
            d.encode(b.iter().copied(), 10).unwrap(),
            vec![Some(2), None, Some(1)]
        );
        assert!(d.encode(some(&["kiwi"]).into_iter(), 3).is_none());
        assert_eq!(d.len(), 3);
        // A value another worker appended under a wider codec is past a narrower one's
        // capacity: that worker must widen or catch up, not use the code.
        assert_eq!(
            d.encode(some(&["fig"]).into_iter(), 3).unwrap(),
            vec![Some(2)]
        );
        assert!(d.encode(some(&["fig"]).into_iter(), 2).is_none());
        assert!(d
            .encode(some(&["pear", "fig", "plum"]).into_iter(), 2)
            .is_none());
        assert_eq!(
            d.len(),
            3,
            "nothing appended when a code is past the capacity"
        );
        d.with_values(&[2, 0], |v| assert_eq!(v, vec![&b"fig"[..], &b"pear"[..]]));
    }

    #[test]
    fn a_sharded_dictionary_codes_every_value_once_and_decodes_it() {
        let d = Dictionary::sharded();
        let values: Vec<String> = (0..5000).map(|i| format!("row{}", i % 3000)).collect();
        let codes = d
            .encode(values.iter().map(|v| Some(v.as_bytes())), 1 << 20)
            .unwrap();
        assert_eq!(d.len(), 3000);
        assert!(d.code_bound() >= 3000 && d.code_bound() < 2 * 3000);
        let codes: Vec<u32> = codes.into_iter().map(Option::unwrap).collect();
        for (i, c) in codes.iter().enumerate() {
            assert_eq!(*c, codes[i % 3000], "row {i}");
            assert!((*c as usize) < d.code_bound());
        }
        d.with_values(&codes[..10], |v| {
            for (i, v) in v.iter().enumerate() {
                assert_eq!(*v, values[i].as_bytes());
            }
        });
        // Codes at or past the capacity are refused, whichever shard they are in.
        assert!(d
            .encode(
                std::iter::once(Some(&b"new"[..])),
                d.code_bound() as u64 / 4
            )
            .is_none());
    }

    #[test]
    fn extending_from_many_threads_appends_each_value_once_and_keeps_codes() {
        for d in [Dictionary::new(), Dictionary::sharded()] {
            let first = d
                .encode(std::iter::once(Some(&b"v7"[..])), 1 << 20)
                .unwrap()[0];
            let values: Vec<String> = (0..4000).map(|i| format!("v{}", i % 1000)).collect();
            std::thread::scope(|scope| {
                for chunk in values.chunks(500) {
                    scope.spawn(|| d.extend(chunk.iter().map(|v| v.as_bytes())));
                }
            });
            assert_eq!(d.len(), 1000);
            let again = d
                .encode(std::iter::once(Some(&b"v7"[..])), 1 << 20)
                .unwrap()[0];
            assert_eq!(again, first, "a value seeded before keeps its code");
            let codes: Vec<u32> = d
                .encode(values.iter().map(|v| Some(v.as_bytes())), 1 << 20)
                .unwrap()
                .into_iter()
                .map(Option::unwrap)
                .collect();
            let mut distinct = codes.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), 1000, "one code per value");
            d.with_values(&codes[..5], |v| {
                for (i, v) in v.iter().enumerate() {
                    assert_eq!(*v, values[i].as_bytes());
                }
            });
        }
    }
}

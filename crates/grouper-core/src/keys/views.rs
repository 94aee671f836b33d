//! Dictionary codes of Utf8View key columns, a batch at a time: short strings through the worker
//! thread's cache of their codes by view, the rest through a small table of the batch's distinct
//! views, both in front of the shared dictionary.

use std::cell::RefCell;

use arrow::array::{Array, StringViewArray};

use super::Dictionary;

/// Entries [`ViewTable`] starts with: so many more than the distinct values of a
/// low-cardinality key that two of them rarely share a slot (one that does costs a
/// mispredicted probe on every row of either, rows coming in no order: 8 strings in 256 slots
/// ran 15% slower than 3), while a batch touches only its values' cache lines of the 32 KiB.
const VIEW_TABLE_MIN: usize = 1024;

/// A row [`view_codes`] gives no code: a NULL key; also an empty entry of [`ViewTable`].
pub(super) const NULL_SLOT: u32 = u32::MAX;

/// The hash of `view`: a folded multiply of its halves (a short string's view is its length
/// and its bytes; one-letter flags differ in one byte, which a plain multiply left to collide:
/// TPC-H's `N` and `R` shared a slot of 64), then a Fibonacci multiply so that its top bits,
/// which index the table, depend on every bit: without it, 1,000 keys `id000000`..`id000999`
/// (one half of their views the same) fell in 546 of 4,096 slots, random ones in ~880.
#[inline(always)]
fn view_hash(view: u128) -> u64 {
    let lo = (view as u64) ^ 0x243F_6A88_85A3_08D3;
    let hi = ((view >> 64) as u64) ^ 0x1319_8A2E_0370_7344;
    let p = u128::from(lo) * u128::from(hi);
    ((p as u64) ^ ((p >> 64) as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The distinct views of one batch, each with its index among them (its *local*): open
/// addressing with linear probing, at most half full. One probe of one table per row, where a
/// direct-mapped cache of views in front of a hash map had thrashed past a few dozen distinct
/// values (two views sharing a slot evict each other row after row, each miss a hash-map probe;
/// strings of 100 to 1,000 values ran 0.6x DataFusion's grouping).
struct ViewTable {
    /// `(view, local)`, a power of two of them; `NULL_SLOT` marks an empty one.
    entries: Vec<(u128, u32)>,
    len: usize,
}

thread_local! {
    /// Each worker's [`ViewTable`], kept from batch to batch: a fresh one per batch cost more
    /// in page faults (the kernel zeroing its pages) than its probes.
    static VIEW_TABLE: RefCell<ViewTable> = RefCell::new(ViewTable::with_entries(VIEW_TABLE_MIN));
}

impl ViewTable {
    fn with_entries(n: usize) -> Self {
        Self {
            entries: vec![(0, NULL_SLOT); n],
            len: 0,
        }
    }

    /// Emptied for a new batch, sized for about as many distinct views as the last one had.
    fn reset(&mut self) {
        let n = (self.len * 4).next_power_of_two().max(VIEW_TABLE_MIN);
        if n == self.entries.len() {
            self.entries.fill((0, NULL_SLOT));
            self.len = 0;
        } else {
            *self = Self::with_entries(n);
        }
    }

    /// The entry holding `view`, or the empty one where it goes: linear probing from the top
    /// bits of its hash.
    #[inline(always)]
    fn slot(&self, view: u128) -> usize {
        let mask = self.entries.len() - 1;
        let bits = self.entries.len().trailing_zeros();
        let mut i = (view_hash(view) >> (64 - bits)) as usize;
        while self.entries[i].1 != NULL_SLOT && self.entries[i].0 != view {
            i = (i + 1) & mask;
        }
        i
    }

    /// The local of `view`, which becomes `firsts.len()` (and row `row` its first) when new.
    #[inline(always)]
    fn local(&mut self, view: u128, row: usize, firsts: &mut Vec<usize>) -> u32 {
        let i = self.slot(view);
        if self.entries[i].1 != NULL_SLOT {
            return self.entries[i].1;
        }
        let local = firsts.len() as u32;
        firsts.push(row);
        self.entries[i] = (view, local);
        self.len += 1;
        if self.len * 2 > self.entries.len() {
            self.grow();
        }
        local
    }

    /// Twice the entries, every view placed again.
    fn grow(&mut self) {
        let wider = vec![(0, NULL_SLOT); self.entries.len() * 2];
        let old = std::mem::replace(&mut self.entries, wider);
        for (view, local) in old.into_iter().filter(|&(_, l)| l != NULL_SLOT) {
            let i = self.slot(view);
            self.entries[i] = (view, local);
        }
    }
}

/// Entries [`CodeCache`] starts with.
const CODE_CACHE_MIN: usize = 1024;

/// Entries [`CodeCache`] grows to at most (20 bytes each: 10 MiB a worker thread, for up to
/// 2^18 short strings); past it, new strings take the batch's path each time.
const CODE_CACHE_MAX: usize = 1 << 19;

/// Longest string a view holds inline: such a view is the string (its length and bytes) in
/// every batch, while a longer one's view points into its own batch's buffers.
const INLINE_MAX: u32 = 12;

/// A worker thread's codes of the short strings of one dictionary (`owner`) it has met, by view,
/// kept from batch to batch: open addressing with linear probing, at most half full. A key of 100k strings (db-benchmark's `id3`) brings ~8,000 distinct values a batch,
/// each of which the batch's [`ViewTable`] found once and then looked up in the shared
/// dictionary (a hash of its bytes, a probe, a `memcmp`): ~30% of q7's time on 2 cores.
struct CodeCache {
    owner: Option<u64>,
    views: Vec<u128>,
    /// Each view's code; `NULL_SLOT` marks an empty entry.
    codes: Vec<u32>,
    len: usize,
}

/// Dictionaries a worker thread keeps a [`CodeCache`] for at once: one a string key column of a
/// query (db-benchmark q2's `id1, id2` alternate batch by batch; with one cache between them,
/// each emptied it for the other and every batch missed: 0.8x the code before the cache).
const CACHED_DICTIONARIES: usize = 4;

thread_local! {
    /// The thread's caches, the most recently used first.
    static CODE_CACHES: RefCell<Vec<CodeCache>> = const { RefCell::new(Vec::new()) };
}

impl CodeCache {
    fn with_entries(n: usize) -> Self {
        Self {
            owner: None,
            views: vec![0; n],
            codes: vec![NULL_SLOT; n],
            len: 0,
        }
    }

    /// `dict`'s cache among `caches`, moved to the front: a new one where there is none (the
    /// least recently used one dropped past [`CACHED_DICTIONARIES`]).
    fn serving<'c>(caches: &'c mut Vec<CodeCache>, dict: &Dictionary) -> &'c mut CodeCache {
        match caches.iter().position(|c| c.owner == Some(dict.id())) {
            Some(i) => caches[..=i].rotate_right(1),
            None => {
                let mut fresh = Self::with_entries(CODE_CACHE_MIN);
                fresh.owner = Some(dict.id());
                caches.insert(0, fresh);
                caches.truncate(CACHED_DICTIONARIES);
            }
        }
        &mut caches[0]
    }

    #[inline(always)]
    fn slot(&self, view: u128) -> usize {
        let mask = self.views.len() - 1;
        let bits = self.views.len().trailing_zeros();
        let mut i = (view_hash(view) >> (64 - bits)) as usize;
        while self.codes[i] != NULL_SLOT && self.views[i] != view {
            i = (i + 1) & mask;
        }
        i
    }

    /// The code of `view`, if cached.
    #[inline(always)]
    fn get(&self, view: u128) -> Option<u32> {
        let c = self.codes[self.slot(view)];
        (c != NULL_SLOT).then_some(c)
    }

    /// Caches `view`'s code, growing while under [`CODE_CACHE_MAX`] entries (full, it keeps
    /// what it has).
    fn insert(&mut self, view: u128, code: u32) {
        if (self.len + 1) * 2 > self.views.len() {
            if self.views.len() >= CODE_CACHE_MAX {
                return;
            }
            let mut wider = Self::with_entries(self.views.len() * 2);
            wider.owner = self.owner;
            for (&v, &c) in self.views.iter().zip(&self.codes) {
                if c != NULL_SLOT {
                    wider.insert(v, c);
                }
            }
            *self = wider;
        }
        let i = self.slot(view);
        if self.codes[i] == NULL_SLOT {
            self.len += 1;
        }
        self.views[i] = view;
        self.codes[i] = code;
    }
}

/// Dictionary codes of a Utf8View column, one per row (`NULL_SLOT` for a NULL), or `None` when
/// a code would be at or past `capacity`. A short string's code comes from the worker thread's
/// [`CodeCache`] (equal inline views are equal strings, in any batch); the other rows look up
/// each distinct *view* of the batch once ([`ViewTable`]: a multiply and a compare per row
/// rather than a hash of the bytes and a probe of the shared dictionary, which was ~14% of
/// TPC-H Q1's CPU time on 2 cores) and the dictionary codes those, caching the short ones.
pub(super) fn view_codes(
    dict: &Dictionary,
    a: &StringViewArray,
    capacity: u64,
) -> Option<Vec<u32>> {
    let views = a.views();
    let nulls = a.nulls().filter(|n| n.null_count() > 0);
    if nulls.is_none() && views.iter().all(|&v| v as u32 <= 1) {
        let (mut locals, mut firsts) = (Vec::with_capacity(views.len()), Vec::new());
        one_byte_locals(views, &mut locals, &mut firsts);
        let codes = codes_of(dict, a, capacity, &firsts)?;
        return Some(locals.iter().map(|&l| codes[l as usize]).collect());
    }
    CODE_CACHES.with_borrow_mut(|caches| {
        let cache = CodeCache::serving(caches, dict);
        let mut out = vec![NULL_SLOT; views.len()];
        // Rows the cache did not answer, and the largest code it gave.
        let mut rest: Vec<usize> = Vec::new();
        let mut top = 0u32;
        for (r, (o, &view)) in out.iter_mut().zip(views).enumerate() {
            if nulls.is_some_and(|n| n.is_null(r)) {
                continue;
            }
            match (view as u32 <= INLINE_MAX)
                .then(|| cache.get(view))
                .flatten()
            {
                Some(c) => {
                    *o = c;
                    top = top.max(c);
                }
                None => rest.push(r),
            }
        }
        if u64::from(top) >= capacity {
            return None;
        }
        if rest.is_empty() {
            return Some(out);
        }
        let mut firsts: Vec<usize> = Vec::new();
        let locals: Vec<u32> = VIEW_TABLE.with_borrow_mut(|table| {
            table.reset();
            rest.iter()
                .map(|&r| table.local(views[r], r, &mut firsts))
                .collect()
        });
        let codes = codes_of(dict, a, capacity, &firsts)?;
        for (&r, &l) in rest.iter().zip(&locals) {
            out[r] = codes[l as usize];
        }
        for (&r, &c) in firsts.iter().zip(&codes) {
            if views[r] as u32 <= INLINE_MAX {
                cache.insert(views[r], c);
            }
        }
        Some(out)
    })
}

/// Index of a string of at most one byte in [`one_byte_locals`]' table: its byte and its
/// length (the empty string and "\0" differ only there). Such a string's view is its length
/// in the low 32 bits and its byte above them.
#[inline(always)]
fn one_byte_slot(view: u128) -> usize {
    (((view >> 32) as u8 as usize) << 1) | (view as u32 as usize & 1)
}

/// [`view_codes`]' locals of a column of strings of at most one byte and no NULL (TPC-H's
/// flags): a table of every such string, indexed by the view's byte and length, in place of
/// the cache and the hash map.
fn one_byte_locals(views: &[u128], locals: &mut Vec<u32>, firsts: &mut Vec<usize>) {
    let mut table = [NULL_SLOT; 512];
    locals.resize(views.len(), 0);
    for (r, (l, &view)) in locals.iter_mut().zip(views).enumerate() {
        let slot = &mut table[one_byte_slot(view)];
        if *slot == NULL_SLOT {
            *slot = firsts.len() as u32;
            firsts.push(r);
        }
        *l = *slot;
    }
}

/// The codes of the distinct values at rows `firsts`, in order.
fn codes_of(
    dict: &Dictionary,
    a: &StringViewArray,
    capacity: u64,
    firsts: &[usize],
) -> Option<Vec<u32>> {
    let codes = dict.encode(
        firsts.iter().map(|&r| Some(a.value(r).as_bytes())),
        capacity,
    )?;
    // Every distinct value is a string, so every one has a code.
    Some(codes.into_iter().map(|c| c.unwrap_or(0)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A Utf8View column codes through the batch's table of views exactly as its strings
        /// code through the dictionary: short (inline) and long strings, equal long strings at
        /// different offsets, NULLs, and more distinct values than the table starts with (it
        /// grows, more than once).
        #[test]
        fn view_codes_equal_the_dictionary_codes(
            picks in proptest::collection::vec(proptest::option::weighted(0.9, 0usize..1500), 0..2500),
        ) {
            // A third of the cases hold only strings of at most one byte (the direct table).
            let short = picks.len() % 3 == 0;
            let value = |i: usize| match i % 3 {
                _ if short => ["", "\0", "A", "N", "\u{7f}"][i % 5].to_string(),
                0 => format!("{i}"),
                1 => format!("v{i:02}"),
                _ => format!("a long string past twelve bytes {i}"),
            };
            // ... and no NULL, which the table does not take.
            let strings: Vec<Option<String>> = picks
                .iter()
                .map(|p| if short { Some(value(p.unwrap_or(0))) } else { p.map(value) })
                .collect();
            let views = StringViewArray::from_iter(strings.iter().map(|s| s.as_deref()));
            let dict = Dictionary::new();
            // Twice: the second time short strings come from the thread's cache.
            for _ in 0..2 {
                let codes = view_codes(&dict, &views, u64::MAX).unwrap();
                let direct = dict
                    .encode(strings.iter().map(|s| s.as_deref().map(str::as_bytes)), u64::MAX)
                    .unwrap();
                let cached: Vec<Option<u32>> =
                    codes.iter().map(|&c| (c != NULL_SLOT).then_some(c)).collect();
                proptest::prop_assert_eq!(cached, direct);
            }
        }
    }

    fn column(values: &[&str]) -> StringViewArray {
        StringViewArray::from_iter_values(values.iter().copied())
    }

    #[test]
    fn cached_codes_belong_to_their_dictionary_and_several_stay_cached() {
        // Two dictionaries on one thread, alternating: each its own codes, never the other's.
        let (d1, d2) = (Dictionary::new(), Dictionary::new());
        let a = column(&["x", "yy", "zzz", "x"]);
        let b = column(&["zzz", "x", "w"]);
        assert_eq!(view_codes(&d1, &a, u64::MAX).unwrap(), vec![0, 1, 2, 0]);
        assert_eq!(view_codes(&d2, &b, u64::MAX).unwrap(), vec![0, 1, 2]);
        assert_eq!(view_codes(&d1, &b, u64::MAX).unwrap(), vec![2, 0, 3]);
        assert_eq!(view_codes(&d2, &a, u64::MAX).unwrap(), vec![1, 3, 0, 1]);
        // Both stay cached, and more dictionaries than the thread keeps caches for still code
        // right.
        CODE_CACHES.with_borrow(|c| {
            let owners: Vec<_> = c.iter().map(|c| c.owner).collect();
            assert_eq!(owners, vec![Some(d2.id()), Some(d1.id())]);
        });
        let more: Vec<Dictionary> = (0..CACHED_DICTIONARIES + 2)
            .map(|_| Dictionary::new())
            .collect();
        for _ in 0..2 {
            for d in [&d1, &d2].into_iter().chain(&more) {
                let want = d.encode(
                    ["zzz", "x", "w"].iter().map(|s| Some(s.as_bytes())),
                    u64::MAX,
                );
                let want: Vec<u32> = want.unwrap().into_iter().flatten().collect();
                assert_eq!(view_codes(d, &b, u64::MAX).unwrap(), want);
            }
        }
        CODE_CACHES.with_borrow(|c| assert_eq!(c.len(), CACHED_DICTIONARIES));
    }

    #[test]
    fn a_cached_code_past_the_capacity_asks_to_widen() {
        let dict = Dictionary::new();
        let many: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
        let names: Vec<&str> = many.iter().map(String::as_str).collect();
        // Cached with room for all of them; then a batch of the last one alone, under a
        // codec of 64 codes, must not get code 99 from the cache.
        assert!(view_codes(&dict, &column(&names), u64::MAX).is_some());
        assert_eq!(view_codes(&dict, &column(&["k99"]), 64), None);
        assert_eq!(view_codes(&dict, &column(&["k3"]), 64), Some(vec![3]));
    }

    #[test]
    fn the_cache_stops_growing_at_its_bound_and_stays_right() {
        let dict = Dictionary::new();
        let n = CODE_CACHE_MAX / 2 + 1_000;
        let many: Vec<String> = (0..n).map(|i| format!("{i:x}")).collect();
        let names: Vec<&str> = many.iter().map(String::as_str).collect();
        for _ in 0..2 {
            let codes = view_codes(&dict, &column(&names), u64::MAX).unwrap();
            assert!(codes.iter().enumerate().all(|(i, &c)| c as usize == i));
        }
        CODE_CACHES.with_borrow(|c| {
            assert_eq!(c[0].owner, Some(dict.id()));
            assert_eq!(c[0].views.len(), CODE_CACHE_MAX);
            assert!(c[0].len * 2 <= c[0].views.len());
        });
    }
}

//! An open-addressing map from Utf8View views (`u128`) to `u32`: one probe of one array per
//! lookup. A short string's view is the string itself (its length and its bytes inline), so the
//! map keys a dictionary's short values ([`super::Dictionary`]) as well as one batch's distinct
//! views ([`super::views`]).

use arrow::array::builder::make_view;
use rayon::prelude::*;

/// An empty slot's value; no key maps to it.
pub(super) const EMPTY: u32 = u32::MAX;

/// Longest string a view holds inline: such a view is the string (its length and bytes) in
/// every batch, while a longer one's view points into its own batch's buffers.
pub(super) const INLINE_MAX: usize = 12;

/// The view of `v` if it holds `v` inline (at most [`INLINE_MAX`] bytes).
#[inline]
pub(super) fn inline_view(v: &[u8]) -> Option<u128> {
    (v.len() <= INLINE_MAX).then(|| make_view(v, 0, 0))
}

/// Whether `view` holds its string inline.
#[inline(always)]
pub(super) fn is_inline(view: u128) -> bool {
    view as u32 as usize <= INLINE_MAX
}

/// The hash of `view`: a folded multiply of its halves (a short string's view is its length
/// and its bytes; one-letter flags differ in one byte, which a plain multiply left to collide:
/// TPC-H's `N` and `R` shared a slot of 64), then a Fibonacci multiply so that its top bits,
/// which index the table, depend on every bit: without it, 1,000 keys `id000000`..`id000999`
/// (one half of their views the same) fell in 546 of 4,096 slots, random ones in ~880.
#[inline(always)]
pub(super) fn view_hash(view: u128) -> u64 {
    let lo = (view as u64) ^ 0x243F_6A88_85A3_08D3;
    let hi = ((view >> 64) as u64) ^ 0x1319_8A2E_0370_7344;
    let p = u128::from(lo) * u128::from(hi);
    ((p as u64) ^ ((p >> 64) as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A view and its value, 20 bytes (a `(u128, u32)` pads to 32): a dictionary of a million short
/// strings keeps its map in 40 MiB rather than 64.
#[derive(Clone, Copy)]
#[repr(C, packed(4))]
struct Slot {
    view: u128,
    value: u32,
}

const VACANT: Slot = Slot {
    view: 0,
    value: EMPTY,
};

/// Slots from which a map is large: 5 MiB, past a core's L2 cache. A million short strings
/// (2^21 slots) coded 39 → 30 ns a row with [`ViewMap::get_near`] first (2 cores here, one
/// thread); 1e5 (2^18) the same either way; 1,000 (2^11, in L1) 8.7 → 10.1, so small maps keep
/// the one loop.
pub(super) const LARGE_SLOTS: usize = 1 << 18;

/// Runs of slots [`ViewMap::from_regions`] fills at once (at most [`MIN_SLOTS`], so that a
/// map of any size has that many).
pub(super) const REGIONS: usize = 64;

/// The slot of a map of `slots` slots (a power of two) where the probe for `view` starts: the
/// top bits of its hash.
#[inline(always)]
fn home(view: u128, slots: usize) -> usize {
    (view_hash(view) >> (64 - slots.trailing_zeros())) as usize
}

/// The run of [`ViewMap::from_regions`] where `view`'s home slot is, in any map of at least
/// [`REGIONS`] slots: its home among [`REGIONS`] slots (the same top bits of its hash).
#[inline]
pub(super) fn region_of(view: u128) -> usize {
    home(view, REGIONS)
}

/// Views to values, linear probing from the top bits of [`view_hash`], at most half full.
pub(super) struct ViewMap {
    /// A power of two of them.
    slots: Vec<Slot>,
    len: usize,
}

impl std::fmt::Debug for ViewMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewMap")
            .field("slots", &self.slots.len())
            .field("len", &self.len)
            .finish()
    }
}

/// Slots a map of a key's values starts with: so many more than the values of a
/// low-cardinality key that two of them rarely share a slot (one that does costs a mispredicted
/// probe on every row of either, rows coming in no order: 8 strings in 256 slots ran 15% slower
/// than 3), in 20 KiB.
pub(super) const MIN_SLOTS: usize = 1024;

impl ViewMap {
    /// An empty map of `n` slots (rounded up to a power of two).
    pub(super) fn with_slots(n: usize) -> Self {
        Self {
            slots: vec![VACANT; n.max(2).next_power_of_two()],
            len: 0,
        }
    }

    /// A map of distinct keys, given as (view, value) pairs (no value [`EMPTY`]) by the run of
    /// slots their home slot is in (`by_region`, as [`region_of`] routes them), filled
    /// in parallel: the slots are cut into [`REGIONS`] runs, each run takes its keys, probing
    /// within the run; a key that would probe past its run's end is placed afterwards by the
    /// usual probe, which may wrap into the next run. Lookups then probe as ever: a key placed
    /// late passed only slots already held. A million short strings placed one at a time had
    /// taken ~0.13 s on 2 threads here.
    pub(super) fn from_regions(by_region: &[Vec<(u128, u32)>]) -> Self {
        let keys = by_region.iter().map(Vec::len).sum::<usize>();
        let mut map = Self::with_slots((2 * keys + 1).max(MIN_SLOTS));
        let size = map.slots.len();
        let run = size / REGIONS;
        let late: Vec<(u128, u32)> = map
            .slots
            .par_chunks_mut(run)
            .zip(by_region)
            .flat_map_iter(|(slots, keys)| {
                let mut late = Vec::new();
                for &(view, value) in keys {
                    let at = home(view, size) % run;
                    match slots[at..].iter().position(|s| s.value == EMPTY) {
                        Some(i) => slots[at + i] = Slot { view, value },
                        None => late.push((view, value)),
                    }
                }
                late
            })
            .collect();
        map.len = keys - late.len();
        for (view, value) in late {
            map.get_or_insert(view, value);
        }
        map
    }

    /// Keys held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Slots, held or not.
    #[cfg(test)]
    pub(super) fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Bytes of the slots, for memory accounting.
    pub(super) fn memory_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>()
    }

    /// Emptied, with `n` slots (a power of two): refilled in place when the size stays.
    pub(super) fn clear_to(&mut self, n: usize) {
        if n == self.slots.len() {
            self.slots.fill(VACANT);
            self.len = 0;
        } else {
            *self = Self::with_slots(n);
        }
    }

    /// The slot holding `view`, or the vacant one where it goes.
    #[inline(always)]
    fn slot(&self, view: u128) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = home(view, self.slots.len());
        loop {
            let s = self.slots[i];
            if s.value == EMPTY || { s.view } == view {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    /// Whether the slots take [`LARGE_SLOTS`] or more: lookups mostly leave the cache.
    pub(super) fn is_large(&self) -> bool {
        self.slots.len() >= LARGE_SLOTS
    }

    /// Into `out`, for each of `views`, its value when it sits in its home slot or the next
    /// one, else [`EMPTY`] (it may still be held further on: ask [`ViewMap::get`]). No load
    /// decides whether another is made, so many rows' loads are in flight at once, where
    /// [`ViewMap::get`]'s probe waits on each row's load. Every view's home slot is computed
    /// first, in a pass of arithmetic alone, so that the loop of loads holds a few instructions
    /// a row and the out-of-order window spans more rows of it: coding 4M rows of 1e5 and 1e6
    /// short strings (one thread, 2-core VM whose L3 served no hits) took 42 → 34 and 69 → 58 ns
    /// a row against the hash computed inside the loop of loads; reading the second slot only
    /// when the first misses ran the same.
    pub(super) fn get_near_all(&self, views: &[u128], out: &mut [u32]) {
        let mask = self.slots.len() - 1;
        // Values are `u32`s and the map at most half full, so slots stay within 2^33; a slot
        // index past `u32` (a map of 80 GiB) is read through `get`'s probe instead.
        if self.slots.len() > 1 << 32 {
            for (o, &view) in out.iter_mut().zip(views) {
                *o = self.get(view).unwrap_or(EMPTY);
            }
            return;
        }
        for (o, &view) in out.iter_mut().zip(views) {
            *o = home(view, self.slots.len()) as u32;
        }
        for (o, &view) in out.iter_mut().zip(views) {
            let i = *o as usize;
            let (a, b) = (self.slots[i], self.slots[(i + 1) & mask]);
            // A vacant slot's view is 0 and its value EMPTY, so a match on it gives EMPTY.
            // (Masks instead of this select ran slower: 1M keys 41 against 30 ns a row.)
            let second = if { b.view } == view { b.value } else { EMPTY };
            *o = if { a.view } == view { a.value } else { second };
        }
    }

    /// The value of `view`, if held.
    #[inline(always)]
    pub(super) fn get(&self, view: u128) -> Option<u32> {
        let v = self.slots[self.slot(view)].value;
        (v != EMPTY).then_some(v)
    }

    /// The value of `view`, and whether it was absent: then it is `value` from now on.
    /// `value` must not be [`EMPTY`].
    #[inline(always)]
    pub(super) fn get_or_insert(&mut self, view: u128, value: u32) -> (u32, bool) {
        debug_assert_ne!(value, EMPTY);
        let i = self.slot(view);
        let held = self.slots[i].value;
        if held != EMPTY {
            return (held, false);
        }
        self.slots[i] = Slot { view, value };
        self.len += 1;
        if self.len * 2 > self.slots.len() {
            self.grow();
        }
        (value, true)
    }

    /// Twice the slots, every key placed again.
    fn grow(&mut self) {
        let wider = vec![VACANT; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, wider);
        for s in old.into_iter().filter(|s| s.value != EMPTY) {
            let i = self.slot(s.view);
            self.slots[i] = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_values_through_growth_and_clearing() {
        let mut m = ViewMap::with_slots(4);
        let views: Vec<u128> = (0..1000u32)
            .map(|i| inline_view(format!("id{i:06}").as_bytes()).unwrap())
            .collect();
        for (i, &v) in views.iter().enumerate() {
            assert_eq!(m.get_or_insert(v, i as u32), (i as u32, true));
        }
        assert_eq!(m.len(), 1000);
        assert!(m.slots() >= 2000, "at most half full");
        for (i, &v) in views.iter().enumerate() {
            assert_eq!(m.get(v), Some(i as u32));
            assert_eq!(m.get_or_insert(v, 7), (i as u32, false));
        }
        assert_eq!(m.get(inline_view(b"id001000").unwrap()), None);
        m.clear_to(m.slots());
        assert_eq!((m.len(), m.get(views[3])), (0, None));
        m.clear_to(16);
        assert_eq!(m.slots(), 16);
        assert_eq!(m.get_or_insert(views[3], 5), (5, true));
    }

    #[test]
    fn a_map_filled_by_runs_finds_every_key() {
        // Keys of one run, more than a run of the smallest map holds (some probe past it and
        // are placed late), and keys of every other run.
        let views = |range: std::ops::Range<u32>| -> Vec<u128> {
            range
                .map(|i| inline_view(format!("k{i}").as_bytes()).unwrap())
                .collect()
        };
        let crowded: Vec<u128> = views(0..100_000)
            .into_iter()
            .filter(|&v| region_of(v) == 5)
            .take(3 * MIN_SLOTS / REGIONS)
            .collect();
        let keys: Vec<u128> = crowded
            .iter()
            .copied()
            .chain(views(200_000..200_300))
            .collect();
        let mut by_region = vec![Vec::new(); REGIONS];
        for (i, &v) in keys.iter().enumerate() {
            by_region[region_of(v)].push((v, i as u32));
        }
        let m = ViewMap::from_regions(&by_region);
        assert_eq!((m.len(), m.slots()), (keys.len(), MIN_SLOTS));
        for (i, &v) in keys.iter().enumerate() {
            assert_eq!(m.get(v), Some(i as u32), "key {i}");
        }
        assert_eq!(m.get(inline_view(b"absent").unwrap()), None);
        // Larger: a key a slot and a half; every run takes some.
        let keys = views(0..50_000);
        let mut by_region = vec![Vec::new(); REGIONS];
        for (i, &v) in keys.iter().enumerate() {
            by_region[region_of(v)].push((v, i as u32));
        }
        assert!(by_region.iter().all(|r| !r.is_empty()));
        let m = ViewMap::from_regions(&by_region);
        assert!(m.slots() > 2 * keys.len());
        assert!(keys
            .iter()
            .enumerate()
            .all(|(i, &v)| m.get(v) == Some(i as u32)));
    }

    #[test]
    fn inline_views_are_the_strings() {
        assert_eq!(
            inline_view(b"twelve bytes"),
            Some(make_view(b"twelve bytes", 9, 9))
        );
        assert!(is_inline(inline_view(b"").unwrap()));
        assert_eq!(inline_view(b"thirteen byte"), None);
        assert!(!is_inline(make_view(b"thirteen byte", 0, 0)));
        // The empty string and "\0" differ (in their length).
        assert_ne!(inline_view(b""), inline_view(b"\0"));
    }
}

//! Dictionary codes of Utf8View key columns, a batch at a time, through a small table of the
//! batch's distinct views in front of the shared dictionary.

use std::cell::RefCell;

use arrow::array::{Array, StringViewArray};

use super::Dictionary;

/// Entries [`ViewTable`] starts with: so many more than the distinct values of a
/// low-cardinality key that two of them rarely share a slot (one that does costs a
/// mispredicted probe on every row of either, rows coming in no order: 8 strings in 256 slots
/// ran 15% slower than 3), while a batch touches only its values' cache lines of the 32 KiB.
const VIEW_TABLE_MIN: usize = 1024;

/// A row [`view_codes`] gives no code: a NULL key; also an empty entry of [`ViewTable`].
const NULL_SLOT: u32 = u32::MAX;

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

/// Dictionary codes of a Utf8View column, looking up each distinct *view* once: equal views
/// are equal strings (a short string is its view). Each row's view is found in the batch's
/// [`ViewTable`] (a multiply and a compare per row for a low-cardinality key, rather than a
/// hash of its bytes and a probe of the shared dictionary: the probe was ~14% of TPC-H Q1's CPU
/// time on 2 cores). Returns, per row, an index into the batch's distinct values
/// ([`NULL_SLOT`] for NULL), and each distinct value's code; `None` when a code would be at or
/// past `capacity`.
pub(super) fn view_codes(
    dict: &Dictionary,
    a: &StringViewArray,
    capacity: u64,
) -> Option<(Vec<u32>, Vec<u32>)> {
    let views = a.views();
    let nulls = a.nulls().filter(|n| n.null_count() > 0);
    let mut firsts: Vec<usize> = Vec::new();
    let mut locals: Vec<u32> = Vec::with_capacity(views.len());
    if nulls.is_none() && views.iter().all(|&v| v as u32 <= 1) {
        one_byte_locals(views, &mut locals, &mut firsts);
        return codes_of(dict, a, capacity, locals, &firsts);
    }
    VIEW_TABLE.with_borrow_mut(|table| {
        table.reset();
        match nulls {
            None => locals.extend(
                views
                    .iter()
                    .enumerate()
                    .map(|(r, &view)| table.local(view, r, &mut firsts)),
            ),
            Some(n) => locals.extend(views.iter().enumerate().map(|(r, &view)| {
                if n.is_null(r) {
                    NULL_SLOT
                } else {
                    table.local(view, r, &mut firsts)
                }
            })),
        }
    });
    codes_of(dict, a, capacity, locals, &firsts)
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

/// The codes of the distinct values at rows `firsts`, with the rows' `locals`.
fn codes_of(
    dict: &Dictionary,
    a: &StringViewArray,
    capacity: u64,
    locals: Vec<u32>,
    firsts: &[usize],
) -> Option<(Vec<u32>, Vec<u32>)> {
    let codes = dict.encode(
        firsts.iter().map(|&r| Some(a.value(r).as_bytes())),
        capacity,
    )?;
    // Every distinct value is a string, so every one has a code.
    let codes = codes.into_iter().map(|c| c.unwrap_or(0)).collect();
    Some((locals, codes))
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
            let (locals, codes) = view_codes(&dict, &views, u64::MAX).unwrap();
            let direct = dict
                .encode(strings.iter().map(|s| s.as_deref().map(str::as_bytes)), u64::MAX)
                .unwrap();
            let cached: Vec<Option<u32>> =
                locals.iter().map(|&l| codes.get(l as usize).copied()).collect();
            proptest::prop_assert_eq!(cached, direct);
        }
    }
}

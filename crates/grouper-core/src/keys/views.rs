//! Dictionary codes of Utf8View key columns, a batch at a time, through a small cache of views
//! in front of the batch's hash map of views and the shared dictionary.

use arrow::array::{Array, StringViewArray};

use super::Dictionary;

/// Entries of [`view_codes`]' direct-mapped cache of views: many more than the distinct values
/// of a low-cardinality key, so that two of them rarely share a slot (two that do evict each
/// other row after row), and few enough to stay in L1 (8 KiB).
const VIEW_CACHE: usize = 256;

/// A row [`view_codes`] gives no code: a NULL key.
const NULL_SLOT: u32 = u32::MAX;

/// The slot of `view` in [`view_codes`]' cache: a folded multiply of its halves (a short
/// string's view is its length and its bytes; one-letter flags differ in one byte, which a
/// plain multiply left to collide: TPC-H's `N` and `R` shared a slot of 64).
#[inline(always)]
fn view_slot(view: u128) -> usize {
    let lo = (view as u64) ^ 0x243F_6A88_85A3_08D3;
    let hi = ((view >> 64) as u64) ^ 0x1319_8A2E_0370_7344;
    let p = u128::from(lo) * u128::from(hi);
    let folded = (p as u64) ^ ((p >> 64) as u64);
    (folded >> (64 - VIEW_CACHE.trailing_zeros())) as usize
}

/// Dictionary codes of a Utf8View column, looking up each distinct *view* once: equal views
/// are equal strings (a short string is its view). Each row's view goes through a small
/// direct-mapped cache first and a hash map only on a miss, so a batch of low-cardinality keys
/// (TPC-H Q1's flags) costs a multiply and a compare per row rather than a hash-map probe
/// (the probe was ~14% of Q1's CPU time on 2 cores). Returns, per row, an index into the
/// batch's distinct values ([`NULL_SLOT`] for NULL), and each distinct value's code; `None`
/// when a code would be at or past `capacity`.
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
    let mut cache = [(0u128, NULL_SLOT); VIEW_CACHE];
    let mut slot_of: hashbrown::HashMap<u128, u32> = hashbrown::HashMap::new();
    for (r, &view) in views.iter().enumerate() {
        if nulls.is_some_and(|n| n.is_null(r)) {
            locals.push(NULL_SLOT);
            continue;
        }
        let cached = &mut cache[view_slot(view)];
        if cached.1 != NULL_SLOT && cached.0 == view {
            locals.push(cached.1);
            continue;
        }
        let local = *slot_of.entry(view).or_insert_with(|| {
            firsts.push(r);
            firsts.len() as u32 - 1
        });
        *cached = (view, local);
        locals.push(local);
    }
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
        /// A Utf8View column codes through the view cache exactly as its strings code through
        /// the dictionary: short (inline) and long strings, equal long strings at different
        /// offsets, NULLs, and more distinct values than the cache has entries (collisions).
        #[test]
        fn view_codes_equal_the_dictionary_codes(
            picks in proptest::collection::vec(proptest::option::weighted(0.9, 0usize..200), 0..600),
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

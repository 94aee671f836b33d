//! Dictionary codes of Utf8View key columns, a batch at a time: short strings by their views in
//! the dictionary's own map of them, the rest through a small table of the batch's distinct
//! views, in front of the dictionary's hash of the bytes.

use std::cell::RefCell;

use super::view_column::ViewColumn;
use super::view_map::{ViewMap, EMPTY, MIN_SLOTS};
use super::Dictionary;

/// A row [`view_codes`] gives no code: a NULL key.
pub(super) const NULL_SLOT: u32 = EMPTY;

/// The distinct views of one batch's rows that the dictionary's map of short strings did not
/// answer, each with its index among them (its *local*): a multiply and a compare per row
/// rather than a hash of the bytes and a probe of the shared dictionary (~14% of TPC-H Q1's
/// CPU time on 2 cores, before its flags took [`each_one_byte_code`]).
struct ViewTable {
    map: ViewMap,
}

thread_local! {
    /// Each worker's [`ViewTable`], kept from batch to batch: a fresh one per batch cost more
    /// in page faults (the kernel zeroing its pages) than its probes.
    static VIEW_TABLE: RefCell<ViewTable> = RefCell::new(ViewTable {
        map: ViewMap::with_slots(MIN_SLOTS),
    });
}

impl ViewTable {
    /// Emptied for a new batch, sized for about as many distinct views as the last one had.
    fn reset(&mut self) {
        let n = (self.map.len() * 4).next_power_of_two().max(MIN_SLOTS);
        self.map.clear_to(n);
    }

    /// The local of `view`, which becomes `firsts.len()` (and row `row` its first) when new.
    #[inline(always)]
    fn local(&mut self, view: u128, row: usize, firsts: &mut Vec<usize>) -> u32 {
        let (local, new) = self.map.get_or_insert(view, firsts.len() as u32);
        if new {
            firsts.push(row);
        }
        local
    }
}

/// Dictionary codes of a Utf8View column, one per row (`NULL_SLOT` for a NULL), or `None` when
/// a code would be at or past `capacity`. A short string's code comes from the dictionary's map
/// of views ([`Dictionary::inline_codes`]: equal inline views are equal strings, in any batch);
/// the other rows look up each distinct view of the batch once ([`ViewTable`]) and the
/// dictionary codes those by their bytes, adding the new ones.
pub(super) fn view_codes(dict: &Dictionary, a: &ViewColumn<'_>, capacity: u64) -> Option<Vec<u32>> {
    let views = a.views();
    let mut out = Vec::with_capacity(views.len());
    match each_one_byte_code(dict, a, capacity, |c| c, |_, c| out.push(c)) {
        Some(true) => return Some(out),
        Some(false) => return None,
        None => out.clear(),
    }
    let nulls = a.nulls().filter(|n| n.null_count() > 0);
    out.resize(views.len(), NULL_SLOT);
    let mut rest: Vec<usize> = Vec::new();
    let top = dict.inline_codes(views, nulls, &mut out, &mut rest);
    if top.is_some_and(|top| u64::from(top) >= capacity) {
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
    Some(out)
}

/// Index of a string of at most one byte in [`each_one_byte_code`]'s table: its byte and its
/// length (the empty string and "\0" differ only there). Such a string's view is its length
/// in the low 32 bits and its byte above them.
#[inline(always)]
fn one_byte_slot(view: u128) -> usize {
    (((view >> 32) as u8 as usize) << 1) | (view as u32 as usize & 1)
}

/// For a column of strings of at most one byte and no NULL (TPC-H's flags): calls `each` with
/// every row and `value` of its code, in one pass over the views, from a table of every such
/// string indexed by the view's byte and length in place of the dictionary's map; a string
/// missing from it is coded when it first appears (a branch almost never taken), so codes come
/// in order of first appearance. `None` for any other column, `Some(false)` when a code would
/// be at or past `capacity`. A pass noting each string's first row in such a table, before
/// coding them, waited on its own stores row after row.
#[inline(always)]
fn each_one_byte_code<T: Copy>(
    dict: &Dictionary,
    a: &ViewColumn<'_>,
    capacity: u64,
    value: impl Fn(u32) -> T,
    mut each: impl FnMut(usize, T),
) -> Option<bool> {
    let views = a.views();
    // Every length at most one exactly when their or is: an or of the views, branch-free (a
    // test per view stopped at the first long one, and compiled to a branch per row).
    let lengths = views.iter().fold(0u128, |or, &v| or | v) as u32;
    if a.nulls().is_some_and(|n| n.null_count() > 0) || lengths > 1 {
        return None;
    }
    let mut table: [Option<T>; 512] = [None; 512];
    for (r, &view) in views.iter().enumerate() {
        let slot = &mut table[one_byte_slot(view)];
        let v = match *slot {
            Some(v) => v,
            None => {
                let Some(&code) = codes_of(dict, a, capacity, &[r])
                    .as_deref()
                    .and_then(<[u32]>::first)
                else {
                    return Some(false);
                };
                *slot.insert(value(code))
            }
        };
        each(r, v);
    }
    Some(true)
}

/// Adds each row's term of a packed key word, `(code + off) * mult`, into `words`, for a
/// column of strings of at most one byte and no NULL ([`each_one_byte_code`]); `None` for any
/// other column (the caller codes it through [`view_codes`]), `Some(false)` when a code would be
/// at or past `capacity`. Through [`view_codes`] and an added pass the same column had taken
/// three passes, a codes array and a fourth adding it in (TPC-H Q1's two flags: ~20% of its
/// CPU time in memory on 2 threads).
pub(super) fn add_one_byte_terms(
    dict: &Dictionary,
    a: &ViewColumn<'_>,
    capacity: u64,
    (off, mult): (u64, u64),
    words: &mut [u64],
) -> Option<bool> {
    let term = |code: u32| (u64::from(code) + off) * mult;
    each_one_byte_code(dict, a, capacity, term, |r, t| {
        if let Some(w) = words.get_mut(r) {
            *w += t;
        }
    })
}

/// The codes of the distinct values at rows `firsts`, in order.
fn codes_of(
    dict: &Dictionary,
    a: &ViewColumn<'_>,
    capacity: u64,
    firsts: &[usize],
) -> Option<Vec<u32>> {
    let codes = dict.encode(firsts.iter().map(|&r| Some(a.value(r))), capacity)?;
    // Every distinct value is a string, so every one has a code.
    Some(codes.into_iter().map(|c| c.unwrap_or(0)).collect())
}

#[cfg(test)]
mod tests {
    use arrow::array::StringViewArray;

    use super::*;

    /// [`view_codes`] of a Utf8View array.
    fn codes_of_views(dict: &Dictionary, a: &StringViewArray, capacity: u64) -> Option<Vec<u32>> {
        view_codes(dict, &ViewColumn::of_views(a), capacity)
    }

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
            // Twice: the second time short strings come from the dictionary's map of views.
            for _ in 0..2 {
                let codes = codes_of_views(&dict, &views, u64::MAX).unwrap();
                let direct = dict
                    .encode(strings.iter().map(|s| s.as_deref().map(str::as_bytes)), u64::MAX)
                    .unwrap();
                let cached: Vec<Option<u32>> =
                    codes.iter().map(|&c| (c != NULL_SLOT).then_some(c)).collect();
                proptest::prop_assert_eq!(cached, direct);
            }
        }
    }

    proptest::proptest! {
        /// A column of strings of at most one byte adds exactly the terms its codes through
        /// [`view_codes`] give, codes in the same order (first appearance), into words already
        /// holding other columns' terms; any longer string or a NULL leaves it to [`view_codes`]
        /// (`None`, the words untouched), and a code past the capacity says so.
        #[test]
        fn one_byte_terms_are_the_view_codes_terms(
            picks in proptest::collection::vec(0usize..6, 1..3000),
            odd in proptest::option::of((0usize..3000, proptest::bool::ANY)),
            (off, mult) in (0u64..2, 1u64..1000),
        ) {
            let values = ["", "\0", "A", "N", "R", "\u{7f}"];
            let mut strings: Vec<Option<String>> =
                picks.iter().map(|&p| Some(values[p].to_string())).collect();
            if let Some((at, null)) = odd {
                let at = at % strings.len();
                strings[at] = (!null).then(|| "AB".to_string());
            }
            let views = StringViewArray::from_iter(strings.iter().map(|s| s.as_deref()));
            let base: Vec<u64> = (0..strings.len() as u64).map(|r| r * 7).collect();
            let (fast, reference) = (Dictionary::new(), Dictionary::new());
            let mut words = base.clone();
            let column = ViewColumn::of_views(&views);
            let added = add_one_byte_terms(&fast, &column, u64::MAX, (off, mult), &mut words);
            if odd.is_some() {
                proptest::prop_assert_eq!(added, None);
                proptest::prop_assert_eq!(words, base);
                return Ok(());
            }
            proptest::prop_assert_eq!(added, Some(true));
            let codes = codes_of_views(&reference, &views, u64::MAX).unwrap();
            let want: Vec<u64> =
                base.iter().zip(&codes).map(|(b, &c)| b + (u64::from(c) + off) * mult).collect();
            proptest::prop_assert_eq!(words, want);
            let distinct = picks.iter().collect::<std::collections::HashSet<_>>().len();
            let mut words = base.clone();
            let tight = add_one_byte_terms(
                &Dictionary::new(), &column, distinct as u64 - 1, (off, mult), &mut words,
            );
            proptest::prop_assert_eq!(tight, Some(false));
        }
    }

    fn column(values: &[&str]) -> StringViewArray {
        StringViewArray::from_iter_values(values.iter().copied())
    }

    #[test]
    fn a_large_map_codes_as_the_dictionary_does() {
        // Enough short strings that the dictionary's map of them is large (two passes: home
        // slots first, then probing), with NULLs, long strings and values new to it.
        let dict = Dictionary::new();
        let n = super::super::view_map::LARGE_SLOTS / 2 + 1000;
        let known: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
        dict.encode(known.iter().map(|k| Some(k.as_bytes())), u64::MAX)
            .unwrap();
        let rows: Vec<Option<String>> = (0..3 * n)
            .map(|r| match r % 11 {
                0 => None,
                1 => Some(format!("a long string past twelve bytes {}", r % 97)),
                2 => Some(format!("new{}", r % 500)),
                _ => Some(known[(r * 7919) % n].clone()),
            })
            .collect();
        let views = StringViewArray::from_iter(rows.iter().map(|s| s.as_deref()));
        let codes = codes_of_views(&dict, &views, u64::MAX).unwrap();
        let direct = dict
            .encode(
                rows.iter().map(|s| s.as_deref().map(str::as_bytes)),
                u64::MAX,
            )
            .unwrap();
        let coded: Vec<Option<u32>> = codes
            .iter()
            .map(|&c| (c != NULL_SLOT).then_some(c))
            .collect();
        assert_eq!(coded, direct);
        assert!(dict.inline_is_large());
    }

    #[test]
    fn each_dictionary_codes_its_own_values() {
        // Two dictionaries on one thread, alternating: each its own codes, never the other's.
        let (d1, d2) = (Dictionary::new(), Dictionary::new());
        let a = column(&["x", "yy", "zzz", "x"]);
        let b = column(&["zzz", "x", "w", "a string past twelve bytes"]);
        for _ in 0..2 {
            assert_eq!(codes_of_views(&d1, &a, u64::MAX).unwrap(), vec![0, 1, 2, 0]);
            assert_eq!(codes_of_views(&d2, &b, u64::MAX).unwrap(), vec![0, 1, 2, 3]);
            assert_eq!(codes_of_views(&d1, &b, u64::MAX).unwrap(), vec![2, 0, 3, 4]);
            assert_eq!(codes_of_views(&d2, &a, u64::MAX).unwrap(), vec![1, 4, 0, 1]);
        }
    }

    #[test]
    fn a_known_code_past_the_capacity_asks_to_widen() {
        let dict = Dictionary::new();
        let many: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
        let names: Vec<&str> = many.iter().map(String::as_str).collect();
        // Coded with room for all of them; then a batch of the last one alone, under a
        // codec of 64 codes, must not get code 99 from the map of short strings.
        assert!(codes_of_views(&dict, &column(&names), u64::MAX).is_some());
        assert_eq!(codes_of_views(&dict, &column(&["k99"]), 64), None);
        assert_eq!(codes_of_views(&dict, &column(&["k3"]), 64), Some(vec![3]));
    }

    #[test]
    fn workers_coding_at_once_give_each_value_one_code() {
        let dict = Dictionary::new();
        let strings: Vec<String> = (0..20_000)
            .map(|i| match i % 4 {
                3 => format!("a string past twelve bytes {}", i % 700),
                _ => format!("id{:06}", i % 5000),
            })
            .collect();
        let chunks: Vec<Vec<&str>> = strings
            .chunks(1500)
            .map(|c| c.iter().map(String::as_str).collect())
            .collect();
        let codes: Vec<Vec<u32>> = std::thread::scope(|scope| {
            let handles: Vec<_> = chunks
                .iter()
                .map(|c| scope.spawn(|| codes_of_views(&dict, &column(c), u64::MAX).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let codes: Vec<u32> = codes.into_iter().flatten().collect();
        let mut first: std::collections::HashMap<&str, u32> = Default::default();
        for (s, &c) in strings.iter().zip(&codes) {
            assert_eq!(*first.entry(s).or_insert(c), c, "{s}");
        }
        assert_eq!(dict.len(), first.len());
        let mut distinct: Vec<u32> = first.values().copied().collect();
        distinct.sort_unstable();
        assert_eq!(distinct, (0..first.len() as u32).collect::<Vec<_>>());
    }

    #[test]
    fn a_sharded_dictionary_codes_views_through_its_bytes() {
        let dict = Dictionary::sharded();
        let many: Vec<String> = (0..3000).map(|i| format!("{i:x}")).collect();
        let names: Vec<&str> = many.iter().map(String::as_str).collect();
        let first = codes_of_views(&dict, &column(&names), u64::MAX).unwrap();
        let direct: Vec<u32> = dict
            .encode(names.iter().map(|s| Some(s.as_bytes())), u64::MAX)
            .unwrap()
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert_eq!(first, direct);
        assert_eq!(dict.len(), 3000);
    }
}

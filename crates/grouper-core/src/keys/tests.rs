//! Tests of key codecs: plans bounded by statistics, and room reserved in a dictionary.

use arrow::array::{DictionaryArray, Int32Array, StringArray, StringViewArray};
use arrow::datatypes::Int32Type;

use super::*;

/// Room reserved in a string column's dictionary widens the codec's domain by it, keeps
/// the codes already given, and takes values up to it; with two string columns (whose
/// share of the room is unknown), room already there or a domain past the bound, nothing
/// changes.
#[test]
fn dictionary_room_takes_values_up_to_it() {
    let types = [DataType::Int32, DataType::Utf8];
    let ints: ArrayRef = Arc::new(Int32Array::from(vec![0, 1, 2]));
    let strings: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c"]));
    let codec = KeyCodec::plan(&types, &[&[Arc::clone(&ints), Arc::clone(&strings)]]).unwrap();
    let capacity = codec.dictionary_capacity(1).unwrap();
    assert!(codec
        .with_dictionary_room(capacity, u64::MAX)
        .unwrap()
        .is_none());
    let roomy = codec.with_dictionary_room(1000, u64::MAX).unwrap().unwrap();
    assert_eq!(roomy.dictionary_capacity(1), Some(1000));
    assert_eq!(roomy.domain(), codec.domain() / capacity * 1000);
    assert_eq!(
        roomy.dictionary_codes(1, &strings).unwrap(),
        codec.dictionary_codes(1, &strings).unwrap()
    );
    let many: Vec<String> = (0..900).map(|i| format!("s{i}")).collect();
    let many: ArrayRef = Arc::new(StringArray::from(many));
    assert!(codec.dictionary_codes(1, &many).unwrap().is_none());
    let codes = roomy.dictionary_codes(1, &many).unwrap().unwrap();
    assert!(codes.iter().all(|&c| c < 1000));
    let two = KeyCodec::plan(
        &[DataType::Utf8, DataType::Utf8],
        &[&[Arc::clone(&strings), Arc::clone(&strings)]],
    )
    .unwrap();
    assert!(two.with_dictionary_room(1000, u64::MAX).unwrap().is_none());
    // Room whose domain passes the bound (the planner's projection) is not taken: the
    // integer key multiplies it.
    assert!(codec
        .with_dictionary_room(1000, roomy.domain() - 1)
        .unwrap()
        .is_none());
}

/// A codec planned from statistics covers exactly what they say: ordinal keys within
/// their bounds, NULLs only where allowed, string keys up to their dictionary's room.
#[test]
fn bounded_plans_cover_their_bounds_only() {
    let types = [DataType::Int32, DataType::Utf8];
    let sample: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c"]));
    let ints: ArrayRef = Arc::new(Int32Array::from(vec![10, 12, 20]));
    let codec = KeyCodec::plan_bounded(
        &types,
        &[Some((10, 20)), None],
        &[false, true],
        &[&[Arc::clone(&ints), Arc::clone(&sample)]],
    )
    .unwrap();
    // 11 integers, then 8 codes (3 seen, room doubled to a power of two) and NULL's.
    assert_eq!(codec.domain(), 11 * 9);
    assert_eq!(codec.dictionary_capacity(1), Some(8));
    assert!(codec.covers(0, &ints));
    let outside: ArrayRef = Arc::new(Int32Array::from(vec![9, 15]));
    let null: ArrayRef = Arc::new(Int32Array::from(vec![Some(11), None]));
    assert!(!codec.covers(0, &outside));
    assert!(!codec.covers(0, &null));
    let five_more: ArrayRef = Arc::new(StringArray::from(vec!["d", "e", "f", "g", "h"]));
    assert!(codec.dictionary_codes(1, &five_more).unwrap().is_some());
    let ninth: ArrayRef = Arc::new(StringArray::from(vec!["i"]));
    assert!(codec.dictionary_codes(1, &ninth).unwrap().is_none());
    // An ordinal key without bounds cannot be planned ahead.
    assert!(KeyCodec::plan_bounded(&types, &[None, None], &[true, true], &[]).is_err());
}

proptest::proptest! {
    /// The string layouts code alike: a key column as Utf8, LargeUtf8 and Utf8View (its
    /// views built over the first's buffer, as the codec does), or dictionary-encoded (its
    /// values coded once) gives one codec the same words,
    /// batch after batch, and the words decode back to the strings: short and long values,
    /// NULLs, values first seen in a later batch.
    #[test]
    fn string_layouts_code_alike(
        batches in proptest::collection::vec(
            proptest::collection::vec(proptest::option::weighted(0.9, 0usize..300), 0..400),
            1..4,
        ),
    ) {
        use arrow::array::LargeStringArray;
        let value = |i: usize| match i % 3 {
            0 => format!("id{i:010}"),
            1 => format!("{i}"),
            _ => format!("a value longer than twelve bytes {i}"),
        };
        let layouts = |b: &[Option<usize>]| -> [ArrayRef; 4] {
            let s: Vec<Option<String>> = b.iter().map(|p| p.map(value)).collect();
            [
                Arc::new(StringArray::from(s.clone())),
                Arc::new(LargeStringArray::from(s.clone())),
                Arc::new(StringViewArray::from(s.clone())),
                // As a Parquet scan reads a column of few values for the fused pipeline.
                Arc::new(s.iter().map(Option::as_deref).collect::<DictionaryArray<Int32Type>>()),
            ]
        };
        let first = layouts(&batches[0]);
        let codecs: Vec<KeyCodec> = (0..4)
            .map(|l| {
                let t = match first[l].data_type() {
                    DataType::Dictionary(..) => DataType::Utf8View,
                    t => t.clone(),
                };
                KeyCodec::plan(&[t], &[&[Arc::clone(&first[l])]]).unwrap()
            })
            .collect();
        for b in &batches {
            let arrays = layouts(b);
            let mut words = Vec::new();
            for (codec, a) in codecs.iter().zip(&arrays) {
                match codec.encode(std::slice::from_ref(a), a.len()).unwrap() {
                    Some(w) => {
                        let back = codec.decode(&w).unwrap();
                        let back = arrow::compute::cast(&back[0], &DataType::Utf8).unwrap();
                        let want = arrow::compute::cast(a, &DataType::Utf8).unwrap();
                        proptest::prop_assert_eq!(back.as_ref(), want.as_ref());
                        words.push(Some(w));
                    }
                    // A dictionary past its capacity: every layout must say so alike.
                    None => words.push(None),
                }
            }
            proptest::prop_assert_eq!(&words[0], &words[1]);
            proptest::prop_assert_eq!(&words[0], &words[2]);
            proptest::prop_assert_eq!(&words[0], &words[3]);
        }
    }
}

proptest::proptest! {
    /// Flags (strings of at most one byte) beside an integer key pack into the same words
    /// whether the flag column is Utf8 (coded through the views built over it), Utf8View (each
    /// row's term added in one pass) or dictionary-encoded (a term per value, added by key),
    /// batch after batch, with or without NULLs, and decode back to the flags.
    #[test]
    fn flag_layouts_pack_alike(
        batches in proptest::collection::vec(
            (proptest::collection::vec((0usize..5, 0i32..7), 1..300), proptest::option::of(0usize..300)),
            1..4,
        ),
    ) {
        let flags = ["", "\0", "A", "N", "R"];
        let layouts = |b: &[(usize, i32)], null: Option<usize>| -> [ArrayRef; 3] {
            let s: Vec<Option<&str>> = b
                .iter()
                .enumerate()
                .map(|(r, &(f, _))| (Some(r) != null).then_some(flags[f]))
                .collect();
            [
                Arc::new(StringArray::from(s.clone())),
                Arc::new(StringViewArray::from(s.clone())),
                Arc::new(s.into_iter().collect::<DictionaryArray<Int32Type>>()),
            ]
        };
        let ints = |b: &[(usize, i32)]| -> ArrayRef {
            Arc::new(Int32Array::from_iter_values(b.iter().map(|&(_, i)| i)))
        };
        let (first, null) = &batches[0];
        let first_flags = layouts(first, *null);
        let codecs: Vec<KeyCodec> = first_flags
            .iter()
            .map(|f| {
                let t = match f.data_type() {
                    DataType::Dictionary(..) => DataType::Utf8View,
                    t => t.clone(),
                };
                KeyCodec::plan(&[DataType::Int32, t], &[&[ints(first), Arc::clone(f)]]).unwrap()
            })
            .collect();
        for (b, null) in &batches {
            let mut words = Vec::new();
            for (codec, f) in codecs.iter().zip(layouts(b, *null)) {
                let keys = [ints(b), Arc::clone(&f)];
                let w = codec.encode(&keys, b.len()).unwrap();
                if let Some(w) = &w {
                    let back = codec.decode(w).unwrap();
                    let back = arrow::compute::cast(&back[1], &DataType::Utf8).unwrap();
                    let want = arrow::compute::cast(&f, &DataType::Utf8).unwrap();
                    proptest::prop_assert_eq!(back.as_ref(), want.as_ref());
                }
                words.push(w);
            }
            proptest::prop_assert_eq!(&words[0], &words[1]);
            proptest::prop_assert_eq!(&words[0], &words[2]);
        }
    }
}

/// Keys whose domain passes 2^64 but splits into two packed words are interned as 16 bytes a
/// row, and decode to themselves, NULLs included; a column that alone spans 2^64 values and
/// a NULL leaves no split, and the rows stay `arrow-row`'s.
#[test]
fn two_word_keys_intern_sixteen_bytes_and_decode_to_themselves() {
    use arrow::array::{Int64Array, UInt64Array};
    let types = [DataType::UInt64, DataType::Utf8, DataType::Int64];
    let wide: ArrayRef = Arc::new(UInt64Array::from(vec![0, u64::MAX, 7, u64::MAX]));
    let strings: ArrayRef = Arc::new(StringArray::from(vec![Some("a"), None, Some("b"), None]));
    let ints: ArrayRef = Arc::new(Int64Array::from(vec![
        Some(-5),
        Some(1 << 40),
        None,
        Some(-5),
    ]));
    let keys = [wide, strings, ints];
    let codec = KeyCodec::plan_open(&types, &[&keys], 4).unwrap();
    let rows = codec.rows(&keys, 4).unwrap();
    assert!(matches!(rows, KeyRows::Fixed(_)));
    assert_eq!(rows.row(1).len(), 16);
    let words = codec.encode(&keys, 4).unwrap().unwrap();
    let codec = codec.sealed();
    let decoded = codec.decode(&words).unwrap();
    for (d, k) in decoded.iter().zip(&keys) {
        assert_eq!(d.as_ref(), k.as_ref());
    }
    let with_null: ArrayRef = Arc::new(UInt64Array::from(vec![
        Some(0),
        Some(u64::MAX),
        None,
        Some(1),
    ]));
    let keys = [with_null, Arc::clone(&keys[1]), Arc::clone(&keys[2])];
    let codec = KeyCodec::plan_open(&types, &[&keys], 4).unwrap();
    assert!(matches!(codec.rows(&keys, 4).unwrap(), KeyRows::Arrow(_)));
    let words = codec.encode(&keys, 4).unwrap().unwrap();
    let decoded = codec.sealed().decode(&words).unwrap();
    for (d, k) in decoded.iter().zip(&keys) {
        assert_eq!(d.as_ref(), k.as_ref());
    }
}

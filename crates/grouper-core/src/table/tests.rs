//! Every scheme under both bucket mappings against a `HashMap` of first appearances.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::hash::HashFn;

/// A table's name and its `find_or_insert`.
type Named = (String, Box<dyn FnMut(u64) -> u32>);

/// One table of each scheme and mapping behind one interface, for the tests.
fn tables(groups: usize, hash: HashFn, fill: f64) -> Vec<Named> {
    fn boxed<T: 'static>(name: String, mut t: T, f: fn(&mut T, u64) -> u32) -> Named {
        (name, Box::new(move |k| f(&mut t, k)))
    }
    macro_rules! both {
        ($out:ident, $name:literal, $ty:ident $(<$d:literal>)?) => {
            $out.push(boxed(
                format!("{}/high_bits", $name),
                $ty::<$($d,)? ByHighBits>::new(groups, hash, fill),
                $ty::<$($d,)? ByHighBits>::find_or_insert,
            ));
            $out.push(boxed(
                format!("{}/modulo", $name),
                $ty::<$($d,)? ByModulo>::new(groups, hash, fill),
                $ty::<$($d,)? ByModulo>::find_or_insert,
            ));
        };
    }
    let mut out = Vec::new();
    out.push(boxed(
        "linear/high_bits".into(),
        LinearTable::<ByHighBits>::with_buckets(groups, hash, fill),
        LinearTable::<ByHighBits>::find_or_insert,
    ));
    out.push(boxed(
        "linear/modulo".into(),
        LinearTable::<ByModulo>::with_buckets(groups, hash, fill),
        LinearTable::<ByModulo>::find_or_insert,
    ));
    both!(out, "chained", ChainedTable);
    both!(out, "chained_plus", ChainedPlusTable);
    both!(out, "cuckoo2", CuckooTable<2>);
    both!(out, "cuckoo4", CuckooTable<4>);
    out
}

fn hash_fn() -> impl Strategy<Value = HashFn> {
    prop_oneof![
        Just(HashFn::Murmur3),
        Just(HashFn::MultiplyShift),
        any::<u64>().prop_map(HashFn::random_multiply_shift),
        Just(HashFn::Fnv1a),
        Just(HashFn::Identity),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Ids are dense, in order of first appearance, and stable through growth and rebuilds,
    /// whatever the scheme, mapping, hash, load and key spread (dense, scattered, repeated).
    #[test]
    fn every_scheme_assigns_first_appearance_ids(
        words in prop::collection::vec(prop_oneof![0u64..64, 0u64..5000, any::<u64>()], 0..3000),
        planned in 1usize..3000,
        fill in prop_oneof![Just(0.25), Just(0.5), Just(0.7), Just(0.9)],
        hash in hash_fn(),
    ) {
        let mut expected = HashMap::new();
        let ids: Vec<u32> = words
            .iter()
            .map(|&w| {
                let n = expected.len() as u32;
                *expected.entry(w).or_insert(n)
            })
            .collect();
        for (name, mut find) in tables(planned, hash, fill) {
            for (i, &w) in words.iter().enumerate() {
                prop_assert_eq!(find(w), ids[i], "{} {} row {}", name, hash, i);
            }
            // And again, all present now.
            for (i, &w) in words.iter().enumerate().rev() {
                prop_assert_eq!(find(w), ids[i], "{} {} again", name, hash);
            }
        }
    }
}

#[test]
fn tables_keep_the_keys_by_group_id() {
    let words: Vec<u64> = (0..20_000u64)
        .map(|k| k.wrapping_mul(0x9e37_79b9))
        .collect();
    let mut gids = Vec::new();
    let mut c = ChainedTable::<ByHighBits>::new(1, HashFn::Murmur3, 0.5);
    c.map(&words, &mut gids);
    assert_eq!(c.keys(), &words[..]);
    let mut p = ChainedPlusTable::<ByModulo>::new(1, HashFn::Fnv1a, 0.9);
    p.map(&words, &mut gids);
    assert_eq!(p.into_keys(), words);
    let mut k = CuckooTable::<4>::new(1, HashFn::MultiplyShift, 0.5);
    k.map(&words, &mut gids);
    assert_eq!(gids, (0..20_000).collect::<Vec<u32>>());
    assert_eq!(k.len(), 20_000);
    assert!(k.memory_bytes() >= 20_000 * 16);
}

#[test]
fn a_full_two_table_cuckoo_rebuilds_where_four_tables_need_not() {
    // Luan: Cuckoo2 fails from about 35-50% load, Cuckoo4 holds up to ~90%. At 0.9 both grow
    // at the fill factor; failures past it count as rebuilds.
    let words: Vec<u64> = (0..50_000u64)
        .map(|k| k.wrapping_mul(0xd6e8_feb8_6659_fd93))
        .collect();
    let mut gids = Vec::new();
    let mut two = CuckooTable::<2>::new(words.len(), HashFn::Murmur3, 0.9);
    two.map(&words, &mut gids);
    let mut four = CuckooTable::<4>::new(words.len(), HashFn::Murmur3, 0.9);
    four.map(&words, &mut gids);
    assert!(two.rebuilds() > 0, "cuckoo2 at 90% load");
    assert!(four.rebuilds() <= two.rebuilds());
    assert_eq!(two.keys(), four.keys());
}

#[test]
fn modulo_tables_take_any_size_and_high_bits_tables_powers_of_two() {
    assert_eq!(ByModulo::capacity_for(1000, 0.5), 2000);
    assert_eq!(ByHighBits::capacity_for(1000, 0.5), 2048);
    let m = ByModulo::with_capacity(2000);
    assert_eq!(m.bucket(2001), 1);
    assert_eq!(m.next(1999), 0);
    let h = ByHighBits::with_capacity(16);
    assert_eq!(h.bucket(u64::MAX), 15);
    assert_eq!(h.next(15), 0);
}

#[test]
fn scheme_and_mapping_names_round_trip() {
    for p in Probing::ALL {
        assert_eq!(p.name().parse::<Probing>().unwrap(), p);
    }
    for m in BucketMap::ALL {
        assert_eq!(m.name().parse::<BucketMap>().unwrap(), m);
    }
    let e = "robin_hood".parse::<Probing>().unwrap_err().to_string();
    assert!(e.contains("cuckoo4"), "{e}");
    assert!("prime".parse::<BucketMap>().is_err());
}

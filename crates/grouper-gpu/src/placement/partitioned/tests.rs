//! Unit tests of the partitioned placement: row storage, buffer layout, key ranges.

use super::*;
use arrow::datatypes::DataType;
use grouper_core::agg::layout::Layout;
use grouper_core::agg::{AggKind, AggregateSpec};

#[test]
fn scatter_tiles_take_2048_rows_within_the_registers() {
    let spec = |sums: usize| {
        let mut aggs = vec![AggregateSpec::count_star()];
        aggs.extend((0..sums).map(|_| AggregateSpec::new(AggKind::Sum, DataType::Float64)));
        KernelSpec {
            layout: Layout::new(&aggs).unwrap(),
            ..crate::codegen::tests::spec(crate::GpuStrategy::HASH_PARTITIONED, 1)
        }
    };
    // One key word, one input, the mask (the spec's last argument may be NULL): 3 words.
    assert_eq!(row_words(&spec(1)), 3);
    // Arguments never NULL: no mask word.
    let never_null = KernelSpec {
        non_null_args: vec![true; spec(1).args.len()],
        ..spec(1)
    };
    assert_eq!(row_words(&never_null), 2);
    assert!(crate::codegen::generate(&never_null).contains("#define MASKW 0"));
    assert_eq!(tile_items(&spec(1), 256), 8);
    assert_eq!(tile_items(&spec(1), 1024), 2);
    assert_eq!(tile_items(&spec(1), 128), 16);
    // Forty sums at 1024 threads (64 registers a thread): one row a thread.
    assert_eq!(tile_items(&spec(40), 1024), 1);
    // At 256 threads a thread has 255: two rows of 44 words.
    assert_eq!(tile_items(&spec(40), 256), 2);
}

/// `SUM(v), COUNT(*)` of an f32 `v` (as DataFusion plans it: a cast to double) by one u32
/// key: a direct table's row is the key and the float, 8 bytes; a hash table's keeps the
/// key word whole, 12; a `v` that may be NULL adds the mask's half.
#[test]
fn rows_keep_narrow_words_in_halves() {
    use grouper_core::expr::Expr;
    use grouper_core::keys::{PackedColumn, PackedKind};
    let aggs = [
        AggregateSpec::new(AggKind::Sum, DataType::Float64),
        AggregateSpec::count_star(),
    ];
    let v = Expr::Cast {
        expr: Box::new(Expr::column(1, DataType::Float32)),
        to: DataType::Float64,
    };
    let key = PackedColumn {
        data_type: DataType::UInt32,
        kind: PackedKind::Ordinal { min: 0 },
        nulls: false,
        mult: 1,
    };
    let direct = KernelSpec {
        columns: vec![Some(DataType::UInt32), Some(DataType::Float32)],
        nullable: vec![false, false],
        encodings: vec![],
        filter: None,
        key_words: vec![vec![(0, key)]],
        args: vec![Some(v), None],
        non_null_args: vec![true, true],
        layout: Layout::new(&aggs).unwrap(),
        domain: 1 << 24,
        copies: 1,
        ..crate::codegen::tests::spec(crate::GpuStrategy::PERFECT_PARTITIONED, 1)
    };
    assert_eq!(row_halves(&direct), 2);
    assert_eq!(buffer_words(&direct, 1000), HEAD_WORDS + 1000);
    // In five key ranges the rows are split by range into a second head and rows, after
    // the first on a 64-byte line; in four each range rereads them.
    let ranged = KernelSpec {
        copies: 5,
        ..direct.clone()
    };
    let four = KernelSpec {
        copies: 4,
        ..direct.clone()
    };
    assert!(splits(&ranged) && !splits(&direct) && !splits(&four));
    assert_eq!(buffer_words(&four, 1000), buffer_words(&direct, 1000));
    assert_eq!(
        split_at(&ranged, 1001),
        (HEAD_WORDS + 1001).next_multiple_of(8)
    );
    assert_eq!(buffer_words(&ranged, 1001), 2 * split_at(&ranged, 1001));
    assert!(crate::codegen::generate(&ranged).contains("#define SPLIT 1"));
    assert!(crate::codegen::generate(&direct).contains("#define SPLIT 0"));
    let code = crate::codegen::generate(&direct);
    assert!(code.contains("#define RH 2ULL"));
    assert!(code.contains("r[0] = (unsigned)(key[0]);"), "{code}");
    assert!(code.contains("in[0] = (u64)__double_as_longlong((double)__uint_as_float(r[1]));"));
    let hashed = KernelSpec {
        strategy: crate::GpuStrategy::HASH_PARTITIONED,
        ..direct.clone()
    };
    assert_eq!(row_halves(&hashed), 3);
    assert_eq!(
        buffer_words(&hashed, 1001),
        (HEAD_WORDS + 1502).next_multiple_of(8)
    );
    let nullable = KernelSpec {
        non_null_args: vec![false, true],
        ..hashed
    };
    assert_eq!(row_halves(&nullable), 4);
    assert!(crate::codegen::generate(&nullable).contains("*maskp = (u64)r[3];"));
}

#[test]
fn a_direct_tables_partition_is_its_keys_top_eight_bits() {
    // 2^20 slots: keys below 2^20, shifted by 12, give 0..=255.
    assert_eq!(direct_shift(1 << 20), 12);
    assert_eq!((((1u64 << 20) - 1) >> direct_shift(1 << 20)), 255);
    // A domain not a power of two rounds up: the top key still lands below 256.
    let cap = 1_000_000u64;
    assert!((cap - 1) >> direct_shift(cap) < PARTS);
    assert!((cap - 1) >> direct_shift(cap) >= PARTS / 2);
    // Small tables: no shift, a partition per slot.
    assert_eq!(direct_shift(256), 0);
    assert_eq!(direct_shift(100), 0);
    assert_eq!(direct_shift(1), 0);
}

//! Code generation without a GPU: the generated source's shape, and its validity as C++.
//!
//! The generated source is checked as C++ by the host compiler against a small CUDA shim
//! (declarations only), so syntax and type errors show up without a GPU; NVRTC compiles
//! and runs the same sources in the device tests.

use super::*;
use crate::encode::{Encoding, Scheme};
use crate::strategy::{BucketMap, Probing};
use crate::GpuStrategy;
use grouper_core::agg::{pair_type, AggKind, AggregateSpec};
use grouper_core::expr::Expr;
use grouper_core::expr::{BinOp, Scalar};
use grouper_core::hash::HashFn;
use grouper_core::keys::PackedColumn;

const SHIM: &str = r#"
#define __device__
#define __global__
#define __forceinline__ inline
#define __shared__
#define __launch_bounds__(x)
#define __restrict__
struct Dim { unsigned x, y, z; };
static Dim threadIdx, blockIdx, blockDim, gridDim;
unsigned long long atomicAdd(unsigned long long*, unsigned long long);
unsigned atomicAdd(unsigned*, unsigned);
double atomicAdd(double*, double);
unsigned long long atomicCAS(unsigned long long*, unsigned long long, unsigned long long);
unsigned atomicCAS(unsigned*, unsigned, unsigned);
long long atomicMin(long long*, long long);
long long atomicMax(long long*, long long);
unsigned long long atomicMin(unsigned long long*, unsigned long long);
unsigned long long atomicMax(unsigned long long*, unsigned long long);
unsigned long long atomicOr(unsigned long long*, unsigned long long);
unsigned long long atomicExch(unsigned long long*, unsigned long long);
unsigned atomicExch(unsigned*, unsigned);
void __syncthreads();
void __threadfence();
long long __double_as_longlong(double);
double __longlong_as_double(long long);
int __float_as_int(float);
float __int_as_float(int);
unsigned __float_as_uint(float);
float __uint_as_float(unsigned);
int __clzll(long long);
unsigned long long __umul64hi(unsigned long long, unsigned long long);
unsigned long long __brevll(unsigned long long);
unsigned long long __ldg(const unsigned long long*);
unsigned long long __shfl_down_sync(unsigned, unsigned long long, int);
unsigned long long __shfl_up_sync(unsigned, unsigned long long, unsigned);
"#;

/// A spec reading every kind of column and aggregate (other tests take it and change a part).
pub(crate) fn spec(strategy: GpuStrategy, key_words: usize) -> KernelSpec {
    let dec = DataType::Decimal128(15, 2);
    let aggs = vec![
        AggregateSpec::count_star(),
        AggregateSpec::new(AggKind::Sum, DataType::Decimal128(32, 4)),
        AggregateSpec::new(AggKind::Avg, DataType::Float64),
        AggregateSpec::new(AggKind::Min, DataType::Float32),
        AggregateSpec::new(AggKind::Max, DataType::Int64),
        AggregateSpec::new(AggKind::Sum, DataType::UInt64),
        AggregateSpec::new(AggKind::Count, DataType::Boolean),
        AggregateSpec::new(AggKind::Max, DataType::Decimal128(38, 2)),
        AggregateSpec::new(AggKind::Corr, pair_type()),
    ];
    let col = |i: usize, t: DataType| Box::new(Expr::column(i, t));
    let one_minus = Expr::Binary {
        op: BinOp::Sub,
        left: Box::new(Expr::Literal {
            value: Scalar::Int(100),
            data_type: DataType::Decimal128(15, 2),
        }),
        right: col(1, dec.clone()),
        data_type: DataType::Decimal128(16, 2),
    };
    let args = vec![
        None,
        Some(Expr::Binary {
            op: BinOp::Mul,
            left: col(1, dec.clone()),
            right: Box::new(one_minus),
            data_type: DataType::Decimal128(32, 4),
        }),
        Some(Expr::Cast {
            expr: col(2, DataType::Int32),
            to: DataType::Float64,
        }),
        Some(Expr::column(3, DataType::Float32)),
        Some(Expr::Case {
            whens: vec![(
                Expr::IsNull {
                    expr: col(2, DataType::Int32),
                    negated: false,
                },
                Expr::Literal {
                    value: Scalar::Int(-1),
                    data_type: DataType::Int64,
                },
            )],
            otherwise: Some(Box::new(Expr::Binary {
                op: BinOp::Div,
                left: Box::new(Expr::Cast {
                    expr: col(2, DataType::Int32),
                    to: DataType::Int64,
                }),
                right: Box::new(Expr::Literal {
                    value: Scalar::Int(3),
                    data_type: DataType::Int64,
                }),
                data_type: DataType::Int64,
            })),
            data_type: DataType::Int64,
        }),
        Some(Expr::column(5, DataType::UInt64)),
        Some(Expr::column(4, DataType::Boolean)),
        Some(Expr::Cast {
            expr: col(1, dec.clone()),
            to: DataType::Decimal128(38, 2),
        }),
        Some(Expr::Tuple(vec![
            Expr::Cast {
                expr: col(2, DataType::Int32),
                to: DataType::Float64,
            },
            Expr::Cast {
                expr: col(3, DataType::Float32),
                to: DataType::Float64,
            },
        ])),
    ];
    let filter = Expr::Binary {
        op: BinOp::And,
        left: Box::new(Expr::Binary {
            op: BinOp::LtEq,
            left: col(6, DataType::Date32),
            right: Box::new(Expr::Literal {
                value: Scalar::Int(10471),
                data_type: DataType::Date32,
            }),
            data_type: DataType::Boolean,
        }),
        right: Box::new(Expr::Not(Box::new(Expr::column(4, DataType::Boolean)))),
        data_type: DataType::Boolean,
    };
    let key = |c: usize, kind: PackedKind, mult: u64| {
        (
            c,
            PackedColumn {
                data_type: DataType::UInt32,
                kind,
                nulls: true,
                mult,
            },
        )
    };
    let mut words = vec![vec![
        key(0, PackedKind::Dictionary, 1),
        key(7, PackedKind::Ordinal { min: -5 }, 4),
    ]];
    if key_words > 1 {
        words.push(vec![key(4, PackedKind::Bool, 1)]);
    }
    let mut columns: Vec<Option<DataType>> = vec![
        Some(DataType::UInt32),
        Some(dec),
        Some(DataType::Int32),
        Some(DataType::Float32),
        Some(DataType::Boolean),
        Some(DataType::UInt64),
        Some(DataType::Date32),
        Some(DataType::Int16),
    ];
    columns[7] = Some(DataType::Int16);
    // Every transfer encoding's decode: dictionary codes bit-packed, a decimal dictionary, a
    // frame of reference, a float dictionary, a wide base, a constant.
    let packed = |scheme, bits, base: i128, dictionary: Vec<u64>| {
        Some(Encoding {
            scheme,
            bits,
            base,
            dictionary,
        })
    };
    let encodings = vec![
        packed(Scheme::NullSuppression, 3, 0, vec![]),
        packed(
            Scheme::Dictionary,
            6,
            0,
            (1..=50).map(|v| v * 100).collect(),
        ),
        packed(Scheme::FrameOfReference, 12, -8036, vec![]),
        packed(Scheme::Dictionary, 1, 0, vec![0.5f32.to_bits() as u64, 0]),
        None,
        packed(Scheme::FrameOfReference, 40, 1i128 << 70, vec![]),
        packed(Scheme::FrameOfReference, 0, 8036, vec![]),
        Some(Encoding::plain(&DataType::Int16)),
    ];
    KernelSpec {
        columns,
        encodings,
        // Both forms of column read: with and without a validity bitmap.
        nullable: (0..8).map(|c| c % 2 == 0).collect(),
        filter: Some(filter),
        key_words: words,
        // CORR's count in the kernel (its pair may be NULL), the others' derived from rows.
        non_null_args: (0..args.len()).map(|a| a + 1 < args.len()).collect(),
        args,
        layout: Layout::new(&aggs).unwrap(),
        strategy,
        threads: 128,
        items_per_thread: 2,
        hash: HashFn::Murmur3,
        probing: Probing::Linear,
        buckets: BucketMap::HighBits,
        domain: 6,
        copies: 4,
        local_slots: 256,
        fill_factor: 0.5,
    }
}

#[test]
fn counts_of_non_null_arguments_are_derived_from_rows() {
    let layout = Layout::new(&[
        AggregateSpec::new(AggKind::Count, DataType::Int64),
        AggregateSpec::new(AggKind::Avg, DataType::Float64),
        AggregateSpec::new(AggKind::Sum, DataType::Int64),
    ])
    .unwrap();
    // rows | count | avg sum, avg count | sum lo, sum hi, seen
    let mut cols: Vec<Vec<u64>> = vec![
        vec![0, 3],
        vec![0, 0],
        vec![0, 9],
        vec![0, 0],
        vec![0, 7],
        vec![0, 0],
        vec![0, 0],
    ];
    derive_counts(&layout, &[true, true, false], &mut cols);
    assert_eq!(cols[1], vec![0, 3]); // COUNT(x) = rows
    assert_eq!(cols[3], vec![0, 3]); // AVG's count = rows
    assert_eq!(cols[6], vec![0, 0]); // SUM's argument may be NULL: its flag is the kernel's
    derive_counts(&layout, &[false, false, true], &mut cols);
    assert_eq!(cols[6], vec![0, 1]); // seen = rows > 0
    let src = update_merge(&layout, &[true, true, true]);
    assert!(!src.contains("op_seen<A>(w +"), "{src}");
}

#[test]
fn a_pair_feeds_its_parts_and_products_to_corr() {
    let src = generate(&spec(GpuStrategy::GLOBAL, 1));
    let corr = src
        .split("u64 mask = 0;")
        .nth(1)
        .and_then(|s| s.split("*maskp").next())
        .unwrap();
    // NULL where either part is; x, y, xy, x², y² in the layout's order after the count.
    assert!(corr.contains("_ok && "), "{corr}");
    let products = corr.matches(") * ((double)(").count();
    assert_eq!(products, 3, "{corr}");
    let layout = Layout::new(&[AggregateSpec::new(AggKind::Corr, pair_type())]).unwrap();
    let src = update_merge(&layout, &[false]);
    assert_eq!(src.matches("op_addf<A>(w +").count(), 5, "{src}");
    assert_eq!(
        src.matches("op_cnt<A, S>(w + (N ? 0 : 1)").count(),
        1,
        "{src}"
    );
}

/// Every strategy's kernel for the spec above, with one and two key words where the strategy
/// takes them, and its name.
fn every_generated_kernel() -> Vec<(String, String)> {
    let mut kernels = Vec::new();
    for strategy in GpuStrategy::ALL {
        for key_words in [1, 2] {
            if strategy.is_perfect() && key_words > 1 {
                continue;
            }
            let name = format!("{}_{key_words}", strategy.name());
            kernels.push((name, generate(&spec(strategy, key_words))));
        }
    }
    // The hashing schemes (`codegen/probing`): chained global tables under each hashed
    // placement, cuckoo private tables, with one and two key words.
    // The modulo bucket mapping of the global table, linear and chained.
    for (strategy, probing) in [
        (GpuStrategy::GLOBAL, Probing::Linear),
        (GpuStrategy::BLOCK_LOCAL, Probing::Chained),
        (GpuStrategy::SORTED, Probing::ChainedPlus),
    ] {
        let spec = KernelSpec {
            probing,
            buckets: BucketMap::Modulo,
            ..spec(strategy, 2)
        };
        let src = generate(&spec);
        assert!(src.contains("#define GMAP MOD"), "{}", strategy.name());
        kernels.push((format!("{}_{probing}_modulo", strategy.name()), src));
    }
    for probing in [
        Probing::Chained,
        Probing::ChainedPlus,
        Probing::Cuckoo2,
        Probing::Cuckoo4,
    ] {
        for strategy in GpuStrategy::ALL.into_iter().filter(|s| !s.is_perfect()) {
            let cuckoo = matches!(probing, Probing::Cuckoo2 | Probing::Cuckoo4);
            if cuckoo && strategy != GpuStrategy::THREAD_PRIVATE {
                continue;
            }
            for key_words in [1, 2] {
                let spec = KernelSpec {
                    probing,
                    local_slots: if cuckoo { 64 } else { 256 },
                    ..spec(strategy, key_words)
                };
                let name = format!("{}_{probing}_{key_words}", strategy.name());
                let src = generate(&spec);
                let want = if cuckoo {
                    "find_or_insert_cuckoo("
                } else {
                    "chain_find_or_insert("
                };
                assert!(src.contains(want), "{name}: {want}");
                kernels.push((name, src));
            }
        }
    }
    // The sort-based atomics paper's microbenchmark (`crate::atomics`).
    kernels.push(("atomics".into(), crate::atomics::SOURCE.to_string()));
    // The sweep's query under the partitioned strategies: a count and SUM(CAST(f32 AS DOUBLE))
    // never NULL, so a row is its key and the float in 32-bit halves and no mask
    // (`codegen::stored`), in one key range, in four (each rereads the partition's rows) and
    // in six (the rows split by range first, `part_split`).
    for strategy in [
        GpuStrategy::PERFECT_PARTITIONED,
        GpuStrategy::HASH_PARTITIONED,
    ] {
        for copies in [1, 4, 6] {
            let aggs = [
                AggregateSpec::count_star(),
                AggregateSpec::new(AggKind::Sum, DataType::Float64),
            ];
            let sum = Expr::Cast {
                expr: Box::new(Expr::column(3, DataType::Float32)),
                to: DataType::Float64,
            };
            let narrow = KernelSpec {
                args: vec![None, Some(sum)],
                non_null_args: vec![true, true],
                layout: Layout::new(&aggs).unwrap(),
                filter: None,
                copies,
                ..spec(strategy, 1)
            };
            let name = format!("{}_narrow_{copies}", strategy.name());
            let src = generate(&narrow);
            let split = format!("#define SPLIT {}", u8::from(copies > 4));
            assert!(src.contains(&split), "{name}: {split}");
            kernels.push((name, src));
        }
    }
    kernels
}

#[test]
fn generated_kernels_are_valid_cpp() {
    let Ok(out) = std::process::Command::new("g++").arg("--version").output() else {
        eprintln!("g++ not found: skipping the host syntax check of generated kernels");
        return;
    };
    assert!(out.status.success());
    let dir = std::env::temp_dir().join(format!("grouper-codegen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("shim.h"), SHIM).unwrap();
    for (name, src) in every_generated_kernel() {
        let file = dir.join(format!("{name}.cu"));
        std::fs::write(&file, &src).unwrap();
        let out = std::process::Command::new("g++")
            .args([
                "-std=c++17",
                "-fsyntax-only",
                "-Wno-unknown-pragmas",
                "-x",
                "c++",
                "-include",
            ])
            .arg(dir.join("shim.h"))
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    if std::env::var_os("GROUPER_KEEP_KERNELS").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Every generated kernel through NVRTC to sm_90 machine code, as a GPU machine compiles it
/// (the CUDA front end and the assembler: what the g++ check above cannot see, such as device
/// intrinsics' signatures and shared-memory limits), on a machine without a GPU. Needs NVRTC,
/// which cudarc loads at run time; `scripts/nvrtc-check.sh` fetches it from the package
/// registry and runs this test.
#[test]
#[ignore = "needs NVRTC: scripts/nvrtc-check.sh"]
fn generated_kernels_compile_with_nvrtc() {
    // GROUPER_CUBIN_DIR: each CUBIN is also written there, named by its kernel, so that
    // `scripts/cubin-diff.sh` can show a change to the generator leaves the machine code as it
    // was (a refactor checked without a GPU).
    let dir = std::env::var_os("GROUPER_CUBIN_DIR").map(std::path::PathBuf::from);
    for (name, src) in every_generated_kernel() {
        match crate::compile::nvrtc(&src, "sm_90") {
            Ok(cubin) => {
                assert!(cubin.starts_with(b"\x7fELF"), "{name}: not a CUBIN");
                if let Some(dir) = &dir {
                    let file: String = name
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                        .collect();
                    std::fs::create_dir_all(dir).unwrap();
                    std::fs::write(dir.join(file + ".cubin"), cubin).unwrap();
                }
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

/// A narrow table keeps the words its kernel touches: a non-null sum's value word alone (its
/// `seen` word is derived from the row count), a sum that may be NULL its value and `seen`.
#[test]
fn a_narrow_table_keeps_only_the_words_its_kernel_touches() {
    let layout = Layout::new(&[
        AggregateSpec::count_star(),
        AggregateSpec::new(AggKind::Sum, DataType::Float64),
    ])
    .unwrap();
    let sum = &layout.aggs[1].fields;
    let value = sum.iter().find(|f| f.input != Input::One).unwrap().word;
    assert_eq!(narrow_words(&layout, &[true, true]), vec![value]);
    let mut nullable = narrow_words(&layout, &[true, false]);
    nullable.sort_unstable();
    assert_eq!(nullable.len(), 2);
    assert!(nullable.contains(&value) && !nullable.contains(&ROWS_WORD));
    assert!(update_merge(&layout, &[true, true]).contains("#define NW 1\n"));
    // The shared kernel's copies are narrow, started from the kept words' identities.
    let src = generate(&spec(GpuStrategy::PERFECT_SHARED, 1));
    assert!(src.contains("sm[i] = NIDENT[i / SST]"), "{src}");
    assert!(
        src.contains(", true, true>(sm, SST, key[0] * R + mine"),
        "{src}"
    );
}

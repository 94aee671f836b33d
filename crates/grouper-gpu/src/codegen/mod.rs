//! CUDA C generation: one source per query and strategy, compiled by NVRTC.
//!
//! The source composes orthogonal pieces (as cuCollections composes hash, probing and storage):
//!
//! ```text
//!  eval_row     load the columns a row needs, filter, pack key words, compute aggregate inputs
//!               (the fused filter + projection + key packing of Tomé)
//!  update_slot  the aggregate algebra's update, one op per state word (layout.rs)
//!  merge_slot   its merge, the same ops on another state's words
//!  find_or_insert  linear probing with CAS (one key word) or a latch on word 0 (several words);
//!                  the global table's global_find_or_insert probes linearly or chains
//!                  (codegen/probing)
//!  agg_rows     the strategy: where the table lives and how a row reaches it
//!  merge_entries / init_table  grow (rehash), merge spilled partial states, initialize
//! ```
//!
//! Tables are structs of arrays of 64-bit words: word `w` of slot `s` is at `base[w * stride + s]`,
//! so one `update_slot` serves registers, interleaved shared memory, private and global tables.
//! A *narrow* table (template flags `N`, `DN`, `SN`; every shared-memory table) keeps only
//! the words the kernel touches ([`narrow_words`]: not the counting words `derive_counts` fills
//! after the read-back), `NW` of them, then its row counts as 32-bit words:
//! `((unsigned*)(base + NW * stride))[s]`. A shared table lives for one launch, which covers
//! fewer than 2^32 rows, so its counts fit. For `COUNT(*), SUM(v)` of a non-null `v` a slot
//! takes 12 bytes instead of 24 (rows, sum, and the sum's untouched `seen` word), so 2^14 groups
//! (192 KiB) fit one SM's shared memory, where 2^13 did.

use std::fmt::Write;

use arrow::datatypes::DataType;

use crate::encode::CUDA_UNPACK;
use crate::expr_cuda::{c_type, Emitter};
use crate::strategy::Placement;
use grouper_core::agg::layout::Layout;
use grouper_core::agg::words::{Input, Op, ROWS_WORD};
use grouper_core::keys::PackedKind;

mod hash;
pub mod probing;
pub mod rows;
pub(crate) mod spec;
pub(crate) mod stored;

pub use spec::KernelSpec;

/// Most device columns one kernel reads (the pointer block is a by-value kernel parameter).
pub const MAX_COLUMNS: usize = 32;

/// Error bit: a spill buffer was too small (never expected; a bug if seen).
pub const ERR_SPILL: u64 = 2;

const PRELUDE: &str = r#"
typedef unsigned long long u64;
typedef long long i64;
#define EMPTY 0xFFFFFFFFFFFFFFFFULL
#define BUSY 0xFFFFFFFFFFFFFFFEULL
struct ColPtrs { const void* p[64]; };
struct Ctrl { u64 groups; u64 overflow; u64 spill; u64 error; };

__device__ __forceinline__ i64 ford64(double v) { i64 b = __double_as_longlong(v); return b ^ (i64)(((u64)(b >> 63)) >> 1); }
__device__ __forceinline__ i64 ford32(float v) { int b = __float_as_int(v); return (i64)(b ^ (int)(((unsigned)(b >> 31)) >> 1)); }
__device__ __forceinline__ bool bit(const unsigned char* p, u64 i) { return (p[i >> 3] >> (i & 7)) & 1; }

template <bool A> __device__ __forceinline__ void op_add(u64* p, u64 v) { if (A) atomicAdd(p, v); else *p += v; }
// Counting (+1) into a word. In a shared-memory table (S) a 64-bit atomic is a CAS loop, a
// 32-bit one is native: count on the word's low half. Exact because a shared table lives for
// one launch, and a launch covers fewer than 2^32 rows (chunks are at most 2^30 rows).
template <bool A, bool S> __device__ __forceinline__ void op_cnt(u64* p) {
  if (A && S) atomicAdd((unsigned*)p, 1u); else op_add<A>(p, 1ULL);
}
template <bool A> __device__ __forceinline__ void op_addf(u64* p, u64 bits) {
  double v = __longlong_as_double(bits);
  if (A) atomicAdd((double*)p, v); else *(double*)p += v;
}
template <bool A, int N> __device__ __forceinline__ void op_wide(u64* p, u64 st, const u64* v) {
  u64 carry = 0;
#pragma unroll
  for (int i = 0; i < N; i++) {
    u64 add = v[i] + carry;
    u64 c1 = add < carry ? 1 : 0;
    u64 c2 = 0;
    if (add != 0) {
      u64 old;
      if (A) old = atomicAdd(p + i * st, add); else { old = p[i * st]; p[i * st] = old + add; }
      c2 = old + add < old ? 1 : 0;
    }
    carry = c1 + c2;
  }
}
template <bool A> __device__ __forceinline__ void op_mini(u64* p, u64 v) { if (A) atomicMin((i64*)p, (i64)v); else if ((i64)v < (i64)*p) *p = v; }
template <bool A> __device__ __forceinline__ void op_maxi(u64* p, u64 v) { if (A) atomicMax((i64*)p, (i64)v); else if ((i64)v > (i64)*p) *p = v; }
template <bool A> __device__ __forceinline__ void op_minu(u64* p, u64 v) { if (A) atomicMin(p, v); else if (v < *p) *p = v; }
template <bool A> __device__ __forceinline__ void op_maxu(u64* p, u64 v) { if (A) atomicMax(p, v); else if (v > *p) *p = v; }
// 128-bit min/max: words low, high, lock. No 128-bit atomics, so under a per-slot latch
// (taken in a loop that each thread leaves once it has held it: no intra-warp deadlock).
template <bool A, bool MAX> __device__ __forceinline__ void op_ext128(u64* p, u64 st, const u64* v) {
  const __int128 x = (__int128)(((unsigned __int128)v[1] << 64) | v[0]);
  if (!A) {
    const __int128 cur = (__int128)(((unsigned __int128)p[st] << 64) | p[0]);
    if (MAX ? x > cur : x < cur) { p[0] = v[0]; p[st] = v[1]; }
    return;
  }
  bool done = false;
  while (!done) {
    if (atomicCAS(p + 2 * st, 0ULL, 1ULL) == 0ULL) {
      volatile u64* q = p;
      const __int128 cur = (__int128)(((unsigned __int128)q[st] << 64) | q[0]);
      if (MAX ? x > cur : x < cur) { q[0] = v[0]; q[st] = v[1]; }
      __threadfence();
      atomicExch(p + 2 * st, 0ULL);
      done = true;
    }
  }
}
template <bool A> __device__ __forceinline__ void op_seen(u64* p) { if (A) { if (*(volatile u64*)p == 0) *(volatile u64*)p = 1; } else *p = 1; }
"#;

/// The whole source.
pub fn generate(spec: &KernelSpec) -> String {
    let mut s = String::with_capacity(16 * 1024);
    let k = spec.key_count();
    let w = spec.layout.words;
    let _ = writeln!(
        s,
        "// grouper generated kernel: strategy {}, {k} key word(s), {w} state words",
        spec.strategy.name()
    );
    s.push_str(PRELUDE);
    // The global table keeps no key words when it is indexed directly by the key.
    let gk = if spec.strategy.is_perfect() { 0 } else { k };
    let _ = writeln!(
        s,
        "#define K {k}\n#define W {w}\n#define GK {gk}\n#define GS (GK + W)\n#define THREADS {}\n#define IPT {}",
        spec.threads, spec.items_per_thread
    );
    let ident: Vec<String> = spec
        .layout
        .identities()
        .iter()
        .map(|v| format!("{v}ULL"))
        .collect();
    let _ = writeln!(
        s,
        "__device__ const u64 IDENT[W] = {{{}}};",
        ident.join(", ")
    );
    s.push_str(crate::expr_cuda::HELPERS);
    s.push_str(CUDA_UNPACK);
    for (c, e) in spec.encodings.iter().enumerate() {
        if let Some(e) = e {
            s.push_str(&e.cuda_globals(c));
        }
    }
    s.push_str(&hash::source(spec.hash));
    s.push_str(&probing::source(spec));
    s.push_str(&update_merge(&spec.layout, &spec.non_null_args));
    s.push_str(&eval_row(spec));
    match spec.strategy.placement() {
        Placement::Partitioned => s.push_str(&crate::placement::partition_kernels(spec)),
        _ => s.push_str(LOAD_ROW),
    }
    s.push_str(&agg_kernel(spec));
    if spec.strategy.placement() == Placement::Sorted {
        s.push_str(&crate::placement::sort_keys_kernel(spec));
    }
    s.push_str(MAINTENANCE);
    s
}

/// How the row loops read a row where the rows are the chunk's columns: evaluated in place
/// (the partitioned placement reads its own rows instead, `placement/partitioned.rs`).
const LOAD_ROW: &str = r#"
__device__ __forceinline__ bool load_row(const ColPtrs& C, const u64* aux, u64 row, u64* key, u64* in, u64* maskp, u64* err) { return eval_row(C, row, key, in, maskp, err); }
__device__ __forceinline__ u64 rows_in(const u64* aux, u64 n) { return n; }
"#;

/// Input words `update_slot` reads per row (`NIN`, at least one in the source): a value word
/// per field fed by the argument, two for 128-bit extremes, a wide sum's words.
pub(crate) fn input_count(layout: &Layout) -> usize {
    layout
        .aggs
        .iter()
        .flat_map(|a| &a.fields)
        .map(|f| match f.op {
            Op::MinI128 | Op::MaxI128 => 2,
            Op::Wide { words, .. } => words,
            _ if f.input == Input::One => 0,
            _ => 1,
        })
        .sum()
}

/// The words a narrow table keeps, in order (module doc): every field's words but the counting
/// fields of arguments that are never NULL, which the kernel leaves to `derive_counts`; the row
/// count is kept apart, as 32-bit words.
pub(crate) fn narrow_words(layout: &Layout, non_null: &[bool]) -> Vec<usize> {
    layout
        .aggs
        .iter()
        .enumerate()
        .flat_map(|(a, agg)| {
            let derived = non_null.get(a).copied().unwrap_or(false);
            agg.fields
                .iter()
                .filter(move |f| !(derived && f.input == Input::One))
                .flat_map(|f| f.word..f.word + f.op.width())
        })
        .collect()
}

/// `update_slot` and `merge_slot`: the algebra's update and merge, word op by word op.
fn update_merge(layout: &Layout, non_null: &[bool]) -> String {
    let mut up = String::new();
    let mut me = String::new();
    let mut input = 0usize;
    let call = |op: Op, at: &str, val: &str| -> String {
        match op {
            Op::AddU64 => format!("op_add<A>({at}, {val});"),
            Op::AddF64 => format!("op_addf<A>({at}, {val});"),
            Op::MinI64 => format!("op_mini<A>({at}, {val});"),
            Op::MaxI64 => format!("op_maxi<A>({at}, {val});"),
            Op::MinU64 => format!("op_minu<A>({at}, {val});"),
            Op::MaxU64 => format!("op_maxu<A>({at}, {val});"),
            Op::Seen => format!("op_seen<A>({at});"),
            Op::Wide { .. } | Op::MinI128 | Op::MaxI128 => {
                unreachable!("multi-word ops are emitted separately")
            }
        }
    };
    let kept = narrow_words(layout, non_null);
    let narrow_word = |flag: &str, word: usize| -> String {
        let at = kept.iter().position(|&k| k == word);
        debug_assert!(at.is_some(), "word {word} is not kept in a narrow table");
        format!("({flag} ? {} : {word})", at.unwrap_or(word))
    };
    // The row count: a 32-bit word after the others in a narrow table (module doc).
    let _ = writeln!(
        up,
        "  if (N) {{ unsigned* rp = (unsigned*)(w + NW * st) + s; if (A) atomicAdd(rp, 1u); else *rp += 1u; }}\n  \
         else op_cnt<A, S>(w + {ROWS_WORD} * st + s);"
    );
    let _ = writeln!(
        me,
        "  const u64 rows = SN ? (u64)((const unsigned*)(src + NW * src_st))[ss] : src[{ROWS_WORD} * src_st + ss];\n  \
         if (rows == 0) return;\n  \
         if (DN) {{ unsigned* rp = (unsigned*)(dst + NW * dst_st) + ds; if (A) atomicAdd(rp, (unsigned)rows); else *rp += (unsigned)rows; }}\n  \
         else op_add<A>(dst + {ROWS_WORD} * dst_st + ds, rows);"
    );
    for (a, agg) in layout.aggs.iter().enumerate() {
        if agg.fields.is_empty() {
            continue;
        }
        let _ = writeln!(up, "  if (mask & (1ULL << {a})) {{");
        let derived = non_null.get(a).copied().unwrap_or(false);
        for f in &agg.fields {
            if derived && f.input == Input::One {
                continue; // equals the row count: derive_counts
            }
            let at = format!("w + {} * st + s", narrow_word("N", f.word));
            let dat = format!("dst + {} * dst_st + ds", narrow_word("DN", f.word));
            let sw = |i: usize| format!("src[{} * src_st + ss]", narrow_word("SN", f.word + i));
            match f.op {
                Op::MinI128 | Op::MaxI128 => {
                    let max = f.op == Op::MaxI128;
                    let _ = writeln!(up, "    op_ext128<A, {max}>({at}, st, in + {input});");
                    input += 2;
                    let _ = writeln!(
                        me,
                        "  {{ const u64 v[2] = {{{}, {}}}; op_ext128<A, {max}>({dat}, dst_st, v); }}",
                        sw(0),
                        sw(1)
                    );
                }
                Op::Wide { words, .. } => {
                    let _ = writeln!(up, "    op_wide<A, {words}>({at}, st, in + {input});");
                    input += words;
                    let gather: Vec<String> = (0..words).map(sw).collect();
                    let _ = writeln!(
                        me,
                        "  {{ const u64 v[{words}] = {{{}}}; op_wide<A, {words}>({dat}, dst_st, v); }}",
                        gather.join(", ")
                    );
                }
                Op::AddU64 if f.input == Input::One => {
                    let _ = writeln!(up, "    op_cnt<A, S>({at});");
                    let _ = writeln!(me, "  {}", call(Op::AddU64, &dat, &sw(0)));
                }
                op => {
                    let val = match f.input {
                        Input::One => "1ULL".to_string(),
                        _ => {
                            input += 1;
                            format!("in[{}]", input - 1)
                        }
                    };
                    let _ = writeln!(up, "    {}", call(op, &at, &val));
                    let src = sw(0);
                    let merged = if op == Op::Seen {
                        format!("if ({src} != 0) {}", call(op, &dat, &src))
                    } else {
                        call(op, &dat, &src)
                    };
                    let _ = writeln!(me, "  {merged}");
                }
            }
        }
        let _ = writeln!(up, "  }}");
    }
    debug_assert_eq!(input, input_count(layout));
    let ident = layout.identities();
    // copy_slot's narrow case: each kept word back to its place in a wide slot.
    let widen: String = kept
        .iter()
        .enumerate()
        .map(|(i, k)| format!("  dst[{k}] = src[{i} * src_st + ss];\n"))
        .collect();
    let narrow_ident: Vec<String> = kept
        .iter()
        .map(|&k| format!("{}ULL", ident.get(k).copied().unwrap_or(0)))
        .collect();
    format!(
        "#define NIN {}\n#define NW {}\n__device__ const u64 NIDENT[NW + 1] = {{{}}};\n\
         template <bool A, bool S = false, bool N = false> __device__ __forceinline__ void update_slot(u64* w, u64 st, u64 s, const u64* in, u64 mask) {{\n{up}}}\n\
         template <bool A, bool DN = false, bool SN = false> __device__ __forceinline__ void merge_slot(u64* dst, u64 dst_st, u64 ds, const u64* src, u64 src_st, u64 ss) {{\n{me}}}\n\
         template <bool SN> __device__ __forceinline__ void copy_slot(u64* dst, const u64* src, u64 src_st, u64 ss) {{\n\
           if (!SN) {{ for (int w = 0; w < W; w++) dst[w] = src[w * src_st + ss]; return; }}\n\
           for (int w = 0; w < W; w++) dst[w] = IDENT[w];\n\
           dst[{ROWS_WORD}] = (u64)((const unsigned*)(src + NW * src_st))[ss];\n{widen}}}\n",
        input.max(1),
        kept.len(),
        narrow_ident.join(", ")
    )
}

/// Fills the counting fields that [`KernelSpec::non_null_args`] left out of the kernel:
/// `cols[w][g]` are the state words read back, `cols[ROWS_WORD]` the row counts.
pub fn derive_counts(layout: &Layout, non_null: &[bool], cols: &mut [Vec<u64>]) {
    for (agg, _) in layout.aggs.iter().zip(non_null).filter(|(_, &n)| n) {
        for f in agg.fields.iter().filter(|f| f.input == Input::One) {
            let derived: Vec<u64> = cols[ROWS_WORD]
                .iter()
                .map(|&rows| {
                    if f.op == Op::Seen {
                        (rows != 0) as u64
                    } else {
                        rows
                    }
                })
                .collect();
            cols[f.word] = derived;
        }
    }
}

/// A value's word(s) for a field fed by `Input::Value`.
fn input_words(op: Op, t: &DataType, v: &str) -> Vec<String> {
    let ord = match t {
        DataType::Float32 => format!("(u64)ford32({v})"),
        DataType::Float64 => format!("(u64)ford64({v})"),
        DataType::Boolean => format!("({v} ? 1ULL : 0ULL)"),
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            format!("(u64)({v})")
        }
        _ => format!("(u64)(i64)({v})"),
    };
    match op {
        Op::MinI128 | Op::MaxI128 => vec![
            format!("(u64)({v})"),
            format!("(u64)((__int128)({v}) >> 64)"),
        ],
        Op::AddF64 => vec![format!("(u64)__double_as_longlong((double)({v}))")],
        Op::Wide {
            words: 2,
            signed: false,
        } => vec![format!("(u64)({v})"), "0ULL".into()],
        Op::Wide { words, .. } => {
            let mut out = vec![format!("(u64)({v})")];
            if matches!(t, DataType::Decimal128(..)) {
                out.push(format!("(u64)((__int128)({v}) >> 64)"));
            } else {
                out.push(format!("((i64)({v}) < 0 ? EMPTY : 0ULL)"));
            }
            while out.len() < words {
                out.push(format!("({v} < 0 ? EMPTY : 0ULL)"));
            }
            out
        }
        _ => vec![ord],
    }
}

/// `eval_row`: the fused filter, key packing and aggregate inputs of one row.
fn eval_row(spec: &KernelSpec) -> String {
    let mut used: Vec<usize> = Vec::new();
    if let Some(f) = &spec.filter {
        f.columns(&mut used);
    }
    for a in spec.args.iter().flatten() {
        a.columns(&mut used);
    }
    used.extend(spec.key_words.iter().flatten().map(|(c, _)| *c));
    used.sort_unstable();
    used.dedup();
    let mut s = String::from(
        "__device__ __forceinline__ bool eval_row(const ColPtrs& C, u64 row, u64* key, u64* in, u64* maskp, u64* err) {\n",
    );
    for &c in &used {
        let t = spec.columns[c].clone().unwrap_or(DataType::Null);
        if spec.nullable.get(c).copied().unwrap_or(true) {
            let _ = writeln!(
                s,
                "  const unsigned char* n{c} = (const unsigned char*)C.p[{}];",
                2 * c + 1
            );
            let _ = writeln!(s, "  const bool c{c}_ok = !n{c} || bit(n{c}, row);");
        } else {
            let _ = writeln!(s, "  const bool c{c}_ok = true;");
        }
        if t == DataType::Boolean {
            let _ = writeln!(
                s,
                "  const bool c{c} = bit((const unsigned char*)C.p[{}], row);",
                2 * c
            );
        } else {
            let ct = c_type(&t);
            let ptr = format!("C.p[{}]", 2 * c);
            let load = match spec.encodings.get(c).and_then(Option::as_ref) {
                Some(e) => e.cuda_decode(c, &t, ct, &ptr),
                None => format!("((const {ct}*){ptr})[row]"),
            };
            let _ = writeln!(s, "  const {ct} c{c} = {load};");
        }
    }
    let mut em = Emitter::default();
    if let Some(f) = &spec.filter {
        let (v, ok) = em.emit(f);
        let _ = writeln!(em.code, "if (!({ok} && {v})) return false;");
    }
    for (wi, terms) in spec.key_words.iter().enumerate() {
        let _ = writeln!(em.code, "u64 k{wi} = 0;");
        for (c, col) in terms {
            let code = match &col.kind {
                PackedKind::Ordinal { min } => {
                    let ord = input_words(Op::MinI64, &col.data_type, &format!("c{c}"))[0].clone();
                    format!("({ord} - {}ULL)", *min as u64)
                }
                PackedKind::Bool => format!("(c{c} ? 1ULL : 0ULL)"),
                PackedKind::Dictionary => format!("(u64)c{c}"),
            };
            let _ = writeln!(
                em.code,
                "if (c{c}_ok) k{wi} += ({code} + {}ULL) * {}ULL;",
                col.nulls as u64, col.mult
            );
        }
        let _ = writeln!(em.code, "key[{wi}] = k{wi};");
    }
    if spec.key_words.is_empty() {
        em.code.push_str("key[0] = 0;\n");
    }
    em.code.push_str("u64 mask = 0;\n");
    let mut input = 0usize;
    for (a, (agg, arg)) in spec.layout.aggs.iter().zip(&spec.args).enumerate() {
        let Some(arg) = arg else {
            let _ = writeln!(em.code, "mask |= 1ULL << {a};");
            continue;
        };
        let (parts, ok) = em.emit_parts(arg);
        let _ = writeln!(em.code, "if ({ok}) mask |= 1ULL << {a};");
        let t = arg.data_type();
        // A pair's part as a double (CORR's parts are Float64).
        let part = |i: u8| {
            let v = parts.get(usize::from(i)).map_or("0", String::as_str);
            format!("((double)({v}))")
        };
        for f in agg.fields.iter().filter(|f| f.input.reads_argument()) {
            let words = match f.input {
                Input::Part(i) => input_words(f.op, &DataType::Float64, &part(i)),
                Input::Product(i, j) => input_words(
                    f.op,
                    &DataType::Float64,
                    &format!("({} * {})", part(i), part(j)),
                ),
                _ => input_words(f.op, &t, parts.first().map_or("0", String::as_str)),
            };
            for word in words {
                let _ = writeln!(em.code, "in[{input}] = {word};");
                input += 1;
            }
        }
    }
    s.push_str(&em.code);
    s.push_str("*maskp = mask;\nreturn true;\n}\n");
    s
}

fn agg_kernel(spec: &KernelSpec) -> String {
    // One body, two kernels: `agg_rows` over rows 0..n and `agg_list` over the rows a list
    // names (the re-run after the table has grown), so the common one carries no list test.
    // `aux` is the placement's own device buffer: thread_private's tables, the partitioned
    // rows (whose count `rows_in` reads there: the filter may have dropped some).
    let mut s = format!(
        "#define ERR_SPILL {ERR_SPILL}ULL\n\
         #define AGG_PARAMS const ColPtrs C, const u64 n, const unsigned* __restrict__ list, \
         u64* gt, const u64 gcap, const u64 glimit, Ctrl* ctrl, unsigned* overflow, \
         u64* spill, const u64 spill_cap, u64* aux\n\
         #define AGG_ARGS C, n, list, gt, gcap, glimit, ctrl, overflow, spill, spill_cap, aux\n\
         template <bool LIST> __device__ __forceinline__ void agg_body(AGG_PARAMS) {{\n"
    );
    s.push_str(&spec.strategy.placement().body(spec));
    s.push_str(
        "}\n\
         extern \"C\" __global__ void __launch_bounds__(THREADS) agg_rows(AGG_PARAMS) { agg_body<false>(C, rows_in(aux, n), list, gt, gcap, glimit, ctrl, overflow, spill, spill_cap, aux); }\n\
         extern \"C\" __global__ void __launch_bounds__(THREADS) agg_list(AGG_PARAMS) { agg_body<true>(AGG_ARGS); }\n",
    );
    s
}

const MAINTENANCE: &str = r#"
// Merges the partial states of `n` source slots (or those listed), laid out like the global
// table (array of structs, GS words a slot), into it: growing (the old table into the new) and
// spilled local slots. Slots without rows are skipped.
extern "C" __global__ void merge_entries(const u64* src, const u64 n, const unsigned* __restrict__ list,
    u64* gt, const u64 gcap, const u64 glimit, Ctrl* ctrl, unsigned* overflow, const u64 ocap) {
  const u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const u64 e = list ? (u64)list[i] : i;
    const u64* slot = src + e * GS;
    if (slot[GK] == 0) continue;
    const i64 g = global_find_or_insert(gt, gcap, glimit, slot, &ctrl->groups);
    if (g < 0) { const u64 o = atomicAdd(&ctrl->overflow, 1ULL); if (o < ocap) overflow[o] = (unsigned)e; }
    else merge_slot<true>(gt + (u64)g * GS + GK, 1, 0, slot + GK, 1, 0);
  }
}

// Empty keys and identity states for `cap` slots of GS words.
extern "C" __global__ void init_table(u64* t, const u64 cap) {
  const u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < cap * GS; i += stride) {
    const u64 w = i % GS;
    t[i] = w < GK ? EMPTY : IDENT[w - GK];
  }
}
"#;

#[cfg(test)]
pub(crate) mod tests;

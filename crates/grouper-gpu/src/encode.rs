//! Transfer compression (Tomé §3.1, Table 1): per column, the fewest bits that carry its values
//! over PCIe, decoded inside the fused aggregation kernel.
//!
//! ```text
//!  scheme              chosen when                          on the wire        in the kernel
//!  plain               nothing smaller applies (floats)     native bytes       load
//!  null_suppression    0 <= min, max < 2^bits               value, `bits`      unpack
//!  frame_of_reference  max - min < 2^bits (bits < native)   value - min        base + unpack
//!  dictionary          <= 256 distinct values, fewer bits   code               table[unpack]
//! ```
//!
//! Statistics (min/max over the valid values, a distinct count capped at [`MAX_DICTIONARY`])
//! come from the whole input, so one encoding holds for every chunk and the kernel carries its
//! parameters as constants. Values are packed LSB-first into 64-bit words, value `i` at bits
//! `[i * bits, (i + 1) * bits)`, with one padding word so the kernel's two-word read never runs
//! past the end. NULL rows keep their validity bit and are sent as code 0. The encoding is exact:
//! a decoded value equals the original bit for bit.

use std::fmt;

use hashbrown::{HashMap, HashSet};

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::DataType;
use rayon::prelude::*;

use grouper_core::error::{GrouperError, Result};
use grouper_core::keys::ordinal::Ordinal;

/// Most distinct values a dictionary holds (codes of at most 8 bits; the table stays in cache).
pub const MAX_DICTIONARY: usize = 256;

/// How a column's values travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Native bytes.
    Plain,
    /// Bit-packed values (non-negative, small).
    NullSuppression,
    /// Bit-packed offsets from the smallest value.
    FrameOfReference,
    /// Bit-packed codes into a table of the distinct values.
    Dictionary,
}

impl Scheme {
    /// The name `--explain` prints.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Plain => "plain",
            Scheme::NullSuppression => "null_suppression",
            Scheme::FrameOfReference => "frame_of_reference",
            Scheme::Dictionary => "dictionary",
        }
    }
}

/// One column's encoding: scheme and parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoding {
    /// The scheme.
    pub scheme: Scheme,
    /// Bits per value on the wire (the native width for `plain`; 0 for a constant column).
    pub bits: u32,
    /// Frame of reference: the value code 0 stands for (0 for null suppression).
    pub base: i128,
    /// Dictionary: the values in code order, as the native value's bits (integers sign-extended
    /// to 64 bits, floats their IEEE bits).
    pub dictionary: Vec<u64>,
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.scheme {
            Scheme::Plain => write!(f, "plain {}b", self.bits),
            Scheme::NullSuppression => write!(f, "null_suppression {}b", self.bits),
            Scheme::FrameOfReference => {
                write!(f, "frame_of_reference {}b (base {})", self.bits, self.base)
            }
            Scheme::Dictionary => {
                write!(
                    f,
                    "dictionary {}b ({} values)",
                    self.bits,
                    self.dictionary.len()
                )
            }
        }
    }
}

/// Bits of a value of `t` as the kernel reads it unencoded.
pub fn native_bits(t: &DataType) -> u32 {
    match t {
        DataType::Boolean => 1,
        t => 8 * t.primitive_width().unwrap_or(8) as u32,
    }
}

/// Bits needed for values `0..=span`.
fn bits_for(span: u128) -> u32 {
    128 - span.leading_zeros()
}

/// Whether `t` has an integer image the kernel can rebuild from an offset (floats do not).
fn integral(t: &DataType) -> bool {
    t.is_integer() || matches!(t, DataType::Date32 | DataType::Decimal128(..))
}

/// Statistics of one column over all its pieces.
#[derive(Debug, Clone, Default)]
struct Stats {
    /// Smallest and largest ordinal of a valid value (`None`: no valid value).
    range: Option<(i128, i128)>,
    /// Distinct ordinals, up to `MAX_DICTIONARY + 1` (more means "too many").
    distinct: Option<Vec<i128>>,
}

/// Calls `f(row, ordinal)` for each row of `a` (`None` for NULL rows).
fn for_each(a: &ArrayRef, mut f: impl FnMut(usize, Option<i128>)) -> Result<()> {
    grouper_core::with_ordinal_type!(a.data_type(), T => {
        let p = a.as_primitive::<T>();
        let values = p.values();
        match p.logical_nulls().filter(|n| n.null_count() > 0) {
            None => values.iter().enumerate().for_each(|(i, v)| f(i, Some(v.to_ord()))),
            Some(n) => values.iter().enumerate().for_each(|(i, v)| {
                f(i, n.is_valid(i).then(|| v.to_ord()))
            }),
        }
        Ok(())
    }, _ => Err(GrouperError::UnsupportedType {
        what: "compressed GPU column",
        data_type: a.data_type().clone(),
    }))
}

fn range_of(a: &ArrayRef) -> Result<Option<(i128, i128)>> {
    let mut r: Option<(i128, i128)> = None;
    for_each(a, |_, v| {
        if let Some(v) = v {
            r = Some(r.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
        }
    })?;
    Ok(r)
}

/// Distinct valid ordinals of `a`, or `None` past `MAX_DICTIONARY`.
fn distinct_of(a: &ArrayRef) -> Result<Option<HashSet<i128>>> {
    let mut set = HashSet::new();
    let mut over = false;
    for_each(a, |_, v| {
        if let (Some(v), false) = (v, over) {
            over = set.insert(v) && set.len() > MAX_DICTIONARY;
        }
    })?;
    Ok((!over).then_some(set))
}

impl Encoding {
    /// The native layout of `t`.
    pub fn plain(t: &DataType) -> Self {
        Self {
            scheme: Scheme::Plain,
            bits: native_bits(t),
            base: 0,
            dictionary: Vec::new(),
        }
    }

    /// The smallest bit-packing of values of `t` within `range` (ordinals, `None`: unknown):
    /// null suppression or frame of reference, else plain. What a stream's encoding is
    /// chosen from before its rows are read (the source's min/max statistics); `pack` then
    /// fails on a value outside it.
    pub fn for_range(t: &DataType, range: Option<(i128, i128)>) -> Self {
        let mut best = Self::plain(t);
        let (true, Some((lo, hi))) = (integral(t), range) else {
            return best;
        };
        let (base, scheme) = if lo >= 0 {
            (0, Scheme::NullSuppression)
        } else {
            (lo, Scheme::FrameOfReference)
        };
        let ns = bits_for(hi.abs_diff(base));
        let fr = bits_for(hi.abs_diff(lo));
        // The kernel unpacks at most 64 bits per value.
        if ns < best.bits && ns <= 64 {
            best = Self {
                scheme,
                bits: ns,
                base,
                dictionary: Vec::new(),
            };
        }
        if fr < best.bits && fr <= 64 {
            best = Self {
                scheme: Scheme::FrameOfReference,
                bits: fr,
                base: lo,
                dictionary: Vec::new(),
            };
        }
        best
    }

    /// The smallest encoding of a column of type `t` made of `pieces` (ties go to the cheaper
    /// decode: null suppression, then frame of reference, then dictionary).
    pub fn choose(t: &DataType, pieces: &[ArrayRef]) -> Result<Self> {
        let plain = Self::plain(t);
        if *t == DataType::Boolean || t.primitive_width().is_none() {
            return Ok(plain);
        }
        let stats = stats(t, pieces, plain.bits)?;
        let mut best = Self::for_range(t, stats.range);
        if stats.range.is_none() {
            // Every value is NULL: nothing but validity travels.
            return Ok(Self {
                scheme: Scheme::NullSuppression,
                bits: 0,
                base: 0,
                dictionary: Vec::new(),
            });
        }
        if let Some(mut values) = stats.distinct {
            values.sort_unstable();
            let bits = bits_for(values.len().saturating_sub(1) as u128);
            let fits = values.iter().all(|v| dictionary_word(t, *v).is_some());
            if bits < best.bits && fits {
                best = Self {
                    scheme: Scheme::Dictionary,
                    bits,
                    base: 0,
                    dictionary: values
                        .iter()
                        .filter_map(|v| dictionary_word(t, *v))
                        .collect(),
                };
            }
        }
        Ok(best)
    }

    /// 64-bit words a chunk of `rows` values takes (padding included).
    pub fn words(&self, rows: usize) -> usize {
        (rows * self.bits as usize).div_ceil(64) + 1
    }

    /// Packs `pieces` (a chunk's slices, in order) into `out` as little-endian 64-bit words
    /// (at least `8 * words(rows)` bytes).
    pub fn pack(&self, pieces: &[ArrayRef], out: &mut [u8]) -> Result<()> {
        if self.scheme == Scheme::Plain {
            return Err(GrouperError::InvalidInput(
                "plain columns travel as they are, unpacked".into(),
            ));
        }
        let codes: HashMap<i128, u64> = self
            .dictionary
            .iter()
            .enumerate()
            .map(|(c, w)| (word_ordinal(pieces, *w), c as u64))
            .collect();
        // Where each piece's first value lies: when every piece starts a word (pieces of
        // 64·k rows, as scans and chunks cut them), pieces pack independently, in parallel.
        let bits = self.bits as usize;
        let mut starts = Vec::with_capacity(pieces.len());
        let mut at = 0usize;
        for p in pieces {
            starts.push(at);
            at += p.len() * bits;
        }
        if bits == 0 || pieces.len() < 2 || starts.iter().any(|s| s % 64 != 0) {
            let mut w = BitWriter::new(out, self.bits);
            for p in pieces {
                self.pack_piece(p, &codes, &mut w)?;
            }
            w.finish();
            return Ok(());
        }
        let mut regions = Vec::with_capacity(pieces.len());
        let mut rest = out;
        let mut pos = 0usize;
        for next in starts.iter().skip(1) {
            let (region, tail) = rest
                .split_at_mut_checked(next / 8 - pos)
                .ok_or_else(|| GrouperError::InvalidInput("packed region too small".into()))?;
            regions.push(region);
            rest = tail;
            pos = next / 8;
        }
        regions.push(rest);
        pieces
            .par_iter()
            .zip(regions)
            .map(|(p, region)| {
                // A piece before the last ends on a word boundary: its writer's final
                // stores fall past its region and are dropped.
                let mut w = BitWriter::new(region, self.bits);
                self.pack_piece(p, &codes, &mut w)?;
                w.finish();
                Ok(())
            })
            .collect()
    }

    /// Appends the codes of one piece to `w`.
    fn pack_piece(
        &self,
        p: &ArrayRef,
        codes: &HashMap<i128, u64>,
        w: &mut BitWriter<'_>,
    ) -> Result<()> {
        let mut bad = false;
        for_each(p, |_, v| {
            let code = match (v, self.scheme) {
                (None, _) => 0,
                (Some(v), Scheme::Dictionary) => codes.get(&v).copied().unwrap_or_else(|| {
                    bad = true;
                    0
                }),
                (Some(v), _) => {
                    let d = v.wrapping_sub(self.base);
                    bad |= d < 0 || (self.bits < 128 && (d as u128) >> self.bits != 0);
                    d as u64
                }
            };
            w.push(code);
        })?;
        if bad {
            return Err(GrouperError::InvalidInput(
                "a value lies outside its column's transfer encoding".into(),
            ));
        }
        Ok(())
    }
}

/// Statistics of a column: its range and, when the range alone leaves more than 8 bits (or the
/// values are floats), its distinct values up to the dictionary limit.
fn stats(t: &DataType, pieces: &[ArrayRef], native: u32) -> Result<Stats> {
    let range = pieces
        .par_iter()
        .map(range_of)
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
    let span_bits = range.map_or(0, |(lo, hi)| bits_for(hi.abs_diff(lo)));
    let want_distinct = range.is_some() && (!integral(t) || span_bits > 8) && native > 8;
    let distinct = if want_distinct {
        // Per piece in parallel, each giving up past the limit; then the union.
        let sets = pieces
            .par_iter()
            .map(distinct_of)
            .collect::<Result<Vec<_>>>()?;
        let mut all: HashSet<i128> = HashSet::new();
        let mut ok = true;
        for s in sets {
            match s {
                Some(s) if ok => {
                    all.extend(s);
                    ok = all.len() <= MAX_DICTIONARY;
                }
                _ => ok = false,
            }
        }
        ok.then(|| all.into_iter().collect())
    } else {
        None
    };
    Ok(Stats { range, distinct })
}

/// The table word of ordinal `v` of a `t` value (`None` when it does not fit 64 bits).
fn dictionary_word(t: &DataType, v: i128) -> Option<u64> {
    match t {
        DataType::Float64 => Some(f64::from_ord(v).to_bits()),
        DataType::Float32 => Some(f32::from_ord(v).to_bits() as u64),
        _ => i64::try_from(v).ok().map(|x| x as u64),
    }
}

/// The ordinal a table word stands for, in the type of `pieces`.
fn word_ordinal(pieces: &[ArrayRef], w: u64) -> i128 {
    match pieces.first().map(|p| p.data_type()) {
        Some(DataType::Float64) => f64::from_bits(w).to_ord(),
        Some(DataType::Float32) => f32::from_bits(w as u32).to_ord(),
        _ => w as i64 as i128,
    }
}

/// LSB-first packing of `bits`-bit values into little-endian 64-bit words.
struct BitWriter<'a> {
    out: &'a mut [u8],
    bits: u32,
    word: usize,
    acc: u64,
    filled: u32,
}

impl<'a> BitWriter<'a> {
    fn new(out: &'a mut [u8], bits: u32) -> Self {
        Self {
            out,
            bits,
            word: 0,
            acc: 0,
            filled: 0,
        }
    }

    #[inline(always)]
    fn push(&mut self, v: u64) {
        if self.bits == 0 {
            return;
        }
        self.acc |= v << self.filled;
        if self.filled + self.bits >= 64 {
            self.store(self.word, self.acc);
            self.word += 1;
            self.acc = if self.filled == 0 {
                0
            } else {
                v >> (64 - self.filled)
            };
            self.filled = self.filled + self.bits - 64;
        } else {
            self.filled += self.bits;
        }
    }

    #[inline(always)]
    fn store(&mut self, word: usize, v: u64) {
        if let Some(slot) = self.out.get_mut(8 * word..8 * word + 8) {
            slot.copy_from_slice(&v.to_le_bytes());
        }
    }

    fn finish(mut self) {
        // The partial last word and the padding word.
        self.store(self.word, self.acc);
        self.store(self.word + 1, 0);
    }
}

/// Value `row` of a packed stream (the CPU twin of the kernel's `unpack`).
pub fn unpack(words: &[u64], row: usize, bits: u32) -> u64 {
    if bits == 0 {
        return 0;
    }
    let bit = row * bits as usize;
    let (i, s) = (bit / 64, (bit % 64) as u32);
    let lo = words.get(i).copied().unwrap_or(0) >> s;
    let hi = if s + bits > 64 {
        words.get(i + 1).copied().unwrap_or(0) << (64 - s)
    } else {
        0
    };
    if bits >= 64 {
        lo | hi
    } else {
        (lo | hi) & ((1u64 << bits) - 1)
    }
}

/// The kernel's `unpack`: the same arithmetic as [`unpack`], two read-only loads at most.
pub const CUDA_UNPACK: &str = r#"
__device__ __forceinline__ u64 unpack(const u64* __restrict__ w, u64 row, const unsigned b) {
  const u64 bit = row * b; const u64 i = bit >> 6; const unsigned s = (unsigned)(bit & 63);
  const u64 lo = __ldg(w + i) >> s;
  const u64 hi = s + b > 64 ? __ldg(w + i + 1) << (64 - s) : 0ULL;
  return b >= 64 ? (lo | hi) : ((lo | hi) & ((1ULL << b) - 1));
}
"#;

/// A CUDA expression of type `ct` for an `i128` constant.
fn int_literal(v: i128, ct: &str) -> String {
    match i64::try_from(v) {
        Ok(x) => format!("(({ct})(i64){:#x}ULL)", x as u64),
        Err(_) => format!(
            "(({ct})((((__int128)(i64){:#x}ULL) << 64) | (__int128){:#x}ULL))",
            (v >> 64) as i64 as u64,
            v as u64
        ),
    }
}

impl Encoding {
    /// Declarations the decode of column `c` needs at file scope (its dictionary table).
    pub fn cuda_globals(&self, c: usize) -> String {
        if self.scheme != Scheme::Dictionary {
            return String::new();
        }
        let words: Vec<String> = self
            .dictionary
            .iter()
            .map(|w| format!("{w:#x}ULL"))
            .collect();
        format!(
            "__device__ const u64 dict{c}[{}] = {{{}}};\n",
            words.len().max(1),
            words.join(", ")
        )
    }

    /// The CUDA expression of value `row` of column `c` (type `t`, C type `ct`) whose packed
    /// words start at `ptr`.
    pub fn cuda_decode(&self, c: usize, t: &DataType, ct: &str, ptr: &str) -> String {
        let code = format!("unpack((const u64*){ptr}, row, {}u)", self.bits);
        match self.scheme {
            Scheme::Plain => format!("((const {ct}*){ptr})[row]"),
            Scheme::Dictionary => {
                let w = format!("dict{c}[{code}]");
                match t {
                    DataType::Float64 => format!("__longlong_as_double((i64){w})"),
                    DataType::Float32 => format!("__int_as_float((int)(unsigned){w})"),
                    _ => format!("(({ct})(i64){w})"),
                }
            }
            _ if self.bits == 0 => int_literal(self.base, ct),
            _ => format!("(({ct})({} + ({ct}){code}))", int_literal(self.base, ct)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Decimal128Array, Float64Array, Int32Array, Int64Array, UInt32Array};
    use proptest::prelude::*;
    use std::sync::Arc;

    /// Packs `pieces` and decodes every row on the CPU as the kernel would.
    fn round_trip(t: &DataType, pieces: &[ArrayRef]) -> (Encoding, Vec<Option<i128>>) {
        let e = Encoding::choose(t, pieces).unwrap();
        if e.scheme == Scheme::Plain {
            // Only when no packing is narrower: a span of more than 64 bits.
            assert_eq!(e.bits, native_bits(t));
            return (e, ordinals(pieces));
        }
        let rows: usize = pieces.iter().map(|p| p.len()).sum();
        let mut bytes = vec![0xa5u8; 8 * e.words(rows)];
        e.pack(pieces, &mut bytes).unwrap();
        let out: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
            .collect();
        let mut decoded = Vec::new();
        let mut row = 0;
        for p in pieces {
            for i in 0..p.len() {
                let code = unpack(&out, row, e.bits);
                row += 1;
                if p.is_null(i) {
                    decoded.push(None);
                    continue;
                }
                decoded.push(Some(match e.scheme {
                    Scheme::Dictionary => word_ordinal(pieces, e.dictionary[code as usize]),
                    Scheme::Plain => unreachable!("plain columns are not packed"),
                    _ => e.base + code as i128,
                }));
            }
        }
        (e, decoded)
    }

    fn ordinals(pieces: &[ArrayRef]) -> Vec<Option<i128>> {
        let mut out = Vec::new();
        for p in pieces {
            for_each(p, |_, v| out.push(v)).unwrap();
        }
        out
    }

    #[test]
    fn tpch_q1_columns_take_tomes_widths() {
        // l_quantity 1..50 as DECIMAL(15,2): 50 distinct values, 6-bit codes.
        let q: ArrayRef = Arc::new(
            Decimal128Array::from((1..=50).map(|v| v * 100).collect::<Vec<i128>>())
                .with_precision_and_scale(15, 2)
                .unwrap(),
        );
        let (e, d) = round_trip(q.data_type(), std::slice::from_ref(&q));
        assert_eq!((e.scheme, e.bits), (Scheme::Dictionary, 6));
        assert_eq!(d, ordinals(std::slice::from_ref(&q)));
        // l_discount 0.00..0.10: null suppression, 4 bits.
        let disc: ArrayRef = Arc::new(
            Decimal128Array::from((0..=10).collect::<Vec<i128>>())
                .with_precision_and_scale(15, 2)
                .unwrap(),
        );
        let (e, _) = round_trip(disc.data_type(), std::slice::from_ref(&disc));
        assert_eq!((e.scheme, e.bits), (Scheme::NullSuppression, 4));
        // l_shipdate: 1992-01-02..1998-12-01 (days since 1970): frame of reference, 12 bits.
        let ship: ArrayRef = Arc::new(arrow::array::Date32Array::from(
            (8036..=10561).collect::<Vec<i32>>(),
        ));
        let (e, d) = round_trip(ship.data_type(), std::slice::from_ref(&ship));
        assert_eq!(
            (e.scheme, e.bits, e.base),
            (Scheme::FrameOfReference, 12, 8036)
        );
        assert_eq!(d, ordinals(std::slice::from_ref(&ship)));
    }

    #[test]
    fn constant_null_and_float_columns() {
        let c: ArrayRef = Arc::new(Int64Array::from(vec![-7; 100]));
        let (e, d) = round_trip(c.data_type(), std::slice::from_ref(&c));
        assert_eq!((e.bits, e.base), (0, -7));
        assert!(d.iter().all(|v| *v == Some(-7)));
        let n: ArrayRef = Arc::new(Int32Array::from(vec![None, None]));
        let (e, d) = round_trip(n.data_type(), std::slice::from_ref(&n));
        assert_eq!(e.bits, 0);
        assert_eq!(d, vec![None, None]);
        let f: ArrayRef = Arc::new(Float64Array::from(vec![0.5, -0.0, 0.0, f64::NAN, 0.5]));
        let (e, d) = round_trip(f.data_type(), std::slice::from_ref(&f));
        assert_eq!((e.scheme, e.bits), (Scheme::Dictionary, 2));
        assert_eq!(d, ordinals(std::slice::from_ref(&f)));
        let wide: ArrayRef = Arc::new(Float64Array::from(
            (0..1000).map(|i| i as f64 * 0.1).collect::<Vec<_>>(),
        ));
        let e = Encoding::choose(wide.data_type(), std::slice::from_ref(&wide)).unwrap();
        assert_eq!(e.scheme, Scheme::Plain);
    }

    #[test]
    fn a_value_outside_the_encoding_is_an_error() {
        let a: ArrayRef = Arc::new(UInt32Array::from(vec![1, 2, 3]));
        let b: ArrayRef = Arc::new(UInt32Array::from(vec![1000]));
        let e = Encoding::choose(a.data_type(), std::slice::from_ref(&a)).unwrap();
        let mut out = vec![0; 8 * e.words(1)];
        assert!(e.pack(&[b], &mut out).is_err());
    }

    fn column() -> impl Strategy<Value = (DataType, Vec<Vec<Option<i128>>>)> {
        let kinds = prop_oneof![
            Just((DataType::Int64, i64::MIN as i128, i64::MAX as i128)),
            Just((DataType::Int32, -1000, 1000)),
            Just((DataType::UInt32, 0, u32::MAX as i128)),
            Just((DataType::Decimal128(38, 2), -(1i128 << 100), 1i128 << 100)),
            Just((DataType::Decimal128(15, 2), 100, 5000)),
        ];
        kinds.prop_flat_map(|(t, lo, hi)| {
            let width = prop_oneof![
                Just(0i128),
                Just(3),
                Just(300),
                Just(1 << 20),
                Just(hi - lo)
            ];
            (Just(t), lo..=hi, width).prop_flat_map(move |(t, start, width)| {
                let end = start.saturating_add(width).min(hi);
                let value = prop::option::weighted(0.9, start..=end);
                (
                    Just(t),
                    prop::collection::vec(prop::collection::vec(value, 0..70), 1..4),
                )
            })
        })
    }

    fn array(t: &DataType, v: &[Option<i128>]) -> ArrayRef {
        match t {
            DataType::Int64 => {
                Arc::new(Int64Array::from_iter(v.iter().map(|x| x.map(|x| x as i64))))
            }
            DataType::Int32 => {
                Arc::new(Int32Array::from_iter(v.iter().map(|x| x.map(|x| x as i32))))
            }
            DataType::UInt32 => Arc::new(UInt32Array::from_iter(
                v.iter().map(|x| x.map(|x| x as u32)),
            )),
            DataType::Decimal128(p, s) => Arc::new(
                Decimal128Array::from_iter(v.iter().copied())
                    .with_precision_and_scale(*p, *s)
                    .unwrap(),
            ),
            _ => unreachable!(),
        }
    }

    proptest! {
        /// Every value decodes to itself, across piece boundaries and at every width.
        #[test]
        fn packing_is_exact((t, pieces) in column()) {
            let arrays: Vec<ArrayRef> = pieces.iter().map(|p| array(&t, p)).collect();
            let (e, decoded) = round_trip(&t, &arrays);
            prop_assert_eq!(decoded, ordinals(&arrays));
            prop_assert!(e.bits <= native_bits(&t));
        }

        /// Pieces of 64·k rows (as scans cut them) pack in parallel, each from a word
        /// boundary; the stream is the same as packed in one go.
        #[test]
        fn word_aligned_pieces_pack_exactly(
            (t, pieces) in column(),
            lens in prop::collection::vec(0usize..4, 1..5),
        ) {
            let values: Vec<Option<i128>> = pieces.into_iter().flatten().collect();
            let mut at = 0;
            let mut aligned: Vec<Vec<Option<i128>>> = lens
                .iter()
                .map(|k| {
                    let piece: Vec<_> = (0..64 * k).map(|i| values.get((at + i) % values.len().max(1)).copied().flatten()).collect();
                    at += 64 * k;
                    piece
                })
                .collect();
            aligned.push(values);
            let arrays: Vec<ArrayRef> = aligned.iter().map(|p| array(&t, p)).collect();
            let (e, decoded) = round_trip(&t, &arrays);
            prop_assert_eq!(decoded, ordinals(&arrays));
            prop_assert!(e.bits <= native_bits(&t));
        }
    }
}

//! The CPU's fused evaluation of aggregate arguments (Tomé's fusion, on the CPU): a
//! [`Program`] compiles the arguments' IR once per query into a list of nodes in which every
//! common subexpression appears once, and runs it over each batch vectorised, one node at a time
//! over the whole batch, reading only the rows a selection vector names (no filtered copies of
//! the input columns).
//!
//! Decimals run as 64-bit integers while their values fit (TPC-H's prices, discounts and their
//! products all do): each 64-bit operation records overflow in a flag instead of branching, and a
//! batch whose flag is set redoes that node in 128 bits with the reference's checked arithmetic.
//! The results are exactly [`Expr::eval`]'s, including its errors (a decimal overflow in 128 bits,
//! an integer division by zero), which only rows that pass the filter can raise.
//!
//! Only nodes with an exact vectorised form compile (columns, literals, `+ - * /`, negation and
//! the IR's widening casts over integers, decimals and floats); anything else (CASE, comparisons
//! in arguments, unsigned 64-bit arithmetic) makes [`Program::compile`] return `None`, and the
//! caller leaves the projection to DataFusion.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::buffer::{NullBuffer, ScalarBuffer};
use arrow::compute::FilterPredicate;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Decimal128Type, Decimal64Type, Float32Type, Float64Type,
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt8Type,
    DECIMAL64_MAX_PRECISION,
};

mod arith;

use super::{is_float, is_int, BinOp, Expr, Scalar};
use crate::error::{GrouperError, Result};
use arith::{binary, cast, floats, negative};

/// One node of a compiled program; operands are indices of earlier nodes.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Column(usize, DataType),
    Literal(Scalar, DataType),
    Binary(BinOp, usize, usize, DataType),
    Negative(usize, DataType),
    Cast(usize, DataType),
}

/// Compiled aggregate arguments: each a node of one shared list, or a source column passed
/// through as it is (any type: a MIN over strings reads its column unchanged).
#[derive(Debug, Clone)]
pub struct Program {
    nodes: Vec<Node>,
    outputs: Vec<Option<Output>>,
    /// Per output: whether a decimal may leave as 64-bit lanes (`Decimal64` of its scale)
    /// when its values fit, for an aggregate that reads them
    /// ([`crate::agg::AggregateSpec::lanes_type`]).
    lanes: Vec<bool>,
    /// Arguments that are tuples ([`Expr::Tuple`]): the argument's index and the outputs,
    /// after the arguments' own, that hold its parts.
    tuples: Vec<(usize, Vec<usize>)>,
    /// Number of arguments (the outputs before the tuples' parts).
    args: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Output {
    /// A source column as it is.
    Column(usize),
    /// A computed node.
    Node(usize),
}

/// The Arrow type an output's lanes leave as, moved out of their slot rather than copied.
#[derive(Debug, Clone, Copy)]
enum Moved {
    /// A decimal's 64-bit lanes for an aggregate that reads them, as `Decimal64` of this scale.
    Decimal64(i8),
    /// 64-bit integer lanes of an `Int64` node.
    Int64,
    /// Float lanes of a `Float64` node.
    Float64,
}

/// Whether values of `t` have a lane form here (unsigned 64-bit integers do not: their
/// arithmetic would need a second set of kernels for a rare type).
fn lane_type(t: &DataType) -> bool {
    (is_int(t) && *t != DataType::UInt64) || is_float(t) || matches!(t, DataType::Decimal128(..))
}

impl Program {
    /// Compiles `args` (`None` for `COUNT(*)`), or `None` when some node has no exact
    /// vectorised form here.
    pub fn compile(args: &[Option<&Expr>]) -> Option<Program> {
        Self::compile_with_lanes(args, &[])
    }

    /// [`Program::compile`], with the decimal arguments `lanes` marks (by position; missing
    /// means false) handed over as 64-bit lanes while their values fit: a column passed
    /// through becomes a node too, read once into lanes shared with the arithmetic (TPC-H Q1's
    /// price) instead of a filtered copy of its 128-bit values.
    pub fn compile_with_lanes(args: &[Option<&Expr>], lanes: &[bool]) -> Option<Program> {
        let mut p = Program {
            nodes: Vec::new(),
            outputs: Vec::with_capacity(args.len()),
            lanes: (0..args.len())
                .map(|i| lanes.get(i).copied().unwrap_or(false))
                .collect(),
            tuples: Vec::new(),
            args: args.len(),
        };
        let mut tuples = Vec::new();
        for (i, a) in args.iter().enumerate() {
            let out = match a {
                Some(Expr::Tuple(parts)) => {
                    tuples.push((i, parts));
                    None
                }
                Some(e) => p.output(e, p.lanes[i])?,
                None => None,
            };
            p.outputs.push(out);
        }
        // A tuple's parts are outputs of their own after the arguments' (no lanes), put
        // together into the tuple's struct once the batch has run.
        for (i, parts) in tuples {
            let mut at = Vec::with_capacity(parts.len());
            for e in parts {
                if matches!(e, Expr::Tuple(_)) {
                    return None;
                }
                let out = p.output(e, false)?;
                p.outputs.push(out);
                p.lanes.push(false);
                at.push(p.outputs.len() - 1);
            }
            p.tuples.push((i, at));
        }
        Some(p)
    }

    /// The output computing `e`, an argument whose decimal values may leave as lanes when
    /// `lanes` is set.
    fn output(&mut self, e: &Expr, lanes: bool) -> Option<Option<Output>> {
        Some(Some(match e {
            Expr::Column {
                data_type: DataType::Decimal128(..),
                ..
            } if lanes => Output::Node(self.add(e)?),
            Expr::Column { index, .. } => Output::Column(*index),
            e => {
                e.check().ok()?;
                Output::Node(self.add(e)?)
            }
        }))
    }

    /// Adds `e` (or finds it: common subexpressions are one node) and returns its index.
    fn add(&mut self, e: &Expr) -> Option<usize> {
        let t = e.data_type();
        if !lane_type(&t) {
            return None;
        }
        let node = match e {
            Expr::Column { index, data_type } => Node::Column(*index, data_type.clone()),
            Expr::Literal { value, data_type } => Node::Literal(*value, data_type.clone()),
            Expr::Binary {
                op,
                left,
                right,
                data_type,
            } if op.is_arithmetic() => {
                let (l, r) = (self.add(left)?, self.add(right)?);
                // Decimal division is not in the IR; the rest divide like the reference.
                Node::Binary(*op, l, r, data_type.clone())
            }
            Expr::Negative(x) => Node::Negative(self.add(x)?, t),
            Expr::Cast { expr, to } => Node::Cast(self.add(expr)?, to.clone()),
            _ => return None,
        };
        Some(match self.nodes.iter().position(|n| *n == node) {
            Some(i) => i,
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        })
    }

    /// The source columns this program reads only into lanes (never passes through as they
    /// are): where such a column is declared Decimal128 of at most 18 digits, a `Decimal64`
    /// array of the same values loads into the same lanes, so a scan may produce one instead
    /// (no 128-bit copy written per batch, and none narrowed back).
    pub fn lane_columns(&self) -> Vec<usize> {
        let passed: Vec<usize> = self
            .outputs
            .iter()
            .filter_map(|o| match o {
                Some(Output::Column(c)) => Some(*c),
                _ => None,
            })
            .collect();
        let mut out: Vec<usize> = self
            .nodes
            .iter()
            .filter_map(|n| match n {
                Node::Column(c, _) if !passed.contains(c) => Some(*c),
                _ => None,
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Every source column this program reads, as lanes or passed through.
    pub fn source_columns(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self
            .outputs
            .iter()
            .filter_map(|o| match o {
                Some(Output::Column(c)) => Some(*c),
                _ => None,
            })
            .chain(self.nodes.iter().filter_map(|n| match n {
                Node::Column(c, _) => Some(*c),
                _ => None,
            }))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Number of distinct computed nodes (common subexpressions count once).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The arguments over the rows of `columns` that `selection` keeps (all rows when `None`):
    /// one array per argument, of its type, `None` for `COUNT(*)`. `scratch` holds the nodes'
    /// values; a worker keeps one for all its batches, so no node allocates after the first.
    pub fn run(
        &self,
        scratch: &mut Scratch,
        columns: &[ArrayRef],
        selection: Option<&Selection>,
        rows: usize,
    ) -> Result<Vec<Option<ArrayRef>>> {
        let n = selection.map_or(rows, |s| s.indices.len());
        scratch.slots.resize_with(self.nodes.len(), Slot::default);
        // Every node is some computed output's or an operand of one (compile adds no other).
        for (i, node) in self.nodes.iter().enumerate() {
            // Operands come before the node (they were added first).
            let (done, rest) = scratch.slots.split_at_mut(i);
            let Some(out) = rest.first_mut() else {
                break;
            };
            match node {
                Node::Column(c, _) => load(column(columns, *c)?, selection, out)?,
                Node::Literal(v, t) => literal(*v, t, n, out),
                Node::Binary(op, l, r, t) => binary(
                    *op,
                    (read(done, *l)?, self.constant(*l)),
                    (read(done, *r)?, self.constant(*r)),
                    (&self.type_of(*l), &self.type_of(*r), t),
                    out,
                    &mut scratch.tmp,
                )?,
                Node::Negative(x, t) => negative(read(done, *x)?, t, out),
                Node::Cast(x, to) => cast(read(done, *x)?, *x, &self.type_of(*x), to, out),
            }
        }
        // A column passed through to several aggregates (Q1's SUM and AVG of one column) is
        // filtered once and shared; so is a node several arguments read.
        let mut passed: Vec<(usize, ArrayRef)> = Vec::new();
        let mut computed: Vec<(usize, ArrayRef)> = Vec::new();
        let mut outs: Vec<Option<ArrayRef>> = vec![None; self.outputs.len()];
        let mut moves: Vec<(usize, usize, Moved)> = Vec::new();
        for (k, (o, &lanes)) in self.outputs.iter().zip(&self.lanes).enumerate() {
            outs[k] = match o {
                None => None,
                Some(Output::Column(c)) => Some(match passed.iter().find(|(p, _)| p == c) {
                    Some((_, a)) => Arc::clone(a),
                    None => {
                        let a = column(columns, *c)?;
                        let a = match selection {
                            None => Arc::clone(a),
                            Some(s) => s.predicate.filter(a)?,
                        };
                        passed.push((*c, Arc::clone(&a)));
                        a
                    }
                }),
                Some(Output::Node(i)) => {
                    let (v, t) = (read(&scratch.slots, *i)?, self.type_of(*i));
                    let moved = match (lanes, v.lanes, &t) {
                        (true, Lanes::I64(_), DataType::Decimal128(_, s)) => {
                            Some(Moved::Decimal64(*s))
                        }
                        (_, Lanes::I64(_), DataType::Int64) => Some(Moved::Int64),
                        (_, Lanes::F64(_), DataType::Float64) => Some(Moved::Float64),
                        _ => None,
                    };
                    match moved {
                        Some(m) => {
                            moves.push((k, resolve(&scratch.slots, *i)?, m));
                            None
                        }
                        None => Some(match computed.iter().find(|(n, _)| n == i) {
                            Some((_, a)) => Arc::clone(a),
                            None => {
                                let a = to_arrow(v, &t)?;
                                computed.push((*i, Arc::clone(&a)));
                                a
                            }
                        }),
                    }
                }
            };
        }
        // Lanes leave last, moved out of their slots (every copy above has read them): the
        // aggregates read them once, and a copy of each was ~a tenth of Q1's CPU time. A slot
        // moved out starts the next batch empty (an allocation, not a copy).
        let mut moved: Vec<(usize, ArrayRef)> = Vec::new();
        for (k, slot, to) in moves {
            outs[k] = Some(match moved.iter().find(|(j, _)| *j == slot) {
                Some((_, a)) => Arc::clone(a),
                None => {
                    let s = &mut scratch.slots[slot];
                    let nulls = s.nulls.clone();
                    let lanes = match s.kind {
                        Kind::Borrowed => s.borrowed.clone(),
                        _ => std::mem::take(&mut s.i64s).into(),
                    };
                    let a = match to {
                        Moved::Decimal64(scale) => decimal_lanes(lanes, nulls, scale),
                        Moved::Int64 => Arc::new(PrimitiveArray::<Int64Type>::new(lanes, nulls)),
                        Moved::Float64 => prim::<Float64Type>(std::mem::take(&mut s.f64s), nulls),
                    };
                    moved.push((slot, Arc::clone(&a)));
                    a
                }
            });
        }
        for (k, parts) in &self.tuples {
            let parts = parts
                .iter()
                .map(|&j| outs.get_mut(j).and_then(Option::take))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| GrouperError::InvalidInput("a tuple's part is missing".into()))?;
            outs[*k] = Some(super::tuple(parts, n)?);
        }
        outs.truncate(self.args);
        Ok(outs)
    }

    /// Node `i`'s value when it is a non-NULL numeric literal (its lanes repeat it).
    fn constant(&self, i: usize) -> Option<Scalar> {
        match self.nodes.get(i) {
            Some(Node::Literal(v @ (Scalar::Int(_) | Scalar::Float(_)), _)) => Some(*v),
            _ => None,
        }
    }

    fn type_of(&self, i: usize) -> DataType {
        match self.nodes.get(i) {
            Some(
                Node::Column(_, t)
                | Node::Literal(_, t)
                | Node::Binary(.., t)
                | Node::Negative(_, t)
                | Node::Cast(_, t),
            ) => t.clone(),
            None => DataType::Null,
        }
    }
}

/// The rows of a batch a filter keeps: their indices (for the program's loads) and Arrow's
/// filter predicate (for columns passed through and the keys).
#[derive(Debug)]
pub struct Selection {
    /// Kept rows, ascending.
    pub indices: Vec<u32>,
    /// The same rows as Arrow's prepared filter.
    pub predicate: FilterPredicate,
}

impl Selection {
    /// The selection of a filter's result (true keeps a row; it must have no NULLs).
    pub fn new(keep: &arrow::array::BooleanArray) -> Self {
        Self::with_indices(keep, Self::indices(keep))
    }

    /// The selection of `keep` whose kept rows' [`Selection::indices`] are `indices`.
    pub fn with_indices(keep: &arrow::array::BooleanArray, indices: Vec<u32>) -> Self {
        let predicate = arrow::compute::FilterBuilder::new(keep).optimize().build();
        Self { indices, predicate }
    }

    /// The rows a filter's result keeps (true; it must have no NULLs), ascending.
    pub fn indices(keep: &arrow::array::BooleanArray) -> Vec<u32> {
        // Branch-free: every row's index is written at the next free place, which moves on only
        // past a kept row (a filter keeps most rows, or a branch per row would mispredict;
        // collecting the set bits' indices was ~3% of Q1's CPU time).
        let bits = keep.values();
        let mut indices = vec![0u32; bits.len()];
        let mut n = 0;
        let chunks = bits.bit_chunks();
        let words = chunks
            .iter()
            .chain(std::iter::once(chunks.remainder_bits()));
        for (c, word) in words.enumerate() {
            let base = c * 64;
            for j in 0..64.min(bits.len().saturating_sub(base)) {
                indices[n] = (base + j) as u32;
                n += (word >> j) as usize & 1;
            }
        }
        indices.truncate(n);
        indices
    }

    /// Number of kept rows.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// Whether no row is kept.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }
}

fn column(columns: &[ArrayRef], c: usize) -> Result<&ArrayRef> {
    columns
        .get(c)
        .ok_or_else(|| GrouperError::InvalidInput(format!("no column {c}")))
}

/// Per-worker buffers of a [`Program`]: one slot of values per node, kept from batch to batch
/// (fresh buffers per batch cost more in page faults than the arithmetic they hold).
#[derive(Debug, Default)]
pub struct Scratch {
    slots: Vec<Slot>,
    tmp: (Vec<i64>, Vec<i64>),
}

/// Which buffer of a slot holds its values.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
enum Kind {
    #[default]
    I64,
    I128,
    F64,
    /// The values of an earlier node (a cast that changes no value).
    Alias(usize),
    /// A column's own 64-bit values, every row and none NULL ([`Slot::borrowed`]).
    Borrowed,
}

#[derive(Debug, Default)]
struct Slot {
    kind: Kind,
    i64s: Vec<i64>,
    i128s: Vec<i128>,
    f64s: Vec<f64>,
    /// An input column's values, read in place over a whole batch: no copy into `i64s`, and
    /// a lane passed to an aggregate as it is.
    borrowed: ScalarBuffer<i64>,
    nulls: Option<NullBuffer>,
}

/// A node's values over the selected rows, borrowed from its slot.
#[derive(Debug, Clone, Copy)]
enum Lanes<'a> {
    I64(&'a [i64]),
    I128(&'a [i128]),
    F64(&'a [f64]),
}

#[derive(Debug, Clone, Copy)]
struct Read<'a> {
    lanes: Lanes<'a>,
    nulls: Option<&'a NullBuffer>,
}

/// The slot holding node `i`'s values, following aliases.
fn resolve(slots: &[Slot], mut i: usize) -> Result<usize> {
    loop {
        match slots.get(i).map(|s| s.kind) {
            Some(Kind::Alias(j)) if j < i => i = j,
            Some(Kind::Alias(_)) | None => {
                return Err(GrouperError::InvalidInput("program order".into()))
            }
            Some(_) => return Ok(i),
        }
    }
}

/// The values of node `i`, following aliases.
fn read(slots: &[Slot], i: usize) -> Result<Read<'_>> {
    let s = &slots[resolve(slots, i)?];
    let lanes = match s.kind {
        Kind::I64 => Lanes::I64(&s.i64s),
        Kind::I128 => Lanes::I128(&s.i128s),
        Kind::F64 => Lanes::F64(&s.f64s),
        Kind::Borrowed => Lanes::I64(&s.borrowed),
        Kind::Alias(_) => return Err(GrouperError::InvalidInput("program order".into())),
    };
    Ok(Read {
        lanes,
        nulls: s.nulls.as_ref(),
    })
}

impl Slot {
    fn set_i64(&mut self, values: impl Iterator<Item = i64>) {
        self.kind = Kind::I64;
        self.i64s.clear();
        self.i64s.extend(values);
    }
    fn set_i128(&mut self, values: impl Iterator<Item = i128>) {
        self.kind = Kind::I128;
        self.i128s.clear();
        self.i128s.extend(values);
    }
    fn set_f64(&mut self, values: impl Iterator<Item = f64>) {
        self.kind = Kind::F64;
        self.f64s.clear();
        self.f64s.extend(values);
    }
}

/// `f` of the selected values (all when `None`) into `dst`: a selection's indices were checked
/// against the array's length by [`load`]. (Extending from a slice's iterator stores no length
/// per value and zeroes nothing first.)
fn gather<T: Copy, U: Copy>(
    dst: &mut Vec<U>,
    values: &[T],
    sel: Option<&Selection>,
    mut f: impl FnMut(T) -> U,
) {
    dst.clear();
    match sel {
        None => dst.extend(values.iter().map(|&v| f(v))),
        Some(s) => dst.extend(s.indices.iter().map(|&i| f(values[i as usize]))),
    }
}

/// The selected values (all when `None`) narrowed to 64 bits into `dst`, in one pass; whether
/// every one fits (a NULL slot's value counts too, which can only cost the fast path). The
/// misfit bits gather in a local the loop keeps in a register (and-ing a flag captured by a
/// mapping closure had made every value a load and store of that flag). In TPC-H Q1 in memory
/// these loops are ~25% of the CPU either way: they are the first to touch the table's 16-byte
/// decimals, and wait on those loads.
fn narrow(dst: &mut Vec<i64>, wide: &[i128], sel: Option<&Selection>) -> bool {
    // The high word of a value that fits is its low word's sign.
    let misfit = |v: i128| ((v >> 64) as i64) ^ ((v as i64) >> 63);
    let mut bad = 0i64;
    dst.clear();
    // Narrowed a chunk at a time into a local array and appended, rather than into a vector
    // first filled with zeros (a store per value more: ~3% of TPC-H Q1's CPU time in memory).
    let mut lanes = [0i64; NARROW_CHUNK];
    match sel {
        None => {
            dst.reserve(wide.len());
            for chunk in wide.chunks(NARROW_CHUNK) {
                for (l, &v) in lanes.iter_mut().zip(chunk) {
                    bad |= misfit(v);
                    *l = v as i64;
                }
                dst.extend_from_slice(&lanes[..chunk.len()]);
            }
        }
        Some(s) => {
            dst.reserve(s.indices.len());
            for chunk in s.indices.chunks(NARROW_CHUNK) {
                for (l, &i) in lanes.iter_mut().zip(chunk) {
                    let v = wide[i as usize];
                    bad |= misfit(v);
                    *l = v as i64;
                }
                dst.extend_from_slice(&lanes[..chunk.len()]);
            }
        }
    }
    bad == 0
}

/// Values [`narrow`] narrows before appending them: each append is a call to `memcpy`, which at
/// 16 values (128 bytes) a call was ~6% of TPC-H Q1's CPU time in memory; at 256 (a 2 KiB local
/// array, in L1) the calls leave the profile (Q1 SF 1 in memory on 2 threads 4% faster).
const NARROW_CHUNK: usize = 256;

fn gather_nulls(nulls: Option<&NullBuffer>, sel: Option<&Selection>) -> Option<NullBuffer> {
    let n = nulls.filter(|n| n.null_count() > 0)?;
    Some(match sel {
        None => n.clone(),
        Some(s) => NullBuffer::from(
            s.indices
                .iter()
                .map(|&i| n.is_valid(i as usize))
                .collect::<Vec<_>>(),
        ),
    })
    .filter(|n| n.null_count() > 0)
}

/// A column's selected rows into `out`; NULL slots read as 0 so they cannot flag an overflow.
fn load(a: &ArrayRef, sel: Option<&Selection>, out: &mut Slot) -> Result<()> {
    if let Some(s) = sel {
        if s.indices.last().is_some_and(|&i| i as usize >= a.len()) {
            return Err(GrouperError::InvalidInput(
                "selection past the batch".into(),
            ));
        }
    }
    out.nulls = gather_nulls(a.nulls(), sel);
    // (A batch read in place before is let go.)
    if out.kind == Kind::Borrowed {
        out.borrowed = ScalarBuffer::default();
    }
    // Every row of a column of 64-bit values without NULLs: read in place.
    if sel.is_none() && out.nulls.is_none() {
        let values = match a.data_type() {
            DataType::Int64 => Some(a.as_primitive::<Int64Type>().values()),
            DataType::Decimal64(..) => Some(a.as_primitive::<Decimal64Type>().values()),
            _ => None,
        };
        if let Some(v) = values {
            out.kind = Kind::Borrowed;
            out.borrowed = v.clone();
            return Ok(());
        }
    }
    macro_rules! ints {
        ($t:ty) => {{
            out.kind = Kind::I64;
            gather(&mut out.i64s, a.as_primitive::<$t>().values(), sel, |v| {
                v as i64
            })
        }};
    }
    match a.data_type() {
        DataType::Int8 => ints!(Int8Type),
        DataType::Int16 => ints!(Int16Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int64 => ints!(Int64Type),
        DataType::UInt8 => ints!(UInt8Type),
        DataType::UInt16 => ints!(UInt16Type),
        DataType::UInt32 => ints!(UInt32Type),
        DataType::Float32 => {
            out.kind = Kind::F64;
            let v = a.as_primitive::<Float32Type>().values();
            gather(&mut out.f64s, v, sel, |v| v as f64)
        }
        DataType::Float64 => {
            out.kind = Kind::F64;
            gather(
                &mut out.f64s,
                a.as_primitive::<Float64Type>().values(),
                sel,
                |v| v,
            )
        }
        // A Parquet scan's 64-bit decimals ([`Program::lane_columns`]): the lanes as they are.
        DataType::Decimal64(..) => ints!(Decimal64Type),
        DataType::Decimal128(..) => {
            let wide = a.as_primitive::<Decimal128Type>().values();
            out.kind = Kind::I64;
            if !narrow(&mut out.i64s, wide, sel) {
                out.kind = Kind::I128;
                gather(&mut out.i128s, wide, sel, |v| v);
            }
        }
        t => {
            return Err(GrouperError::UnsupportedType {
                what: "fused argument",
                data_type: t.clone(),
            })
        }
    }
    if let Some(n) = &out.nulls {
        match out.kind {
            Kind::I128 => zero_nulls(&mut out.i128s, n),
            Kind::F64 => zero_nulls(&mut out.f64s, n),
            _ => zero_nulls(&mut out.i64s, n),
        }
    }
    Ok(())
}

fn zero_nulls<T: Default>(v: &mut [T], nulls: &NullBuffer) {
    for (x, valid) in v.iter_mut().zip(nulls.iter()) {
        if !valid {
            *x = T::default();
        }
    }
}

fn literal(v: Scalar, t: &DataType, n: usize, out: &mut Slot) {
    out.nulls = None;
    match v {
        Scalar::Int(i) => match i64::try_from(i) {
            Ok(x) => out.set_i64(std::iter::repeat_n(x, n)),
            Err(_) => out.set_i128(std::iter::repeat_n(i, n)),
        },
        Scalar::Float(f) => out.set_f64(std::iter::repeat_n(f, n)),
        Scalar::Null | Scalar::Bool(_) => {
            if is_float(t) {
                out.set_f64(std::iter::repeat_n(0.0, n));
            } else {
                out.set_i64(std::iter::repeat_n(0, n));
            }
            out.nulls = Some(NullBuffer::new_null(n));
        }
    }
}

fn prim<T: ArrowPrimitiveType>(values: Vec<T::Native>, nulls: Option<NullBuffer>) -> ArrayRef {
    Arc::new(PrimitiveArray::<T>::new(values.into(), nulls))
}

/// A decimal node's 64-bit lanes as `Decimal64` of scale `scale`: the values as they are (the
/// precision is the type's largest, not the node's, which may pass 18 digits while its values
/// fit).
fn decimal_lanes(values: ScalarBuffer<i64>, nulls: Option<NullBuffer>, scale: i8) -> ArrayRef {
    Arc::new(
        PrimitiveArray::<Decimal64Type>::new(values, nulls)
            .with_data_type(DataType::Decimal64(DECIMAL64_MAX_PRECISION, scale)),
    )
}

/// The lanes as an Arrow array of type `t`.
fn to_arrow(v: Read<'_>, t: &DataType) -> Result<ArrayRef> {
    let nulls = v.nulls.cloned();
    macro_rules! ints {
        ($ty:ty, $n:ty) => {
            match v.lanes {
                Lanes::I64(x) => prim::<$ty>(x.iter().map(|&i| i as $n).collect(), nulls),
                _ => return Err(GrouperError::InvalidInput("integer lanes expected".into())),
            }
        };
    }
    Ok(match t {
        DataType::Int8 => ints!(Int8Type, i8),
        DataType::Int16 => ints!(Int16Type, i16),
        DataType::Int32 => ints!(Int32Type, i32),
        DataType::Int64 => ints!(Int64Type, i64),
        DataType::UInt8 => ints!(UInt8Type, u8),
        DataType::UInt16 => ints!(UInt16Type, u16),
        DataType::UInt32 => ints!(UInt32Type, u32),
        DataType::Float32 => {
            prim::<Float32Type>(floats(v.lanes).iter().map(|&f| f as f32).collect(), nulls)
        }
        DataType::Float64 => prim::<Float64Type>(floats(v.lanes).into_owned(), nulls),
        DataType::Decimal128(p, s) => Arc::new(
            PrimitiveArray::<Decimal128Type>::new(
                match v.lanes {
                    Lanes::I64(x) => x.iter().map(|&i| i as i128).collect::<Vec<_>>(),
                    Lanes::I128(x) => x.to_vec(),
                    Lanes::F64(_) => {
                        return Err(GrouperError::InvalidInput("decimal lanes expected".into()))
                    }
                }
                .into(),
                nulls,
            )
            .with_precision_and_scale(*p, *s)?,
        ),
        t => {
            return Err(GrouperError::UnsupportedType {
                what: "fused argument",
                data_type: t.clone(),
            })
        }
    })
}

#[cfg(test)]
mod tests;

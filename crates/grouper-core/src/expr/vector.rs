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

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::buffer::NullBuffer;
use arrow::compute::FilterPredicate;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type, UInt16Type, UInt32Type, UInt8Type,
};

use super::{is_float, is_int, pow10, wrap, BinOp, Expr, Scalar};
use crate::error::{GrouperError, Result};

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
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Output {
    /// A source column as it is.
    Column(usize),
    /// A computed node.
    Node(usize),
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
        let mut p = Program {
            nodes: Vec::new(),
            outputs: Vec::with_capacity(args.len()),
        };
        for a in args {
            let out = match a {
                None => None,
                Some(Expr::Column { index, .. }) => Some(Output::Column(*index)),
                Some(e) => {
                    e.check().ok()?;
                    Some(Output::Node(p.add(e)?))
                }
            };
            p.outputs.push(out);
        }
        Some(p)
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
                    read(done, *l)?,
                    read(done, *r)?,
                    (&self.type_of(*l), &self.type_of(*r), t),
                    out,
                    &mut scratch.tmp,
                )?,
                Node::Negative(x, t) => negative(read(done, *x)?, t, out),
                Node::Cast(x, to) => cast(read(done, *x)?, *x, &self.type_of(*x), to, out),
            }
        }
        // A column passed through to several aggregates (Q1's SUM and AVG of one column) is
        // filtered once and shared.
        let mut passed: Vec<(usize, ArrayRef)> = Vec::new();
        self.outputs
            .iter()
            .map(|o| match o {
                None => Ok(None),
                Some(Output::Column(c)) => {
                    if let Some((_, a)) = passed.iter().find(|(p, _)| p == c) {
                        return Ok(Some(Arc::clone(a)));
                    }
                    let a = column(columns, *c)?;
                    let a = match selection {
                        None => Arc::clone(a),
                        Some(s) => s.predicate.filter(a)?,
                    };
                    passed.push((*c, Arc::clone(&a)));
                    Ok(Some(a))
                }
                Some(Output::Node(i)) => {
                    to_arrow(read(&scratch.slots, *i)?, &self.type_of(*i)).map(Some)
                }
            })
            .collect()
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
        let indices = keep
            .values()
            .set_indices()
            .map(|i| i as u32)
            .collect::<Vec<_>>();
        let predicate = arrow::compute::FilterBuilder::new(keep).optimize().build();
        Self { indices, predicate }
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
}

#[derive(Debug, Default)]
struct Slot {
    kind: Kind,
    i64s: Vec<i64>,
    i128s: Vec<i128>,
    f64s: Vec<f64>,
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

/// The values of node `i`, following aliases.
fn read(slots: &[Slot], mut i: usize) -> Result<Read<'_>> {
    loop {
        let s = slots
            .get(i)
            .ok_or_else(|| GrouperError::InvalidInput("program order".into()))?;
        let lanes = match s.kind {
            Kind::Alias(j) if j < i => {
                i = j;
                continue;
            }
            Kind::Alias(_) => return Err(GrouperError::InvalidInput("program order".into())),
            Kind::I64 => Lanes::I64(&s.i64s),
            Kind::I128 => Lanes::I128(&s.i128s),
            Kind::F64 => Lanes::F64(&s.f64s),
        };
        return Ok(Read {
            lanes,
            nulls: s.nulls.as_ref(),
        });
    }
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
/// against the array's length by [`load`]. (Loops write into a slice sized first, so that no
/// length is stored per value and the compiler vectorises them.)
fn gather<T: Copy, U: Copy + Default>(
    dst: &mut Vec<U>,
    values: &[T],
    sel: Option<&Selection>,
    f: impl Fn(T) -> U,
) {
    match sel {
        None => {
            dst.clear();
            dst.extend(values.iter().map(|&v| f(v)));
        }
        Some(s) => {
            dst.resize(s.indices.len(), U::default());
            for (o, &i) in dst.iter_mut().zip(&s.indices) {
                *o = f(values[i as usize]);
            }
        }
    }
}

/// `f` over `a` into `dst`; false when some lane overflowed.
fn map64(a: &[i64], dst: &mut Vec<i64>, f: impl Fn(i64) -> (i64, bool)) -> bool {
    dst.resize(a.len(), 0);
    let mut overflow = false;
    for (o, &x) in dst.iter_mut().zip(a) {
        let (r, v) = f(x);
        *o = r;
        overflow |= v;
    }
    !overflow
}

/// `f` over pairs of `a` and `b` into `dst`; false when some lane overflowed.
fn zip64(a: &[i64], b: &[i64], dst: &mut Vec<i64>, f: impl Fn(i64, i64) -> (i64, bool)) -> bool {
    dst.resize(a.len().min(b.len()), 0);
    let mut overflow = false;
    for (o, (&x, &y)) in dst.iter_mut().zip(a.iter().zip(b)) {
        let (r, v) = f(x, y);
        *o = r;
        overflow |= v;
    }
    !overflow
}

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
        DataType::Decimal128(..) => {
            let wide = a.as_primitive::<Decimal128Type>().values();
            // Whether the whole column fits (unselected rows too: a superset, one branchless
            // pass).
            let fits = wide.iter().fold(true, |f, &v| f & (v as i64 as i128 == v));
            out.kind = Kind::I64;
            gather(&mut out.i64s, wide, sel, |v| v as i64);
            if !fits {
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

fn widen<'a>(l: Lanes<'a>) -> Box<dyn Iterator<Item = i128> + 'a> {
    match l {
        Lanes::I64(v) => Box::new(v.iter().map(|&x| x as i128)),
        Lanes::I128(v) => Box::new(v.iter().copied()),
        Lanes::F64(v) => Box::new(v.iter().map(|&x| x as i128)),
    }
}

fn floats(l: Lanes<'_>) -> Cow<'_, [f64]> {
    match l {
        Lanes::F64(v) => Cow::Borrowed(v),
        Lanes::I64(v) => v.iter().map(|&x| x as f64).collect(),
        Lanes::I128(v) => v.iter().map(|&x| x as f64).collect(),
    }
}

/// `x * 10^k` over 64-bit lanes (into `tmp` unless `k` is 0); `None` when some value (or
/// `10^k`) leaves 64 bits.
fn rescale64<'a>(v: &'a [i64], k: i8, tmp: &'a mut Vec<i64>) -> Option<&'a [i64]> {
    if k == 0 {
        return Some(v);
    }
    let m = i64::try_from(pow10(k as i32)).ok()?;
    map64(v, tmp, |x| x.overflowing_mul(m)).then_some(tmp.as_slice())
}

fn decimal_op64(
    op: BinOp,
    (a, b): (&[i64], &[i64]),
    (ka, kb): (i8, i8),
    out: &mut Slot,
    tmp: &mut (Vec<i64>, Vec<i64>),
) -> bool {
    out.kind = Kind::I64;
    if op == BinOp::Mul {
        return zip64(a, b, &mut out.i64s, i64::overflowing_mul);
    }
    let (Some(a), Some(b)) = (rescale64(a, ka, &mut tmp.0), rescale64(b, kb, &mut tmp.1)) else {
        return false;
    };
    match op {
        BinOp::Add => zip64(a, b, &mut out.i64s, i64::overflowing_add),
        _ => zip64(a, b, &mut out.i64s, i64::overflowing_sub),
    }
}

fn decimal_overflow(op: BinOp, t: &DataType) -> GrouperError {
    GrouperError::InvalidInput(format!("decimal overflow in {op:?} of {t}"))
}

fn binary(
    op: BinOp,
    a: Read<'_>,
    b: Read<'_>,
    (lt, rt, t): (&DataType, &DataType, &DataType),
    out: &mut Slot,
    tmp: &mut (Vec<i64>, Vec<i64>),
) -> Result<()> {
    out.nulls = NullBuffer::union(a.nulls, b.nulls);
    match (lt, rt, t) {
        (DataType::Decimal128(_, s1), DataType::Decimal128(_, s2), DataType::Decimal128(_, s)) => {
            let k = (*s - *s1, *s - *s2);
            let narrow = match (a.lanes, b.lanes) {
                (Lanes::I64(x), Lanes::I64(y)) => decimal_op64(op, (x, y), k, out, tmp),
                _ => false,
            };
            if !narrow {
                decimal_op128(op, (a, b), k, out, t)?;
            }
        }
        _ if is_float(t) => {
            let (x, y) = (floats(a.lanes), floats(b.lanes));
            let f32_out = *t == DataType::Float32;
            out.set_f64(x.iter().zip(y.iter()).map(|(&x, &y)| {
                let r = match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    _ => x / y,
                };
                if f32_out {
                    r as f32 as f64
                } else {
                    r
                }
            }));
        }
        _ => {
            let (Lanes::I64(x), Lanes::I64(y)) = (a.lanes, b.lanes) else {
                return Err(GrouperError::InvalidInput("integer lanes expected".into()));
            };
            if op == BinOp::Div {
                let nulls = out.nulls.as_ref();
                let zero = y
                    .iter()
                    .enumerate()
                    .any(|(i, &d)| d == 0 && nulls.is_none_or(|n| n.is_valid(i)));
                if zero {
                    return Err(GrouperError::InvalidInput("division by zero".into()));
                }
            }
            out.set_i64(x.iter().zip(y).map(|(&x, &y)| {
                let r = match op {
                    BinOp::Add => x.wrapping_add(y),
                    BinOp::Sub => x.wrapping_sub(y),
                    BinOp::Mul => x.wrapping_mul(y),
                    _ if y == 0 => 0,
                    _ => x.wrapping_div(y),
                };
                wrap(r as i128, t) as i64
            }));
        }
    }
    Ok(())
}

/// The reference's 128-bit decimal arithmetic into `out`, failing only on a valid row.
fn decimal_op128(
    op: BinOp,
    (a, b): (Read<'_>, Read<'_>),
    (ka, kb): (i8, i8),
    out: &mut Slot,
    t: &DataType,
) -> Result<()> {
    let (ma, mb) = (pow10(ka as i32), pow10(kb as i32));
    let nulls = out.nulls.clone();
    let mut failed = false;
    out.set_i128(
        widen(a.lanes)
            .zip(widen(b.lanes))
            .enumerate()
            .map(|(i, (x, y))| {
                let r = match op {
                    BinOp::Mul => x.checked_mul(y),
                    BinOp::Add => x
                        .checked_mul(ma)
                        .zip(y.checked_mul(mb))
                        .and_then(|(x, y)| x.checked_add(y)),
                    _ => x
                        .checked_mul(ma)
                        .zip(y.checked_mul(mb))
                        .and_then(|(x, y)| x.checked_sub(y)),
                };
                r.unwrap_or_else(|| {
                    failed |= nulls.as_ref().is_none_or(|n| n.is_valid(i));
                    0
                })
            }),
    );
    match failed {
        true => Err(decimal_overflow(op, t)),
        false => Ok(()),
    }
}

fn negative(a: Read<'_>, t: &DataType, out: &mut Slot) {
    out.nulls = a.nulls.cloned();
    match a.lanes {
        Lanes::F64(v) => out.set_f64(v.iter().map(|&x| -x)),
        Lanes::I128(v) => out.set_i128(v.iter().map(|&x| x.wrapping_neg())),
        Lanes::I64(v) if matches!(t, DataType::Decimal128(..)) => {
            if v.contains(&i64::MIN) {
                out.set_i128(v.iter().map(|&x| (x as i128).wrapping_neg()));
            } else {
                out.set_i64(v.iter().map(|&x| -x));
            }
        }
        Lanes::I64(v) => out.set_i64(
            v.iter()
                .map(|&x| wrap((x as i128).wrapping_neg(), t) as i64),
        ),
    }
}

/// CAST of node `src`'s values `a` into `out` (an alias of `src` where no value changes).
fn cast(a: Read<'_>, src: usize, from: &DataType, to: &DataType, out: &mut Slot) {
    if from == to || (is_int(from) && is_int(to)) {
        out.kind = Kind::Alias(src);
        return;
    }
    out.nulls = a.nulls.cloned();
    match (from, to) {
        // Straight to f32 from the integer: through f64 would round twice.
        (_, DataType::Float32) => match a.lanes {
            Lanes::I64(v) => out.set_f64(v.iter().map(|&x| x as f32 as f64)),
            Lanes::I128(v) => out.set_f64(v.iter().map(|&x| x as f32 as f64)),
            Lanes::F64(v) => out.set_f64(v.iter().map(|&f| f as f32 as f64)),
        },
        (DataType::Decimal128(_, s), DataType::Float64) => {
            let d = 10f64.powi(*s as i32);
            out.set_f64(floats(a.lanes).iter().map(|&f| f / d));
        }
        (_, DataType::Float64) => out.set_f64(floats(a.lanes).iter().copied()),
        (_, DataType::Decimal128(_, s)) => {
            let fs = match from {
                DataType::Decimal128(_, fs) => *fs,
                _ => 0,
            };
            let k = *s - fs;
            let m = pow10(k as i32);
            let narrow = match (a.lanes, i64::try_from(m)) {
                (Lanes::I64(v), Ok(m64)) => {
                    out.kind = Kind::I64;
                    map64(v, &mut out.i64s, |x| x.overflowing_mul(m64))
                }
                _ => false,
            };
            if !narrow {
                out.set_i128(widen(a.lanes).map(|x| x * m));
            }
        }
        _ => out.set_i64(std::iter::empty()),
    }
}

fn prim<T: ArrowPrimitiveType>(values: Vec<T::Native>, nulls: Option<NullBuffer>) -> ArrayRef {
    Arc::new(PrimitiveArray::<T>::new(values.into(), nulls))
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

//! The node kernels of a [`super::Program`]: arithmetic over a node's lanes into another's
//! slot, in 64 bits with overflow flags while values fit, else in 128 bits with the reference's
//! checked arithmetic (its errors on valid rows only), and casts.

use std::borrow::Cow;

use arrow::buffer::NullBuffer;
use arrow::datatypes::DataType;

use super::{Kind, Lanes, Read, Slot, NARROW_CHUNK};
use crate::error::{GrouperError, Result};
use crate::expr::{is_float, is_int, pow10, wrap, BinOp, Scalar};

/// `f` over `a` into `dst`; false when some lane overflowed. The overflow bits gather in a
/// local of a plain loop, kept in a register: a flag captured by a mapping closure was loaded
/// and stored at every lane, a chain through memory of several cycles a lane (the multiply of
/// TPC-H Q1's `l_extendedprice * (1 - l_discount)` waited on it more than on the multiply).
/// Lanes are appended a chunk at a time from a local array, as [`super::narrow`] does.
fn map64(a: &[i64], dst: &mut Vec<i64>, f: impl Fn(i64) -> (i64, bool)) -> bool {
    let mut bad = false;
    let mut lanes = [0i64; NARROW_CHUNK];
    dst.clear();
    dst.reserve(a.len());
    for chunk in a.chunks(NARROW_CHUNK) {
        for (l, &x) in lanes.iter_mut().zip(chunk) {
            let (r, v) = f(x);
            bad |= v;
            *l = r;
        }
        dst.extend_from_slice(&lanes[..chunk.len()]);
    }
    !bad
}

/// `f` over pairs of `a` and `b` into `dst`; false when some lane overflowed (as [`map64`]).
fn zip64(a: &[i64], b: &[i64], dst: &mut Vec<i64>, f: impl Fn(i64, i64) -> (i64, bool)) -> bool {
    let mut bad = false;
    let mut lanes = [0i64; NARROW_CHUNK];
    dst.clear();
    dst.reserve(a.len().min(b.len()));
    for (ca, cb) in a.chunks(NARROW_CHUNK).zip(b.chunks(NARROW_CHUNK)) {
        let n = ca.len().min(cb.len());
        for ((l, &x), &y) in lanes.iter_mut().zip(ca).zip(cb) {
            let (r, v) = f(x, y);
            bad |= v;
            *l = r;
        }
        dst.extend_from_slice(&lanes[..n]);
    }
    !bad
}

/// One operand of a 64-bit kernel: a node's lanes, or a literal's one value.
#[derive(Clone, Copy)]
enum Operand<'a, T> {
    Lanes(&'a [T]),
    Constant(T),
}

/// A node's lanes, or its literal value `c`.
fn operand<T: Copy>(lanes: &[T], c: Option<T>) -> Operand<'_, T> {
    match c {
        Some(c) => Operand::Constant(c),
        None => Operand::Lanes(lanes),
    }
}

/// A literal as the one value of integer lanes (NULL and 128-bit literals keep their lanes).
fn int_constant(c: Scalar) -> Option<i64> {
    match c {
        Scalar::Int(v) => i64::try_from(v).ok(),
        _ => None,
    }
}

/// A literal as the one value of float lanes (an integer literal of a float node reads as
/// its value, as [`floats`] reads its lanes).
fn float_constant(c: Scalar) -> Option<f64> {
    match c {
        Scalar::Float(f) => Some(f),
        Scalar::Int(v) => Some(v as f64),
        _ => None,
    }
}

/// `f` over the lanes of `x` and `y` into `dst`, a literal operand read from a register: one
/// loop per shape, each a plain map the compiler vectorises (an operator matched inside the
/// loop, or a literal's lanes read from memory, kept it scalar).
#[inline(always)]
fn lanes_op<T: Copy>(
    (x, y): (Operand<'_, T>, Operand<'_, T>),
    rows: usize,
    dst: &mut Vec<T>,
    f: impl Fn(T, T) -> T,
) {
    dst.clear();
    match (x, y) {
        (Operand::Lanes(a), Operand::Lanes(b)) => {
            dst.extend(a.iter().zip(b).map(|(&a, &b)| f(a, b)))
        }
        (Operand::Lanes(a), Operand::Constant(c)) => dst.extend(a.iter().map(|&a| f(a, c))),
        (Operand::Constant(c), Operand::Lanes(b)) => dst.extend(b.iter().map(|&b| f(c, b))),
        // Two literals (DataFusion folds them before the plan reaches here).
        (Operand::Constant(a), Operand::Constant(b)) => {
            dst.extend(std::iter::repeat_n(f(a, b), rows))
        }
    }
}

/// `x op y` over float lanes.
fn float_op(op: BinOp, xy: (Operand<'_, f64>, Operand<'_, f64>), rows: usize, dst: &mut Vec<f64>) {
    match op {
        BinOp::Add => lanes_op(xy, rows, dst, |a, b| a + b),
        BinOp::Sub => lanes_op(xy, rows, dst, |a, b| a - b),
        BinOp::Mul => lanes_op(xy, rows, dst, |a, b| a * b),
        _ => lanes_op(xy, rows, dst, |a, b| a / b),
    }
}

/// `x op y` over integer lanes, wrapping in 64 bits (a division by zero gives 0: the caller
/// has checked that no valid row divides by zero).
fn int_op(op: BinOp, xy: (Operand<'_, i64>, Operand<'_, i64>), rows: usize, dst: &mut Vec<i64>) {
    match op {
        BinOp::Add => lanes_op(xy, rows, dst, i64::wrapping_add),
        BinOp::Sub => lanes_op(xy, rows, dst, i64::wrapping_sub),
        BinOp::Mul => lanes_op(xy, rows, dst, i64::wrapping_mul),
        _ => lanes_op(
            xy,
            rows,
            dst,
            |a, b| if b == 0 { 0 } else { a.wrapping_div(b) },
        ),
    }
}

fn widen<'a>(l: Lanes<'a>) -> Box<dyn Iterator<Item = i128> + 'a> {
    match l {
        Lanes::I64(v) => Box::new(v.iter().map(|&x| x as i128)),
        Lanes::I128(v) => Box::new(v.iter().copied()),
        Lanes::F64(v) => Box::new(v.iter().map(|&x| x as i128)),
    }
}

pub(super) fn floats(l: Lanes<'_>) -> Cow<'_, [f64]> {
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

/// A decimal operation with a literal operand in 64-bit lanes: the literal rescaled once, the
/// other operand's lanes rescaled and combined in one pass (`1 - l_discount` in Q1) instead of
/// a rescale pass over the literal's lanes and another over the pair; false when some value
/// leaves 64 bits.
fn decimal_scalar64(
    op: BinOp,
    (lanes, constant): (&[i64], i64),
    constant_left: bool,
    (k_lanes, k_constant): (i8, i8),
    out: &mut Slot,
) -> bool {
    out.kind = Kind::I64;
    let m = |k: i8| i64::try_from(pow10(k as i32)).ok();
    if op == BinOp::Mul {
        return map64(lanes, &mut out.i64s, |x| x.overflowing_mul(constant));
    }
    let (Some(ml), Some(c)) = (
        m(k_lanes),
        m(k_constant).and_then(|mc| constant.checked_mul(mc)),
    ) else {
        return false;
    };
    // One loop per case, so that the common one (a scale already equal, no multiply) is
    // additions the compiler vectorises.
    let dst = &mut out.i64s;
    match (op == BinOp::Sub, constant_left, ml) {
        (false, _, 1) => map64(lanes, dst, |x| x.overflowing_add(c)),
        (true, true, 1) => map64(lanes, dst, |x| c.overflowing_sub(x)),
        (true, false, 1) => map64(lanes, dst, |x| x.overflowing_sub(c)),
        (sub, left, _) => map64(lanes, dst, |x| {
            let (x, o1) = x.overflowing_mul(ml);
            let (r, o2) = match (sub, left) {
                (false, _) => x.overflowing_add(c),
                (true, true) => c.overflowing_sub(x),
                (true, false) => x.overflowing_sub(c),
            };
            (r, o1 | o2)
        }),
    }
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

/// `a op b` into `out`; each operand with its value when it is a non-NULL literal (whose
/// lanes repeat it: the kernels then read it from a register).
pub(super) fn binary(
    op: BinOp,
    (a, ca): (Read<'_>, Option<Scalar>),
    (b, cb): (Read<'_>, Option<Scalar>),
    (lt, rt, t): (&DataType, &DataType, &DataType),
    out: &mut Slot,
    tmp: &mut (Vec<i64>, Vec<i64>),
) -> Result<()> {
    out.nulls = NullBuffer::union(a.nulls, b.nulls);
    match (lt, rt, t) {
        (DataType::Decimal128(_, s1), DataType::Decimal128(_, s2), DataType::Decimal128(_, s)) => {
            let k = (*s - *s1, *s - *s2);
            let narrow = match (
                a.lanes,
                b.lanes,
                ca.and_then(int_constant),
                cb.and_then(int_constant),
            ) {
                (_, Lanes::I64(y), Some(c), _) => {
                    decimal_scalar64(op, (y, c), true, (k.1, k.0), out)
                }
                (Lanes::I64(x), _, _, Some(c)) => {
                    decimal_scalar64(op, (x, c), false, (k.0, k.1), out)
                }
                (Lanes::I64(x), Lanes::I64(y), ..) => decimal_op64(op, (x, y), k, out, tmp),
                _ => false,
            };
            if !narrow {
                decimal_op128(op, (a, b), k, out, t)?;
            }
        }
        _ if is_float(t) => {
            let (x, y) = (floats(a.lanes), floats(b.lanes));
            out.kind = Kind::F64;
            let rows = x.len().max(y.len());
            let (ca, cb) = (ca.and_then(float_constant), cb.and_then(float_constant));
            float_op(op, (operand(&x, ca), operand(&y, cb)), rows, &mut out.f64s);
            if *t == DataType::Float32 {
                out.f64s.iter_mut().for_each(|r| *r = *r as f32 as f64);
            }
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
            out.kind = Kind::I64;
            let rows = x.len().max(y.len());
            let (ca, cb) = (ca.and_then(int_constant), cb.and_then(int_constant));
            int_op(op, (operand(x, ca), operand(y, cb)), rows, &mut out.i64s);
            // Narrower integers wrap as their own type: in 64 bits, then truncated (the same
            // for + - * and for / of sign- or zero-extended values).
            if *t != DataType::Int64 {
                out.i64s
                    .iter_mut()
                    .for_each(|r| *r = wrap(*r as i128, t) as i64);
            }
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

pub(super) fn negative(a: Read<'_>, t: &DataType, out: &mut Slot) {
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
pub(super) fn cast(a: Read<'_>, src: usize, from: &DataType, to: &DataType, out: &mut Slot) {
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

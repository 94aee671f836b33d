//! Parquet's RLE/bit-packed hybrid, read on the CPU as far as its run headers: dictionary
//! indices and definition levels both use it. A run is either `count` values bit-packed at a
//! fixed width (8 at a time, LSB first) or one value repeated `count` times; the header says
//! which (ULEB128, low bit 1: bit-packed groups of 8; 0: a repeat count). Only the headers are
//! read here; the values of bit-packed runs stay where they are for the GPU to unpack.

use grouper_core::error::{GrouperError, Result};

/// A run of the hybrid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// `count` values of the run's bit width, starting at bit `bit` of the buffer.
    Packed { bit: u64, count: u32 },
    /// `value` repeated `count` times.
    Repeated { value: u64, count: u32 },
}

impl Run {
    /// Values in the run.
    pub fn count(&self) -> u32 {
        match *self {
            Run::Packed { count, .. } | Run::Repeated { count, .. } => count,
        }
    }
}

fn corrupt(what: &str) -> GrouperError {
    GrouperError::InvalidInput(format!("corrupt Parquet page: {what}"))
}

/// An unsigned LEB128 varint (a run header here, DELTA_BINARY_PACKED's header fields too) at
/// `*at`, moving past it.
pub(super) fn uleb128(buf: &[u8], at: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf
            .get(*at)
            .ok_or_else(|| corrupt("a varint (run or block header) past the end of the page"))?;
        *at += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(corrupt(
        "a varint (run or block header) longer than 64 bits",
    ))
}

/// The runs holding the first `values` values of the hybrid in `buf` at `bits` bits per value
/// (the last run cut to what is needed). A buffer that ends first is corrupt; so is a width
/// over 32 bits.
pub fn runs(buf: &[u8], bits: u8, values: usize) -> Result<Vec<Run>> {
    if bits > 32 {
        return Err(corrupt("a bit width over 32"));
    }
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut left = values;
    while left > 0 {
        let header = uleb128(buf, &mut at)?;
        if header & 1 == 1 {
            let groups = header >> 1;
            let count = groups.saturating_mul(8).min(left as u64) as usize;
            let bytes = (count * bits as usize).div_ceil(8);
            if at + bytes > buf.len() {
                return Err(corrupt("a bit-packed run past the end of the page"));
            }
            if count == 0 {
                return Err(corrupt("an empty bit-packed run"));
            }
            let run = match bits {
                0 => Run::Repeated {
                    value: 0,
                    count: count as u32,
                },
                _ => Run::Packed {
                    bit: 8 * at as u64,
                    count: count as u32,
                },
            };
            out.push(run);
            // The run's full length (its padding included) comes before the next header.
            at = at.saturating_add(groups.saturating_mul(bits as u64) as usize);
            left -= count;
        } else {
            let count = (header >> 1).min(left as u64) as usize;
            if count == 0 {
                return Err(corrupt("an empty repeated run"));
            }
            let width = (bits as usize).div_ceil(8);
            let bytes = buf
                .get(at..at + width)
                .ok_or_else(|| corrupt("a repeated run past the end of the page"))?;
            let value = bytes
                .iter()
                .enumerate()
                .fold(0u64, |v, (i, b)| v | (*b as u64) << (8 * i));
            at += width;
            out.push(Run::Repeated {
                value,
                count: count as u32,
            });
            left -= count;
        }
    }
    Ok(out)
}

/// Definition levels of a flat optional column (maximum level 1, one bit each) as validity:
/// the runs of consecutive valid rows `(first row, rows)` among `rows` rows.
pub fn valid_stretches(buf: &[u8], rows: usize) -> Result<Vec<(usize, usize)>> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut row = 0usize;
    let mut push = |start: usize, len: usize| match out.last_mut() {
        Some((s, l)) if *s + *l == start => *l += len,
        _ => out.push((start, len)),
    };
    for run in runs(buf, 1, rows)? {
        match run {
            Run::Repeated { value, count } => {
                if value > 1 {
                    return Err(corrupt("a definition level over the column's maximum"));
                }
                if value == 1 {
                    push(row, count as usize);
                }
                row += count as usize;
            }
            Run::Packed { bit, count } => {
                for i in 0..count as u64 {
                    let b = bit + i;
                    let byte = buf.get((b / 8) as usize).copied().unwrap_or(0);
                    if (byte >> (b % 8)) & 1 == 1 {
                        push(row, 1);
                    }
                    row += 1;
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_and_packed_runs_read_back() {
        // 5 x value 3 (RLE, 2 bits -> 1 byte), then 8 bit-packed values 0..8 at 3 bits.
        let mut buf = vec![5 << 1, 3, (1 << 1) | 1];
        let vals: Vec<u64> = (0..8).collect();
        let mut packed = 0u64;
        for (i, v) in vals.iter().enumerate() {
            packed |= v << (3 * i);
        }
        buf.extend_from_slice(&packed.to_le_bytes()[..3]);
        let r = runs(&buf, 3, 11).unwrap();
        assert_eq!(
            r,
            vec![
                Run::Repeated { value: 3, count: 5 },
                Run::Packed { bit: 24, count: 6 }
            ]
        );
    }

    #[test]
    fn truncated_or_oversized_runs_are_corrupt() {
        assert!(runs(&[5 << 1], 8, 5).is_err());
        assert!(runs(&[(2 << 1) | 1, 0xff], 8, 16).is_err());
        assert!(runs(&[0x80, 0x80], 8, 1).is_err());
        assert!(runs(&[0 << 1], 8, 1).is_err());
        assert!(runs(&[], 40, 1).is_err());
    }

    #[test]
    fn definition_levels_give_the_valid_stretches() {
        // Rows: 1 1 0 1 0 0 0 0 (a bit-packed group of 8), then valid x 3 (RLE, 2 needed).
        let buf = [(1 << 1) | 1, 0b0000_1011, 3 << 1, 1];
        let s = valid_stretches(&buf, 10).unwrap();
        assert_eq!(s, vec![(0, 2), (3, 1), (8, 2)]);
        assert!(valid_stretches(&[2 << 1, 2], 2).is_err());
    }
}

//! A chunk's image: every column the kernel reads, laid out in one contiguous buffer, so that a
//! chunk crosses PCIe as one DMA (from a pinned staging buffer or the compressed cache) and the
//! kernel finds each column at a fixed offset from the buffer's device address.
//!
//! ```text
//!  [col a values | col a validity | col b values | ...]   regions 256-byte aligned
//!   values:   plain native bytes, or packed words (encode.rs)
//!   validity: one bit per row (only for columns with a NULL somewhere in the input)
//! ```

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::DataType;
use arrow::util::bit_mask::set_bits;
use rayon::prelude::*;

use crate::encode::{Encoding, Scheme};
use crate::table::ColPtrs;
use grouper_core::error::{GrouperError, Result};

/// Where one column lies in an image (byte offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnRegion {
    /// Values (or packed words).
    pub values: usize,
    /// Validity bits, when the column has NULLs.
    pub validity: Option<usize>,
}

/// The layout of one chunk's image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageLayout {
    /// Rows in the chunk.
    pub rows: usize,
    /// Per input column, its region (`None`: the kernel does not read it).
    pub columns: Vec<Option<ColumnRegion>>,
    /// Total bytes (a multiple of 8; regions start at multiples of 256).
    pub bytes: usize,
}

fn words_for_bits(bits: usize) -> usize {
    bits.div_ceil(64)
}

/// Region alignment: 16 bytes for `__int128` loads, and a warp's first load starts a 256-byte
/// line (coalescing).
const ALIGN: usize = 256;

fn aligned(at: usize) -> usize {
    at.div_ceil(ALIGN) * ALIGN
}

impl ImageLayout {
    /// The layout of `rows` rows of the columns with an encoding (`None`: unread); `nullable`
    /// columns get a validity region.
    pub fn new(rows: usize, encodings: &[Option<Encoding>], nullable: &[bool]) -> Self {
        let mut at = 0usize;
        let columns = encodings
            .iter()
            .enumerate()
            .map(|(c, e)| {
                let e = e.as_ref()?;
                let values = aligned(at);
                at = values + 8 * e.words(rows);
                let validity = nullable.get(c).copied().unwrap_or(false).then(|| {
                    let v = aligned(at);
                    at = v + 8 * words_for_bits(rows).max(1);
                    v
                });
                Some(ColumnRegion { values, validity })
            })
            .collect();
        Self {
            rows,
            columns,
            bytes: at.max(8),
        }
    }

    /// The layout of `rows` rows that start at row `at` of this image, for columns of
    /// `widths` bytes a value (validity bits stay where they are: only images without them
    /// hold several such parts).
    pub fn rows_at(&self, at: usize, rows: usize, widths: &[usize]) -> ImageLayout {
        ImageLayout {
            rows,
            columns: self
                .columns
                .iter()
                .zip(widths)
                .map(|(r, w)| {
                    r.map(|r| ColumnRegion {
                        values: r.values + at * w,
                        validity: r.validity,
                    })
                })
                .collect(),
            bytes: self.bytes,
        }
    }

    /// Bytes per row of the image (what crosses PCIe per row).
    pub fn bytes_per_row(&self) -> f64 {
        self.bytes as f64 / self.rows.max(1) as f64
    }

    /// The kernel's column pointers for an image whose first byte is at device address `base`.
    pub fn pointers(&self, base: u64) -> ColPtrs {
        let mut p = ColPtrs([0; 64]);
        for (c, r) in self.columns.iter().enumerate() {
            if let (Some(r), Some(slot)) = (r, p.0.get_mut(2 * c..2 * c + 2)) {
                slot[0] = base + r.values as u64;
                slot[1] = r.validity.map_or(0, |v| base + v as u64);
            }
        }
        p
    }

    /// Writes the image of `pieces` (per column, the chunk's slices in order; `None` where
    /// unread) into `out` (at least `bytes` long), columns in parallel on the CPU's threads.
    pub fn fill(
        &self,
        pieces: &[Option<Vec<ArrayRef>>],
        encodings: &[Option<Encoding>],
        out: &mut [u8],
    ) -> Result<()> {
        // Cut `out` into each column's disjoint regions (in layout order), then fill them.
        let mut jobs = Vec::new();
        let mut rest = out;
        let mut at = 0usize;
        for ((region, col), enc) in self.columns.iter().zip(pieces).zip(encodings) {
            let (Some(r), Some(col), Some(enc)) = (region, col, enc) else {
                continue;
            };
            let mut take = |start: usize, len: usize| -> Result<&mut [u8]> {
                let tail = std::mem::take(&mut rest);
                let (_, tail) = tail
                    .split_at_mut_checked(start - at)
                    .ok_or_else(too_small)?;
                let (region, tail) = tail.split_at_mut_checked(len).ok_or_else(too_small)?;
                rest = tail;
                at = start + len;
                Ok(region)
            };
            let values = take(r.values, 8 * enc.words(self.rows))?;
            let validity = match r.validity {
                Some(v) => Some(take(v, 8 * words_for_bits(self.rows).max(1))?),
                None => None,
            };
            jobs.push((col, enc, values, validity));
        }
        jobs.into_par_iter()
            .map(|(col, enc, values, validity)| {
                if enc.scheme == Scheme::Plain {
                    copy_plain(col, values)?;
                } else {
                    enc.pack(col, values)?;
                }
                if let Some(bits) = validity {
                    bits.fill(0);
                    copy_validity(col, bits);
                }
                Ok(())
            })
            .collect()
    }
}

fn too_small() -> GrouperError {
    GrouperError::Gpu("a chunk image is larger than its buffer".into())
}

/// Native values of `pieces`, one after the other (booleans as bits); pieces of other types
/// are copied in parallel.
fn copy_plain(pieces: &[ArrayRef], out: &mut [u8]) -> Result<()> {
    let Some(first) = pieces.first() else {
        return Ok(());
    };
    if *first.data_type() == DataType::Boolean {
        // `set_bits` ORs bits in at unaligned offsets: start from a clean region (staging
        // buffers are reused, fresh pinned memory is uninitialised).
        out.fill(0);
        let mut at = 0usize;
        for p in pieces {
            let b = p.as_boolean().values();
            set_bits(out, b.inner().as_slice(), at, b.offset(), b.len());
            at += b.len();
        }
        return Ok(());
    }
    let width =
        first
            .data_type()
            .primitive_width()
            .ok_or_else(|| GrouperError::UnsupportedType {
                what: "GPU column",
                data_type: first.data_type().clone(),
            })?;
    let mut jobs = Vec::with_capacity(pieces.len());
    let mut rest = out;
    for p in pieces {
        let (dst, tail) = std::mem::take(&mut rest)
            .split_at_mut_checked(p.len() * width)
            .ok_or_else(too_small)?;
        rest = tail;
        jobs.push((p, dst));
    }
    jobs.into_par_iter()
        .map(|(p, dst)| {
            let data = p.to_data();
            let src = data
                .buffers()
                .first()
                .and_then(|b| {
                    b.as_slice()
                        .get(data.offset() * width..(data.offset() + data.len()) * width)
                })
                .ok_or_else(|| {
                    GrouperError::InvalidInput("a column is shorter than its length".into())
                })?;
            dst.copy_from_slice(src);
            Ok(())
        })
        .collect()
}

/// Validity bits of `pieces`, one after the other (all set where a piece has no NULL).
fn copy_validity(pieces: &[ArrayRef], out: &mut [u8]) {
    let mut at = 0usize;
    for p in pieces {
        match p.logical_nulls().filter(|n| n.null_count() > 0) {
            Some(n) => {
                let b = n.inner();
                set_bits(out, b.inner().as_slice(), at, b.offset(), b.len());
            }
            None => (at..at + p.len()).for_each(|i| {
                if let Some(byte) = out.get_mut(i / 8) {
                    *byte |= 1 << (i % 8);
                }
            }),
        }
        at += p.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::unpack;
    use arrow::array::{BooleanArray, Int32Array, Int64Array};
    use std::sync::Arc;

    fn word(out: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(out[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn images_hold_each_column_at_its_offset() {
        let a: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![Some(5), None, Some(7)])),
            Arc::new(Int64Array::from(vec![9, 10, 11, 12, 13]).slice(1, 2)),
        ];
        let b: Vec<ArrayRef> = vec![
            Arc::new(BooleanArray::from(vec![true, false, true])),
            Arc::new(BooleanArray::from(vec![false, true, true]).slice(1, 2)),
        ];
        let packed = Encoding::choose(&DataType::Int64, &a).unwrap();
        let encodings = vec![
            Some(packed.clone()),
            None,
            Some(Encoding::plain(&DataType::Boolean)),
        ];
        let layout = ImageLayout::new(5, &encodings, &[true, false, false]);
        // A reused buffer: whatever was there before must not show through.
        let mut out = vec![0xffu8; layout.bytes];
        let pieces = vec![Some(a), None, Some(b)];
        layout.fill(&pieces, &encodings, &mut out).unwrap();
        let r = layout.columns[0].unwrap();
        let words: Vec<u64> = (0..packed.words(5))
            .map(|w| word(&out, r.values + 8 * w))
            .collect();
        let decoded: Vec<i128> = (0..5)
            .map(|i| packed.base + unpack(&words, i, packed.bits) as i128)
            .collect();
        assert_eq!(
            [decoded[0], decoded[2], decoded[3], decoded[4]],
            [5, 7, 10, 11]
        );
        assert_eq!(out[r.validity.unwrap()], 0b11101);
        assert!(layout.columns[1].is_none());
        let bools = out[layout.columns[2].unwrap().values];
        assert_eq!(bools, 0b11101);
        for r in layout.columns.iter().flatten() {
            assert_eq!(r.values % 256, 0, "{r:?}");
            assert!(r.validity.is_none_or(|v| v % 256 == 0), "{r:?}");
        }
        let ptrs = layout.pointers(1 << 40);
        assert_eq!(ptrs.0[0], (1 << 40) + r.values as u64);
        assert_eq!((ptrs.0[2], ptrs.0[3]), (0, 0));
    }

    #[test]
    fn plain_values_are_the_native_bytes() {
        let a: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![1, -2])),
            Arc::new(Int32Array::from(vec![3, 4, 5]).slice(2, 1)),
        ];
        let encodings = vec![Some(Encoding::plain(&DataType::Int32))];
        let layout = ImageLayout::new(3, &encodings, &[false]);
        let mut out = vec![0u8; layout.bytes];
        layout.fill(&[Some(a)], &encodings, &mut out).unwrap();
        let v: Vec<i32> = out[..12]
            .chunks(4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(v, vec![1, -2, 5]);
    }
}

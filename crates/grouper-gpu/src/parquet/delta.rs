//! DELTA_BINARY_PACKED, Parquet's delta encoding of INT32 and INT64 pages: the header checked
//! on the CPU when a page becomes a [`super::segments::Kind::Delta`] segment, and the host
//! reference decode the kernel ([`super::kernel`]) is tested against.
//!
//! ```text
//!  page   <block size> <miniblocks a block> <values> <first value (zigzag)>  block...
//!  block  <min delta (zigzag)> <a bit width per miniblock, a byte each> <miniblocks, LSB first>
//! ```
//!
//! `value[0] = first`, `value[i] = value[i-1] + min delta + packed[i-1]`, in wrapping 64-bit
//! arithmetic (INT32 pages keep the low 32 bits). Each miniblock a value needs is padded to its
//! full size; miniblocks no value needs are absent (their widths still there).

use grouper_core::error::{GrouperError, Result};

use super::hybrid::uleb128 as uleb;

/// Most miniblocks a block may have for the GPU (it keeps one block's widths in shared memory).
pub const MAX_MINIBLOCKS: u64 = 64;

/// A page's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Values a block holds.
    pub block: u64,
    /// Miniblocks a block holds.
    pub miniblocks: u64,
    /// Values in the page.
    pub values: u64,
    /// The first value.
    pub first: u64,
    /// Bytes of the header (the first block starts there).
    pub len: usize,
}

fn corrupt(what: &str) -> GrouperError {
    GrouperError::InvalidInput(format!(
        "corrupt Parquet page (DELTA_BINARY_PACKED): {what}"
    ))
}

fn zigzag(v: u64) -> u64 {
    (v >> 1) ^ (v & 1).wrapping_neg()
}

/// The header of `stream`, checked: block sizes a multiple of 128, miniblocks of a multiple of
/// 32 values, at most [`MAX_MINIBLOCKS`] a block.
pub fn header(stream: &[u8]) -> Result<Header> {
    let mut pos = 0;
    let block = uleb(stream, &mut pos)?;
    let miniblocks = uleb(stream, &mut pos)?;
    let values = uleb(stream, &mut pos)?;
    let first = zigzag(uleb(stream, &mut pos)?);
    if block == 0 || block % 128 != 0 || block > 1 << 20 {
        return Err(corrupt("a block size that is not a multiple of 128"));
    }
    if miniblocks == 0 || miniblocks > MAX_MINIBLOCKS || block % miniblocks != 0 {
        return Err(corrupt("a miniblock count the block size does not divide"));
    }
    if (block / miniblocks) % 32 != 0 {
        return Err(corrupt(
            "miniblocks of a number of values not a multiple of 32",
        ));
    }
    Ok(Header {
        block,
        miniblocks,
        values,
        first,
        len: pos,
    })
}

/// Bit `bit`'s `width`-bit field (up to 64 bits) of `buf`.
fn field(buf: &[u8], bit: u64, width: u32) -> Result<u64> {
    if width == 0 {
        return Ok(0);
    }
    let first = (bit / 8) as usize;
    let span = ((bit % 8) as usize + width as usize).div_ceil(8);
    let bytes = buf
        .get(first..first + span)
        .ok_or_else(|| corrupt("a miniblock past the page's end"))?;
    let word = bytes
        .iter()
        .rev()
        .fold(0u128, |w, &b| (w << 8) | u128::from(b))
        >> (bit % 8);
    Ok(match width {
        64 => word as u64,
        w => (word as u64) & ((1u64 << w) - 1),
    })
}

/// The first `count` values of `stream` (as 64-bit words; an INT32 page's in the low 32 bits),
/// as the kernel decodes them: the reference for testing it.
pub fn decode(stream: &[u8], count: usize) -> Result<Vec<u64>> {
    let h = header(stream)?;
    if h.values < count as u64 {
        return Err(corrupt("fewer values than the page's rows"));
    }
    let per = (h.block / h.miniblocks) as usize;
    let mut out = Vec::with_capacity(count);
    let mut pos = h.len;
    let mut value = h.first;
    if count > 0 {
        out.push(value);
    }
    while out.len() < count {
        let min = zigzag(uleb(stream, &mut pos)?);
        let widths = stream
            .get(pos..pos + h.miniblocks as usize)
            .ok_or_else(|| corrupt("miniblock widths past the page's end"))?;
        pos += h.miniblocks as usize;
        for &w in widths {
            if out.len() >= count {
                break;
            }
            if w > 64 {
                return Err(corrupt("a miniblock wider than 64 bits"));
            }
            let take = per.min(count - out.len());
            for j in 0..take {
                let packed = field(stream, pos as u64 * 8 + (j * w as usize) as u64, w.into())?;
                value = value.wrapping_add(min).wrapping_add(packed);
                out.push(value);
            }
            pos += per * w as usize / 8;
        }
    }
    Ok(out)
}

/// The table by which the kernel places a page's values among its NULLs: per stretch of valid
/// rows (`(first row, rows)`, from the page's first row, in order), the index of its first value
/// and its first row, two little-endian `u32`s. Value `j` lands on the row of the last stretch
/// whose first value is at most `j`, `j` less that first value further on ([`row_of`]).
pub fn row_table(stretches: &[(usize, usize)]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(stretches.len() * 8);
    let mut first = 0usize;
    let too_many = || corrupt("a page of more than 2^32 rows");
    for &(row, n) in stretches {
        out.extend(u32::try_from(first).map_err(|_| too_many())?.to_le_bytes());
        out.extend(u32::try_from(row).map_err(|_| too_many())?.to_le_bytes());
        first += n;
    }
    Ok(out)
}

/// `table` ([`row_table`]'s bytes) as pairs, checked for a page of `values` values: stretches
/// in order, the first at value 0, none empty or overlapping the next; with the rows the
/// values span (one past the last value's row), which bounds what the kernel writes.
pub fn read_row_table(table: &[u8], values: u64) -> Result<(Vec<(u32, u32)>, u64)> {
    let pairs: Vec<(u32, u32)> = table
        .chunks_exact(8)
        .map(|p| {
            let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            (word(&p[..4]), word(&p[4..]))
        })
        .collect();
    let bad = || corrupt("a table of valid rows out of order");
    if !table.len().is_multiple_of(8) || pairs.first().is_none_or(|p| p.0 != 0) {
        return Err(bad());
    }
    for w in pairs.windows(2) {
        let ((f0, r0), (f1, r1)) = (w[0], w[1]);
        if f1 <= f0 || u64::from(r0) + u64::from(f1 - f0) > u64::from(r1) {
            return Err(bad());
        }
    }
    let &(f, r) = pairs.last().ok_or_else(bad)?;
    if u64::from(f) >= values {
        return Err(bad());
    }
    Ok((pairs, u64::from(r) + values - u64::from(f)))
}

/// The row of value `j` by `table` ([`read_row_table`]'s pairs), from the page's first row.
pub fn row_of(table: &[(u32, u32)], j: u64) -> u64 {
    let k = table
        .partition_point(|p| u64::from(p.0) <= j)
        .saturating_sub(1);
    table
        .get(k)
        .map_or(j, |&(f, r)| u64::from(r) + j - u64::from(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header of a page of `n` values from `first`: blocks of 128 in 4 miniblocks of 32.
    fn head(n: u8, first_zigzag: u8) -> Vec<u8> {
        vec![0x80, 0x01, 4, n, first_zigzag]
    }

    #[test]
    fn decodes_the_specifications_examples() {
        // 1, 2, 3, 4, 5: min delta 1, every miniblock 0 bits wide (no bytes).
        let mut page = head(5, 2);
        page.extend([2, 0, 0, 0, 0]);
        assert_eq!(decode(&page, 5).unwrap(), [1, 2, 3, 4, 5]);
        // 7, 5, 3, 1, 2, 3, 4, 5: min delta -2, packed 0 0 0 3 3 3 3 at 2 bits; the miniblock
        // padded to 32 values (8 bytes).
        let mut page = head(8, 14);
        page.extend([3, 2, 0, 0, 0, 0xc0, 0x3f, 0, 0, 0, 0, 0, 0]);
        assert_eq!(decode(&page, 8).unwrap(), [7, 5, 3, 1, 2, 3, 4, 5]);
        // A prefix decodes alone; one value more than the page holds is an error.
        assert_eq!(decode(&page, 3).unwrap(), [7, 5, 3]);
        assert!(decode(&page, 9).is_err());
        // Wrapping: from -1 (zigzag 1) by a min delta of i64::MIN twice.
        let mut page = head(3, 1);
        page.extend([
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0, 0,
        ]);
        let got = decode(&page, 3).unwrap();
        assert_eq!(got, [u64::MAX, (i64::MAX) as u64, u64::MAX]);
    }

    /// Values placed among NULLs: rows 0-1 NULL, 2-4 valid, 5 NULL, 6 valid, 7-9 NULL.
    #[test]
    fn a_row_table_places_values_between_nulls() {
        let table = row_table(&[(2, 3), (6, 1)]).unwrap();
        let (pairs, span) = read_row_table(&table, 4).unwrap();
        assert_eq!(pairs, [(0, 2), (3, 6)]);
        assert_eq!(span, 7);
        let rows: Vec<u64> = (0..4).map(|j| row_of(&pairs, j)).collect();
        assert_eq!(rows, [2, 3, 4, 6]);
        // Out of order, overlapping, not from value 0, or past the page's values: refused.
        for bad in [
            row_table(&[(6, 1), (2, 3)]).unwrap(),
            row_table(&[(2, 5), (6, 1)]).unwrap(),
            [1u32, 0].iter().flat_map(|w| w.to_le_bytes()).collect(),
            Vec::new(),
            vec![0; 7],
        ] {
            assert!(read_row_table(&bad, 4).is_err(), "{bad:?}");
        }
        assert!(
            read_row_table(&table, 3).is_err(),
            "a stretch past the values"
        );
    }

    #[test]
    fn a_bad_header_or_a_cut_page_is_an_error() {
        let mut page = head(8, 14);
        // The 7 deltas need 2 of the miniblock's 8 bytes: its padding may be missing, not them.
        page.extend([3, 2, 0, 0, 0, 0xc0, 0x3f]);
        assert_eq!(decode(&page, 8).unwrap(), [7, 5, 3, 1, 2, 3, 4, 5]);
        page.pop();
        assert!(decode(&page, 8).is_err(), "a miniblock cut short");
        // Block size 100 (not a multiple of 128).
        assert!(header(&[100, 4, 10, 0]).is_err());
        // 128 values in 3 miniblocks.
        assert!(header(&[0x80, 0x01, 3, 10, 0]).is_err());
        // A varint that never ends.
        assert!(header(&[0xff; 12]).is_err());
        assert!(header(&[0x80, 0x01, 4, 10, 0]).is_ok());
    }
}

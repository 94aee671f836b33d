//! One column chunk's pages into a page image: the CPU's part of decoding Parquet on the GPU.
//!
//! The parquet crate's page reader reads the chunk and decompresses each page (SNAPPY, ZSTD,
//! LZ4, GZIP, BROTLI or none) on the calling CPU worker. What stays encoded goes into the image
//! as it is: PLAIN values, dictionary indices (their run headers read here), BYTE_STREAM_SPLIT
//! planes. Dictionary pages are converted once per chunk to the kernel's native values (string
//! dictionaries become the query's key codes). Definition levels (flat optional columns) are
//! read here: they decide which rows the values land on, and make the validity bitmap.
//!
//! A chunk this does not decode (another encoding, a nested column, a type without a native
//! image) is an [`GrouperError::Unsupported`] naming why: the caller decodes that chunk on the
//! CPU instead. Inconsistent pages are [`GrouperError::InvalidInput`].

use std::sync::Arc;

use parquet::basic::{Encoding, Type as PhysicalType};
use parquet::column::page::Page;
use parquet::schema::types::ColumnDescriptor;

use super::hybrid::{self, Run};
use super::segments::{widen, Kind, PageImage, Segment};
use crate::image::ColumnRegion;
use grouper_core::error::{GrouperError, Result};

/// Maps string values to the query's key codes (a string key's dictionary).
pub type Coder = Arc<dyn Fn(&[&[u8]]) -> Result<Vec<u32>> + Send + Sync>;

/// Checks decoded values (`count` of them, native bytes) against the query's plan: a group
/// key's codec was planned from statistics, and a value outside it is
/// [`GrouperError::OutsidePlan`] (the caller reruns the query another way).
pub type Check = Arc<dyn Fn(&[u8], usize) -> Result<()> + Send + Sync>;

/// What a column becomes in the decoded image.
#[derive(Clone)]
pub struct Target {
    /// Bytes of a decoded value (1, 2, 4, 8 or 16).
    pub width: u8,
    /// Whether stored integers widen with their sign.
    pub signed: bool,
    /// For string columns: their key codes (`width` 4).
    pub coder: Option<Coder>,
    /// For group keys: the plan's check of their values.
    pub check: Option<Check>,
}

impl Target {
    fn checked(&self, native: &[u8], count: usize) -> Result<()> {
        match &self.check {
            Some(c) => c(native, count),
            None => Ok(()),
        }
    }
}

fn unsupported(why: String) -> GrouperError {
    GrouperError::Unsupported(why)
}

fn corrupt(what: &str) -> GrouperError {
    GrouperError::InvalidInput(format!("corrupt Parquet page: {what}"))
}

/// How stored values of the column read: bytes each and byte order (`None`: variable-length
/// strings).
fn stored(descr: &ColumnDescriptor, target: &Target) -> Result<Option<(u8, bool)>> {
    let t = descr.physical_type();
    let width = match t {
        PhysicalType::INT32 | PhysicalType::FLOAT => (4, false),
        PhysicalType::INT64 | PhysicalType::DOUBLE => (8, false),
        PhysicalType::FIXED_LEN_BYTE_ARRAY if (1..=16).contains(&descr.type_length()) => {
            (descr.type_length() as u8, true)
        }
        PhysicalType::BYTE_ARRAY if target.coder.is_some() => return Ok(None),
        t => {
            return Err(unsupported(format!(
                "{t} values are not decoded on the GPU"
            )))
        }
    };
    if target.coder.is_some() {
        return Err(unsupported(format!("{t} values as string keys")));
    }
    Ok(Some(width))
}

/// The values of PLAIN-encoded BYTE_ARRAY `buf`: `n` of them, each a 4-byte length and bytes.
fn byte_arrays(buf: &[u8], n: usize) -> Result<Vec<&[u8]>> {
    let mut out = Vec::with_capacity(n);
    let mut at = 0usize;
    for _ in 0..n {
        let len = buf
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(|| corrupt("a string length past the end of the page"))?;
        at += 4;
        out.push(
            buf.get(at..at + len)
                .ok_or_else(|| corrupt("a string past the end of the page"))?,
        );
        at += len;
    }
    Ok(out)
}

/// The decoded bytes of `n` PLAIN values of `descr`'s column in `buf` (little-endian,
/// `target.width` each): string pages (as key codes), and values the CPU checks.
fn plain_to_native(
    buf: &[u8],
    n: usize,
    descr: &ColumnDescriptor,
    target: &Target,
) -> Result<Vec<u8>> {
    let Some((sw, big_endian)) = stored(descr, target)? else {
        let coder = target.coder.as_ref().ok_or_else(|| corrupt("no coder"))?;
        let codes = coder(&byte_arrays(buf, n)?)?;
        return Ok(codes.iter().flat_map(|c| c.to_le_bytes()).collect());
    };
    let stored = buf
        .get(..n * sw as usize)
        .ok_or_else(|| corrupt("fewer values than the page says"))?;
    Ok(widen(
        stored,
        n,
        sw,
        target.width,
        target.signed,
        big_endian,
    ))
}

/// A dictionary page's entries as the kernel reads them, and their width: fixed-width values
/// as stored (the kernel widens them), big-endian decimals as native values, strings as their
/// key codes. Checked against the plan where the column is a key.
fn dictionary(
    buf: &[u8],
    n: usize,
    descr: &ColumnDescriptor,
    target: &Target,
) -> Result<(Vec<u8>, u8)> {
    let as_stored = match stored(descr, target)? {
        Some((sw, false)) if [4, 8].contains(&sw) => Some(sw),
        _ => None,
    };
    if let (Some(sw), None) = (as_stored, &target.check) {
        let bytes = buf
            .get(..n * sw as usize)
            .ok_or_else(|| corrupt("fewer values than the page says"))?;
        return Ok((bytes.to_vec(), sw));
    }
    let native = plain_to_native(buf, n, descr, target)?;
    target.checked(&native, n)?;
    match as_stored {
        Some(sw) => Ok((buf[..n * sw as usize].to_vec(), sw)),
        None => Ok((native, target.width)),
    }
}

/// A data page taken apart: its rows, its definition levels (optional columns) and its
/// values, still encoded.
struct DataPage<'a> {
    rows: usize,
    levels: Option<&'a [u8]>,
    values: &'a [u8],
    encoding: Encoding,
}

fn split_page<'a>(page: &'a Page, nullable: bool) -> Result<DataPage<'a>> {
    match page {
        Page::DataPage {
            buf,
            num_values,
            encoding,
            def_level_encoding,
            ..
        } => {
            let (levels, values) = if nullable {
                if *def_level_encoding != Encoding::RLE {
                    return Err(unsupported(format!(
                        "definition levels encoded {def_level_encoding}"
                    )));
                }
                let len = buf
                    .get(..4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                    .ok_or_else(|| corrupt("no definition levels"))?;
                let levels = buf
                    .get(4..4 + len)
                    .ok_or_else(|| corrupt("definition levels past the end of the page"))?;
                (Some(levels), buf.get(4 + len..).unwrap_or(&[]))
            } else {
                (None, &buf[..])
            };
            Ok(DataPage {
                rows: *num_values as usize,
                levels,
                values,
                encoding: *encoding,
            })
        }
        Page::DataPageV2 {
            buf,
            num_values,
            encoding,
            def_levels_byte_len,
            rep_levels_byte_len,
            ..
        } => {
            if *rep_levels_byte_len != 0 {
                return Err(unsupported("repetition levels (a nested column)".into()));
            }
            let d = *def_levels_byte_len as usize;
            let levels = buf
                .get(..d)
                .ok_or_else(|| corrupt("definition levels past the end of the page"))?;
            Ok(DataPage {
                rows: *num_values as usize,
                levels: nullable.then_some(levels),
                values: buf.get(d..).unwrap_or(&[]),
                encoding: *encoding,
            })
        }
        Page::DictionaryPage { .. } => Err(corrupt("a second dictionary page")),
    }
}

/// The dictionary of a chunk in the image: payload offset and entries.
#[derive(Clone, Copy)]
struct Dict {
    at: u32,
    len: u32,
    /// Bytes of an entry.
    width: u8,
}

/// Adds the segments that decode the column chunk `pages` (of `rows` rows, column `descr`)
/// into `region` of a decoded image of `decoded` bytes.
pub fn add_column_chunk(
    img: &mut PageImage,
    pages: impl Iterator<Item = parquet::errors::Result<Page>>,
    descr: &ColumnDescriptor,
    target: &Target,
    rows: usize,
    region: ColumnRegion,
    decoded: u64,
) -> Result<()> {
    if descr.max_rep_level() > 0 || descr.max_def_level() > 1 {
        return Err(unsupported("a nested column".into()));
    }
    let nullable = descr.max_def_level() == 1;
    let store = stored(descr, target)?;
    let w = target.width;
    let mut dict: Option<Dict> = None;
    let mut validity = region.validity.map(|_| vec![0u8; rows.div_ceil(8)]);
    let mut row0 = 0usize;
    let seg = |kind: Kind| Segment {
        signed: target.signed,
        big_endian: store.is_some_and(|s| s.1),
        ..Segment::new(kind, store.map_or(4, |s| s.0), w)
    };
    for page in pages {
        let page = page.map_err(|e| corrupt(&e.to_string()))?;
        if let Page::DictionaryPage {
            buf,
            num_values,
            encoding,
            ..
        } = &page
        {
            if !matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY) || dict.is_some() {
                return Err(corrupt(
                    "a dictionary page that is not the chunk's first PLAIN page",
                ));
            }
            let (values, width) = dictionary(buf, *num_values as usize, descr, target)?;
            let at = img.add_payload(&values, 16)?;
            dict = Some(Dict {
                at: u32::try_from(at).map_err(|_| unsupported("a page image over 4 GiB".into()))?,
                len: *num_values,
                width,
            });
            continue;
        }
        let p = split_page(&page, nullable)?;
        let stretches = match p.levels {
            Some(levels) => hybrid::valid_stretches(levels, p.rows)?,
            None => vec![(0, p.rows)],
        };
        if region.validity.is_none() && p.rows > 0 && stretches != [(0, p.rows)] {
            return Err(GrouperError::OutsidePlan(
                "a column has NULLs its statistics did not count".into(),
            ));
        }
        if let Some(bits) = validity.as_mut() {
            for &(s, n) in &stretches {
                for r in row0 + s..row0 + s + n {
                    if let Some(b) = bits.get_mut(r / 8) {
                        *b |= 1 << (r % 8);
                    }
                }
            }
        }
        let values: usize = stretches.iter().map(|s| s.1).sum();
        let dst_of = |row: usize| region.values as u64 + ((row0 + row) * w as usize) as u64;
        match (p.encoding, store) {
            (Encoding::PLAIN, Some((sw, _))) => {
                let bytes = p
                    .values
                    .get(..values * sw as usize)
                    .ok_or_else(|| corrupt("fewer values than the page's rows"))?;
                if target.check.is_some() {
                    target.checked(&plain_to_native(bytes, values, descr, target)?, values)?;
                }
                let base = img.add_payload(bytes, 16)?;
                let mut vi = 0u64;
                for &(s, n) in &stretches {
                    let src = base + vi * sw as u64;
                    img.push(
                        Segment {
                            src,
                            dst: dst_of(s),
                            count: n as u32,
                            ..seg(Kind::Plain)
                        },
                        decoded,
                    )?;
                    vi += n as u64;
                }
            }
            (Encoding::PLAIN, None) => {
                let coded = plain_to_native(p.values, values, descr, target)?;
                let base = img.add_payload(&coded, 16)?;
                let mut vi = 0u64;
                for &(s, n) in &stretches {
                    let plain = Segment {
                        src: base + 4 * vi,
                        dst: dst_of(s),
                        count: n as u32,
                        src_width: 4,
                        ..seg(Kind::Plain)
                    };
                    img.push(plain, decoded)?;
                    vi += n as u64;
                }
            }
            (Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY, _) => {
                let d =
                    dict.ok_or_else(|| corrupt("dictionary indices without a dictionary page"))?;
                let (&bits, rest) = p
                    .values
                    .split_first()
                    .ok_or_else(|| corrupt("no index bit width"))?;
                let base = img.add_payload(rest, 8)?;
                let at_dict = Segment {
                    dict: d.at,
                    dict_len: d.len,
                    src_width: d.width,
                    bits,
                    ..seg(Kind::Hybrid)
                };
                if stretches == [(0, p.rows)] {
                    // No NULLs: the kernel reads the run headers itself.
                    let stride = u32::try_from(rest.len())
                        .map_err(|_| unsupported("a page over 4 GiB".into()))?;
                    let hybrid = Segment {
                        src: base,
                        dst: dst_of(0),
                        count: values as u32,
                        stride,
                        ..at_dict
                    };
                    img.push(hybrid, decoded)?;
                } else {
                    // NULLs: runs cut where the rows they land on are.
                    let runs = hybrid::runs(rest, bits, values)?;
                    let mut runs = runs.into_iter().peekable();
                    let mut used = 0u32; // values of the current run already placed
                    for &(s, n) in &stretches {
                        let mut placed = 0usize;
                        while placed < n {
                            let run = *runs
                                .peek()
                                .ok_or_else(|| corrupt("fewer indices than values"))?;
                            let take = ((run.count() - used) as usize).min(n - placed);
                            let mut piece = Segment {
                                dst: dst_of(s + placed),
                                count: take as u32,
                                ..at_dict
                            };
                            match run {
                                Run::Packed { bit, .. } => {
                                    piece.kind = Kind::Packed;
                                    piece.src = 8 * base + bit + used as u64 * bits as u64;
                                }
                                Run::Repeated { value, .. } => {
                                    piece.kind = Kind::Rle;
                                    piece.src = value;
                                }
                            }
                            img.push(piece, decoded)?;
                            placed += take;
                            used += take as u32;
                            if used == run.count() {
                                runs.next();
                                used = 0;
                            }
                        }
                    }
                }
            }
            (Encoding::BYTE_STREAM_SPLIT, Some((sw, big_endian)))
                if (!big_endian || sw == 1) && target.check.is_none() =>
            {
                let bytes = p
                    .values
                    .get(..values * sw as usize)
                    .ok_or_else(|| corrupt("fewer values than the page's rows"))?;
                let base = img.add_payload(bytes, 16)?;
                let mut vi = 0u64;
                for &(s, n) in &stretches {
                    let split = Segment {
                        src: base + vi,
                        dst: dst_of(s),
                        count: n as u32,
                        stride: values as u32,
                        ..seg(Kind::Split)
                    };
                    img.push(split, decoded)?;
                    vi += n as u64;
                }
            }
            (Encoding::DELTA_BINARY_PACKED, Some((sw @ (4 | 8), false)))
                if matches!(
                    descr.physical_type(),
                    PhysicalType::INT32 | PhysicalType::INT64
                ) =>
            {
                // The kernel reads the block headers; with NULLs, it places each value by the
                // page's stretches of valid rows (their table after the stream).
                let h = super::delta::header(p.values)?;
                if h.values != values as u64 {
                    return Err(corrupt("a DELTA_BINARY_PACKED page of another value count"));
                }
                if target.check.is_some() {
                    // A key column's values are checked against the plan here, as a PLAIN
                    // page's are; the page still travels encoded.
                    let plain: Vec<u8> = super::delta::decode(p.values, values)?
                        .iter()
                        .flat_map(|v| v.to_le_bytes().into_iter().take(sw as usize))
                        .collect();
                    target.checked(&plain_to_native(&plain, values, descr, target)?, values)?;
                }
                if values > 0 {
                    let base = img.add_payload(p.values, 8)?;
                    let stride = u32::try_from(p.values.len())
                        .map_err(|_| unsupported("a page over 4 GiB".into()))?;
                    let (dict, dict_len) = match stretches.as_slice() {
                        [(0, n)] if *n == p.rows => (0, 0),
                        _ => {
                            let table = super::delta::row_table(&stretches)?;
                            let at = img.add_payload(&table, 8)?;
                            let at = u32::try_from(at)
                                .map_err(|_| unsupported("a page image over 4 GiB".into()))?;
                            (at, stretches.len() as u32)
                        }
                    };
                    let delta = Segment {
                        src: base,
                        dst: dst_of(0),
                        count: values as u32,
                        stride,
                        dict,
                        dict_len,
                        src_width: sw,
                        ..seg(Kind::Delta)
                    };
                    img.push(delta, decoded)?;
                }
            }
            (e, _) => {
                return Err(unsupported(format!(
                    "{e} pages of {}",
                    descr.physical_type()
                )));
            }
        }
        row0 += p.rows;
    }
    if row0 != rows {
        return Err(corrupt("fewer rows in the pages than in the row group"));
    }
    if let (Some(bits), Some(at)) = (validity, region.validity) {
        let src = img.add_payload(&bits, 8)?;
        img.push(
            Segment {
                src,
                dst: at as u64,
                count: bits.len() as u32,
                ..seg(Kind::Copy)
            },
            decoded,
        )?;
    }
    Ok(())
}

//! The page image: what crosses PCIe for one chunk (a row group) read from Parquet pages, and
//! the decode program the GPU runs over it.
//!
//! ```text
//!  page image  [segments: 40 bytes each | payload: page values as Parquet encoded them,
//!               dictionaries converted to the kernel's native values, validity bitmaps]
//!  decoded     the chunk image the aggregation kernel reads (image.rs, every column plain)
//! ```
//!
//! A segment is a run of values that decode the same way: a PLAIN stretch, a bit-packed or an
//! RLE run of dictionary indices (the RLE/bit-packed hybrid), a BYTE_STREAM_SPLIT stretch, or
//! bytes to copy (validity). The CPU finds the segments by reading run headers and definition
//! levels (a few bytes per run of hundreds of values); the GPU expands them, one thread block a
//! segment, one thread a value. Segments are at most [`MAX_SEGMENT`] values, so that blocks get
//! even work whatever the writer's run lengths.
//!
//! Every offset is checked on the CPU when the segment is made ([`PageImage::push`]), against
//! the payload and the decoded image; a dictionary index is checked by whoever reads it (the
//! kernel flags an index past the dictionary instead of reading there). [`decode_on_host`] is
//! the same program on the CPU: the reference the GPU kernel is tested against.

use rayon::prelude::*;

use grouper_core::error::{GrouperError, Result};

/// Most values (bytes for [`Kind::Copy`]) a segment holds.
pub const MAX_SEGMENT: u32 = 2048;

/// Bytes of one segment in the image.
pub const SEGMENT_BYTES: usize = 40;

/// How a segment's values decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// `count` bytes copied as they are (validity bitmaps).
    Copy = 0,
    /// PLAIN: `count` values of `src_width` bytes, widened or narrowed to `dst_width`.
    Plain = 1,
    /// Bit-packed dictionary indices of `bits` bits, from bit `src` of the payload.
    Packed = 2,
    /// One dictionary index (`src`) repeated `count` times.
    Rle = 3,
    /// BYTE_STREAM_SPLIT: byte `b` of value `j` at `src + b * stride + j`.
    Split = 4,
    /// A page's whole RLE/bit-packed hybrid stream of dictionary indices (`stride` bytes from
    /// byte `src`, `count` values, no NULLs): the kernel reads its run headers itself, a block
    /// a page, so the CPU neither parses them nor sends a segment a run.
    Hybrid = 5,
    /// A page's whole DELTA_BINARY_PACKED stream of INT32 or INT64 values (`stride` bytes from
    /// byte `src`, `count` values; [`super::delta`]): a block a page reads the block headers,
    /// unpacks the deltas and adds them up (a prefix sum), tile by tile. A page with NULLs
    /// places its values by its table of valid rows (`dict`, `dict_len`).
    Delta = 6,
}

/// One segment of the decode program (as the kernel reads it: little-endian, 40 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Payload byte offset ([`Kind::Copy`], [`Kind::Plain`], [`Kind::Split`],
    /// [`Kind::Hybrid`]), payload *bit* offset ([`Kind::Packed`]) or the repeated index
    /// ([`Kind::Rle`]).
    pub src: u64,
    /// Byte offset in the decoded image of the first value.
    pub dst: u64,
    /// Values (bytes for [`Kind::Copy`]).
    pub count: u32,
    /// Payload byte offset of the dictionary (its entries are `src_width` bytes each), or of a
    /// [`Kind::Delta`] page's table of valid rows ([`super::delta::row_table`]).
    pub dict: u32,
    /// Entries in the dictionary, or stretches in the table of valid rows (0: no NULLs).
    pub dict_len: u32,
    /// [`Kind::Split`]: bytes between a value's byte planes (the page's value count);
    /// [`Kind::Hybrid`]: bytes of the stream.
    pub stride: u32,
    pub kind: Kind,
    /// [`Kind::Packed`], [`Kind::Hybrid`]: bits per index.
    pub bits: u8,
    /// Bytes of a value as stored ([`Kind::Plain`], [`Kind::Split`]) or of a dictionary entry
    /// (widened to `dst_width` as it is read).
    pub src_width: u8,
    /// Bytes of a value in the decoded image.
    pub dst_width: u8,
    /// Whether widening sign-extends (signed integers and decimals).
    pub signed: bool,
    /// Whether stored values are big-endian (FIXED_LEN_BYTE_ARRAY decimals).
    pub big_endian: bool,
}

impl Segment {
    /// A segment of `kind` reading values of `src_width` bytes into `dst_width`-byte values,
    /// every other field zero (unsigned, little-endian) for the caller to set.
    pub fn new(kind: Kind, src_width: u8, dst_width: u8) -> Self {
        Self {
            src: 0,
            dst: 0,
            count: 0,
            dict: 0,
            dict_len: 0,
            stride: 0,
            kind,
            bits: 0,
            src_width,
            dst_width,
            signed: false,
            big_endian: false,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.src.to_le_bytes());
        out.extend_from_slice(&self.dst.to_le_bytes());
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.dict.to_le_bytes());
        out.extend_from_slice(&self.dict_len.to_le_bytes());
        out.extend_from_slice(&self.stride.to_le_bytes());
        out.extend_from_slice(&[
            self.kind as u8,
            self.bits,
            self.src_width,
            self.dst_width,
            self.signed as u8,
            self.big_endian as u8,
            0,
            0,
        ]);
    }

    /// The segment with its payload `shift` bytes further on.
    fn shifted(mut self, shift: u64) -> Result<Self> {
        match self.kind {
            Kind::Copy | Kind::Plain | Kind::Split | Kind::Hybrid | Kind::Delta => {
                self.src += shift
            }
            Kind::Packed => self.src += 8 * shift,
            Kind::Rle => {}
        }
        // A DELTA page's table of valid rows moves with the payload as a dictionary does.
        let table = self.kind == Kind::Delta && self.dict_len > 0;
        if table || matches!(self.kind, Kind::Packed | Kind::Rle | Kind::Hybrid) {
            self.dict = u32::try_from(self.dict as u64 + shift).map_err(|_| too_large())?;
        }
        Ok(self)
    }

    /// Payload bytes the segment reads, as `(start, end)`.
    fn reads(&self) -> (u64, u64) {
        let n = self.count as u64;
        match self.kind {
            Kind::Copy => (self.src, self.src + n),
            Kind::Plain => (self.src, self.src + n * self.src_width as u64),
            Kind::Packed => (self.src / 8, (self.src + n * self.bits as u64).div_ceil(8)),
            Kind::Rle => (0, 0),
            Kind::Split => (
                self.src,
                self.src + (self.src_width as u64 - 1) * self.stride as u64 + n,
            ),
            Kind::Hybrid | Kind::Delta => (self.src, self.src + self.stride as u64),
        }
    }

    /// Decoded-image bytes the segment writes, as `(start, end)`.
    fn writes(&self) -> (u64, u64) {
        let n = self.count as u64;
        match self.kind {
            Kind::Copy => (self.dst, self.dst + n),
            _ => (self.dst, self.dst + n * self.dst_width as u64),
        }
    }
}

/// A page image being built: the decode program and its payload.
#[derive(Debug, Default)]
pub struct PageImage {
    segments: Vec<Segment>,
    payload: Vec<u8>,
}

impl PageImage {
    /// An empty image.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty image with room for `payload` bytes of payload.
    pub fn with_capacity(payload: usize) -> Self {
        Self {
            segments: Vec::new(),
            payload: Vec::with_capacity(payload),
        }
    }

    /// Appends `bytes` to the payload (aligned to `align`), returning their offset.
    pub fn add_payload(&mut self, bytes: &[u8], align: usize) -> Result<u64> {
        let at = self.payload.len().div_ceil(align.max(1)) * align.max(1);
        self.payload.resize(at, 0);
        self.payload.extend_from_slice(bytes);
        u64::try_from(at).map_err(|_| too_large())
    }

    /// Bytes of payload so far.
    pub fn payload_len(&self) -> usize {
        self.payload.len()
    }

    /// Adds `seg`, split into pieces of at most [`MAX_SEGMENT`] values, after checking that it
    /// reads only the payload and writes only the first `decoded` bytes of the decoded image.
    pub fn push(&mut self, seg: Segment, decoded: u64) -> Result<()> {
        let widths_ok = match seg.kind {
            Kind::Copy => true,
            Kind::Plain | Kind::Split => {
                (1..=16).contains(&seg.src_width) && valid_width(seg.dst_width)
            }
            Kind::Packed => {
                (1..=32).contains(&seg.bits)
                    && valid_width(seg.src_width)
                    && valid_width(seg.dst_width)
            }
            Kind::Hybrid => {
                seg.bits <= 32 && valid_width(seg.src_width) && valid_width(seg.dst_width)
            }
            Kind::Rle => valid_width(seg.src_width) && valid_width(seg.dst_width),
            Kind::Delta => matches!(seg.src_width, 4 | 8) && valid_width(seg.dst_width),
        };
        if !widths_ok || (seg.kind == Kind::Split && seg.count > seg.stride) {
            return Err(corrupt(
                "a value width or bit width the decoder does not have",
            ));
        }
        let (r0, r1) = seg.reads();
        if r1 > self.payload.len() as u64 || r0 > r1 {
            return Err(corrupt("a page's values run past its end"));
        }
        if matches!(seg.kind, Kind::Packed | Kind::Rle | Kind::Hybrid) {
            let end = seg.dict as u64 + seg.dict_len as u64 * seg.src_width as u64;
            if end > self.payload.len() as u64 {
                return Err(corrupt("a dictionary runs past the page image"));
            }
            if seg.kind == Kind::Rle && seg.src >= seg.dict_len as u64 {
                return Err(corrupt("a dictionary index past the dictionary"));
            }
        }
        let mut writes = seg.writes().1;
        if seg.kind == Kind::Delta && seg.dict_len > 0 {
            // Values placed among NULLs by the page's table of valid rows: checked, and the
            // rows it spans bound the writes.
            let at = seg.dict as usize;
            let table = self
                .payload
                .get(at..at + seg.dict_len as usize * 8)
                .ok_or_else(|| corrupt("a table of valid rows runs past the page image"))?;
            let (_, span) = super::delta::read_row_table(table, seg.count.into())?;
            writes = seg.dst + span * seg.dst_width as u64;
        }
        if writes > decoded {
            return Err(corrupt("more values than the row group's rows"));
        }
        if matches!(seg.kind, Kind::Hybrid | Kind::Delta) {
            // Split by the kernel itself, run table by run table (tile by tile).
            self.segments.push(seg);
            return Ok(());
        }
        let mut rest = seg;
        while rest.count > 0 {
            let mut piece = rest;
            piece.count = rest.count.min(MAX_SEGMENT);
            self.segments.push(piece);
            let n = piece.count as u64;
            rest.count -= piece.count;
            rest.dst += match rest.kind {
                Kind::Copy => n,
                _ => n * rest.dst_width as u64,
            };
            match rest.kind {
                Kind::Copy => rest.src += n,
                Kind::Plain => rest.src += n * rest.src_width as u64,
                Kind::Packed => rest.src += n * rest.bits as u64,
                Kind::Rle | Kind::Hybrid | Kind::Delta => {}
                Kind::Split => rest.src += n,
            }
        }
        Ok(())
    }

    /// Where the image stands now, to [`PageImage::rollback`] to.
    pub fn mark(&self) -> (usize, usize) {
        (self.segments.len(), self.payload.len())
    }

    /// Forgets everything added since `mark` (a column chunk given up part-way).
    pub fn rollback(&mut self, mark: (usize, usize)) {
        self.segments.truncate(mark.0);
        self.payload.truncate(mark.1);
    }

    /// Appends `other`'s program and payload (its offsets moved past this payload).
    pub fn append(&mut self, other: PageImage) -> Result<()> {
        let shift = self.add_payload(&other.payload, 256)?;
        for s in other.segments {
            self.segments.push(s.shifted(shift)?);
        }
        Ok(())
    }

    /// Segments in the program.
    pub fn segments(&self) -> usize {
        self.segments.len()
    }

    /// Bytes of the whole image.
    pub fn bytes(&self) -> usize {
        Self::bytes_of(&[self])
    }

    /// Where the payload starts (after the segments, 256-byte aligned).
    pub fn payload_offset(&self) -> usize {
        payload_at(self.segments.len())
    }

    /// Writes the image into `out` (at least [`PageImage::bytes`] long).
    pub fn write(&self, out: &mut [u8]) -> Result<()> {
        Self::write_all(&[self], out).map(|_| ())
    }

    /// Writes the payload at the start of `region` (its place in a chunk whose payloads lie at
    /// offsets fixed before they were read: [`crate::pages`]) and gives the program, its
    /// offsets moved `at` bytes on (where `region` starts in that payload).
    pub fn place(self, region: &mut [u8], at: u64) -> Result<Vec<Segment>> {
        region
            .get_mut(..self.payload.len())
            .ok_or_else(too_large)?
            .copy_from_slice(&self.payload);
        self.segments.iter().map(|s| s.shifted(at)).collect()
    }

    /// Writes the program `segments` at the start of `out`.
    pub fn write_program(segments: &[Segment], out: &mut [u8]) -> Result<()> {
        let mut program = Vec::with_capacity(segments.len() * SEGMENT_BYTES);
        for s in segments {
            s.write(&mut program);
        }
        out.get_mut(..program.len())
            .ok_or_else(too_large)?
            .copy_from_slice(&program);
        Ok(())
    }

    /// Bytes of the image [`PageImage::write_all`] makes of `images`.
    pub fn bytes_of(images: &[&PageImage]) -> usize {
        let segments = images.iter().map(|i| i.segments.len()).sum();
        images.iter().fold(payload_at(segments), |at, i| {
            (at + i.payload.len()).div_ceil(256) * 256
        })
    }

    /// Writes `images` into `out` as one image (their programs one after the other, each
    /// payload at its own 256-byte boundary): the segments and where the payload starts.
    /// Payloads are copied on the CPU's threads (a row group's is megabytes, and `out` is
    /// pinned memory the copy engine reads next).
    pub fn write_all(images: &[&PageImage], out: &mut [u8]) -> Result<(usize, usize)> {
        let segments: usize = images.iter().map(|i| i.segments.len()).sum();
        let first = payload_at(segments);
        let total = Self::bytes_of(images);
        let out = out.get_mut(..total).ok_or_else(too_large)?;
        let (head, mut body) = out.split_at_mut(first);
        let mut program = Vec::with_capacity(first);
        let mut jobs = Vec::with_capacity(images.len());
        let mut at = first;
        for img in images {
            for s in &img.segments {
                s.shifted((at - first) as u64)?.write(&mut program);
            }
            let (payload, rest) = std::mem::take(&mut body).split_at_mut(img.payload.len());
            jobs.push((payload, &img.payload));
            let end = (at + img.payload.len()).div_ceil(256) * 256;
            let (pad, rest) = rest.split_at_mut(end - at - img.payload.len());
            pad.fill(0);
            body = rest;
            at = end;
        }
        program.resize(first, 0);
        head.copy_from_slice(&program);
        const PIECE: usize = 1 << 20;
        jobs.into_par_iter().for_each(|(d, p)| {
            d.par_chunks_mut(PIECE)
                .zip(p.par_chunks(PIECE))
                .for_each(|(d, s)| d.copy_from_slice(s))
        });
        Ok((segments, first))
    }
}

/// Where the payload starts after `segments` segments (256-byte aligned).
fn payload_at(segments: usize) -> usize {
    (segments * SEGMENT_BYTES).div_ceil(256) * 256
}

fn valid_width(w: u8) -> bool {
    matches!(w, 1 | 2 | 4 | 8 | 16)
}

fn corrupt(what: &str) -> GrouperError {
    GrouperError::InvalidInput(format!("corrupt Parquet page: {what}"))
}

fn too_large() -> GrouperError {
    GrouperError::Gpu("a page image is larger than its buffer".into())
}

/// Reads a little-endian unsigned value of `bytes.len()` bytes.
fn load(bytes: &[u8]) -> u128 {
    let mut v = 0u128;
    for (i, b) in bytes.iter().enumerate() {
        v |= (*b as u128) << (8 * i);
    }
    v
}

/// Reads a big-endian unsigned value of `bytes.len()` bytes.
fn load_be(bytes: &[u8]) -> u128 {
    bytes.iter().fold(0u128, |v, b| (v << 8) | *b as u128)
}

/// `v` (of `src` bytes) sign-extended when `signed`.
fn extend(v: u128, src: u8, signed: bool) -> u128 {
    let bits = 8 * src as u32;
    if signed && bits < 128 && (v >> (bits - 1)) & 1 == 1 {
        v | (u128::MAX << bits)
    } else {
        v
    }
}

/// `v` (of `src` bytes) as `dst` bytes, sign-extended when `signed`.
fn convert(v: u128, src: u8, dst: u8, signed: bool) -> Vec<u8> {
    extend(v, src, signed).to_le_bytes()[..dst as usize].to_vec()
}

/// `n` stored values of `src` bytes (big-endian when `big_endian`) as `dst`-byte little-endian
/// values, sign-extended when `signed`: a dictionary's or a PLAIN page's values on the CPU.
pub fn widen(stored: &[u8], n: usize, src: u8, dst: u8, signed: bool, big_endian: bool) -> Vec<u8> {
    let (sw, dw) = (src as usize, dst as usize);
    let mut out = vec![0u8; n * dw];
    for (v, o) in stored
        .chunks_exact(sw)
        .take(n)
        .zip(out.chunks_exact_mut(dw))
    {
        let raw = if big_endian { load_be(v) } else { load(v) };
        o.copy_from_slice(&extend(raw, src, signed).to_le_bytes()[..dw]);
    }
    out
}

/// Runs the decode program of `image` (as [`PageImage::write`] wrote it) on the CPU into a
/// decoded image of `decoded` bytes: what the GPU kernel computes, for testing it. An index
/// past its dictionary is an error here, as the kernel's flag makes it one.
pub fn decode_on_host(image: &[u8], segments: usize, decoded: usize) -> Result<Vec<u8>> {
    let payload_at = (segments * SEGMENT_BYTES).div_ceil(256) * 256;
    let payload = image.get(payload_at..).ok_or_else(too_large)?;
    let mut out = vec![0u8; decoded];
    for k in 0..segments {
        let s = image
            .get(k * SEGMENT_BYTES..(k + 1) * SEGMENT_BYTES)
            .ok_or_else(too_large)?;
        let u64_at = |o: usize| load(&s[o..o + 8]) as u64;
        let u32_at = |o: usize| load(&s[o..o + 4]) as u32;
        let (src, dst, count) = (u64_at(0), u64_at(8) as usize, u32_at(16) as usize);
        let (dict, dict_len, stride) = (u32_at(20) as usize, u32_at(24), u32_at(28) as usize);
        let (kind, bits, sw, dw) = (s[32], s[33], s[34], s[35]);
        let (signed, big_endian) = (s[36] != 0, s[37] != 0);
        let get = |a: usize, n: usize| payload.get(a..a + n).ok_or_else(too_large);
        let entry = |idx: u64| -> Result<Vec<u8>> {
            if idx >= dict_len as u64 {
                return Err(corrupt("a dictionary index past the dictionary"));
            }
            let e = get(dict + idx as usize * sw as usize, sw as usize)?;
            Ok(convert(load(e), sw, dw, signed))
        };
        if kind == Kind::Delta as u8 {
            let stream = get(src as usize, stride)?;
            let table = match dict_len {
                0 => Vec::new(),
                n => super::delta::read_row_table(get(dict, n as usize * 8)?, count as u64)?.0,
            };
            for (j, v) in super::delta::decode(stream, count)?.into_iter().enumerate() {
                let row = super::delta::row_of(&table, j as u64) as usize;
                let at = dst + row * dw as usize;
                out.get_mut(at..at + dw as usize)
                    .ok_or_else(too_large)?
                    .copy_from_slice(&convert(
                        u128::from(v) & ((1u128 << (8 * sw)) - 1),
                        sw,
                        dw,
                        signed,
                    ));
            }
            continue;
        }
        if kind == Kind::Hybrid as u8 {
            let stream = get(src as usize, stride)?;
            let mut j = 0usize;
            for run in super::hybrid::runs(stream, bits, count)? {
                for r in 0..run.count() as usize {
                    let idx = match run {
                        super::hybrid::Run::Repeated { value, .. } => value,
                        super::hybrid::Run::Packed { bit, .. } => {
                            let b = bit + (r * bits as usize) as u64;
                            let span = ((b % 8) as usize + bits as usize).div_ceil(8);
                            let word = load(get(src as usize + (b / 8) as usize, span)?) >> (b % 8);
                            (word & ((1u128 << bits) - 1)) as u64
                        }
                    };
                    let at = dst + j * dw as usize;
                    out.get_mut(at..at + dw as usize)
                        .ok_or_else(too_large)?
                        .copy_from_slice(&entry(idx)?);
                    j += 1;
                }
            }
            continue;
        }
        for j in 0..count {
            let (at, bytes) = match kind {
                0 => (
                    dst + j,
                    vec![*get(src as usize + j, 1)?.first().unwrap_or(&0)],
                ),
                1 => {
                    let raw = get(src as usize + j * sw as usize, sw as usize)?;
                    let v = if big_endian { load_be(raw) } else { load(raw) };
                    (dst + j * dw as usize, convert(v, sw, dw, signed))
                }
                2 => {
                    let bit = src + (j * bits as usize) as u64;
                    let first = (bit / 8) as usize;
                    let span = ((bit % 8) as usize + bits as usize).div_ceil(8);
                    let word = load(get(first, span)?) >> (bit % 8);
                    let idx = (word & ((1u128 << bits) - 1)) as u64;
                    (dst + j * dw as usize, entry(idx)?)
                }
                3 => (dst + j * dw as usize, entry(src)?),
                _ => {
                    let mut v = 0u128;
                    for b in 0..sw as usize {
                        let byte = *get(src as usize + b * stride + j, 1)?.first().unwrap_or(&0);
                        v |= (byte as u128) << (8 * b);
                    }
                    (dst + j * dw as usize, convert(v, sw, dw, signed))
                }
            };
            out.get_mut(at..at + bytes.len())
                .ok_or_else(too_large)?
                .copy_from_slice(&bytes);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(kind: Kind) -> Segment {
        Segment {
            signed: true,
            ..Segment::new(kind, 8, 8)
        }
    }

    fn run(img: &PageImage, decoded: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; img.bytes()];
        img.write(&mut bytes).unwrap();
        decode_on_host(&bytes, img.segments(), decoded).unwrap()
    }

    #[test]
    fn plain_values_widen_with_their_sign() {
        let mut img = PageImage::new();
        let vals: Vec<u8> = [-3i32, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
        let at = img.add_payload(&vals, 8).unwrap();
        let s = Segment {
            src: at,
            count: 2,
            src_width: 4,
            dst_width: 16,
            ..seg(Kind::Plain)
        };
        img.push(s, 32).unwrap();
        let out = run(&img, 32);
        assert_eq!(i128::from_le_bytes(out[..16].try_into().unwrap()), -3);
        assert_eq!(i128::from_le_bytes(out[16..].try_into().unwrap()), 7);
    }

    #[test]
    fn big_endian_decimals_of_odd_widths_widen() {
        let mut img = PageImage::new();
        // -2 and 258 as 7-byte big-endian two's complement (pyarrow's decimal(15, 2)).
        let mut vals = vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe];
        vals.extend([0, 0, 0, 0, 0, 1, 2]);
        let at = img.add_payload(&vals, 1).unwrap();
        let s = Segment {
            src: at,
            count: 2,
            src_width: 7,
            dst_width: 16,
            big_endian: true,
            ..seg(Kind::Plain)
        };
        img.push(s, 32).unwrap();
        let out = run(&img, 32);
        assert_eq!(i128::from_le_bytes(out[..16].try_into().unwrap()), -2);
        assert_eq!(i128::from_le_bytes(out[16..].try_into().unwrap()), 258);
    }

    #[test]
    fn packed_and_rle_indices_read_the_dictionary() {
        let mut img = PageImage::new();
        let dict: Vec<u8> = [10i64, 20, 30, 40]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let d = img.add_payload(&dict, 16).unwrap() as u32;
        // Indices 3, 1, 2, 0 at 2 bits each: 0b00_10_01_11.
        let p = img.add_payload(&[0b0010_0111], 1).unwrap();
        let packed = Segment {
            src: 8 * p,
            count: 4,
            dict: d,
            dict_len: 4,
            bits: 2,
            ..seg(Kind::Packed)
        };
        img.push(packed, 48).unwrap();
        let rle = Segment {
            src: 2,
            dst: 32,
            count: 2,
            dict: d,
            dict_len: 4,
            ..seg(Kind::Rle)
        };
        img.push(rle, 48).unwrap();
        let out = run(&img, 48);
        let v: Vec<i64> = out
            .chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(v, vec![40, 20, 30, 10, 30, 30]);
    }

    #[test]
    fn a_hybrid_stream_decodes_through_narrow_dictionary_entries() {
        let mut img = PageImage::new();
        // Entries stored as 4-byte integers, widened with their sign to 8 bytes.
        let dict: Vec<u8> = [-5i32, 6, 7, 8]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let d = img.add_payload(&dict, 16).unwrap() as u32;
        // 3 x index 2 (RLE), then 8 bit-packed indices 0 1 2 3 0 1 2 3 at 2 bits.
        let stream = [3 << 1, 2, (1 << 1) | 1, 0b1110_0100, 0b1110_0100];
        let at = img.add_payload(&stream, 8).unwrap();
        let s = Segment {
            src: at,
            count: 11,
            dict: d,
            dict_len: 4,
            stride: stream.len() as u32,
            bits: 2,
            src_width: 4,
            ..seg(Kind::Hybrid)
        };
        img.push(s, 88).unwrap();
        let out = run(&img, 88);
        let v: Vec<i64> = out
            .chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(v, vec![7, 7, 7, -5, 6, 7, 8, -5, 6, 7, 8]);
        // The same stream cut short is corrupt.
        let mut short = PageImage::new();
        let d = short.add_payload(&dict, 16).unwrap() as u32;
        let at = short.add_payload(&stream[..4], 8).unwrap();
        let s = Segment {
            src: at,
            count: 11,
            dict: d,
            dict_len: 4,
            stride: 4,
            bits: 2,
            src_width: 4,
            ..seg(Kind::Hybrid)
        };
        short.push(s, 88).unwrap();
        let mut bytes = vec![0u8; short.bytes()];
        short.write(&mut bytes).unwrap();
        assert!(decode_on_host(&bytes, 1, 88).is_err());
    }

    #[test]
    fn long_segments_split_and_still_decode_every_value() {
        let mut img = PageImage::new();
        let n = MAX_SEGMENT as usize * 2 + 5;
        // Byte-stream split of n u16 values: the low bytes, then the high bytes.
        let vals: Vec<u16> = (0..n as u16).map(|i| i.wrapping_mul(257)).collect();
        let mut planes = vals.iter().map(|v| (*v & 0xff) as u8).collect::<Vec<_>>();
        planes.extend(vals.iter().map(|v| (*v >> 8) as u8));
        let at = img.add_payload(&planes, 1).unwrap();
        let s = Segment {
            src: at,
            count: n as u32,
            stride: n as u32,
            src_width: 2,
            dst_width: 4,
            signed: false,
            ..seg(Kind::Split)
        };
        img.push(s, 4 * n as u64).unwrap();
        assert_eq!(img.segments(), 3);
        let out = run(&img, 4 * n);
        let got: Vec<u32> = out
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, vals.iter().map(|v| *v as u32).collect::<Vec<_>>());
    }

    #[test]
    fn segments_outside_the_payload_the_rows_or_the_dictionary_are_refused() {
        let mut img = PageImage::new();
        img.add_payload(&[0u8; 16], 8).unwrap();
        let past_payload = Segment {
            count: 3,
            ..seg(Kind::Plain)
        };
        assert!(img.push(past_payload, 1 << 20).is_err());
        let past_rows = Segment {
            count: 2,
            ..seg(Kind::Plain)
        };
        assert!(img.push(past_rows, 8).is_err());
        let past_dict = Segment {
            src: 2,
            count: 1,
            dict_len: 2,
            ..seg(Kind::Rle)
        };
        assert!(img.push(past_dict, 64).is_err());
        let bad_bits = Segment {
            count: 1,
            bits: 40,
            dict_len: 1,
            ..seg(Kind::Packed)
        };
        assert!(img.push(bad_bits, 64).is_err());
        assert_eq!(img.segments(), 0);
    }

    #[test]
    fn the_host_decoder_flags_a_packed_index_past_the_dictionary() {
        let mut img = PageImage::new();
        let d = img.add_payload(&7i64.to_le_bytes(), 8).unwrap() as u32;
        let p = img.add_payload(&[0b11], 1).unwrap();
        let s = Segment {
            src: 8 * p,
            count: 1,
            dict: d,
            dict_len: 1,
            bits: 2,
            ..seg(Kind::Packed)
        };
        img.push(s, 8).unwrap();
        let mut bytes = vec![0u8; img.bytes()];
        img.write(&mut bytes).unwrap();
        assert!(decode_on_host(&bytes, 1, 8).is_err());
    }
}

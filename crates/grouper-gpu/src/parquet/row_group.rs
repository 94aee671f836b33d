//! A row group's page image: every column the kernel reads, as [`super::chunk`] makes it where
//! it can, and decoded on the CPU (the parquet crate's Arrow reader, that chunk alone) where it
//! cannot — each such chunk named with the reason, for `--explain`.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::DataType;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ProjectionMask;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::serialized_reader::SerializedPageReader;

use super::chunk::{add_column_chunk, Target};
use super::positional::{ChunkBytes, Positional};
use super::segments::{Kind, PageImage, Segment};
use crate::image::{ColumnRegion, ImageLayout};
use grouper_core::error::{GrouperError, Result};

/// A column of the decoded image: which leaf of the file's schema it is and what it becomes.
#[derive(Clone)]
pub struct Column {
    /// Leaf column index in the Parquet schema.
    pub leaf: usize,
    /// Its decoded form.
    pub target: Target,
}

/// One row group, ready to cross PCIe.
pub struct RowGroupImage {
    /// The decode program and payload.
    pub image: PageImage,
    /// Rows of the row group.
    pub rows: usize,
    /// Column chunks decoded on the CPU, with why (leaf index, reason).
    pub on_cpu: Vec<(usize, String)>,
}

/// An open Parquet file: its page reader and the Arrow reader's metadata (for chunks decoded
/// on the CPU).
pub struct ParquetFile {
    path: PathBuf,
    file: Positional,
    reader: SerializedFileReader<Positional>,
    arrow: ArrowReaderMetadata,
}

fn io(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> GrouperError + '_ {
    move |e| GrouperError::InvalidInput(format!("cannot read {}: {e}", path.display()))
}

fn open_file(path: &Path) -> Result<File> {
    File::open(path)
        .map_err(|e| GrouperError::InvalidInput(format!("cannot open {}: {e}", path.display())))
}

impl ParquetFile {
    /// Opens `path` and reads its footer.
    pub fn open(path: &Path) -> Result<Self> {
        let positional = Positional::new(open_file(path)?).map_err(|e| {
            GrouperError::InvalidInput(format!("cannot read {}: {e}", path.display()))
        })?;
        let reader = SerializedFileReader::new(positional.clone()).map_err(io(path))?;
        let arrow =
            ArrowReaderMetadata::load(&open_file(path)?, Default::default()).map_err(io(path))?;
        Ok(Self {
            path: path.to_path_buf(),
            file: positional,
            reader,
            arrow,
        })
    }

    /// The file's schema as Arrow reads it.
    pub fn arrow_schema(&self) -> arrow::datatypes::SchemaRef {
        std::sync::Arc::clone(self.arrow.schema())
    }

    /// The leaf column named `name` (a top-level column of a flat schema).
    pub fn leaf(&self, name: &str) -> Option<usize> {
        let schema = self.reader.metadata().file_metadata().schema_descr();
        (0..schema.num_columns()).find(|&i| {
            let c = schema.column(i);
            c.path().parts() == [name.to_string()]
        })
    }

    /// A bound on the bytes of row group `rg`'s page image of `columns`: each column's
    /// [`ParquetFile::column_bound`], payload and program, and the image's alignment.
    pub fn image_bound(&self, rg: usize, columns: &[Column]) -> usize {
        columns
            .iter()
            .map(|c| {
                let (payload, program) = self.column_bound(rg, c);
                payload + program
            })
            .sum::<usize>()
            + 4096
    }

    /// Bounds on the payload and the program bytes of column `c`'s chunk in row group `rg`:
    /// the values as stored (uncompressed, page headers included, which cover each page's
    /// alignment), plus room where the CPU widens them or decodes the chunk itself (big-endian
    /// decimals, encodings other than PLAIN, dictionaries and BYTE_STREAM_SPLIT, NULLs: 16
    /// bytes a value and the validity bits); segments one per 1024 values and per page (with
    /// NULLs, up to one per value). A chunk past its bound sends the scan another way.
    pub fn column_bound(&self, rg: usize, c: &Column) -> (usize, usize) {
        use super::segments::SEGMENT_BYTES;
        use parquet::basic::{Encoding, Type};
        let group = self.reader.metadata().row_group(rg);
        if c.leaf >= group.num_columns() {
            return (0, 0);
        }
        let rows = self.rows(rg);
        let chunk = group.column(c.leaf);
        let stored = chunk.uncompressed_size().max(0) as usize;
        let descr = self
            .reader
            .metadata()
            .file_metadata()
            .schema_descr()
            .column(c.leaf);
        let widened = descr.physical_type() == Type::FIXED_LEN_BYTE_ARRAY
            || descr.max_def_level() > 0
            || chunk.encodings().any(|e| {
                !matches!(
                    e,
                    Encoding::PLAIN
                        | Encoding::PLAIN_DICTIONARY
                        | Encoding::RLE_DICTIONARY
                        | Encoding::RLE
                        | Encoding::BYTE_STREAM_SPLIT
                )
            });
        let payload = match widened {
            true => stored + 16 * rows + rows.div_ceil(8),
            false => stored,
        } + 1024;
        let program = SEGMENT_BYTES * (rows / 1024 + 64 + if widened { rows } else { 0 });
        (payload, program)
    }

    /// Row groups in the file.
    pub fn row_groups(&self) -> usize {
        self.reader.metadata().num_row_groups()
    }

    /// Rows of row group `rg`.
    pub fn rows(&self, rg: usize) -> usize {
        self.reader.metadata().row_group(rg).num_rows().max(0) as usize
    }

    /// The page image of row group `rg`'s `columns`, decoding into `layout` (its columns in
    /// the order of `columns`). Chunks the GPU does not decode are decoded here; corrupt
    /// chunks fail.
    pub fn row_group_image(
        &self,
        rg: usize,
        columns: &[Column],
        layout: &ImageLayout,
    ) -> Result<RowGroupImage> {
        let rows = self.rows(rg);
        if layout.rows != rows || rg >= self.row_groups() {
            return Err(GrouperError::Gpu(format!(
                "no row group {rg} of {} rows",
                layout.rows
            )));
        }
        let stored: usize = columns.iter().map(|c| self.column_bound(rg, c).0).sum();
        let mut image = PageImage::with_capacity(stored + 4096);
        let mut on_cpu = Vec::new();
        for (c, col) in columns.iter().enumerate() {
            let Some(Some(region)) = layout.columns.get(c).copied() else {
                continue;
            };
            let (chunk, why) = self.column_image(rg, col, region, layout.bytes as u64)?;
            image.append(chunk)?;
            if let Some(why) = why {
                on_cpu.push((col.leaf, why));
            }
        }
        Ok(RowGroupImage {
            image,
            rows,
            on_cpu,
        })
    }

    /// The page image of column `col`'s chunk in row group `rg`, decoding into `region` of a
    /// decoded image of `decoded` bytes; where the GPU cannot decode it, the chunk decoded here
    /// and why. Corrupt chunks fail.
    pub fn column_image(
        &self,
        rg: usize,
        col: &Column,
        region: ColumnRegion,
        decoded: u64,
    ) -> Result<(PageImage, Option<String>)> {
        let schema = self.reader.metadata().file_metadata().schema_descr_ptr();
        if col.leaf >= schema.num_columns() || rg >= self.row_groups() {
            return Err(GrouperError::InvalidInput(format!(
                "{} has no column {} in row group {rg}",
                self.path.display(),
                col.leaf
            )));
        }
        let rows = self.rows(rg);
        let descr = schema.column(col.leaf);
        let meta = self.reader.metadata().row_group(rg).column(col.leaf);
        let (start, len) = meta.byte_range();
        let bytes = ChunkBytes::read(&self.file, start, len).map_err(io(&self.path))?;
        let pages = SerializedPageReader::new(std::sync::Arc::new(bytes), meta, rows, None)
            .map_err(io(&self.path))?;
        let mut image = PageImage::with_capacity(self.column_bound(rg, col).0);
        match add_column_chunk(
            &mut image,
            pages,
            &descr,
            &col.target,
            rows,
            region,
            decoded,
        ) {
            Ok(()) => Ok((image, None)),
            // A chunk the GPU cannot decode leaves nothing behind: its CPU decode replaces it.
            Err(GrouperError::Unsupported(why)) => {
                Ok((self.decoded_on_cpu(rg, col, region, decoded)?, Some(why)))
            }
            Err(e) => Err(e),
        }
    }

    /// Column chunk `col` of row group `rg` decoded by the Arrow reader, as plain values (and
    /// validity) to copy.
    fn decoded_on_cpu(
        &self,
        rg: usize,
        col: &Column,
        region: ColumnRegion,
        decoded: u64,
    ) -> Result<PageImage> {
        let mask = ProjectionMask::leaves(self.arrow.parquet_schema(), [col.leaf]);
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(
            open_file(&self.path)?,
            self.arrow.clone(),
        )
        .with_row_groups(vec![rg])
        .with_projection(mask)
        .with_batch_size(self.rows(rg).max(1))
        .build()
        .map_err(io(&self.path))?;
        let mut img = PageImage::new();
        let mut row = 0u64;
        let mut validity: Vec<u8> = vec![0; self.rows(rg).div_ceil(8)];
        for batch in reader {
            let batch = batch.map_err(|e| {
                GrouperError::InvalidInput(format!("cannot read {}: {e}", self.path.display()))
            })?;
            let array = batch
                .columns()
                .first()
                .ok_or_else(|| GrouperError::InvalidInput("a column with no values".into()))?;
            let bytes = native_bytes(array, &col.target)?;
            if let Some(check) = &col.target.check {
                check(&bytes, array.len())?;
            }
            if region.validity.is_none() && array.null_count() > 0 {
                return Err(GrouperError::OutsidePlan(
                    "a column has NULLs its statistics did not count".into(),
                ));
            }
            let w = col.target.width as u64;
            let src = img.add_payload(&bytes, 16)?;
            let plain = Segment {
                src,
                dst: region.values as u64 + row * w,
                count: array.len() as u32,
                ..Segment::new(Kind::Plain, w as u8, w as u8)
            };
            img.push(plain, decoded)?;
            for i in 0..array.len() {
                if array.is_valid(i) {
                    let r = row as usize + i;
                    if let Some(b) = validity.get_mut(r / 8) {
                        *b |= 1 << (r % 8);
                    }
                }
            }
            row += array.len() as u64;
        }
        if let Some(at) = region.validity {
            let src = img.add_payload(&validity, 8)?;
            let copy = Segment {
                src,
                dst: at as u64,
                count: validity.len() as u32,
                ..Segment::new(Kind::Copy, 1, 1)
            };
            img.push(copy, decoded)?;
        }
        Ok(img)
    }
}

/// The native bytes of `array` as the kernel reads them: fixed-width values as they are,
/// strings as their key codes.
pub fn native_bytes(array: &ArrayRef, target: &Target) -> Result<Vec<u8>> {
    if let Some(coder) = &target.coder {
        let array = arrow::compute::cast(array, &DataType::Utf8)
            .map_err(|e| GrouperError::InvalidInput(e.to_string()))?;
        let strings = array.as_string::<i32>();
        let values: Vec<&[u8]> = (0..strings.len())
            .map(|i| strings.value(i).as_bytes())
            .collect();
        return Ok(coder(&values)?
            .iter()
            .flat_map(|c| c.to_le_bytes())
            .collect());
    }
    let width = array
        .data_type()
        .primitive_width()
        .filter(|w| *w == target.width as usize)
        .ok_or_else(|| GrouperError::UnsupportedType {
            what: "GPU column from Parquet",
            data_type: array.data_type().clone(),
        })?;
    let data = array.to_data();
    data.buffers()
        .first()
        .and_then(|b| {
            b.as_slice()
                .get(data.offset() * width..(data.offset() + data.len()) * width)
        })
        .map(<[u8]>::to_vec)
        .ok_or_else(|| GrouperError::InvalidInput("a column shorter than its length".into()))
}

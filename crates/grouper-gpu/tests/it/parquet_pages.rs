//! Page images against the parquet crate's own Arrow reader: files written with dictionaries on
//! and off, BYTE_STREAM_SPLIT, DELTA_BINARY_PACKED (with and without NULLs), DELTA_BYTE_ARRAY (decoded on the CPU), page format v1 and
//! v2, SNAPPY, ZSTD and no compression, NULLs, several pages and row groups; decoded here by
//! [`decode_on_host`] (the GPU kernel's reference); on a GPU, the decode kernel is held to the
//! same values.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use arrow::array::{
    Array, ArrayRef, Date32Array, Decimal128Array, Float64Array, Int32Array, Int64Array, Int8Array,
    RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding as PqEncoding, ZstdLevel};
use parquet::file::properties::{WriterProperties, WriterVersion};
use parquet::schema::types::ColumnPath;

use grouper_gpu::encode::Encoding;
use grouper_gpu::image::ImageLayout;
use grouper_gpu::parquet::segments::{Kind, Segment};
use grouper_gpu::parquet::{
    decode_on_host, native_bytes, Coder, Column, Decoder, PageImage, ParquetFile, Target,
};
use grouper_gpu::Gpu;

/// Key codes in order of first sight (a string key's dictionary, for the tests).
pub fn coder() -> Coder {
    let codes: Arc<Mutex<HashMap<Vec<u8>, u32>>> = Default::default();
    Arc::new(move |values: &[&[u8]]| {
        let mut m = codes.lock().unwrap();
        Ok(values
            .iter()
            .map(|v| {
                let n = m.len() as u32;
                *m.entry(v.to_vec()).or_insert(n)
            })
            .collect())
    })
}

/// What a column of `t` becomes in the decoded image.
pub fn target(t: &DataType, coder: &Coder) -> Target {
    match t {
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 => Target {
            width: 4,
            signed: false,
            coder: Some(Arc::clone(coder)),
            check: None,
        },
        t => Target {
            width: t.primitive_width().unwrap() as u8,
            signed: !t.is_unsigned_integer(),
            coder: None,
            check: None,
        },
    }
}

/// A table of every supported kind of column, with NULLs in some, `rows` rows.
pub fn table(rows: usize, seed: u64) -> RecordBatch {
    let r = |i: usize, m: u64| (seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) % m;
    let schema = Schema::new(vec![
        Field::new("i32", DataType::Int32, true),
        Field::new("i64", DataType::Int64, false),
        Field::new("dec", DataType::Decimal128(15, 2), false),
        Field::new("wide", DataType::Decimal128(38, 2), true),
        Field::new("f64", DataType::Float64, true),
        Field::new("day", DataType::Date32, false),
        Field::new("s", DataType::Utf8, true),
        Field::new("i8", DataType::Int8, false),
        Field::new("delta", DataType::Int64, false),
        Field::new("delta32", DataType::Int32, true),
    ]);
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter(
            (0..rows).map(|i| (r(i, 7) != 0).then(|| r(i, 1000) as i32 - 500)),
        )),
        Arc::new(Int64Array::from_iter_values(
            (0..rows).map(|i| r(i, 1 << 40) as i64 - (1 << 39)),
        )),
        Arc::new(
            Decimal128Array::from_iter_values((0..rows).map(|i| r(i, 100_000) as i128 - 50))
                .with_precision_and_scale(15, 2)
                .unwrap(),
        ),
        Arc::new(
            Decimal128Array::from_iter(
                (0..rows).map(|i| (r(i, 5) != 0).then(|| (r(i, 1 << 50) as i128) << 60)),
            )
            .with_precision_and_scale(38, 2)
            .unwrap(),
        ),
        Arc::new(Float64Array::from_iter(
            (0..rows).map(|i| (r(i, 3) != 0).then(|| r(i, 1 << 20) as f64 / 7.0)),
        )),
        Arc::new(Date32Array::from_iter_values(
            (0..rows).map(|i| 9000 + r(i, 2500) as i32),
        )),
        Arc::new(StringArray::from_iter((0..rows).map(|i| {
            (r(i, 11) != 0).then(|| ["A", "N", "R", "longer value"][r(i, 4) as usize])
        }))),
        Arc::new(Int8Array::from_iter_values(
            (0..rows).map(|i| r(i, 200) as i8),
        )),
        // Deltas of every width up to 64 bits, wrapping past i64's ends.
        Arc::new(Int64Array::from_iter_values((0..rows).map(|i| {
            match i % 5 {
                0 => i64::MIN + i as i64,
                1 => i64::MAX - r(i, 1000) as i64,
                _ => (r(i, 1 << (i % 63)) as i64) - (i as i64 * 3),
            }
        }))),
        Arc::new(Int32Array::from_iter((0..rows).map(|i| {
            (r(i, 9) != 0).then(|| r(i, 1 << 31) as i32 - (1 << 30))
        }))),
    ];
    RecordBatch::try_new(Arc::new(schema), cols).unwrap()
}

/// Writer settings the fixtures cover.
pub fn properties(variant: usize) -> WriterProperties {
    let b = WriterProperties::builder()
        .set_max_row_group_row_count(Some(3000))
        .set_data_page_row_count_limit(700)
        .set_write_batch_size(256)
        .set_column_encoding(ColumnPath::from("delta"), PqEncoding::DELTA_BINARY_PACKED)
        .set_column_dictionary_enabled(ColumnPath::from("delta"), false)
        .set_column_encoding(ColumnPath::from("delta32"), PqEncoding::DELTA_BINARY_PACKED)
        .set_column_dictionary_enabled(ColumnPath::from("delta32"), false);
    match variant % 4 {
        0 => b.set_compression(Compression::SNAPPY),
        // Dictionaries off, and one that fills up part-way (later pages fall back to PLAIN).
        // And a string column of DELTA_BYTE_ARRAY pages, which only the CPU decodes.
        1 => b
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_column_dictionary_enabled(ColumnPath::from("s"), false)
            .set_column_encoding(ColumnPath::from("s"), PqEncoding::DELTA_BYTE_ARRAY)
            .set_column_dictionary_enabled(ColumnPath::from("i64"), false)
            .set_column_dictionary_enabled(ColumnPath::from("wide"), false)
            .set_dictionary_page_size_limit(512),
        2 => b
            .set_compression(Compression::UNCOMPRESSED)
            .set_column_dictionary_enabled(ColumnPath::from("f64"), false)
            .set_column_encoding(ColumnPath::from("f64"), PqEncoding::BYTE_STREAM_SPLIT)
            .set_column_dictionary_enabled(ColumnPath::from("day"), false)
            .set_column_encoding(ColumnPath::from("day"), PqEncoding::BYTE_STREAM_SPLIT),
        // Data pages v2 (levels outside the compressed part).
        _ => b
            .set_compression(Compression::SNAPPY)
            .set_writer_version(WriterVersion::PARQUET_2_0),
    }
    .build()
}

/// Writes `batch` to `path` with `props`.
pub fn write(path: &Path, batch: &RecordBatch, props: WriterProperties) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

/// The decoded-image layout of a row group of `rows` rows of `schema`, and its columns.
pub fn layout(schema: &Schema, rows: usize, coder: &Coder) -> (ImageLayout, Vec<Column>) {
    let encodings: Vec<Option<Encoding>> = schema
        .fields()
        .iter()
        .map(|f| {
            Some(Encoding::plain(match f.data_type() {
                DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 => &DataType::UInt32,
                t => t,
            }))
        })
        .collect();
    let nullable: Vec<bool> = schema.fields().iter().map(|f| f.is_nullable()).collect();
    let columns = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(leaf, f)| Column {
            leaf,
            target: target(f.data_type(), coder),
        })
        .collect();
    (ImageLayout::new(rows, &encodings, &nullable), columns)
}

/// Checks a decoded image of row group `rg` against the Arrow reader's values.
pub fn check_decoded(path: &Path, rg: usize, decoded: &[u8], layout: &ImageLayout, coder: &Coder) {
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
        .unwrap()
        .with_row_groups(vec![rg])
        .with_batch_size(1 << 20)
        .build()
        .unwrap();
    let batch = reader.into_iter().next().unwrap().unwrap();
    for (c, array) in batch.columns().iter().enumerate() {
        let region = layout.columns[c].unwrap();
        let t = target(array.data_type(), coder);
        let w = t.width as usize;
        let expect = native_bytes(array, &t).unwrap();
        for i in 0..array.len() {
            let valid = match region.validity {
                Some(v) => (decoded[v + i / 8] >> (i % 8)) & 1 == 1,
                None => true,
            };
            assert_eq!(valid, array.is_valid(i), "column {c} row {i}: validity");
            if valid {
                let at = region.values + i * w;
                assert_eq!(
                    &decoded[at..at + w],
                    &expect[i * w..(i + 1) * w],
                    "column {c} ({}) row {i}",
                    array.data_type()
                );
            }
        }
    }
}

/// Decodes `img` on the GPU into a zeroed image of `bytes` bytes; the decoded image, or the
/// flag the kernel raised.
fn decode_on_gpu(img: &PageImage, bytes: usize) -> Result<Vec<u8>, String> {
    use cudarc::driver::DevicePtr;
    let gpu = Gpu::get().unwrap();
    let stream = &gpu.stream;
    let decoder = Decoder::new(&gpu).unwrap();
    let mut host = vec![0u8; img.bytes()];
    img.write(&mut host).unwrap();
    let dev = stream.clone_htod(&host).unwrap();
    let out = stream.alloc_zeros::<u8>(bytes.max(1)).unwrap();
    let mut flags = stream.alloc_zeros::<u64>(1).unwrap();
    let (image, _g1) = dev.device_ptr(stream);
    let (to, _g2) = out.device_ptr(stream);
    // SAFETY: `dev` holds the whole image, whose segments were checked against `bytes`, which
    // `out` holds; both live until the synchronize below.
    unsafe {
        decoder
            .launch(
                stream,
                image,
                img.segments(),
                image + img.payload_offset() as u64,
                to,
                &mut flags,
            )
            .unwrap();
    }
    stream.synchronize().unwrap();
    if stream.clone_dtoh(&flags).unwrap()[0] != 0 {
        return Err("an index past its dictionary".into());
    }
    Ok(stream.clone_dtoh(&out).unwrap())
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn the_gpu_decodes_every_writer_setting_as_the_host_reference_does() {
    if !crate::gpu::have_gpu() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("grouper-pq-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for variant in 0..4 {
        let path = dir.join(format!("v{variant}.parquet"));
        write(
            &path,
            &table(20_011, 7 + variant as u64),
            properties(variant),
        );
        let file = ParquetFile::open(&path).unwrap();
        let coder = coder();
        let schema = file.arrow_schema();
        for rg in 0..file.row_groups() {
            let (layout, columns) = layout(&schema, file.rows(rg), &coder);
            let img = file.row_group_image(rg, &columns, &layout).unwrap();
            let mut bytes = vec![0u8; img.image.bytes()];
            img.image.write(&mut bytes).unwrap();
            let host = decode_on_host(&bytes, img.image.segments(), layout.bytes).unwrap();
            let gpu = decode_on_gpu(&img.image, layout.bytes).unwrap();
            assert!(
                host == gpu,
                "variant {variant} row group {rg}: GPU and host differ"
            );
            check_decoded(&path, rg, &gpu, &layout, &coder);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-test.sh runs it on one"]
fn the_gpu_flags_a_packed_index_past_its_dictionary_and_a_cut_page() {
    if !crate::gpu::have_gpu() {
        return;
    }
    let mut img = PageImage::new();
    let d = img.add_payload(&7i64.to_le_bytes(), 16).unwrap() as u32;
    let p = img.add_payload(&[0b1101], 8).unwrap();
    let seg = Segment {
        src: 8 * p,
        dst: 0,
        count: 2,
        dict: d,
        dict_len: 1,
        stride: 0,
        kind: Kind::Packed,
        bits: 2,
        src_width: 8,
        dst_width: 8,
        signed: true,
        big_endian: false,
    };
    img.push(seg, 16).unwrap();
    assert!(decode_on_gpu(&img, 16).is_err());
    // A hybrid stream whose runs claim more bytes than the page has.
    let mut short = PageImage::new();
    let d = short.add_payload(&7i64.to_le_bytes(), 16).unwrap() as u32;
    let at = short.add_payload(&[(4 << 1) | 1, 0], 8).unwrap();
    let hybrid = Segment {
        src: at,
        count: 32,
        stride: 2,
        kind: Kind::Hybrid,
        bits: 1,
        dict: d,
        dict_len: 1,
        ..seg
    };
    short.push(hybrid, 256).unwrap();
    assert!(decode_on_gpu(&short, 256).is_err());
    // DELTA_BINARY_PACKED: 7, 5, 3, 1, 2, 3, 4, 5 decodes as the host does; cut inside its
    // miniblock, or with a block size the format forbids, the kernel flags it.
    let stream = [0x80, 0x01, 4, 8, 14, 3, 2, 0, 0, 0, 0xc0, 0x3f];
    for (bytes, ok) in [(&stream[..], true), (&stream[..11], false)] {
        let mut img = PageImage::new();
        let at = img.add_payload(bytes, 8).unwrap();
        let delta = Segment {
            src: at,
            count: 8,
            stride: bytes.len() as u32,
            kind: Kind::Delta,
            // No NULLs: no table of valid rows.
            dict: 0,
            dict_len: 0,
            ..seg
        };
        img.push(delta, 64).unwrap();
        let got = decode_on_gpu(&img, 64);
        match ok {
            true => {
                let want: Vec<u8> = [7i64, 5, 3, 1, 2, 3, 4, 5]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect();
                assert_eq!(got.unwrap(), want);
            }
            false => assert!(got.is_err(), "a cut DELTA page must be flagged"),
        }
    }
    // With NULLs (rows 0-1 and 5): the values placed by the page's table of valid rows, the
    // NULL rows left alone, as the host places them.
    let mut img = PageImage::new();
    let at = img.add_payload(&stream, 8).unwrap();
    let table = grouper_gpu::parquet::delta::row_table(&[(2, 3), (6, 5)]).unwrap();
    let table_at = img.add_payload(&table, 8).unwrap();
    let delta = Segment {
        src: at,
        count: 8,
        stride: stream.len() as u32,
        kind: Kind::Delta,
        dict: table_at as u32,
        dict_len: 2,
        ..seg
    };
    img.push(delta, 88).unwrap();
    let want: Vec<u8> = [0i64, 0, 7, 5, 3, 0, 1, 2, 3, 4, 5]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut bytes = vec![0u8; img.bytes()];
    img.write(&mut bytes).unwrap();
    assert_eq!(decode_on_host(&bytes, img.segments(), 88).unwrap(), want);
    assert_eq!(decode_on_gpu(&img, 88).unwrap(), want);
    let mut bad = PageImage::new();
    let at = bad
        .add_payload(&[100, 4, 8, 14, 3, 2, 0, 0, 0, 0xc0, 0x3f], 8)
        .unwrap();
    let delta = Segment {
        src: at,
        count: 8,
        stride: 11,
        kind: Kind::Delta,
        dict: 0,
        dict_len: 0,
        ..seg
    };
    bad.push(delta, 64).unwrap();
    assert!(decode_on_gpu(&bad, 64).is_err());
}

/// Whether the Arrow reader reads row group 0 of `path` without an error.
fn arrow_reads(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(b) = ParquetRecordBatchReaderBuilder::try_new(file) else {
        return false;
    };
    let Ok(r) = b.with_row_groups(vec![0]).build() else {
        return false;
    };
    r.into_iter().all(|b| b.is_ok())
}

/// Every row group of `path` through page images and the host decoder; the chunks that went
/// to the CPU.
fn decode_file(path: &Path) -> Vec<(usize, String)> {
    let file = ParquetFile::open(path).unwrap();
    let coder = coder();
    let schema = file.arrow_schema();
    let mut on_cpu = Vec::new();
    for rg in 0..file.row_groups() {
        let (layout, columns) = layout(&schema, file.rows(rg), &coder);
        let img = file.row_group_image(rg, &columns, &layout).unwrap();
        // The staging buffers are sized by the bound.
        assert!(img.image.bytes() <= file.image_bound(rg, &columns));
        let mut bytes = vec![0u8; img.image.bytes()];
        img.image.write(&mut bytes).unwrap();
        let decoded = decode_on_host(&bytes, img.image.segments(), layout.bytes).unwrap();
        check_decoded(path, rg, &decoded, &layout, &coder);
        // Where there is a GPU, its kernel decodes the same image byte for byte.
        if Gpu::get().is_ok() {
            let gpu = decode_on_gpu(&img.image, layout.bytes).unwrap();
            assert!(gpu == decoded, "row group {rg}: GPU and host differ");
        }
        on_cpu.extend(img.on_cpu);
    }
    on_cpu
}

#[test]
fn every_writer_setting_decodes_to_the_arrow_readers_values() {
    let dir = std::env::temp_dir().join(format!("grouper-pq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for variant in 0..4 {
        let path = dir.join(format!("v{variant}.parquet"));
        write(&path, &table(7001, variant as u64), properties(variant));
        let on_cpu = decode_file(&path);
        // DELTA_BINARY_PACKED decodes on the GPU, without NULLs (leaf 8) and with them (leaf
        // 9); the strings of DELTA_BYTE_ARRAY pages (leaf 6, variant 1) on the CPU, named.
        match variant {
            1 => assert!(
                !on_cpu.is_empty()
                    && on_cpu
                        .iter()
                        .all(|(leaf, why)| *leaf == 6 && why.contains("DELTA_BYTE_ARRAY")),
                "variant {variant}: {on_cpu:?}"
            ),
            _ => assert!(on_cpu.is_empty(), "variant {variant}: {on_cpu:?}"),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_corrupt_page_is_an_error_not_a_wrong_answer() {
    let dir = std::env::temp_dir().join(format!("grouper-pq-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ok.parquet");
    let props = WriterProperties::builder()
        .set_compression(Compression::UNCOMPRESSED)
        .build();
    write(&path, &table(2000, 1), props);
    let good = std::fs::read(&path).unwrap();
    let file = ParquetFile::open(&path).unwrap();
    let coder = coder();
    let schema = file.arrow_schema();
    let (layout, columns) = layout(&schema, file.rows(0), &coder);
    // Flip bytes across the first column chunks' data: every outcome is an error or the
    // same values, never other values.
    for at in (4..good.len() / 3).step_by(97) {
        let mut bad = good.clone();
        bad[at] ^= 0x5a;
        let bad_path = dir.join("bad.parquet");
        std::fs::write(&bad_path, &bad).unwrap();
        let Ok(file) = ParquetFile::open(&bad_path) else {
            continue;
        };
        let Ok(img) = file.row_group_image(0, &columns, &layout) else {
            continue;
        };
        let mut bytes = vec![0u8; img.image.bytes()];
        img.image.write(&mut bytes).unwrap();
        let Ok(decoded) = decode_on_host(&bytes, img.image.segments(), layout.bytes) else {
            continue;
        };
        // A flipped value byte decodes to another value: what the Arrow reader also reads
        // from the same bytes (where it reads them at all).
        if arrow_reads(&bad_path) {
            let same = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check_decoded(&bad_path, 0, &decoded, &layout, &coder)
            }));
            assert!(
                same.is_ok(),
                "byte {at}: the page image disagrees with the Arrow reader"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Workers reading row groups of one file at once each read their own bytes.
#[test]
fn row_groups_read_at_once_decode_as_read_alone() {
    use rayon::prelude::*;
    let dir = std::env::temp_dir().join(format!("grouper-pq-par-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("many.parquet");
    write(&path, &table(40_000, 3), properties(0));
    let file = ParquetFile::open(&path).unwrap();
    let coder = coder();
    let schema = file.arrow_schema();
    assert!(file.row_groups() > 8);
    (0..file.row_groups()).into_par_iter().for_each(|rg| {
        let (layout, columns) = layout(&schema, file.rows(rg), &coder);
        let img = file.row_group_image(rg, &columns, &layout).unwrap();
        let mut bytes = vec![0u8; img.image.bytes()];
        img.image.write(&mut bytes).unwrap();
        let decoded = decode_on_host(&bytes, img.image.segments(), layout.bytes).unwrap();
        check_decoded(&path, rg, &decoded, &layout, &coder);
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Several row groups decode as one chunk: each built against its rows' place in the chunk's
/// image, written as one image, decoded once.
#[test]
fn row_groups_share_a_chunk() {
    let dir = std::env::temp_dir().join(format!("grouper-pq-chunk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("chunk.parquet");
    // Non-nullable columns only (validity bits would start mid-byte).
    let all = table(9_500, 5);
    let keep: Vec<usize> = all
        .schema()
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.is_nullable())
        .map(|(i, _)| i)
        .collect();
    let batch = all.project(&keep).unwrap();
    write(&path, &batch, properties(0));
    let file = ParquetFile::open(&path).unwrap();
    let coder = coder();
    let schema = file.arrow_schema();
    let rows: Vec<usize> = (0..file.row_groups()).map(|rg| file.rows(rg)).collect();
    let total: usize = rows.iter().sum();
    let (chunk, columns) = layout(&schema, total, &coder);
    let widths: Vec<usize> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8 => 4,
            t => t.primitive_width().unwrap(),
        })
        .collect();
    let mut images = Vec::new();
    let mut at = 0;
    for (rg, &n) in rows.iter().enumerate() {
        let part = chunk.rows_at(at, n, &widths);
        images.push(file.row_group_image(rg, &columns, &part).unwrap().image);
        at += n;
    }
    let refs: Vec<&PageImage> = images.iter().collect();
    let mut bytes = vec![0u8; PageImage::bytes_of(&refs)];
    let (segments, _) = PageImage::write_all(&refs, &mut bytes).unwrap();
    let decoded = decode_on_host(&bytes, segments, chunk.bytes).unwrap();
    // Row group by row group, at its rows' place.
    let mut at = 0;
    for (rg, &n) in rows.iter().enumerate() {
        let (one, _) = layout(&schema, n, &coder);
        let mut own = vec![0u8; one.bytes];
        for (c, w) in widths.iter().enumerate() {
            let (src, dst) = (
                chunk.columns[c].unwrap().values,
                one.columns[c].unwrap().values,
            );
            own[dst..dst + n * w].copy_from_slice(&decoded[src + at * w..src + (at + n) * w]);
        }
        check_decoded(&path, rg, &own, &one, &coder);
        at += n;
    }
    assert!(rows.len() > 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Python with DuckDB: `$GROUPER_PYTHON`, else the project's venv (made by
/// `scripts/setup-venv.sh` when missing, as the differential tests do); `None` on the device
/// machine (`GROUPER_REQUIRE_GPU=1`) without the DuckDB wheel, where only GPU tests must run.
fn duckdb_python() -> Option<std::path::PathBuf> {
    static SETUP: Mutex<()> = Mutex::new(());
    let _guard = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    let python = match std::env::var_os("GROUPER_PYTHON") {
        Some(p) => std::path::PathBuf::from(p),
        None => {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let venv = root.join(".venv/bin/python");
            if !venv.exists() && std::env::var("GROUPER_REQUIRE_GPU").is_err() {
                let status = std::process::Command::new("bash")
                    .arg(root.join("scripts/setup-venv.sh"))
                    .status()
                    .expect("run scripts/setup-venv.sh");
                assert!(status.success(), "scripts/setup-venv.sh failed");
            }
            venv
        }
    };
    let works = std::process::Command::new(&python)
        .args(["-c", "import duckdb"])
        .status()
        .is_ok_and(|s| s.success());
    match works {
        true => Some(python),
        false if std::env::var("GROUPER_REQUIRE_GPU").is_ok() => None,
        false => panic!("{} cannot import duckdb", python.display()),
    }
}

/// Files DuckDB writes (`COPY ... TO`): optional columns with NULLs, PLAIN_DICTIONARY pages,
/// SNAPPY, ZSTD and none, several row groups; decoded through page images as the Arrow reader
/// reads them (and, where there is a GPU, by the kernel as by the host reference).
#[test]
fn files_duckdb_writes_decode_as_the_arrow_reader_reads_them() {
    let Some(python) = duckdb_python() else {
        eprintln!("skipped: no DuckDB on the device machine");
        return;
    };
    let dir = std::env::temp_dir().join(format!("grouper-pq-duckdb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for codec in ["snappy", "zstd", "uncompressed"] {
        let path = dir.join(format!("{codec}.parquet"));
        let sql = format!(
            "COPY (SELECT i::BIGINT AS i, \
               CASE WHEN i % 7 = 0 THEN NULL ELSE (i % 1000)::INT - 500 END AS k, \
               (((i * 37) % 100000) / 100)::DECIMAL(15,2) AS d, \
               CASE WHEN i % 11 = 0 THEN NULL ELSE ['A','N','R','longer value'][i % 4 + 1] END AS s, \
               DATE '1994-01-01' + (i % 2500)::INT AS dt, \
               CASE WHEN i % 3 = 0 THEN NULL ELSE i / 7.0 END::DOUBLE AS f \
             FROM range(23000) t(i)) TO '{}' (FORMAT parquet, COMPRESSION {codec}, ROW_GROUP_SIZE 6000)",
            path.display()
        );
        let status = std::process::Command::new(&python)
            .args([
                "-c",
                &format!("import duckdb; duckdb.sql(\"\"\"{sql}\"\"\")"),
            ])
            .status()
            .unwrap();
        assert!(status.success(), "DuckDB did not write {codec}");
        let on_cpu = decode_file(&path);
        assert!(on_cpu.is_empty(), "{codec}: {on_cpu:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A key column of DELTA_BINARY_PACKED pages (pyarrow's `k`, with NULLs) is checked against
/// the plan on the CPU, as PLAIN pages are, and still travels encoded: the check sees every
/// valid value in order, the decoded image is the Arrow reader's, and a value the check
/// refuses stops the row group (the caller then reads the files another way).
#[test]
fn delta_key_values_are_checked_on_the_cpu_and_stay_encoded() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/data/pyarrow/delta_snappy.parquet");
    let file = ParquetFile::open(&path).unwrap();
    let coder = coder();
    let schema = file.arrow_schema();
    let seen: Arc<Mutex<Vec<i32>>> = Default::default();
    for refuse in [false, true] {
        for rg in 0..file.row_groups() {
            let (layout, mut columns) = layout(&schema, file.rows(rg), &coder);
            let seen = Arc::clone(&seen);
            columns[1].target.check = Some(Arc::new(move |native: &[u8], n: usize| {
                if refuse {
                    return Err(grouper_core::GrouperError::OutsidePlan("refused".into()));
                }
                let values = native[..n * 4].chunks_exact(4);
                let mut seen = seen.lock().unwrap();
                seen.extend(values.map(|b| i32::from_le_bytes(b.try_into().unwrap())));
                Ok(())
            }));
            let got = file.row_group_image(rg, &columns, &layout);
            if refuse {
                assert!(
                    matches!(got, Err(grouper_core::GrouperError::OutsidePlan(_))),
                    "row group {rg}"
                );
                continue;
            }
            let img = got.unwrap();
            assert!(img.on_cpu.is_empty(), "{:?}", img.on_cpu);
            let mut bytes = vec![0u8; img.image.bytes()];
            img.image.write(&mut bytes).unwrap();
            let decoded = decode_on_host(&bytes, img.image.segments(), layout.bytes).unwrap();
            check_decoded(&path, rg, &decoded, &layout, &coder);
        }
    }
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut want = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let k = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int32Array>()
            .unwrap();
        want.extend(k.iter().flatten());
    }
    assert_eq!(*seen.lock().unwrap(), want);
}

/// Files pyarrow writes (`scripts/write-pyarrow-fixtures.py`, committed): dictionary on and
/// off, BYTE_STREAM_SPLIT with data pages v2, DELTA_BINARY_PACKED; SNAPPY, ZSTD and none;
/// NULLs, several row groups and pages, a string key. Decoded through page images as the Arrow
/// reader reads them and, where there is a GPU, by the kernel as by the host reference; none
/// goes to the CPU (the DELTA_BINARY_PACKED column with NULLs included).
#[test]
fn files_pyarrow_writes_decode_as_the_arrow_reader_reads_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/data/pyarrow");
    let mut seen = 0;
    for name in [
        "dictionary_snappy",
        "plain_zstd",
        "byte_stream_split_v2",
        "delta_snappy",
    ] {
        let path = dir.join(format!("{name}.parquet"));
        let on_cpu = decode_file(&path);
        assert!(on_cpu.is_empty(), "{name}: {on_cpu:?}");
        seen += 1;
    }
    assert_eq!(seen, 4);
}

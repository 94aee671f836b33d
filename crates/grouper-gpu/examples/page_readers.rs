//! The CPU side of the Parquet page stream alone (no GPU): TPC-H Q1's column chunks of a
//! lineitem file read, decompressed and made into page images on N threads, in GB/s of image.
//! `page_readers FILE THREADS...`
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arrow::datatypes::DataType;
use grouper_gpu::encode::Encoding;
use grouper_gpu::image::ImageLayout;
use grouper_gpu::parquet::{Coder, Column, ParquetFile, Target};
use rayon::prelude::*;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let file = ParquetFile::open(std::path::Path::new(&args[1])).unwrap();
    let schema = file.arrow_schema();
    let names = [
        "l_returnflag",
        "l_linestatus",
        "l_quantity",
        "l_extendedprice",
        "l_discount",
        "l_tax",
        "l_shipdate",
    ];
    let codes: Arc<Mutex<HashMap<Vec<u8>, u32>>> = Default::default();
    let coder: Coder = Arc::new(move |values: &[&[u8]]| {
        let mut m = codes.lock().unwrap();
        Ok(values
            .iter()
            .map(|v| {
                let n = m.len() as u32;
                *m.entry(v.to_vec()).or_insert(n)
            })
            .collect())
    });
    let (mut cols, mut encs) = (Vec::new(), Vec::new());
    for nm in names {
        let t = schema.field_with_name(nm).unwrap().data_type().clone();
        let string = matches!(t, DataType::Utf8 | DataType::Utf8View);
        let enc_t = if string { DataType::UInt32 } else { t.clone() };
        let w = enc_t.primitive_width().unwrap() as u8;
        cols.push(Column {
            leaf: file.leaf(nm).unwrap(),
            target: Target {
                width: w,
                signed: true,
                coder: string.then(|| Arc::clone(&coder)),
                check: None,
            },
        });
        encs.push(Some(Encoding::plain(&enc_t)));
    }
    let nullable = vec![false; names.len()];
    let units: Vec<(usize, usize)> = (0..file.row_groups())
        .flat_map(|rg| (0..cols.len()).map(move |c| (rg, c)))
        .collect();
    for threads in args[2..].iter().map(|t| t.parse::<usize>().unwrap()) {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        for _ in 0..2 {
            let t = Instant::now();
            let bytes: usize = pool.install(|| {
                units
                    .par_iter()
                    .map(|&(rg, c)| {
                        let layout = ImageLayout::new(file.rows(rg), &encs, &nullable);
                        let region = layout.columns[c].unwrap();
                        let (img, _) = file
                            .column_image(rg, &cols[c], region, layout.bytes as u64)
                            .unwrap();
                        img.bytes()
                    })
                    .sum()
            });
            let s = t.elapsed().as_secs_f64();
            println!(
                "{threads} threads: {:.1} MB in {:.1} ms: {:.2} GB/s ({:.2} a thread)",
                bytes as f64 / 1e6,
                s * 1e3,
                bytes as f64 / s / 1e9,
                bytes as f64 / s / 1e9 / threads as f64
            );
        }
    }
}

//! grouper-gpu's integration tests, one binary: they need a GPU, and are ignored without one
//! (see `gpu`).

mod atomics;
mod gpu;
mod narrow_rows;
mod parquet_pages;
mod runtime;
mod schemes;
mod sort;

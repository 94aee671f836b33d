//! Parquet pages decoded on the GPU (Tomé's transfer compression, as the file already has it).
//!
//! ```text
//!  CPU worker per row group            PCIe                   GPU
//!  page reader: read + decompress  ─▶  page image  ─▶  decode kernel ─▶ chunk image ─▶ aggregation
//!  run headers, definition levels      (encoded values,     (one block a    (image.rs,
//!  dictionaries → native values /       segments)            segment)        plain columns)
//!  key codes; other chunks decoded here
//! ```
//!
//! - [`segments`]: the page image and its decode program, with the CPU reference decoder;
//! - [`hybrid`]: the RLE/bit-packed hybrid's run headers and definition levels;
//! - [`delta`]: DELTA_BINARY_PACKED's header and host decode;
//! - [`chunk`]: one column chunk's pages into segments;
//! - [`row_group`]: a row group's columns, falling back to the CPU per chunk;
//! - [`kernel`]: the decode kernel;
//! - [`positional`]: files read at positions, by many workers at once.

pub mod chunk;
pub mod delta;
pub mod hybrid;
pub mod kernel;
pub mod positional;
pub mod row_group;
pub mod segments;

pub use chunk::{Check, Coder, Target};
pub use kernel::Decoder;
pub use row_group::{native_bytes, Column, ParquetFile, RowGroupImage};
pub use segments::{decode_on_host, PageImage};

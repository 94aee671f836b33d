//! The one error type of `grouper-core`.
//!
//! Every failure a user can provoke (an unsupported type, an overflowing SUM, a strategy that does
//! not apply to the query) is a variant here with a one-line `Display`, so callers (the DataFusion
//! glue, the CLI) can show it as is and never need to panic.

use arrow::datatypes::DataType;
use arrow::error::ArrowError;

/// Errors raised by the aggregation engine.
#[derive(Debug, thiserror::Error)]
pub enum GrouperError {
    /// A group key or aggregate input of a type the engine does not handle.
    #[error("unsupported {what}: {data_type}")]
    UnsupportedType {
        what: &'static str,
        data_type: DataType,
    },
    /// The query asks for something the engine does not handle (the caller falls back).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// An integer or decimal SUM left the range of its result type.
    #[error("arithmetic overflow in {aggregate}: the result does not fit {data_type}")]
    Overflow {
        aggregate: &'static str,
        data_type: DataType,
    },
    /// A forced strategy or option that cannot run this query.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// Input batches that do not match the query spec.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// No usable GPU: no driver or NVRTC library, no device, or a driver error at start-up.
    #[error("no GPU available: {0}")]
    GpuUnavailable(String),
    /// A CUDA driver, NVRTC or kernel failure while running on the GPU.
    #[error("GPU error: {0}")]
    Gpu(String),
    /// A streamed input left the plan made from its source's statistics (a value outside
    /// the bounds, an unexpected NULL, a dictionary that filled up); the caller reruns the
    /// query on the collected input.
    #[error("input outside its streaming plan: {0}")]
    OutsidePlan(String),
    /// Reading or writing a spill file.
    #[error("spill file: {0}")]
    Io(#[from] std::io::Error),
    /// An error from an Arrow kernel.
    #[error("arrow: {0}")]
    Arrow(#[from] ArrowError),
}

/// Result alias used throughout the crate.
pub type Result<T, E = GrouperError> = std::result::Result<T, E>;

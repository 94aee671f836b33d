//! grouper-flight's integration tests, one binary:
//! - `server`: the server through Flight's gRPC client, one call at a time.
//!   (Many clients at once from Python's ADBC driver: grouper-cli's `serve` test.)

mod server;

//! grouper-core's integration tests, one binary (`cargo test -p grouper-core --test it`).

mod strategies;
mod structure;

//! grouper-core's integration tests, one binary (`cargo test -p grouper-core --test it`).

mod selected;
mod strategies;
mod structure;

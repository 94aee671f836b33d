//! grouper's front ends for people: the interactive SQL shell (`grouper` without arguments),
//! scripts (`grouper -c`, `grouper -f`, SQL on standard input), and the pieces the one-shot
//! `grouper query` shares with them (tables from files, result formats, progress, plans).
//! The library crate `grouper` stays free of all of this.

pub mod batch;
pub mod dot;
pub mod explain;
pub mod output;
pub mod progress;
pub mod repl;
pub mod session;
pub mod statements;
pub mod tables;

pub use session::{Cancelled, Flow, Settings, Shell};

/// An error and its causes on one line, each cause only where the text before does not
/// already say it (DataFusion's errors repeat their sources in their own message). A panic
/// inside a query task arrives as an error naming it, and prints like any other.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let text = cause
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

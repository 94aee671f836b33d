//! The `grouper` command-line tool. Errors print as one line on stderr with exit code 2.

mod bench;
mod cli;
mod gpu_bench;

use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let msg = format!("{e:#}").replace('\n', " ");
            eprintln!("error: {msg}");
            ExitCode::from(2)
        }
    }
}

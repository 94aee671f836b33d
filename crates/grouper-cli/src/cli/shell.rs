//! `grouper` without a subcommand: the interactive shell, or a script from `-c`, `-f` or
//! standard input, over one session.

use std::io::{IsTerminal, Read};

use anyhow::{bail, Context, Result};
use grouper_shell::{repl, Shell};
use tokio::runtime::Runtime;

use super::{Format, ShellArgs};

/// Whether these arguments open the prompt (no script given, a terminal on standard input).
pub fn interactive(args: &ShellArgs) -> bool {
    args.command.is_none() && args.file.is_none() && std::io::stdin().is_terminal()
}

/// Runs the shell or the script these arguments name.
pub fn run(args: ShellArgs, rt: &Runtime) -> Result<()> {
    if args.format == Format::Parquet {
        bail!(
            "the shell prints table, csv or json (--format parquet needs `grouper query --output`)"
        );
    }
    let mut shell = Shell::new(args.engine.config())?;
    shell.settings.mode = args.format;
    shell.settings.coprocess = args.coprocess;
    rt.block_on(shell.register(&args.tables))?;
    if let Some(sql) = &args.command {
        return repl::script(rt, &mut shell, sql);
    }
    if let Some(path) = &args.file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        return repl::script(rt, &mut shell, &text);
    }
    if !std::io::stdin().is_terminal() {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read SQL from standard input")?;
        return repl::script(rt, &mut shell, &text);
    }
    repl::interactive(rt, &mut shell, &banner(&args))
}

/// What runs the aggregations under these options, for a banner: the GPU's name, or why
/// there is none.
pub(super) fn engine(engine: &super::EngineArgs) -> String {
    grouper::device_facts::describe(engine.backend)
}

/// The first lines the prompt prints: what runs the aggregations, and how to go on.
fn banner(args: &ShellArgs) -> String {
    format!(
        "grouper {}: GROUP BY on {}, backend {}.\nStatements end with ';'. .help lists commands; Ctrl-C cancels a statement; .quit or Ctrl-D leaves.",
        env!("CARGO_PKG_VERSION"),
        engine(&args.engine),
        args.engine.backend
    )
}

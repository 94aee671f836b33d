//! The prompt: line editing and history (rustyline), statements over several lines until `;`,
//! Ctrl-C cancelling the running statement (or clearing the line being typed), Ctrl-D or
//! `.quit` leaving. And the same session without a prompt, for scripts.

use std::path::PathBuf;

use anyhow::Result;
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::{DefaultHistory, History};
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Editor, Helper};
use tokio::runtime::Runtime;

use crate::session::{Flow, Shell};
use crate::statements;

/// The prompt.
pub const PROMPT: &str = "grouper> ";

/// Lines kept in the history file.
const HISTORY_LINES: usize = 10_000;

/// rustyline's helper: Enter runs the buffer only once it is complete (its last statement
/// ended by `;`, or a dot-command); otherwise it starts a new line of the same statement.
struct Lines;

impl Validator for Lines {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if statements::complete(ctx.input()) {
            ValidationResult::Valid(None)
        } else {
            ValidationResult::Incomplete
        })
    }
}

impl Completer for Lines {
    type Candidate = String;
}

impl Hinter for Lines {
    type Hint = String;
}

impl Highlighter for Lines {}

impl Helper for Lines {}

/// The history file: `~/.grouper_history` (none where there is no home folder).
fn history_file() -> Option<PathBuf> {
    std::env::var_os("GROUPER_HISTORY")
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".grouper_history")))
}

/// Runs the prompt until `.quit` or Ctrl-D. Errors of statements are printed and the prompt
/// goes on; only a broken terminal ends it with an error.
pub fn interactive(rt: &Runtime, shell: &mut Shell, banner: &str) -> Result<()> {
    shell.settings.prompt = true;
    let config = rustyline::Config::builder()
        .max_history_size(HISTORY_LINES)?
        .auto_add_history(false)
        .build();
    let mut editor: Editor<Lines, DefaultHistory> = Editor::with_config(config)?;
    editor.set_helper(Some(Lines));
    let history = history_file();
    if let Some(h) = &history {
        // A missing file is a first run.
        let _ = editor.load_history(h);
    }
    println!("{banner}");
    loop {
        match editor.readline(PROMPT) {
            Ok(text) => {
                if !text.trim().is_empty() {
                    let _ = editor.history_mut().add(&text);
                }
                if rt.block_on(shell.run_text(&text, false))? == Flow::Quit {
                    break;
                }
            }
            // Ctrl-C while typing drops the line, as in DuckDB's and Python's prompts.
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(h) = &history {
        if let Err(e) = editor.save_history(h) {
            eprintln!("warning: cannot save the history to {}: {e}", h.display());
        }
    }
    Ok(())
}

/// Runs a script without a prompt (`-c`, `-f`, standard input): the first error ends it.
pub fn script(rt: &Runtime, shell: &mut Shell, text: &str) -> Result<()> {
    rt.block_on(shell.run_text(text, true)).map(|_| ())
}

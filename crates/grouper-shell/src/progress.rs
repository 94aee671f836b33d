//! Progress on stderr for long work, shown only when stderr is a terminal.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar counting `total` rows, or a hidden one when stderr is not a terminal.
pub fn rows(total: u64, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {human_pos}/{human_len} rows ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// A spinner for work of unknown length.
pub fn spinner(what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// A spinner that appears only once the work has run for `after` (a quick statement leaves no
/// trace on the terminal), and is cleared when the guard is dropped. Needs a Tokio runtime.
pub fn delayed_spinner(what: &str, after: Duration) -> Delayed {
    let bar = ProgressBar::hidden();
    if std::io::stderr().is_terminal() {
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(what.to_string());
        let shown = bar.clone();
        let show = tokio::spawn(async move {
            tokio::time::sleep(after).await;
            shown.set_draw_target(ProgressDrawTarget::stderr());
            shown.enable_steady_tick(Duration::from_millis(120));
        });
        return Delayed {
            bar,
            show: Some(show),
        };
    }
    Delayed { bar, show: None }
}

/// The guard of [`delayed_spinner`].
pub struct Delayed {
    bar: ProgressBar,
    show: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Delayed {
    fn drop(&mut self) {
        if let Some(show) = self.show.take() {
            show.abort();
        }
        self.bar.finish_and_clear();
    }
}

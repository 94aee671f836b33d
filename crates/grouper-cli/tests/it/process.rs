//! Processes the tests start and stop as a user would.

use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// Sends `child` SIGINT (Ctrl-C) and waits for it to end, failing the test if it runs on past
/// `within`; its exit status.
pub fn interrupt(child: &mut Child, within: Duration) -> ExitStatus {
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            t.elapsed() < within,
            "still running {within:?} after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

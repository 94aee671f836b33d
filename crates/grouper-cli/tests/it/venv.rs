//! The Python the tests drive (DuckDB as the oracle, ADBC's Flight SQL client): `$GROUPER_PYTHON`
//! when set, else the project's venv, made or completed by `scripts/setup-venv.sh` when a
//! package is missing (a fresh clone, CI; a venv made before the client was added). One lock
//! for every test of this binary, so that two never run pip into the same venv at once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The workspace's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether `python` imports every module in `modules`.
pub fn imports(python: &Path, modules: &[&str]) -> bool {
    Command::new(python)
        .args(["-c", &format!("import {}", modules.join(", "))])
        .status()
        .is_ok_and(|s| s.success())
}

/// A Python that imports `modules`, the venv set up first where it cannot.
pub fn python(modules: &[&str]) -> PathBuf {
    static SETUP: Mutex<()> = Mutex::new(());
    let _guard = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    let python = grouper_cli::difftest::duckdb::python(&root());
    if std::env::var_os("GROUPER_PYTHON").is_none() && !imports(&python, modules) {
        let status = Command::new("bash")
            .arg(root().join("scripts/setup-venv.sh"))
            .status()
            .expect("run scripts/setup-venv.sh");
        assert!(status.success(), "scripts/setup-venv.sh failed");
    }
    python
}

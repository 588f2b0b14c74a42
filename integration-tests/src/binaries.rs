//! Where the built service binaries are: next to the running executable, in
//! `target/<profile>/`, where `cargo build --workspace --bins` puts them.

use std::path::{Path, PathBuf};

/// Overrides the directory the binaries are looked up in.
pub const BIN_DIR_ENV: &str = "CARAVAN_BIN_DIR";

/// The binaries a cluster runs.
pub const SERVICE_BINARIES: [&str; 7] = [
    "caravan-api-gateway",
    "caravan-deployment-watcher",
    "caravan-eval-broker",
    "caravan-plan-applier",
    "caravan-scheduler-worker",
    "caravan-client-node",
    "caravan",
];

/// The directory holding the service binaries: `CARAVAN_BIN_DIR`, else the
/// profile directory of the running executable (a test runs from
/// `target/<profile>/deps/`, a bench binary from `target/<profile>/`).
pub fn bin_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(BIN_DIR_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let exe = std::env::current_exe()?;
    let mut dir = exe
        .parent()
        .ok_or_else(|| anyhow::anyhow!("{} has no parent directory", exe.display()))?
        .to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    Ok(dir)
}

/// The path of one binary, or an error telling how to build it.
pub fn binary(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        anyhow::bail!(
            "{} not found: build the service binaries first with \
             `cargo build --workspace --bins` (same profile as this run), \
             or point {BIN_DIR_ENV} at them; scripts/test does both",
            path.display()
        )
    }
}

/// Checks every service binary is built, naming the missing ones.
pub fn check_all(dir: &Path) -> anyhow::Result<()> {
    let missing: Vec<&str> = SERVICE_BINARIES
        .iter()
        .copied()
        .filter(|n| !dir.join(n).is_file())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        anyhow::bail!(
            "service binaries missing from {}: {}; build them first with \
             `cargo build --workspace --bins` (same profile as this run), \
             or point {BIN_DIR_ENV} at them; scripts/test does both",
            dir.display(),
            missing.join(", ")
        )
    }
}

//! Embeds every file under `assets/`: writes `$OUT_DIR/assets.rs`, a table of
//! each file's path (relative to `assets/`, with `/` separators), its bytes
//! (`include_bytes!`) and an entity tag made from a hash of those bytes, so a
//! browser revalidates cheaply and a changed asset is never served stale.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs, io};

fn main() -> io::Result<()> {
    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or_else(missing)?).join("assets");
    // A directory given to rerun-if-changed is scanned whole, so an added,
    // changed or removed asset rebuilds the table.
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &root, &mut files)?;
    files.sort();
    let mut out = String::from(
        "/// Every embedded asset, sorted by path.\npub(crate) static ASSETS: &[Embedded] = &[\n",
    );
    for (rel, abs) in &files {
        let bytes = fs::read(abs)?;
        writeln!(
            out,
            "    Embedded {{ path: {rel:?}, bytes: include_bytes!({abs:?}), etag: \"\\\"{:016x}\\\"\" }},",
            fnv1a(&bytes),
            abs = abs.display().to_string(),
        )
        .map_err(io::Error::other)?;
    }
    out.push_str("];\n");
    let dest = PathBuf::from(env::var_os("OUT_DIR").ok_or_else(missing)?).join("assets.rs");
    fs::write(dest, out)
}

fn missing() -> io::Error {
    io::Error::other("cargo did not set CARGO_MANIFEST_DIR or OUT_DIR")
}

/// Every file under `dir`, as (path relative to `root`, absolute path).
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, files)?;
        } else {
            let rel = path
                .strip_prefix(root)
                .map_err(io::Error::other)?
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            files.push((rel, path));
        }
    }
    Ok(())
}

/// 64-bit FNV-1a: enough to tell two versions of a file apart.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

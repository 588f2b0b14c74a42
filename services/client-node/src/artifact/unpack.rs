//! Archives unpacked into an artifact's destination: the kind read from the
//! source's extension (or the `archive` option), entries kept inside the
//! destination, and the client's size and file-count limits enforced.
//!
//! Crates, all pure Rust so the client needs no C toolchain: `tar` (the
//! de-facto tar reader, whose `unpack_in` also checks that a parent
//! directory does not lead out through a symlink), `flate2` (gzip, on its
//! default pure-Rust backend), `bzip2` (on the pure-Rust libbz2-rs),
//! `lzma-rust2` (xz, with a streaming reader; the one `zip` itself uses) and
//! `zip` (deflate only, through flate2).

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Component, Path, PathBuf};

use super::ArtifactError;
use super::limits::ArtifactLimits;

/// The archive formats an artifact may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveKind {
    /// `.tar.gz`, `.tgz`
    TarGz,
    /// `.tar.bz2`, `.tbz2`
    TarBz2,
    /// `.tar.xz`, `.txz`
    TarXz,
    /// `.tar`
    Tar,
    /// `.zip`
    Zip,
    /// `.gz`: one compressed file.
    Gz,
    /// `.bz2`: one compressed file.
    Bz2,
    /// `.xz`: one compressed file.
    Xz,
}

/// Extensions by kind, longest first so `.tar.gz` wins over `.gz`.
const EXTENSIONS: &[(&str, ArchiveKind)] = &[
    ("tar.bz2", ArchiveKind::TarBz2),
    ("tar.gz", ArchiveKind::TarGz),
    ("tar.xz", ArchiveKind::TarXz),
    ("tbz2", ArchiveKind::TarBz2),
    ("tgz", ArchiveKind::TarGz),
    ("txz", ArchiveKind::TarXz),
    ("tar", ArchiveKind::Tar),
    ("zip", ArchiveKind::Zip),
    ("bz2", ArchiveKind::Bz2),
    ("gz", ArchiveKind::Gz),
    ("xz", ArchiveKind::Xz),
];

impl ArchiveKind {
    /// The kind of the file at `path`, or the kind the `archive` option
    /// names (`false` turns unpacking off).
    pub fn detect(path: &str, archive_option: Option<&str>) -> Result<Option<Self>, ArtifactError> {
        match archive_option.map(str::trim) {
            Some("false") => Ok(None),
            Some(forced) if !forced.is_empty() => EXTENSIONS
                .iter()
                .find(|(ext, _)| ext.eq_ignore_ascii_case(forced.trim_start_matches('.')))
                .map(|(_, k)| Some(*k))
                .ok_or_else(|| {
                    ArtifactError::Unpack(format!(
                        "unknown archive type {forced:?} in option archive"
                    ))
                }),
            _ => {
                let lower = path.to_ascii_lowercase();
                Ok(EXTENSIONS
                    .iter()
                    .find(|(ext, _)| lower.ends_with(&format!(".{ext}")))
                    .map(|(_, k)| *k))
            }
        }
    }

    fn single_file_name(self) -> Option<&'static str> {
        match self {
            ArchiveKind::Gz => Some("gzip"),
            ArchiveKind::Bz2 => Some("bzip2"),
            ArchiveKind::Xz => Some("xz"),
            _ => None,
        }
    }
}

/// Unpacks `archive` (blocking): into the directory `dst` when `into_dir`,
/// else its one file becomes the file `dst`.
pub fn unpack(
    kind: ArchiveKind,
    archive: &Path,
    dst: &Path,
    into_dir: bool,
    limits: &ArtifactLimits,
) -> Result<(), ArtifactError> {
    let file = File::open(archive).map_err(|e| ArtifactError::io("open", archive, e))?;
    let mut budget = Budget::new(limits);
    if let Some(name) = kind.single_file_name() {
        if into_dir {
            return Err(ArtifactError::Unpack(format!(
                "{name}-compressed files can only unarchive to a single file (use mode \"file\")"
            )));
        }
        budget.count_file()?;
        let mut reader = decoder(kind, file);
        return write_file(&mut reader, dst, None, &mut budget);
    }
    match kind {
        ArchiveKind::Zip => unzip(file, dst, into_dir, &mut budget),
        _ => untar(decoder(kind, file), dst, into_dir, &mut budget),
    }
}

fn decoder(kind: ArchiveKind, file: File) -> Box<dyn Read> {
    let buffered = BufReader::new(file);
    match kind {
        ArchiveKind::TarGz | ArchiveKind::Gz => {
            Box::new(flate2::read::MultiGzDecoder::new(buffered))
        }
        ArchiveKind::TarBz2 | ArchiveKind::Bz2 => {
            Box::new(bzip2::read::MultiBzDecoder::new(buffered))
        }
        ArchiveKind::TarXz | ArchiveKind::Xz => Box::new(lzma_rust2::XzReader::new(buffered, true)),
        ArchiveKind::Tar | ArchiveKind::Zip => Box::new(buffered),
    }
}

/// What an archive may still unpack before the client's limits stop it.
struct Budget {
    bytes_left: Option<u64>,
    size_limit: Option<u64>,
    files_left: Option<u64>,
    file_limit: Option<u64>,
}

impl Budget {
    fn new(limits: &ArtifactLimits) -> Budget {
        Budget {
            bytes_left: limits.decompression_size_limit,
            size_limit: limits.decompression_size_limit,
            files_left: limits.decompression_file_count_limit,
            file_limit: limits.decompression_file_count_limit,
        }
    }

    fn count_file(&mut self) -> Result<(), ArtifactError> {
        if let Some(left) = self.files_left.as_mut() {
            if *left == 0 {
                return Err(ArtifactError::Limit(format!(
                    "archive has more than {} files (the client's artifact \
                     decompression_file_count_limit)",
                    self.file_limit.unwrap_or_default()
                )));
            }
            *left -= 1;
        }
        Ok(())
    }

    fn take_bytes(&mut self, n: u64) -> Result<(), ArtifactError> {
        if let Some(left) = self.bytes_left.as_mut() {
            if n > *left {
                return Err(ArtifactError::Limit(format!(
                    "archive unpacks to more than {} bytes (the client's artifact \
                     decompression_size_limit)",
                    self.size_limit.unwrap_or_default()
                )));
            }
            *left -= n;
        }
        Ok(())
    }
}

/// Copies `reader` into a new file `dst` within the budget, then applies `mode`.
fn write_file(
    reader: &mut dyn Read,
    dst: &Path,
    mode: Option<u32>,
    budget: &mut Budget,
) -> Result<(), ArtifactError> {
    if let Some(parent) = dst.parent() {
        std::fs::create_dir_all(parent).map_err(|e| ArtifactError::io("create", parent, e))?;
    }
    let mut out = File::create(dst).map_err(|e| ArtifactError::io("create", dst, e))?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| ArtifactError::Unpack(format!("reading archive: {e}")))?;
        if n == 0 {
            break;
        }
        budget.take_bytes(n as u64)?;
        out.write_all(&buf[..n])
            .map_err(|e| ArtifactError::io("write", dst, e))?;
    }
    if let Some(mode) = mode {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(mode & 0o777))
            .map_err(|e| ArtifactError::io("chmod", dst, e))?;
    }
    Ok(())
}

fn untar(
    reader: Box<dyn Read>,
    dst: &Path,
    into_dir: bool,
    budget: &mut Budget,
) -> Result<(), ArtifactError> {
    let bad = |e: std::io::Error| ArtifactError::Unpack(format!("reading tar archive: {e}"));
    let mut archive = tar::Archive::new(reader);
    if into_dir {
        std::fs::create_dir_all(dst).map_err(|e| ArtifactError::io("create", dst, e))?;
    }
    let mut wrote_single = false;
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader | tar::EntryType::GNULongName
        ) {
            continue;
        }
        budget.count_file()?;
        let raw = entry.path().map_err(bad)?.into_owned();
        let rel = inside(&raw)?;
        if !into_dir {
            if !kind.is_file() {
                continue;
            }
            if wrote_single {
                return Err(ArtifactError::Unpack(
                    "expected a single file in the archive (mode \"file\")".into(),
                ));
            }
            let mode = entry.header().mode().ok();
            write_file(&mut entry, dst, mode, budget)?;
            wrote_single = true;
            continue;
        }
        if rel.as_os_str().is_empty() {
            continue;
        }
        no_symlink_ancestor(dst, &rel)?;
        match kind {
            tar::EntryType::Symlink => {
                let target = entry.link_name().map_err(bad)?.ok_or_else(|| {
                    ArtifactError::Unpack(format!("symlink {} has no target", raw.display()))
                })?;
                check_symlink(&rel, &target)?;
            }
            tar::EntryType::Link => {
                let target = entry.link_name().map_err(bad)?.ok_or_else(|| {
                    ArtifactError::Unpack(format!("hard link {} has no target", raw.display()))
                })?;
                inside(&target)?;
            }
            k if k.is_file() || k.is_dir() => {}
            // Devices and FIFOs have no place in a task's files.
            _ => continue,
        }
        budget.take_bytes(entry.header().size().map_err(bad)?)?;
        let unpacked = entry
            .unpack_in(dst)
            .map_err(|e| ArtifactError::Unpack(format!("unpacking {}: {e}", raw.display())))?;
        if !unpacked {
            return Err(escapes(&raw));
        }
    }
    if !into_dir && !wrote_single {
        return Err(ArtifactError::Unpack(
            "the archive holds no file (mode \"file\")".into(),
        ));
    }
    Ok(())
}

fn unzip(file: File, dst: &Path, into_dir: bool, budget: &mut Budget) -> Result<(), ArtifactError> {
    let bad = |e: zip::result::ZipError| ArtifactError::Unpack(format!("reading zip archive: {e}"));
    let mut archive = zip::ZipArchive::new(BufReader::new(file)).map_err(bad)?;
    if !into_dir {
        let files: Vec<usize> = (0..archive.len())
            .filter(|i| archive.by_index_raw(*i).is_ok_and(|f| f.is_file()))
            .collect();
        let [only] = files[..] else {
            return Err(ArtifactError::Unpack(
                "expected a single file in the archive (mode \"file\")".into(),
            ));
        };
        budget.count_file()?;
        let mut f = archive.by_index(only).map_err(bad)?;
        let mode = f.unix_mode();
        return write_file(&mut f, dst, mode, budget);
    }
    std::fs::create_dir_all(dst).map_err(|e| ArtifactError::io("create", dst, e))?;
    for i in 0..archive.len() {
        budget.count_file()?;
        let mut f = archive.by_index(i).map_err(bad)?;
        let raw = PathBuf::from(f.name().map_err(bad)?.into_owned());
        let rel = f.enclosed_name().ok_or_else(|| escapes(&raw))?;
        let rel = inside(&rel)?;
        if rel.as_os_str().is_empty() {
            continue;
        }
        no_symlink_ancestor(dst, &rel)?;
        let path = dst.join(&rel);
        if f.is_dir() {
            std::fs::create_dir_all(&path).map_err(|e| ArtifactError::io("create", &path, e))?;
        } else if f.is_symlink() {
            let mut target = String::new();
            f.read_to_string(&mut target).map_err(|e| {
                ArtifactError::Unpack(format!("reading symlink {}: {e}", raw.display()))
            })?;
            check_symlink(&rel, Path::new(&target))?;
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| ArtifactError::io("create", parent, e))?;
            }
            let _ = std::fs::remove_file(&path);
            std::os::unix::fs::symlink(&target, &path)
                .map_err(|e| ArtifactError::io("symlink", &path, e))?;
        } else {
            let mode = f.unix_mode();
            write_file(&mut f, &path, mode, budget)?;
        }
    }
    Ok(())
}

/// `path` as a relative path with no `..`, a leading `/` dropped (tar
/// files made with absolute names still unpack under the destination).
fn inside(path: &Path) -> Result<PathBuf, ArtifactError> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return Err(escapes(path)),
        }
    }
    Ok(out)
}

/// Refuses a symlink at `link` (relative to the destination) whose target
/// leads out of the destination.
pub(super) fn check_symlink(link: &Path, target: &Path) -> Result<(), ArtifactError> {
    let outside = || {
        ArtifactError::Unpack(format!(
            "symlink {} points outside the destination ({})",
            link.display(),
            target.display()
        ))
    };
    if target.is_absolute() {
        return Err(outside());
    }
    let mut depth: usize = link.components().count().saturating_sub(1);
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => depth = depth.checked_sub(1).ok_or_else(outside)?,
            Component::RootDir | Component::Prefix(_) => return Err(outside()),
        }
    }
    Ok(())
}

/// Refuses an entry under a directory that an earlier entry made a symlink:
/// a symlink's target is checked lexically, which holds only if nothing is
/// ever reached through another symlink.
fn no_symlink_ancestor(dst: &Path, rel: &Path) -> Result<(), ArtifactError> {
    let mut at = dst.to_path_buf();
    let parents: Vec<_> = rel.components().collect();
    for c in &parents[..parents.len().saturating_sub(1)] {
        at.push(c);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(ArtifactError::Unpack(format!(
                "entry {} lies under the symlink {}",
                rel.display(),
                at.display()
            )));
        }
    }
    Ok(())
}

fn escapes(path: &Path) -> ArtifactError {
    ArtifactError::Unpack(format!(
        "archive entry {} would land outside the destination",
        path.display()
    ))
}

#[cfg(test)]
#[path = "unpack_tests.rs"]
mod tests;

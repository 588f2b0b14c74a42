//! Artifacts that are files or directories already on the node
//! (`file://…` or an absolute path): copied, never linked, so the task's
//! files stay its own and a chroot sees them.

use std::path::Path;

use super::ArtifactError;

/// Copies the file `src` to `dst` (blocking), with its permissions.
pub fn copy_file(src: &Path, dst: &Path) -> Result<u64, ArtifactError> {
    if let Some(parent) = dst.parent() {
        std::fs::create_dir_all(parent).map_err(|e| ArtifactError::io("create", parent, e))?;
    }
    std::fs::copy(src, dst).map_err(|e| ArtifactError::io("copy", src, e))
}

/// Copies the directory `src` into `dst` (blocking); symlinks are
/// recreated only when they stay inside the copied tree.
pub fn copy_dir(src: &Path, dst: &Path) -> Result<(), ArtifactError> {
    std::fs::create_dir_all(dst).map_err(|e| ArtifactError::io("create", dst, e))?;
    copy_tree(src, dst, src)
}

fn copy_tree(root: &Path, dst: &Path, dir: &Path) -> Result<(), ArtifactError> {
    let entries = std::fs::read_dir(dir).map_err(|e| ArtifactError::io("read", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| ArtifactError::io("read", dir, e))?;
        let from = entry.path();
        let rel = from.strip_prefix(root).unwrap_or(&from);
        let to = dst.join(rel);
        let ft = entry
            .file_type()
            .map_err(|e| ArtifactError::io("stat", &from, e))?;
        if ft.is_symlink() {
            let target =
                std::fs::read_link(&from).map_err(|e| ArtifactError::io("readlink", &from, e))?;
            super::unpack::check_symlink(rel, &target)?;
            std::os::unix::fs::symlink(&target, &to)
                .map_err(|e| ArtifactError::io("symlink", &to, e))?;
        } else if ft.is_dir() {
            std::fs::create_dir_all(&to).map_err(|e| ArtifactError::io("create", &to, e))?;
            copy_tree(root, dst, &from)?;
        } else if ft.is_file() {
            copy_file(&from, &to)?;
        }
    }
    Ok(())
}

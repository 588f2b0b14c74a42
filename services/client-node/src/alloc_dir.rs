//! The directory of one alloc, laid out as Nomad lays it out:
//! `<data_dir>/allocs/<alloc>/alloc/` shared by the tasks (with `logs/`),
//! and `<task>/local`, `<task>/secrets` per task.

use std::path::{Path, PathBuf};

use crate::error::ClientError;

/// The directory tree of one alloc.
#[derive(Debug, Clone)]
pub struct AllocDir {
    root: PathBuf,
}

/// The directories one task sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDirs {
    /// The shared alloc dir (`NOMAD_ALLOC_DIR`).
    pub alloc_dir: PathBuf,
    /// The task's own dir, its working directory.
    pub task_dir: PathBuf,
    /// `<task>/local` (`NOMAD_TASK_DIR`).
    pub local_dir: PathBuf,
    /// `<task>/secrets` (`NOMAD_SECRETS_DIR`).
    pub secrets_dir: PathBuf,
    /// `alloc/logs/<task>.stdout.0`.
    pub stdout: PathBuf,
    /// `alloc/logs/<task>.stderr.0`.
    pub stderr: PathBuf,
    /// Where the task's supervisor records how the task ended,
    /// `.<task>.exit.json` next to the task's dir.
    pub exit_record: PathBuf,
    /// Where the supervisor records that it started the task, before the
    /// client learns of it: `.<task>.start.json`.
    pub start_record: PathBuf,
}

/// Checks that `name` is one path segment, so ids and task names can't escape
/// the data dir.
pub fn check_segment(field: &str, name: &str) -> Result<(), ClientError> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.contains('/')
        || name.contains('\0')
        || name.len() > 255
    {
        return Err(ClientError::invalid(
            field,
            format!("{name:?} is not a valid name"),
        ));
    }
    Ok(())
}

/// The root under which every alloc dir lives.
pub fn allocs_root(data_dir: &Path) -> PathBuf {
    data_dir.join("allocs")
}

impl AllocDir {
    /// The alloc dir of `alloc_id` under `data_dir` (not yet created).
    pub fn new(data_dir: &Path, alloc_id: &str) -> Result<AllocDir, ClientError> {
        check_segment("alloc_id", alloc_id)?;
        Ok(AllocDir {
            root: allocs_root(data_dir).join(alloc_id),
        })
    }

    /// The alloc's root directory.
    #[cfg(test)]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The paths of a task (not created).
    pub fn task(&self, task: &str) -> Result<TaskDirs, ClientError> {
        check_segment("task", task)?;
        let alloc_dir = self.root.join("alloc");
        let task_dir = self.root.join(task);
        let logs = alloc_dir.join("logs");
        Ok(TaskDirs {
            local_dir: task_dir.join("local"),
            secrets_dir: task_dir.join("secrets"),
            stdout: logs.join(format!("{task}.stdout.0")),
            stderr: logs.join(format!("{task}.stderr.0")),
            exit_record: self.root.join(format!(".{task}.exit.json")),
            start_record: self.root.join(format!(".{task}.start.json")),
            alloc_dir,
            task_dir,
        })
    }

    /// Creates the shared dirs and those of every task.
    pub fn build<'a>(&self, tasks: impl IntoIterator<Item = &'a str>) -> Result<(), ClientError> {
        for sub in ["alloc/logs", "alloc/tmp", "alloc/data"] {
            let p = self.root.join(sub);
            std::fs::create_dir_all(&p).map_err(|e| ClientError::io("create", &p, e))?;
        }
        for t in tasks {
            let dirs = self.task(t)?;
            for p in [
                &dirs.local_dir,
                &dirs.secrets_dir,
                &dirs.task_dir.join("tmp"),
            ] {
                std::fs::create_dir_all(p).map_err(|e| ClientError::io("create", p, e))?;
            }
        }
        Ok(())
    }

    /// Writes a dispatch payload to `file`, relative to the task's local dir.
    pub fn write_payload(&self, task: &str, file: &str, payload: &[u8]) -> Result<(), ClientError> {
        let rel = Path::new(file);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(ClientError::invalid(
                "dispatch_payload_file",
                format!("{file:?} must be a relative path inside the task's local dir"),
            ));
        }
        let path = self.task(task)?.local_dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| ClientError::io("create", parent, e))?;
        }
        std::fs::write(&path, payload).map_err(|e| ClientError::io("write", &path, e))
    }

    /// Removes the whole tree.
    pub fn destroy(&self) -> Result<(), ClientError> {
        match std::fs::remove_dir_all(&self.root) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ClientError::io("remove", &self.root, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_nomad_names() {
        let dir = tempfile::tempdir().unwrap();
        let a = AllocDir::new(dir.path(), "a1").unwrap();
        a.build(["web", "side"]).unwrap();
        let t = a.task("web").unwrap();
        assert!(t.local_dir.is_dir());
        assert!(t.secrets_dir.is_dir());
        assert!(t.alloc_dir.join("logs").is_dir());
        assert_eq!(
            t.stdout,
            dir.path().join("allocs/a1/alloc/logs/web.stdout.0")
        );
        a.destroy().unwrap();
        assert!(!a.root().exists());
        a.destroy().unwrap();
    }

    #[test]
    fn payloads_stay_inside_the_local_dir() {
        let dir = tempfile::tempdir().unwrap();
        let a = AllocDir::new(dir.path(), "a1").unwrap();
        a.build(["t"]).unwrap();
        a.write_payload("t", "in/p.json", b"{}").unwrap();
        assert_eq!(
            std::fs::read(a.task("t").unwrap().local_dir.join("in/p.json")).unwrap(),
            b"{}"
        );
        assert!(a.write_payload("t", "../escape", b"x").is_err());
        assert!(a.write_payload("t", "/etc/x", b"x").is_err());
    }

    #[test]
    fn names_cannot_escape() {
        let dir = tempfile::tempdir().unwrap();
        assert!(AllocDir::new(dir.path(), "../x").is_err());
        assert!(AllocDir::new(dir.path(), "..").is_err());
        let a = AllocDir::new(dir.path(), "a").unwrap();
        assert!(a.task("a/b").is_err());
        assert!(a.task("").is_err());
    }
}

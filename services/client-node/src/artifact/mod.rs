//! Tasks' `artifact` blocks: files and archives fetched into the task's
//! directory before it starts (HTTP(S) and node-local sources, checksums,
//! unpacking, ownership), within the client's `[artifact]` limits.

mod checksum;
mod fetch_file;
mod fetch_http;
mod hook;
mod limits;
mod source;
mod unpack;

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use caravan_proto::Artifact;

pub use checksum::{Checksum, ChecksumKind};
pub use fetch_http::HttpFetcher;
pub use hook::ArtifactHook;
pub use limits::{ArtifactConfig, ArtifactLimits, parse_bytes};
pub use source::Source;
pub use unpack::ArchiveKind;

use crate::task_env::TaskEnv;

/// Where an artifact lands when its block names no destination.
pub const DEFAULT_DESTINATION: &str = "local/";

/// Why an artifact could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The source names nothing this client can fetch.
    #[error("{0}")]
    Source(String),
    /// The `checksum` option is malformed, or the file does not match it.
    #[error("{0}")]
    Checksum(String),
    /// The HTTP request failed or was refused.
    #[error("{0}")]
    Http(String),
    /// The archive could not be unpacked safely.
    #[error("{0}")]
    Unpack(String),
    /// A client `[artifact]` limit was reached.
    #[error("{0}")]
    Limit(String),
    /// The block itself is wrong (`mode`, `destination`, `chown`'s user).
    #[error("{field}: {problem}")]
    Invalid {
        /// The artifact field, e.g. `destination`.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A file system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl ArtifactError {
    fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ArtifactError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    fn invalid(field: &'static str, problem: impl Into<String>) -> Self {
        ArtifactError::Invalid {
            field,
            problem: problem.into(),
        }
    }
}

/// An artifact's `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactMode {
    /// A file lands in the destination directory under its own name; an
    /// archive unpacks into it.
    Any,
    /// The destination is the file itself.
    File,
    /// The destination is a directory the archive (or directory) fills.
    Dir,
}

impl ArtifactMode {
    fn parse(mode: &str) -> Result<Self, ArtifactError> {
        match mode {
            "" | "any" => Ok(ArtifactMode::Any),
            "file" => Ok(ArtifactMode::File),
            "dir" => Ok(ArtifactMode::Dir),
            other => Err(ArtifactError::invalid(
                "mode",
                format!("{other:?} is not any, file or dir"),
            )),
        }
    }
}

/// Fetches artifacts for the tasks of one node.
#[derive(Debug, Default)]
pub struct ArtifactFetcher {
    limits: ArtifactLimits,
    http: OnceLock<HttpFetcher>,
}

impl ArtifactFetcher {
    /// A fetcher enforcing `limits`.
    pub fn new(limits: ArtifactLimits) -> ArtifactFetcher {
        ArtifactFetcher {
            limits,
            http: OnceLock::new(),
        }
    }

    fn http(&self) -> Result<&HttpFetcher, ArtifactError> {
        if let Some(h) = self.http.get() {
            return Ok(h);
        }
        let built = HttpFetcher::new()?;
        Ok(self.http.get_or_init(|| built))
    }

    /// Fetches `artifact` into `task_dir`, with `${…}` in its fields
    /// filled from `env`; `user` owns the files when the block asks for
    /// `chown` and the client runs as root.
    pub async fn fetch(
        &self,
        artifact: &Artifact,
        task_dir: &Path,
        env: Option<&TaskEnv>,
        user: &str,
    ) -> Result<(), ArtifactError> {
        let fill = |s: &str| env.map_or_else(|| s.to_string(), |e| e.interpolate(s));
        let (source, url_options) = Source::parse(&fill(&artifact.source))?
            .in_task_dir(task_dir)
            .take_getter_options();
        let mode = ArtifactMode::parse(artifact.mode.trim())?;
        let destination = match artifact.destination.trim() {
            "" => DEFAULT_DESTINATION.to_string(),
            d => fill(d),
        };
        let dst = within(task_dir, &destination)?;
        // The block's options win over the same ones in the URL's query.
        let options: HashMap<String, String> = url_options
            .into_iter()
            .chain(artifact.options.iter().map(|(k, v)| (k.clone(), fill(v))))
            .collect();
        let mut headers: Vec<(String, String)> = artifact
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), fill(v)))
            .collect();
        headers.sort();
        let checksum = options
            .get("checksum")
            .filter(|c| !c.trim().is_empty())
            .map(|c| Checksum::parse(c))
            .transpose()?;
        let kind = ArchiveKind::detect(
            &source.path_for_archive(),
            options.get("archive").map(String::as_str),
        )?;

        if let Source::File(path) = &source
            && path.is_dir()
        {
            if checksum.is_some() {
                return Err(ArtifactError::Checksum(
                    "checksum cannot be specified for directory download".into(),
                ));
            }
            if mode == ArtifactMode::File {
                return Err(ArtifactError::invalid(
                    "mode",
                    format!("{} is a directory, not a file", path.display()),
                ));
            }
            let (from, to) = (path.clone(), dst.clone());
            blocking(move || fetch_file::copy_dir(&from, &to)).await?;
            return self.chown(artifact, &dst, user).await;
        }

        let staging = Staging::create(task_dir)?;
        let staged = staging.path.join("download");
        match &source {
            Source::Http(uri) => {
                self.http()?
                    .download(uri.clone(), &headers, &staged, &self.limits)
                    .await?;
            }
            Source::File(path) => {
                let (from, to) = (path.clone(), staged.clone());
                blocking(move || fetch_file::copy_file(&from, &to).map(drop)).await?;
            }
        }
        let shown = source
            .file_name()
            .unwrap_or_else(|| artifact.source.clone());
        if let Some(sum) = checksum {
            let file = staged.clone();
            blocking(move || sum.verify(&file, &shown)).await?;
        }

        let placed = match (kind, mode) {
            (Some(kind), mode) => {
                let (archive, to, limits) = (staged.clone(), dst.clone(), self.limits);
                let into_dir = mode != ArtifactMode::File;
                blocking(move || unpack::unpack(kind, &archive, &to, into_dir, &limits)).await?;
                dst
            }
            (None, ArtifactMode::File) => dst,
            (None, ArtifactMode::Any) => {
                let name = source.file_name().ok_or_else(|| {
                    ArtifactError::invalid(
                        "mode",
                        "the source's path names no file; use mode \"file\" and a destination file",
                    )
                })?;
                dst.join(name)
            }
            (None, ArtifactMode::Dir) => {
                return Err(ArtifactError::invalid(
                    "mode",
                    "\"dir\" needs an archive or a directory on the node as its source",
                ));
            }
        };
        if kind.is_none() {
            if let Some(parent) = placed.parent() {
                tokio::fs::create_dir_all(parent)
                    .await
                    .map_err(|e| ArtifactError::io("create", parent, e))?;
            }
            tokio::fs::rename(&staged, &placed)
                .await
                .map_err(|e| ArtifactError::io("move into place", &placed, e))?;
        }
        drop(staging);
        self.chown(artifact, &placed, user).await
    }

    async fn chown(
        &self,
        artifact: &Artifact,
        path: &Path,
        user: &str,
    ) -> Result<(), ArtifactError> {
        if !artifact.chown || user.is_empty() || !nix::unistd::geteuid().is_root() {
            return Ok(());
        }
        let owner = nix::unistd::User::from_name(user)
            .map_err(|e| ArtifactError::invalid("chown", format!("looking up user {user:?}: {e}")))?
            .ok_or_else(|| {
                ArtifactError::invalid("chown", format!("no user {user:?} on this node"))
            })?;
        let (path, uid, gid) = (path.to_path_buf(), owner.uid.as_raw(), owner.gid.as_raw());
        blocking(move || chown_tree(&path, uid, gid)).await
    }
}

/// Gives `path` and everything under it to `uid`:`gid`, links themselves
/// rather than what they point at.
fn chown_tree(path: &Path, uid: u32, gid: u32) -> Result<(), ArtifactError> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
        .map_err(|e| ArtifactError::io("chown", path, e))?;
    let meta = std::fs::symlink_metadata(path).map_err(|e| ArtifactError::io("stat", path, e))?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(|e| ArtifactError::io("read", path, e))? {
            let entry = entry.map_err(|e| ArtifactError::io("read", path, e))?;
            chown_tree(&entry.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// `destination` under `task_dir`, refusing one that climbs out of the
/// alloc directory (the task dir's parent) as the job spec's validation does.
fn within(task_dir: &Path, destination: &str) -> Result<PathBuf, ArtifactError> {
    let (Some(alloc_dir), Some(task)) = (task_dir.parent(), task_dir.file_name()) else {
        return Err(ArtifactError::invalid(
            "destination",
            format!("the task directory {} has no parent", task_dir.display()),
        ));
    };
    let mut rel: Vec<&std::ffi::OsStr> = vec![task];
    for c in Path::new(destination).components() {
        match c {
            Component::Normal(p) => rel.push(p),
            Component::ParentDir => {
                if rel.pop().is_none() {
                    return Err(ArtifactError::invalid(
                        "destination",
                        format!("{destination:?} escapes allocation directory"),
                    ));
                }
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    Ok(rel.iter().fold(alloc_dir.to_path_buf(), |p, c| p.join(c)))
}

/// A scratch directory inside the task dir (so the final move is a rename
/// on one file system), removed when dropped.
struct Staging {
    path: PathBuf,
}

impl Staging {
    fn create(task_dir: &Path) -> Result<Staging, ArtifactError> {
        let path = task_dir.join(format!(".artifact-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&path).map_err(|e| ArtifactError::io("create", &path, e))?;
        Ok(Staging { path })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ArtifactError> + Send + 'static,
) -> Result<T, ArtifactError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ArtifactError::Unpack(format!("the unpacking task failed: {e}")))?
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;

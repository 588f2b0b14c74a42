//! The alloc file system: what `nomad alloc fs` reads. Paths are relative to
//! the alloc's directory (`alloc/logs`, `<task>/local`); none may lead out of
//! it, through `..` or a symlink, and files under `<task>/secrets` and
//! `<task>/private` are never read, only listed, as Nomad does.

use std::io::SeekFrom;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::UNIX_EPOCH;

use caravan_proto::{AllocFileChunk, AllocFileInfo, ReadAllocFileRequest};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::alloc_dir::{allocs_root, check_segment};
use crate::logs::{CHUNK, FOLLOW_POLL};

/// Nomad's answer to a path out of the alloc dir.
const ESCAPES: &str = "Path escapes the alloc directory";

/// The directory of one alloc on this node, for reading.
#[derive(Debug, Clone)]
pub struct AllocFs {
    root: PathBuf,
}

/// A path checked to be inside the alloc dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Where it is on disk, symlinks followed.
    pub real: PathBuf,
    /// The path as asked, cleaned, relative to the alloc dir (`""` is the root).
    pub rel: String,
}

impl AllocFs {
    /// The alloc dir of `alloc_id` under `data_dir`; an alloc without one
    /// (never ran here, or garbage-collected) is unknown, as Nomad says.
    pub fn open(data_dir: &Path, alloc_id: &str) -> Result<AllocFs, Status> {
        check_segment("alloc_id", alloc_id).map_err(Status::from)?;
        let root = allocs_root(data_dir).join(alloc_id);
        if !root.is_dir() {
            return Err(Status::not_found(format!(
                "Unknown allocation \"{alloc_id}\""
            )));
        }
        Ok(AllocFs { root })
    }

    /// Checks `path` and finds it on disk. `..` past the alloc dir, and a
    /// symlink whose target is out of it, are refused; a missing path is
    /// NOT_FOUND.
    pub fn resolve(&self, path: &str) -> Result<Resolved, Status> {
        if path.contains('\0') {
            return Err(Status::invalid_argument("path: contains a NUL byte"));
        }
        let mut parts: Vec<&str> = Vec::new();
        for c in Path::new(path).components() {
            match c {
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
                Component::ParentDir => {
                    if parts.pop().is_none() {
                        return Err(Status::invalid_argument(ESCAPES));
                    }
                }
                Component::Normal(p) => parts.push(
                    p.to_str()
                        .ok_or_else(|| Status::invalid_argument("path: is not valid UTF-8"))?,
                ),
            }
        }
        let rel = parts.join("/");
        let joined = self.root.join(&rel);
        let root = std::fs::canonicalize(&self.root)
            .map_err(|e| Status::internal(format!("alloc dir: {e}")))?;
        let real = match std::fs::canonicalize(&joined) {
            Ok(real) => real,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A dangling symlink may point out of the dir: say so first.
                if let Ok(target) = std::fs::read_link(&joined) {
                    let target = joined.parent().unwrap_or(&root).join(target);
                    if !lexically_inside(&target, &root) {
                        return Err(Status::invalid_argument(ESCAPES));
                    }
                }
                return Err(Status::not_found(format!(
                    "stat {}: no such file or directory",
                    shown(&rel)
                )));
            }
            Err(e) => return Err(Status::internal(format!("stat {}: {e}", shown(&rel)))),
        };
        if !real.starts_with(&root) {
            return Err(Status::invalid_argument(ESCAPES));
        }
        Ok(Resolved { real, rel })
    }

    /// The entries of a directory, by name, as Nomad lists them (symlinks
    /// as themselves).
    pub fn list(&self, path: &str) -> Result<Vec<AllocFileInfo>, Status> {
        let dir = self.resolve(path)?;
        if !dir.real.is_dir() {
            return Err(Status::invalid_argument(format!(
                "open {}: not a directory",
                shown(&dir.rel)
            )));
        }
        let entries = std::fs::read_dir(&dir.real)
            .map_err(|e| Status::internal(format!("open {}: {e}", shown(&dir.rel))))?;
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Status::internal(format!("list: {e}")))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if dir.rel.is_empty() && is_supervisor_record(&name) {
                continue;
            }
            // Gone between the listing and the look: not listed.
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            files.push(info(name, &meta, String::new()));
        }
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(files)
    }

    /// A file's or directory's details, symlinks followed.
    pub fn stat(&self, path: &str) -> Result<AllocFileInfo, Status> {
        let found = self.resolve(path)?;
        let meta = std::fs::metadata(&found.real)
            .map_err(|e| Status::internal(format!("stat {}: {e}", shown(&found.rel))))?;
        let name = Path::new(&found.rel)
            .file_name()
            .map_or_else(|| "/".to_string(), |n| n.to_string_lossy().into_owned());
        let content_type = content_type(&found.real, &meta);
        Ok(info(name, &meta, content_type))
    }

    /// Checks a read: the file exists (a missing one is a bad request, as
    /// Nomad's stream answers), is no directory and holds no secrets.
    pub fn readable(&self, path: &str) -> Result<(Resolved, u64), Status> {
        let found = match self.resolve(path) {
            Err(s) if s.code() == tonic::Code::NotFound => {
                return Err(Status::invalid_argument(s.message()));
            }
            other => other?,
        };
        let mut parts = found.rel.split('/');
        if let (Some(task), Some(sub)) = (parts.next(), parts.next())
            && !task.eq_ignore_ascii_case("alloc")
        {
            if sub.eq_ignore_ascii_case("secrets") {
                return Err(Status::invalid_argument(format!(
                    "Reading secret file prohibited: {path}"
                )));
            }
            if sub.eq_ignore_ascii_case("private") {
                return Err(Status::invalid_argument(format!(
                    "Reading private file prohibited: {path}"
                )));
            }
        }
        let meta = std::fs::metadata(&found.real)
            .map_err(|e| Status::internal(format!("stat {}: {e}", shown(&found.rel))))?;
        if meta.is_dir() {
            return Err(Status::invalid_argument(format!(
                "file {path:?} is a directory"
            )));
        }
        Ok((found, meta.len()))
    }
}

/// The records a task's supervisor keeps at the alloc dir's root
/// (`.<task>.start.json`, `.<task>.exit.json` and their temporary files):
/// the client's own, not listed. Nomad's alloc dir has no other dot files
/// at its root.
fn is_supervisor_record(name: &str) -> bool {
    name.starts_with('.')
}

/// `path` as error messages show it.
fn shown(rel: &str) -> &str {
    if rel.is_empty() { "/" } else { rel }
}

/// Whether `path`, with `..` and `.` taken literally, stays under `root`.
fn lexically_inside(path: &Path, root: &Path) -> bool {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.starts_with(root)
}

fn info(name: String, meta: &std::fs::Metadata, content_type: String) -> AllocFileInfo {
    let mod_time_unix_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    AllocFileInfo {
        name,
        is_dir: meta.is_dir(),
        size: i64::try_from(meta.len()).unwrap_or(i64::MAX),
        file_mode: go_file_mode(meta),
        mod_time_unix_ns,
        content_type,
    }
}

/// A mode as Go's `os.FileMode.String()` writes it: `drwxr-xr-x`,
/// `-rw-r--r--`, `Lrwxrwxrwx`.
pub fn go_file_mode(meta: &std::fs::Metadata) -> String {
    let ft = meta.file_type();
    let mut s = String::with_capacity(11);
    if ft.is_dir() {
        s.push('d');
    } else if ft.is_symlink() {
        s.push('L');
    } else {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            s.push('p');
        } else if ft.is_socket() {
            s.push('S');
        } else if ft.is_char_device() {
            s.push_str("Dc");
        } else if ft.is_block_device() {
            s.push('D');
        }
    }
    let mode = meta.permissions().mode();
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        s.push(if mode & (1 << (8 - i)) != 0 { c } else { '-' });
    }
    if s.len() == 9 {
        s.insert(0, '-');
    }
    s
}

/// Nomad's best-effort content type: JSON by extension, text when the
/// first 512 bytes are text, otherwise octet-stream.
fn content_type(path: &Path, meta: &std::fs::Metadata) -> String {
    let mut kind = "application/octet-stream";
    if !meta.is_dir()
        && let Ok(mut f) = std::fs::File::open(path)
    {
        let mut head = [0u8; 512];
        if let Ok(n) = std::io::Read::read(&mut f, &mut head) {
            let head = &head[..n];
            let text = std::str::from_utf8(head).is_ok()
                && !head
                    .iter()
                    .any(|b| *b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t' | 0x0c | 0x1b));
            if text {
                kind = "text/plain; charset=utf-8";
            }
        }
    }
    if path.extension().is_some_and(|e| e == "json") {
        kind = "application/json";
    }
    kind.to_string()
}

/// A checked read of one file.
#[derive(Debug, Clone)]
pub struct FileRead {
    /// The file on disk.
    pub path: PathBuf,
    /// Its name as the request gave it, cleaned.
    pub rel: String,
    /// Where reading starts.
    pub start: u64,
    /// Bytes to send at most; `None` is to the end.
    pub limit: Option<u64>,
    /// Keep sending what is appended.
    pub follow: bool,
}

impl FileRead {
    /// Checks a read request against the alloc dir under `data_dir`.
    pub fn parse(data_dir: &Path, req: &ReadAllocFileRequest) -> Result<FileRead, Status> {
        if req.path.is_empty() {
            return Err(Status::invalid_argument("must provide a file path"));
        }
        if req.offset < 0 {
            return Err(Status::invalid_argument("offset: must not be negative"));
        }
        if req.limit < 0 {
            return Err(Status::invalid_argument("limit: must not be negative"));
        }
        let fs = AllocFs::open(data_dir, &req.alloc_id)?;
        let (found, size) = fs.readable(&req.path)?;
        let offset = req.offset.unsigned_abs();
        let start = if req.from_end {
            size.saturating_sub(offset)
        } else {
            offset
        };
        Ok(FileRead {
            path: found.real,
            rel: found.rel,
            start,
            limit: (req.limit > 0).then_some(req.limit.unsigned_abs()),
            follow: req.follow,
        })
    }
}

/// Nomad's file events, sent when a followed file changes under the reader.
pub mod file_events {
    /// The file shrank: reading starts over from its start.
    pub const TRUNCATED: &str = "file truncated";
    /// The file is gone: the stream ends.
    pub const DELETED: &str = "file deleted";
}

/// Sends the file's chunks into `out` until its end or the limit (or, when
/// following, until `out` closes, `stop` fires or the file is deleted).
pub async fn stream_file(
    req: FileRead,
    out: mpsc::Sender<Result<AllocFileChunk, Status>>,
    stop: CancellationToken,
) {
    let fail = |s: Status| {
        let out = out.clone();
        async move {
            let _ = out.send(Err(s)).await;
        }
    };
    let mut file = match tokio::fs::File::open(&req.path).await {
        Ok(f) => f,
        Err(e) => return fail(Status::internal(format!("open {}: {e}", req.rel))).await,
    };
    let mut pos = req.start;
    if let Err(e) = file.seek(SeekFrom::Start(pos)).await {
        return fail(Status::internal(format!("seek {}: {e}", req.rel))).await;
    }
    let mut left = req.limit;
    let mut buf = vec![0u8; CHUNK];
    let event = |name: &str, offset: u64| AllocFileChunk {
        data: Vec::new(),
        offset: i64::try_from(offset).unwrap_or(i64::MAX),
        file: req.rel.clone(),
        file_event: name.to_string(),
    };
    loop {
        if left == Some(0) {
            return;
        }
        let want = left.map_or(CHUNK, |l| CHUNK.min(usize::try_from(l).unwrap_or(CHUNK)));
        let n = match file.read(&mut buf[..want]).await {
            Ok(n) => n,
            Err(e) => return fail(Status::internal(format!("read {}: {e}", req.rel))).await,
        };
        if n > 0 {
            let chunk = AllocFileChunk {
                data: buf[..n].to_vec(),
                offset: i64::try_from(pos).unwrap_or(i64::MAX),
                file: req.rel.clone(),
                file_event: String::new(),
            };
            pos += n as u64;
            left = left.map(|l| l.saturating_sub(n as u64));
            if out.send(Ok(chunk)).await.is_err() {
                return;
            }
            continue;
        }
        if !req.follow {
            return;
        }
        match tokio::fs::metadata(&req.path).await {
            Err(_) => {
                let _ = out.send(Ok(event(file_events::DELETED, pos))).await;
                return;
            }
            Ok(m) if m.len() < pos => {
                pos = 0;
                if file.seek(SeekFrom::Start(0)).await.is_err() {
                    return;
                }
                if out
                    .send(Ok(event(file_events::TRUNCATED, 0)))
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            Ok(_) => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(FOLLOW_POLL) => {}
            _ = out.closed() => return,
            _ = stop.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An alloc `a` with task `web`, a file in `alloc/data`, a secret, and
    /// `outside` next to the data dir.
    fn setup() -> (tempfile::TempDir, AllocFs) {
        let dir = tempfile::tempdir().unwrap();
        let alloc = crate::alloc_dir::AllocDir::new(&dir.path().join("data"), "a").unwrap();
        alloc.build(["web"]).unwrap();
        let root = dir.path().join("data/allocs/a");
        std::fs::write(root.join("alloc/data/hello.txt"), "hello world\n").unwrap();
        std::fs::write(root.join("web/secrets/token"), "s3cret").unwrap();
        std::fs::write(root.join("web/local/conf.json"), "{}").unwrap();
        std::fs::write(dir.path().join("outside"), "not yours").unwrap();
        std::fs::write(root.join(".web.start.json"), "{}").unwrap();
        let fs = AllocFs::open(&dir.path().join("data"), "a").unwrap();
        (dir, fs)
    }

    #[test]
    fn traversal_is_refused() {
        let (_dir, fs) = setup();
        for bad in [
            "..",
            "../..",
            "alloc/../../a",
            "/../outside",
            "web/../../../outside",
        ] {
            let e = fs.resolve(bad).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}");
            assert_eq!(e.message(), ESCAPES, "{bad}");
        }
        // `..` that stays inside, and an absolute path, are the alloc dir's.
        assert_eq!(fs.resolve("alloc/../web/local").unwrap().rel, "web/local");
        assert_eq!(fs.resolve("/alloc/data").unwrap().rel, "alloc/data");
        assert_eq!(fs.resolve("").unwrap().rel, "");
    }

    #[test]
    fn symlinks_out_of_the_alloc_dir_are_refused() {
        let (dir, fs) = setup();
        let local = fs.root.join("web/local");
        std::os::unix::fs::symlink(dir.path().join("outside"), local.join("out")).unwrap();
        std::os::unix::fs::symlink("/", local.join("slash")).unwrap();
        std::os::unix::fs::symlink("../../../../gone", local.join("dangling")).unwrap();
        std::os::unix::fs::symlink("../../alloc/data/hello.txt", local.join("in")).unwrap();
        for bad in ["web/local/out", "web/local/slash/etc", "web/local/dangling"] {
            let e = fs.resolve(bad).unwrap_err();
            assert_eq!(e.message(), ESCAPES, "{bad}");
            let e = fs.readable(bad).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}");
        }
        // A link that stays inside is followed.
        let (found, size) = fs.readable("web/local/in").unwrap();
        assert!(found.real.ends_with("alloc/data/hello.txt"));
        assert_eq!(size, 12);
        // Listing shows the links as links.
        let listed = fs.list("web/local").unwrap();
        let out = listed.iter().find(|f| f.name == "out").unwrap();
        assert!(out.file_mode.starts_with('L'), "{}", out.file_mode);
    }

    #[test]
    fn lists_and_stats_like_nomad() {
        let (_dir, fs) = setup();
        let names: Vec<String> = fs.list("/").unwrap().into_iter().map(|f| f.name).collect();
        assert_eq!(names, ["alloc", "web"]);
        let data = fs.list("alloc/data").unwrap();
        assert_eq!(data.len(), 1);
        assert_eq!(data[0].name, "hello.txt");
        assert_eq!(data[0].size, 12);
        assert!(!data[0].is_dir);
        assert_eq!(data[0].file_mode.len(), 10);
        assert!(data[0].file_mode.starts_with('-'));
        assert!(data[0].mod_time_unix_ns > 0);
        let dir = fs.stat("alloc").unwrap();
        assert!(dir.is_dir);
        assert!(dir.file_mode.starts_with('d'), "{}", dir.file_mode);
        let file = fs.stat("alloc/data/hello.txt").unwrap();
        assert_eq!(file.content_type, "text/plain; charset=utf-8");
        assert_eq!(
            fs.stat("web/local/conf.json").unwrap().content_type,
            "application/json"
        );
        let missing = fs.stat("alloc/nope").unwrap_err();
        assert_eq!(missing.code(), tonic::Code::NotFound);
        assert!(missing.message().contains("no such file or directory"));
        let not_dir = fs.list("alloc/data/hello.txt").unwrap_err();
        assert_eq!(not_dir.code(), tonic::Code::InvalidArgument);
        // Secrets are listed but never read.
        assert_eq!(fs.list("web/secrets").unwrap()[0].name, "token");
        let e = fs.readable("web/secrets/token").unwrap_err();
        assert!(
            e.message().contains("Reading secret file prohibited"),
            "{e:?}"
        );
        let e = fs.readable("WEB/Secrets/token").unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        // Reading a missing file or a directory is a bad request.
        let e = fs.readable("alloc/nope").unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        let e = fs.readable("alloc").unwrap_err();
        assert!(e.message().contains("is a directory"), "{e:?}");
        let e = AllocFs::open(&fs.root.join("../.."), "other").unwrap_err();
        assert_eq!(e.message(), "Unknown allocation \"other\"");
    }

    async fn read(data_dir: &Path, offset: i64, from_end: bool, limit: i64) -> String {
        let req = ReadAllocFileRequest {
            alloc_id: "a".into(),
            path: "alloc/data/hello.txt".into(),
            offset,
            from_end,
            limit,
            follow: false,
        };
        let parsed = FileRead::parse(data_dir, &req).unwrap();
        let (tx, mut rx) = mpsc::channel(8);
        stream_file(parsed, tx, CancellationToken::new()).await;
        let mut out = Vec::new();
        while let Some(c) = rx.recv().await {
            out.extend(c.unwrap().data);
        }
        String::from_utf8(out).unwrap()
    }

    #[tokio::test]
    async fn reads_at_offsets_with_limits() {
        let (dir, _fs) = setup();
        let data = dir.path().join("data");
        assert_eq!(read(&data, 0, false, 0).await, "hello world\n");
        assert_eq!(read(&data, 6, false, 0).await, "world\n");
        assert_eq!(read(&data, 6, false, 3).await, "wor");
        assert_eq!(read(&data, 6, true, 0).await, "world\n");
        assert_eq!(read(&data, 100, true, 0).await, "hello world\n");
        assert_eq!(read(&data, 100, false, 0).await, "");
    }

    #[tokio::test]
    async fn follows_growth_and_truncation() {
        let (dir, fs) = setup();
        let path = fs.root.join("alloc/data/hello.txt");
        let req = ReadAllocFileRequest {
            alloc_id: "a".into(),
            path: "alloc/data/hello.txt".into(),
            offset: 0,
            from_end: true,
            limit: 0,
            follow: true,
        };
        let parsed = FileRead::parse(&dir.path().join("data"), &req).unwrap();
        let (tx, mut rx) = mpsc::channel(8);
        let stop = CancellationToken::new();
        let task = tokio::spawn(stream_file(parsed, tx, stop.clone()));
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"more\n").unwrap();
        let c = rx.recv().await.unwrap().unwrap();
        assert_eq!((c.data.as_slice(), c.offset), (&b"more\n"[..], 12));
        std::fs::write(&path, b"x").unwrap();
        let c = rx.recv().await.unwrap().unwrap();
        assert_eq!(c.file_event, file_events::TRUNCATED);
        let c = rx.recv().await.unwrap().unwrap();
        assert_eq!(c.data, b"x");
        std::fs::remove_file(&path).unwrap();
        let c = rx.recv().await.unwrap().unwrap();
        assert_eq!(c.file_event, file_events::DELETED);
        assert!(rx.recv().await.is_none());
        task.await.unwrap();
    }
}

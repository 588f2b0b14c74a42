//! Where a template's file goes and how it is written: inside the alloc's
//! directory only, atomically (a reader never sees half a file), with the
//! template's mode and owner; and an `env = true` template's text read as
//! the task's environment.

use std::collections::BTreeMap;
use std::io;
use std::path::{Component, Path, PathBuf};

/// `rel` taken from `base` (a task's dir), lexically normalised; `Err` when
/// it leaves `root` (the alloc's dir).
pub fn resolve_within(root: &Path, base: &Path, rel: &str) -> Result<PathBuf, String> {
    let joined = if Path::new(rel).is_absolute() {
        // An absolute destination is read from the task's dir, as the
        // task sees its own root.
        base.join(rel.trim_start_matches('/'))
    } else {
        base.join(rel)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return Err(format!("{rel:?} escapes the allocation directory"));
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    if !out.starts_with(root) {
        return Err(format!("{rel:?} escapes the allocation directory"));
    }
    Ok(out)
}

/// A file's mode from a template's `perms` (octal, `0644` when empty).
pub fn mode(perms: &str) -> Result<u32, String> {
    let p = if perms.is_empty() { "0644" } else { perms };
    u32::from_str_radix(p, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| format!("perms {perms:?} is not an octal file mode"))
}

/// Writes `text` to `path` through a temporary file renamed into place,
/// with `mode`, owned by `uid`/`gid` where they are not -1. Returns false
/// (and writes nothing) when the file already holds `text` with `mode`.
pub fn write(path: &Path, text: &str, mode: u32, uid: i32, gid: i32) -> io::Result<bool> {
    use std::os::unix::fs::PermissionsExt;
    if let (Ok(old), Ok(meta)) = (std::fs::read(path), std::fs::metadata(path))
        && old == text.as_bytes()
        && meta.permissions().mode() & 0o7777 == mode
    {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.rendering"));
    std::fs::write(&tmp, text)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
    let owner = |id: i32| u32::try_from(id).ok();
    if owner(uid).is_some() || owner(gid).is_some() {
        std::os::unix::fs::chown(&tmp, owner(uid), owner(gid))?;
    }
    std::fs::rename(&tmp, path)?;
    Ok(true)
}

/// An env file's variables: `KEY=value` lines (an optional `export `,
/// quotes around the value taken off), blank lines and `#` comments skipped.
pub fn parse_env(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut vars = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!(
                "line {}: {line:?} is not KEY=value (an env template's text is read as an env file)",
                n + 1
            ));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("line {}: a variable needs a name", n + 1));
        }
        let value = value.trim();
        let value = ['"', '\'']
            .iter()
            .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
            .unwrap_or(value);
        vars.insert(key.to_string(), value.to_string());
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_stay_inside_the_alloc_dir() {
        let root = Path::new("/a");
        let task = Path::new("/a/web");
        assert_eq!(
            resolve_within(root, task, "local/app.conf").unwrap(),
            Path::new("/a/web/local/app.conf")
        );
        assert_eq!(
            resolve_within(root, task, "../alloc/shared.txt").unwrap(),
            Path::new("/a/alloc/shared.txt")
        );
        assert_eq!(
            resolve_within(root, task, "/local/x").unwrap(),
            Path::new("/a/web/local/x")
        );
        assert!(resolve_within(root, task, "../../etc/passwd").is_err());
    }

    #[test]
    fn perms_are_octal() {
        assert_eq!(mode(""), Ok(0o644));
        assert_eq!(mode("0600"), Ok(0o600));
        assert_eq!(mode("755"), Ok(0o755));
        assert!(mode("rw").is_err());
        assert!(mode("99999").is_err());
    }

    #[test]
    fn env_files_parse_like_dotenv() {
        let vars = parse_env("# c\n\nA=1\nexport B = \"two words\"\nC='x=y'\n").unwrap();
        assert_eq!(vars["A"], "1");
        assert_eq!(vars["B"], "two words");
        assert_eq!(vars["C"], "x=y");
        assert!(parse_env("novalue").unwrap_err().contains("line 1"));
    }

    #[test]
    fn writes_are_skipped_when_nothing_changed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/f.txt");
        assert!(write(&p, "hello", 0o600, -1, -1).unwrap());
        assert!(!write(&p, "hello", 0o600, -1, -1).unwrap());
        assert!(write(&p, "hello", 0o640, -1, -1).unwrap());
        assert!(write(&p, "bye", 0o640, -1, -1).unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "bye");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777,
            0o640
        );
    }
}

//! Filesystem functions. They read files beside the job file on the machine that parses
//! it: the CLI. Where jobs arrive over the network they fail, as in Nomad.

use std::path::{Path, PathBuf};

use base64::Engine as _;

use super::{FResult, FuncError, arity, string};
use crate::hcl::eval::FileAccess;
use crate::hcl::eval::value::{Value, make_set};

const FS_FUNCTIONS: &[&str] = &[
    "abspath",
    "basename",
    "dirname",
    "file",
    "filebase64",
    "fileexists",
    "fileset",
    "pathexpand",
];

pub(super) fn call(name: &str, args: &[Value], files: Option<&FileAccess>) -> Option<FResult> {
    if !FS_FUNCTIONS.contains(&name) {
        return None;
    }
    let Some(files) = files.filter(|f| f.allowed) else {
        return Some(Err(FuncError::Failed(
            "filesystem function disabled".into(),
        )));
    };
    let base = &files.base_dir;
    Some(match name {
        "abspath" => (|| {
            arity(args, 1)?;
            let p = PathBuf::from(string(args, 0)?);
            let abs = if p.is_absolute() {
                p
            } else {
                std::env::current_dir()
                    .map_err(|e| FuncError::Failed(e.to_string()))?
                    .join(p)
            };
            Ok(Value::String(clean(&abs)))
        })(),
        "basename" => (|| {
            arity(args, 1)?;
            Ok(Value::String(basename(&string(args, 0)?)))
        })(),
        "dirname" => (|| {
            arity(args, 1)?;
            Ok(Value::String(dirname(&string(args, 0)?)))
        })(),
        "pathexpand" => (|| {
            arity(args, 1)?;
            Ok(Value::String(expand_home(&string(args, 0)?)))
        })(),
        "file" => (|| {
            arity(args, 1)?;
            let (path, bytes) = read(base, &string(args, 0)?)?;
            String::from_utf8(bytes).map(Value::String).map_err(|_| {
                FuncError::Failed(format!(
                    "contents of {path} are not valid UTF-8; use the filebase64 function to obtain the Base64 encoded contents or the other file functions (e.g. filemd5, filesha256) to obtain file hashing results instead"
                ))
            })
        })(),
        "filebase64" => (|| {
            arity(args, 1)?;
            let (_, bytes) = read(base, &string(args, 0)?)?;
            Ok(Value::String(
                base64::engine::general_purpose::STANDARD.encode(bytes),
            ))
        })(),
        "fileexists" => (|| {
            arity(args, 1)?;
            let path = resolve(base, &string(args, 0)?);
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => Ok(Value::Bool(true)),
                Ok(_) => Err(FuncError::Failed(format!(
                    "{} is not a regular file",
                    path.display()
                ))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Value::Bool(false)),
                Err(_) => Err(FuncError::Failed(format!(
                    "failed to stat {}",
                    path.display()
                ))),
            }
        })(),
        "fileset" => (|| {
            arity(args, 2)?;
            let root = resolve(base, &string(args, 0)?);
            let pattern = string(args, 1)?;
            let mut out = Vec::new();
            for entry in walkdir::WalkDir::new(&root).follow_links(true) {
                let Ok(entry) = entry else { continue };
                if !entry.file_type().is_file() {
                    continue;
                }
                let Ok(rel) = entry.path().strip_prefix(&root) else {
                    continue;
                };
                let rel = rel.to_string_lossy().replace('\\', "/");
                if glob_match(&pattern, &rel) {
                    out.push(Value::String(rel));
                }
            }
            Ok(Value::List(make_set(out)))
        })(),
        _ => return None,
    })
}

fn expand_home(p: &str) -> String {
    match p.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = std::env::var("HOME").unwrap_or_default();
            format!("{home}{rest}")
        }
        _ => p.to_string(),
    }
}

fn resolve(base: &Path, p: &str) -> PathBuf {
    let p = PathBuf::from(expand_home(p));
    if p.is_absolute() { p } else { base.join(p) }
}

fn read(base: &Path, p: &str) -> Result<(String, Vec<u8>), FuncError> {
    let path = resolve(base, p);
    let shown = clean(&path);
    match std::fs::read(&path) {
        Ok(bytes) => Ok((shown, bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(FuncError::Failed(format!("no file exists at {shown}")))
        }
        Err(_) => Err(FuncError::Failed(format!("failed to read {shown}"))),
    }
}

/// Go's `filepath.Clean` for display: `.` and `..` resolved lexically.
fn clean(p: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    let absolute = p.is_absolute();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                if parts.last().is_some_and(|l| l != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..".into());
                }
            }
            std::path::Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

/// Go's `filepath.Base`.
fn basename(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let trimmed = p.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".into();
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed).to_string()
}

/// Go's `filepath.Dir`.
fn dirname(p: &str) -> String {
    match p.rfind('/') {
        None => ".".into(),
        Some(0) => "/".into(),
        Some(i) => clean(Path::new(&p[..i])),
    }
}

/// Glob matching as `doublestar` does: `*` and `?` within a path segment, `**` across
/// segments, `[...]` classes and `{a,b}` alternatives.
fn glob_match(pattern: &str, path: &str) -> bool {
    if let Some(start) = pattern.find('{')
        && let Some(len) = pattern[start..].find('}')
    {
        let (head, rest) = pattern.split_at(start);
        let body = &rest[1..len];
        let tail = &rest[len + 1..];
        return body
            .split(',')
            .any(|alt| glob_match(&format!("{head}{alt}{tail}"), path));
    }
    let pat: Vec<&str> = pattern.split('/').collect();
    let segs: Vec<&str> = path.split('/').collect();
    match_segments(&pat, &segs)
}

fn match_segments(pat: &[&str], segs: &[&str]) -> bool {
    match pat.split_first() {
        None => segs.is_empty(),
        Some((&"**", rest)) => (0..=segs.len()).any(|i| match_segments(rest, &segs[i..])),
        Some((p, rest)) => match segs.split_first() {
            Some((s, srest)) => {
                match_one(p.as_bytes(), s.as_bytes()) && match_segments(rest, srest)
            }
            None => false,
        },
    }
}

fn match_one(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| match_one(rest, &s[i..])),
        Some((b'?', rest)) => !s.is_empty() && match_one(rest, &s[1..]),
        Some((b'[', rest)) => {
            let Some(end) = rest.iter().position(|&b| b == b']') else {
                return false;
            };
            let Some((&c, srest)) = s.split_first() else {
                return false;
            };
            let (negate, class) = match rest[..end].split_first() {
                Some((b'!' | b'^', cls)) => (true, cls),
                _ => (false, &rest[..end]),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == b'-' {
                    hit |= class[i] <= c && c <= class[i + 2];
                    i += 3;
                } else {
                    hit |= class[i] == c;
                    i += 1;
                }
            }
            hit != negate && match_one(&rest[end + 1..], srest)
        }
        Some((b'\\', rest)) if !rest.is_empty() => {
            s.first() == Some(&rest[0]) && match_one(&rest[1..], &s[1..])
        }
        Some((&c, rest)) => s.first() == Some(&c) && match_one(rest, &s[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("*.txt", "a.txt"));
        assert!(!glob_match("*.txt", "d/a.txt"));
        assert!(glob_match("**/*.txt", "d/e/a.txt"));
        assert!(glob_match("**/*.txt", "a.txt"));
        assert!(glob_match("{a,b}/?.hcl", "b/x.hcl"));
        assert!(glob_match("[a-c]*", "cat"));
        assert!(!glob_match("[!a-c]*", "cat"));
    }

    #[test]
    fn paths_as_go() {
        assert_eq!(basename("/a/b/"), "b");
        assert_eq!(basename(""), ".");
        assert_eq!(dirname("a/b/c"), "a/b");
        assert_eq!(dirname("c"), ".");
        assert_eq!(dirname("/c"), "/");
        assert_eq!(clean(Path::new("/a/./b/../c")), "/a/c");
    }
}

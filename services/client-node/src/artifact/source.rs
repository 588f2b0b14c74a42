//! An artifact's `source` read into the getter that fetches it: HTTP(S),
//! a file on the node, or a getter this client does not have.

use std::path::PathBuf;

use super::ArtifactError;

/// Where an artifact comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An `http://` or `https://` URL.
    Http(hyper::Uri),
    /// A file or directory on the node (`file://…`, or a path: absolute, or
    /// relative to the task's directory).
    File(PathBuf),
}

/// Query parameters that are options to the fetch, not to the server.
const GETTER_OPTIONS: &[&str] = &["checksum", "archive"];

/// Getters a job may name with a `<getter>::` prefix that this client lacks.
const UNSUPPORTED_GETTERS: &[&str] = &["git", "hg", "s3", "gcs"];

impl Source {
    /// Reads `source`, with go-getter's forced getter prefix (`http::`,
    /// `https::`, `file::`) accepted.
    pub fn parse(source: &str) -> Result<Source, ArtifactError> {
        let source = source.trim();
        if source.is_empty() {
            return Err(ArtifactError::Source("the source is empty".into()));
        }
        let (forced, rest) = match source.split_once("::") {
            Some((getter, rest)) if !getter.contains('/') => (Some(getter), rest),
            _ => (None, source),
        };
        match forced {
            Some("http" | "https") => return Self::http(rest),
            Some("file") if !rest.contains("://") => return Ok(Source::File(PathBuf::from(rest))),
            Some("file") => return Self::file(rest),
            Some(g) if UNSUPPORTED_GETTERS.contains(&g) => {
                return Err(ArtifactError::Source(format!(
                    "the {g:?} getter is not supported by this client (only http, https and file)"
                )));
            }
            Some(g) => {
                return Err(ArtifactError::Source(format!(
                    "unknown getter {g:?} (only http, https and file)"
                )));
            }
            None => {}
        }
        let scheme = rest.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("http" | "https") => Self::http(rest),
            Some("file") => Self::file(rest),
            Some(other) => Err(ArtifactError::Source(format!(
                "unsupported scheme {other:?} (only http, https and file)"
            ))),
            // A path without a scheme is a file; a relative one is read
            // from the task's directory (see `in_task_dir`).
            None => Ok(Source::File(PathBuf::from(rest))),
        }
    }

    fn http(url: &str) -> Result<Source, ArtifactError> {
        let uri: hyper::Uri = url
            .parse()
            .map_err(|e| ArtifactError::Source(format!("bad URL {url:?}: {e}")))?;
        match uri.scheme_str() {
            Some("http" | "https") if uri.host().is_some() => Ok(Source::Http(uri)),
            _ => Err(ArtifactError::Source(format!(
                "{url:?} is not an http(s) URL with a host"
            ))),
        }
    }

    fn file(path: &str) -> Result<Source, ArtifactError> {
        let path = match path.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("file") => {
                // `file://localhost/x` and `file:///x` both name `/x`.
                rest.strip_prefix("localhost").unwrap_or(rest)
            }
            _ => path,
        };
        let path = percent_decode(path);
        if !path.starts_with('/') {
            return Err(ArtifactError::Source(format!(
                "file source {path:?} must be an absolute path on the node"
            )));
        }
        Ok(Source::File(PathBuf::from(path)))
    }

    /// The source with a relative file path read from `task_dir`.
    pub fn in_task_dir(self, task_dir: &std::path::Path) -> Source {
        match self {
            Source::File(p) if p.is_relative() => Source::File(task_dir.join(p)),
            other => other,
        }
    }

    /// Takes go-getter's own options (`checksum`, `archive`) out of an
    /// HTTP URL's query, so they are not sent to the server.
    pub fn take_getter_options(self) -> (Source, Vec<(String, String)>) {
        let Source::Http(uri) = &self else {
            return (self, Vec::new());
        };
        let Some(query) = uri.query() else {
            return (self, Vec::new());
        };
        let mut taken = Vec::new();
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if GETTER_OPTIONS.contains(&k) {
                taken.push((k.to_string(), percent_decode(v)));
            } else {
                kept.push(pair);
            }
        }
        if taken.is_empty() {
            return (self, taken);
        }
        let path_and_query = if kept.is_empty() {
            uri.path().to_string()
        } else {
            format!("{}?{}", uri.path(), kept.join("&"))
        };
        let mut parts = uri.clone().into_parts();
        match path_and_query.parse() {
            Ok(pq) => parts.path_and_query = Some(pq),
            Err(_) => return (self, Vec::new()),
        }
        match hyper::Uri::from_parts(parts) {
            Ok(stripped) => (Source::Http(stripped), taken),
            Err(_) => (self, Vec::new()),
        }
    }

    /// The last element of the source's path, the file name a fetched file
    /// gets in `any` mode; `None` when the path ends in `/` or is empty.
    pub fn file_name(&self) -> Option<String> {
        let path = match self {
            Source::Http(uri) => percent_decode(uri.path()),
            Source::File(p) => p.to_string_lossy().into_owned(),
        };
        let name = path.rsplit('/').next()?;
        (!name.is_empty() && name != "." && name != "..").then(|| name.to_string())
    }

    /// The path part whose extension says what kind of archive this is.
    pub fn path_for_archive(&self) -> String {
        match self {
            Source::Http(uri) => uri.path().to_string(),
            Source::File(p) => p.to_string_lossy().into_owned(),
        }
    }
}

/// Decodes `%XX` escapes; malformed ones are kept as written.
fn percent_decode(input: &str) -> String {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_paths_and_forced_getters_parse() {
        assert!(matches!(
            Source::parse("https://example.com/a.tgz").unwrap(),
            Source::Http(_)
        ));
        assert!(matches!(
            Source::parse("http::http://example.com/a").unwrap(),
            Source::Http(_)
        ));
        assert_eq!(
            Source::parse("file:///opt/a%20b.txt").unwrap(),
            Source::File("/opt/a b.txt".into())
        );
        assert_eq!(
            Source::parse("file::/opt/x").unwrap(),
            Source::File("/opt/x".into())
        );
        assert_eq!(
            Source::parse("/opt/x").unwrap(),
            Source::File("/opt/x".into())
        );
    }

    #[test]
    fn other_getters_fail_clearly() {
        let e = Source::parse("git::https://github.com/x/y").unwrap_err();
        assert!(
            e.to_string().contains("\"git\" getter is not supported"),
            "{e}"
        );
        let e = Source::parse("s3://bucket/key").unwrap_err();
        assert!(e.to_string().contains("unsupported scheme \"s3\""), "{e}");
        assert_eq!(
            Source::parse("local/a.txt")
                .unwrap()
                .in_task_dir(std::path::Path::new("/t")),
            Source::File("/t/local/a.txt".into())
        );
        assert!(Source::parse("").is_err());
        assert!(Source::parse("file://relative").is_err());
    }

    #[test]
    fn getter_options_leave_the_url_query() {
        let (s, opts) = Source::parse("https://h/a.tgz?x=1&checksum=sha256%3Aab&archive=false")
            .unwrap()
            .take_getter_options();
        assert_eq!(s, Source::parse("https://h/a.tgz?x=1").unwrap());
        assert_eq!(
            opts,
            [
                ("checksum".to_string(), "sha256:ab".to_string()),
                ("archive".to_string(), "false".to_string())
            ]
        );
        let (s, opts) = Source::parse("https://h/a.tgz?checksum=md5:00")
            .unwrap()
            .take_getter_options();
        assert_eq!(s, Source::parse("https://h/a.tgz").unwrap());
        assert_eq!(opts.len(), 1);
    }

    #[test]
    fn file_name_is_the_last_path_element() {
        let s = Source::parse("https://example.com/dl/app.tar.gz?x=1").unwrap();
        assert_eq!(s.file_name().as_deref(), Some("app.tar.gz"));
        assert_eq!(s.path_for_archive(), "/dl/app.tar.gz");
        let s = Source::parse("https://example.com/").unwrap();
        assert_eq!(s.file_name(), None);
    }
}

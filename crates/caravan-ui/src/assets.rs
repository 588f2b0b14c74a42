//! The embedded files and how a path under `/ui/` finds one: files under
//! `assets/` by their exact path, every other path (a page of the app, such
//! as `/ui/jobs/web@default`) the app's `index.html`, which routes it in the
//! browser.

/// A file embedded at build time (see `build.rs`), by its path under the
/// crate's `assets/` directory.
#[derive(Debug)]
pub(crate) struct Embedded {
    pub(crate) path: &'static str,
    pub(crate) bytes: &'static [u8],
    pub(crate) etag: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// The page every app route is answered with.
const INDEX: &str = "index.html";

/// Where the app's static files live below `/ui/`; a path there names a file
/// or is not found.
const STATIC_DIR: &str = "assets/";

/// An embedded file ready to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asset {
    /// Its path under `/ui/assets/` (`index.html` also answers every app page).
    pub path: &'static str,
    /// Its bytes.
    pub bytes: &'static [u8],
    /// The `Content-Type` to answer with.
    pub content_type: &'static str,
    /// Its entity tag (quoted), which changes with its bytes.
    pub etag: &'static str,
}

/// What a path below `/ui/` resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// A file under `assets/`.
    File(Asset),
    /// A page of the app: `index.html`, which routes the path in the browser.
    Page(Asset),
    /// A path under `assets/` that names no file.
    NotFound,
}

/// Resolves `path`, the part of the URL path after `/ui/` (empty for
/// `/ui/` itself).
pub fn lookup(path: &str) -> Lookup {
    let path = path.trim_start_matches('/');
    if let Some(file) = path.strip_prefix(STATIC_DIR) {
        return find(file).map_or(Lookup::NotFound, Lookup::File);
    }
    match find(INDEX) {
        Some(index) => Lookup::Page(index),
        None => Lookup::NotFound,
    }
}

/// Every embedded file, for tests and the docs.
pub fn all() -> impl Iterator<Item = Asset> {
    ASSETS.iter().map(asset)
}

fn find(path: &str) -> Option<Asset> {
    ASSETS
        .binary_search_by(|e| e.path.cmp(path))
        .ok()
        .map(|i| asset(&ASSETS[i]))
}

fn asset(e: &'static Embedded) -> Asset {
    Asset {
        path: e.path,
        bytes: e.bytes,
        content_type: content_type(e.path),
        etag: e.etag,
    }
}

/// The media type of a file, by its extension.
pub fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map_or("", |(_, ext)| ext);
    match ext {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "json" => "application/json",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

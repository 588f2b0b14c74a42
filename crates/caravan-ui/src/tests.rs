//! The asset table (every file embedded, typed, and reachable from the
//! app's imports), the lookup (files, app pages, 404s) and the HTTP
//! answers (redirects, headers, revalidation).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::*;

fn assets_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets")
}

fn files_on_disk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read the assets directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files_on_disk(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn every_file_under_assets_is_embedded_as_it_is_on_disk() {
    let root = assets_dir();
    let mut disk = Vec::new();
    files_on_disk(&root, &mut disk);
    let embedded: BTreeSet<&str> = all().map(|a| a.path).collect();
    assert_eq!(disk.len(), embedded.len(), "{embedded:?}");
    for path in disk {
        let rel = path
            .strip_prefix(&root)
            .expect("under the assets directory")
            .to_string_lossy()
            .replace('\\', "/");
        let asset = match lookup(&format!("assets/{rel}")) {
            Lookup::File(asset) => asset,
            other => panic!("{rel}: {other:?}"),
        };
        let bytes = std::fs::read(&path).expect("read the asset");
        assert_eq!(asset.bytes, bytes.as_slice(), "{rel}");
    }
}

#[test]
fn every_asset_has_a_known_media_type_and_a_quoted_tag() {
    for asset in all() {
        assert_ne!(
            asset.content_type, "application/octet-stream",
            "{}: add its extension to content_type",
            asset.path
        );
        assert!(
            asset.etag.starts_with('"') && asset.etag.ends_with('"') && asset.etag.len() == 18,
            "{}: {}",
            asset.path,
            asset.etag
        );
    }
    assert_eq!(content_type("a/b.js"), "text/javascript; charset=utf-8");
    assert_eq!(content_type("app.css"), "text/css; charset=utf-8");
    assert_eq!(content_type("favicon.svg"), "image/svg+xml");
    assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
    assert_eq!(content_type("blob"), "application/octet-stream");
}

#[test]
fn files_are_found_by_path_and_missing_ones_are_404() {
    match lookup("assets/app.css") {
        Lookup::File(a) => assert_eq!(a.content_type, "text/css; charset=utf-8"),
        other => panic!("{other:?}"),
    }
    match lookup("/assets/js/main.js") {
        Lookup::File(a) => assert_eq!(a.content_type, "text/javascript; charset=utf-8"),
        other => panic!("{other:?}"),
    }
    assert_eq!(lookup("assets/nope.js"), Lookup::NotFound);
    assert_eq!(lookup("assets/"), Lookup::NotFound);
    assert_eq!(lookup("assets/js"), Lookup::NotFound);
}

#[test]
fn app_pages_fall_back_to_the_index() {
    for path in [
        "",
        "jobs",
        "jobs/web@default/allocations",
        "allocations/0b5c/logs",
        "clients/node-1",
        "settings/tokens",
        "a-page-the-app-does-not-know",
    ] {
        match lookup(path) {
            Lookup::Page(a) => {
                assert_eq!(a.path, "index.html", "{path}");
                assert!(a.bytes.starts_with(b"<!doctype html>"));
                assert_eq!(a.content_type, "text/html; charset=utf-8");
            }
            other => panic!("{path}: {other:?}"),
        }
    }
}

/// The single-quoted module paths in a script (`from './x.js'`,
/// `import('./pages/y.js')`, the router's table), resolved against its
/// directory.
fn relative_modules(source: &str, dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    for literal in source.split('\'').skip(1).step_by(2) {
        if !(literal.starts_with("./") || literal.starts_with("../")) || !literal.ends_with(".js") {
            continue;
        }
        let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
        for seg in literal.split('/') {
            match seg {
                "." => {}
                ".." => {
                    parts.pop();
                }
                s => parts.push(s),
            }
        }
        out.push(parts.join("/"));
    }
    out
}

#[test]
fn every_module_the_app_imports_is_embedded() {
    let mut checked = 0;
    for asset in all().filter(|a| a.path.ends_with(".js")) {
        let source = std::str::from_utf8(asset.bytes).expect("scripts are UTF-8");
        let dir = asset.path.rsplit_once('/').map_or("", |(d, _)| d);
        for module in relative_modules(source, dir) {
            assert!(
                matches!(lookup(&format!("assets/{module}")), Lookup::File(_)),
                "{} imports {module}, which is not embedded",
                asset.path
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} imports found");
    let index = match lookup("") {
        Lookup::Page(a) => std::str::from_utf8(a.bytes).expect("UTF-8"),
        other => panic!("{other:?}"),
    };
    let refs: Vec<&str> = index
        .split('"')
        .filter(|s| s.starts_with("/ui/assets/"))
        .collect();
    assert!(refs.len() >= 3, "{refs:?}");
    for r in refs {
        assert!(
            matches!(lookup(r.trim_start_matches("/ui/")), Lookup::File(_)),
            "index.html links {r}"
        );
    }
}

async fn get(uri: &str, etag: Option<&str>) -> axum::response::Response {
    let mut req = Request::builder().method(Method::GET).uri(uri);
    if let Some(tag) = etag {
        req = req.header(header::IF_NONE_MATCH, tag);
    }
    routes::<()>()
        .oneshot(req.body(Body::empty()).expect("a request"))
        .await
        .expect("the router answers")
}

#[tokio::test]
async fn the_root_and_ui_redirect_to_the_app() {
    for uri in ["/", "/ui"] {
        let res = get(uri, None).await;
        assert_eq!(res.status(), StatusCode::TEMPORARY_REDIRECT, "{uri}");
        assert_eq!(res.headers()[header::LOCATION], "/ui/", "{uri}");
    }
}

#[tokio::test]
async fn pages_answer_the_index_with_its_headers() {
    for uri in ["/ui/", "/ui/jobs", "/ui/jobs/web%40default/versions"] {
        let res = get(uri, None).await;
        assert_eq!(res.status(), StatusCode::OK, "{uri}");
        let headers = res.headers().clone();
        assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(headers[header::CACHE_CONTROL], "no-cache");
        assert!(
            headers[header::CONTENT_SECURITY_POLICY]
                .to_str()
                .expect("ASCII")
                .contains("script-src 'self'")
        );
        let body = res.into_body().collect().await.expect("a body").to_bytes();
        assert!(body.starts_with(b"<!doctype html>"), "{uri}");
    }
}

#[tokio::test]
async fn assets_are_typed_revalidated_and_missing_ones_404() {
    let res = get("/ui/assets/js/main.js", None).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()[header::CONTENT_TYPE],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(res.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    let tag = res.headers()[header::ETAG]
        .to_str()
        .expect("ASCII")
        .to_string();
    let again = get("/ui/assets/js/main.js", Some(&tag)).await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(again.headers()[header::ETAG], tag.as_str());
    let body = again
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    assert!(body.is_empty());
    let changed = get("/ui/assets/js/main.js", Some("\"0000000000000000\"")).await;
    assert_eq!(changed.status(), StatusCode::OK);
    assert_eq!(
        get("/ui/assets/js/missing.js", None).await.status(),
        StatusCode::NOT_FOUND
    );
}

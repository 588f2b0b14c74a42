//! Caravan's web UI: a single-page app in plain JavaScript modules and CSS
//! (no build step, nothing fetched from elsewhere at run time), embedded in
//! the binary and served by the api-gateway at `/ui`. The app speaks only the
//! public HTTP API under `/v1`, with the browser's ACL token, like every
//! other client. This crate owns the files and how they are answered: media
//! types, entity tags and revalidation, the fallback of app pages to
//! `index.html`, and the redirects of `/` and `/ui` to `/ui/`.

mod assets;

use axum::Router;
use axum::body::Body;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

pub use assets::{Asset, Lookup, all, content_type, lookup};

/// Where the app lives.
pub const UI_ROOT: &str = "/ui/";

/// What a page may load: only this origin's scripts, styles and API, so a
/// value shown in the UI can never run as code and nothing comes from a CDN.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// The UI's routes: `GET /ui/*` and the redirects of `/` and `/ui`. Merged
/// into the gateway's HTTP router outside its ACL layer: the app's files are
/// public, as Nomad's are; the API calls the app makes carry the token.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(to_root))
        .route("/ui", get(to_root))
        .route("/ui/", get(|headers: HeaderMap| async move { respond("", &headers) }))
        .route(
            "/ui/{*path}",
            get(|Path(path): Path<String>, headers: HeaderMap| async move {
                respond(&path, &headers)
            }),
        )
}

/// Nomad answers `/` with a temporary redirect to its UI.
async fn to_root() -> Redirect {
    Redirect::temporary(UI_ROOT)
}

/// Answers a GET of `/ui/<path>`: the file or app page with its media type
/// and entity tag (`304 Not Modified` when `If-None-Match` names it), or 404.
pub fn respond(path: &str, request: &HeaderMap) -> Response {
    let asset = match lookup(path) {
        Lookup::File(asset) | Lookup::Page(asset) => asset,
        Lookup::NotFound => return (StatusCode::NOT_FOUND, "no such UI file").into_response(),
    };
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| {
            tags.split(',')
                .any(|t| t.trim() == asset.etag || t.trim() == "*")
        });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        Body::from(asset.bytes).into_response()
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    headers.insert(header::ETAG, HeaderValue::from_static(asset.etag));
    // The files keep their names across releases, so the browser may keep
    // them but asks each time whether they changed (a 304 costs nothing).
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if asset.content_type.starts_with("text/html") {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        );
    }
    response
}

#[cfg(test)]
mod tests;

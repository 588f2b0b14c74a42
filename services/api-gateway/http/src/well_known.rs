//! `/.well-known/jwks.json` (the public keys workload identities are signed
//! with, for anyone verifying one) and `/.well-known/openid-configuration`
//! (OIDC discovery, when an `oidc_issuer` is configured): both public, as
//! third parties read them without a token.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::{ApiError, Http};
use caravan_gateway_core::identity::keyring::ALGORITHM;

/// Where the key set is served, below the issuer.
pub(crate) const JWKS_PATH: &str = "/.well-known/jwks.json";

/// How long a verifier may keep the key set: keys are only ever added, and a
/// token signed by an unknown `kid` sends a verifier back here.
const JWKS_MAX_AGE_SECS: u64 = 3600;

async fn jwks(State(http): State<Http>) -> Result<Response, ApiError> {
    let keyring = caravan_gateway_core::identity::keyring(&http.gw).await?;
    Ok((
        [(
            header::CACHE_CONTROL,
            format!("max-age={JWKS_MAX_AGE_SECS}"),
        )],
        axum::Json(keyring.jwks()),
    )
        .into_response())
}

async fn openid_configuration(State(http): State<Http>) -> Response {
    let issuer = http.gw.config.oidc_issuer.trim_end_matches('/');
    if issuer.is_empty() {
        return (StatusCode::NOT_FOUND, "OIDC Discovery endpoint disabled").into_response();
    }
    axum::Json(json!({
        "issuer": http.gw.config.oidc_issuer,
        "jwks_uri": format!("{issuer}{JWKS_PATH}"),
        "id_token_signing_alg_values_supported": [ALGORITHM],
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
    }))
    .into_response()
}

/// The routes.
pub(crate) fn routes() -> Router<Http> {
    Router::new()
        .route("/.well-known/jwks.json", get(jwks))
        .route(
            "/.well-known/openid-configuration",
            get(openid_configuration),
        )
}

//! The Nomad-compatible HTTP API.

use axum::Router;

use crate::Bound;
use crate::gateway::Gateway;

/// The HTTP API's routes.
pub fn router(_gw: Gateway, _bound: Bound) -> Router {
    Router::new()
}

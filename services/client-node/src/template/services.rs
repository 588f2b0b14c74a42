//! Service instances for `nomadService` and `nomadServices`, read from the
//! gateway's `ServiceRegistryService`.

use std::time::Duration;

use tonic::Status;

use super::source::Fetched;
use crate::node_api::NodeApi;

/// The instances of service `name` (with `tag`) in `namespace`.
pub async fn instances(
    _api: &NodeApi,
    _token: Option<&str>,
    _namespace: &str,
    name: &str,
    _tag: Option<&str>,
    _after: i64,
    _wait: Option<Duration>,
) -> Result<Fetched, Status> {
    Err(Status::unimplemented(format!(
        "PENDING service read {name}"
    )))
}

/// The services of `namespace`.
pub async fn names(
    _api: &NodeApi,
    _token: Option<&str>,
    namespace: &str,
    _after: i64,
    _wait: Option<Duration>,
) -> Result<Fetched, Status> {
    Err(Status::unimplemented(format!(
        "PENDING services {namespace}"
    )))
}

//! The claims of a workload identity token, named as the JWTs Nomad issues
//! (`nomad_namespace`, `nomad_job_id`, `nomad_allocation_id`, `nomad_task`
//! beside the registered `sub`, `aud`, `iat`, `nbf`, `exp`, `jti`), so tools
//! that read those tokens read these.

use serde::{Deserialize, Serialize};

/// The identity every task has, used for Caravan's own API.
pub const DEFAULT_IDENTITY: &str = "default";

/// The audience of the default identity; a token must carry it to be
/// accepted by the API.
pub const DEFAULT_AUDIENCE: &str = "nomadproject.io";

/// What a workload identity token says about its holder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityClaims {
    /// The allocation's namespace.
    pub nomad_namespace: String,
    /// The job's id.
    pub nomad_job_id: String,
    /// The allocation's id.
    pub nomad_allocation_id: String,
    /// The task's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub nomad_task: String,
    /// The issuer (the gateway's `oidc_issuer`), when one is configured.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iss: String,
    /// `<region>:<namespace>:<job>:<group>:<task>:<identity>`.
    pub sub: String,
    /// Who the token is meant for.
    #[serde(default)]
    pub aud: Vec<String>,
    /// Issued at (Unix seconds).
    pub iat: i64,
    /// Not valid before (Unix seconds).
    pub nbf: i64,
    /// Expiry (Unix seconds); none: valid as long as the allocation runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
    /// A unique id of this token.
    pub jti: String,
}

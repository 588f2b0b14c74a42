//! Nomad's ACL system: policies in Nomad's policy language ([`policy`]),
//! compiled per token into the checks Nomad makes ([`check`]), tokens and
//! policies in the store with a watched cache for per-request lookups
//! ([`store`]), the one table of what each operation needs ([`ops`], in
//! the terms of [`need`]) and the HTTP routes' operations ([`routes`]), and
//! what both transports share: the token of a request's headers, the
//! namespace an object named by id lives in ([`owner`]) and the cut of a
//! list to what its caller may read ([`list`]), and workload identity tokens
//! as callers ([`workload`]). The transports enforce it:
//! `http::acl_guard` on every HTTP route, `grpc::acl_guard` on the public
//! gRPC services.

pub mod check;
pub mod list;
pub mod need;
pub mod ops;
pub mod owner;
pub mod policy;
pub mod store;
pub mod volumes;
pub mod workload;

pub use check::Acl;
pub use list::ListScope;
pub use store::{AclCache, Caller};

/// The token a request presents: `X-Nomad-Token`, else
/// `Authorization: Bearer <secret>`; empty counts as none.
pub fn token_of(x_nomad_token: Option<&str>, authorization: Option<&str>) -> Option<String> {
    let direct = x_nomad_token.map(str::trim).filter(|t| !t.is_empty());
    let bearer = authorization
        .and_then(|a| {
            let (scheme, rest) = a.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(rest.trim())
        })
        .filter(|t| !t.is_empty());
    direct.or(bearer).map(str::to_string)
}

/// The token in a request's headers (HTTP or gRPC metadata), as
/// [`token_of`] reads it.
pub fn token_from_headers(headers: &http::HeaderMap) -> Option<String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    token_of(
        header("x-nomad-token"),
        header(http::header::AUTHORIZATION.as_str()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_come_from_either_header() {
        assert_eq!(token_of(Some("s1"), None).as_deref(), Some("s1"));
        assert_eq!(token_of(None, Some("Bearer s2")).as_deref(), Some("s2"));
        assert_eq!(token_of(None, Some("bearer  s3 ")).as_deref(), Some("s3"));
        assert_eq!(token_of(Some(""), Some("Basic x")), None);
        assert_eq!(token_of(Some("a"), Some("Bearer b")).as_deref(), Some("a"));
        let mut headers = http::HeaderMap::new();
        headers.insert("authorization", "Bearer s4".parse().unwrap());
        assert_eq!(token_from_headers(&headers).as_deref(), Some("s4"));
        headers.insert("X-Nomad-Token", "s5".parse().unwrap());
        assert_eq!(token_from_headers(&headers).as_deref(), Some("s5"));
    }
}

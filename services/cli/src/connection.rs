//! Where the CLI connects and as whom: Nomad's flags (`-address`, `-token`,
//! `-namespace`, `-region`, `-ca-cert`, …) over Caravan's and Nomad's
//! environment variables, resolved once into a [`Connection`].
//!
//! An `http://` or `https://` address (`-address`, `NOMAD_ADDR`, and the
//! default `http://127.0.0.1:4646`) speaks Nomad's HTTP API; Caravan's gRPC
//! API is reached with `-grpc-address` or `CARAVAN_ADDR`. Flags win over the
//! environment; among variables, Caravan's (`CARAVAN_*`) win over Nomad's
//! (`NOMAD_*`), since a shell that sets both for two clusters means Caravan
//! with the Caravan one.

use std::path::PathBuf;

use clap::Args;

use crate::error::CliError;

/// Nomad's default agent address, where `caravan dev` serves the HTTP API.
pub const DEFAULT_HTTP_ADDRESS: &str = "http://127.0.0.1:4646";

/// The namespace of reads and writes when none is named.
pub const DEFAULT_NAMESPACE: &str = "default";

/// The connection flags every verb takes (Nomad's "General Options").
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct ConnectionArgs {
    /// Nomad's HTTP API of a Caravan api-gateway (`http://127.0.0.1:4646`);
    /// `NOMAD_ADDR` when unset.
    #[arg(long, global = true, value_name = "ADDR")]
    pub address: Option<String>,
    /// Caravan's gRPC API instead (`127.0.0.1:4647`); `CARAVAN_ADDR` when unset.
    #[arg(long = "grpc-address", global = true, value_name = "ADDR")]
    pub grpc_address: Option<String>,
    /// The region sent with HTTP requests (`NOMAD_REGION`).
    #[arg(long, global = true)]
    pub region: Option<String>,
    /// The namespace of the jobs, allocations and variables read or written
    /// (`CARAVAN_NAMESPACE`, `NOMAD_NAMESPACE`; `default`).
    #[arg(long, global = true)]
    pub namespace: Option<String>,
    /// The ACL token's secret (`CARAVAN_TOKEN`, `NOMAD_TOKEN`).
    #[arg(long, global = true, value_name = "SECRET")]
    pub token: Option<String>,
    /// The CA certificate (PEM) that signed the gateway's
    /// (`CARAVAN_CACERT`, `NOMAD_CACERT`).
    #[arg(long = "ca-cert", global = true, value_name = "PEM")]
    pub ca_cert: Option<PathBuf>,
    /// A directory of CA certificates (PEM) to trust (`NOMAD_CAPATH`; HTTP only).
    #[arg(long = "ca-path", global = true, value_name = "DIR")]
    pub ca_path: Option<PathBuf>,
    /// This CLI's certificate (`CARAVAN_CLIENT_CERT`, `NOMAD_CLIENT_CERT`).
    #[arg(long = "client-cert", global = true, value_name = "PEM")]
    pub client_cert: Option<PathBuf>,
    /// Its private key (`CARAVAN_CLIENT_KEY`, `NOMAD_CLIENT_KEY`).
    #[arg(long = "client-key", global = true, value_name = "PEM")]
    pub client_key: Option<PathBuf>,
    /// The name the gateway's certificate must carry, when it is not the
    /// address's host (`NOMAD_TLS_SERVER_NAME`; HTTP only).
    #[arg(long = "tls-server-name", global = true, value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// Do not verify the gateway's certificate (`NOMAD_SKIP_VERIFY`; HTTP only).
    #[arg(long = "tls-skip-verify", global = true)]
    pub tls_skip_verify: bool,
    /// The same as -tls-skip-verify.
    #[arg(long, global = true, hide = true)]
    pub insecure: bool,
}

/// Which API the CLI speaks, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// Nomad's HTTP API at this base URL (`http(s)://host:port`, no trailing slash).
    Http(String),
    /// Caravan's gRPC API at this address (`host:port` or `http(s)://host:port`).
    Grpc(String),
}

/// TLS material and checks, as named on the command line or in the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// The CA certificate file.
    pub ca_cert: Option<PathBuf>,
    /// A directory of CA certificates.
    pub ca_path: Option<PathBuf>,
    /// The CLI's certificate.
    pub client_cert: Option<PathBuf>,
    /// Its key.
    pub client_key: Option<PathBuf>,
    /// The server name to verify instead of the address's host.
    pub server_name: Option<String>,
    /// Whether the server's certificate goes unchecked.
    pub skip_verify: bool,
}

impl TlsSettings {
    /// Whether any TLS material or check was asked for.
    pub fn is_empty(&self) -> bool {
        *self == TlsSettings::default()
    }
}

/// Everything a verb needs to reach the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// The API and its address.
    pub endpoint: Endpoint,
    /// The ACL secret, if any.
    pub token: Option<String>,
    /// The namespace of reads and writes.
    pub namespace: String,
    /// The region sent with HTTP requests, if any.
    pub region: Option<String>,
    /// Nomad's `NOMAD_HTTP_AUTH` (`user[:password]`), sent as HTTP basic auth.
    pub http_auth: Option<String>,
    /// TLS files and checks.
    pub tls: TlsSettings,
}

/// Reads a variable of the environment: `None` when unset or empty (Nomad
/// ignores empty variables).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// This process's environment, read as [`Env`] reads it.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn var(env: Env<'_>, name: &str) -> Option<String> {
    env(name).filter(|v| !v.is_empty())
}

/// The first of a flag and variables that is set.
fn first(flag: Option<&String>, env: Env<'_>, names: &[&str]) -> Option<String> {
    flag.filter(|f| !f.is_empty())
        .cloned()
        .or_else(|| names.iter().find_map(|n| var(env, n)))
}

fn first_path(flag: Option<&PathBuf>, env: Env<'_>, names: &[&str]) -> Option<PathBuf> {
    flag.filter(|f| !f.as_os_str().is_empty())
        .cloned()
        .or_else(|| names.iter().find_map(|n| var(env, n).map(PathBuf::from)))
}

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// An HTTP API address checked and without its trailing slash.
fn http_base(address: &str, source: &str) -> Result<String, CliError> {
    let lower = address.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(CliError::Usage(format!(
            "Invalid {source} {address:?}: Nomad's HTTP API address starts with http:// or \
             https:// (Caravan's gRPC API is reached with -grpc-address or CARAVAN_ADDR)"
        )));
    }
    let rest = &address[address.find("://").map_or(0, |i| i + 3)..];
    if rest.trim_end_matches('/').is_empty() {
        return Err(CliError::Usage(format!(
            "Invalid {source} {address:?}: no host"
        )));
    }
    Ok(address.trim_end_matches('/').to_string())
}

/// Resolves the flags against the environment `env`.
pub fn resolve(args: &ConnectionArgs, env: Env<'_>) -> Result<Connection, CliError> {
    let endpoint = match (&args.address, &args.grpc_address) {
        (Some(_), Some(_)) => {
            return Err(CliError::Usage(
                "Only one of -address (Nomad's HTTP API) and -grpc-address (Caravan's gRPC API) \
                 may be given"
                    .into(),
            ));
        }
        (Some(a), None) => Endpoint::Http(http_base(a, "-address")?),
        (None, Some(g)) => Endpoint::Grpc(g.clone()),
        (None, None) => match (var(env, "CARAVAN_ADDR"), var(env, "NOMAD_ADDR")) {
            (Some(g), _) => Endpoint::Grpc(g),
            (None, Some(a)) => Endpoint::Http(http_base(&a, "NOMAD_ADDR")?),
            (None, None) => Endpoint::Http(DEFAULT_HTTP_ADDRESS.to_string()),
        },
    };
    let skip_verify = args.tls_skip_verify
        || args.insecure
        || var(env, "NOMAD_SKIP_VERIFY")
            .and_then(|v| parse_go_bool(&v))
            .unwrap_or(false);
    let tls = TlsSettings {
        ca_cert: first_path(
            args.ca_cert.as_ref(),
            env,
            &["CARAVAN_CACERT", "NOMAD_CACERT"],
        ),
        ca_path: first_path(args.ca_path.as_ref(), env, &["NOMAD_CAPATH"]),
        client_cert: first_path(
            args.client_cert.as_ref(),
            env,
            &["CARAVAN_CLIENT_CERT", "NOMAD_CLIENT_CERT"],
        ),
        client_key: first_path(
            args.client_key.as_ref(),
            env,
            &["CARAVAN_CLIENT_KEY", "NOMAD_CLIENT_KEY"],
        ),
        server_name: first(
            args.tls_server_name.as_ref(),
            env,
            &["NOMAD_TLS_SERVER_NAME"],
        ),
        skip_verify,
    };
    check_tls(&endpoint, &tls)?;
    Ok(Connection {
        endpoint,
        token: first(args.token.as_ref(), env, &["CARAVAN_TOKEN", "NOMAD_TOKEN"]),
        namespace: first(
            args.namespace.as_ref(),
            env,
            &["CARAVAN_NAMESPACE", "NOMAD_NAMESPACE"],
        )
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string()),
        region: first(args.region.as_ref(), env, &["NOMAD_REGION"]),
        http_auth: var(env, "NOMAD_HTTP_AUTH"),
        tls,
    })
}

/// Refuses TLS settings the chosen API cannot honour, rather than ignoring them.
fn check_tls(endpoint: &Endpoint, tls: &TlsSettings) -> Result<(), CliError> {
    if tls.client_cert.is_some() != tls.client_key.is_some() {
        return Err(CliError::Usage(
            "A client certificate needs its key: give both -client-cert and -client-key \
             (CARAVAN_CLIENT_CERT/NOMAD_CLIENT_CERT and CARAVAN_CLIENT_KEY/NOMAD_CLIENT_KEY)"
                .into(),
        ));
    }
    match endpoint {
        Endpoint::Grpc(_) => {
            let http_only = [
                (tls.ca_path.is_some(), "-ca-path (NOMAD_CAPATH)"),
                (
                    tls.server_name.is_some(),
                    "-tls-server-name (NOMAD_TLS_SERVER_NAME)",
                ),
                (tls.skip_verify, "-tls-skip-verify (NOMAD_SKIP_VERIFY)"),
            ];
            if let Some((_, name)) = http_only.iter().find(|(set, _)| *set) {
                return Err(CliError::Usage(format!(
                    "{name} applies to Nomad's HTTP API only; Caravan's gRPC API takes \
                     -ca-cert, -client-cert and -client-key"
                )));
            }
            let files = [
                tls.ca_cert.is_some(),
                tls.client_cert.is_some(),
                tls.client_key.is_some(),
            ];
            if files.contains(&true) && files.contains(&false) {
                return Err(CliError::Usage(
                    "TLS to Caravan's gRPC API needs all of -ca-cert, -client-cert and \
                     -client-key (or CARAVAN_CACERT, CARAVAN_CLIENT_CERT and CARAVAN_CLIENT_KEY)"
                        .into(),
                ));
            }
        }
        Endpoint::Http(base) => {
            let https = base.to_ascii_lowercase().starts_with("https://");
            if https && tls.ca_cert.is_none() && tls.ca_path.is_none() && !tls.skip_verify {
                return Err(CliError::Usage(format!(
                    "{base} needs the CA that signed the gateway's certificate: give -ca-cert \
                     or -ca-path (NOMAD_CACERT, NOMAD_CAPATH), or -tls-skip-verify; the CLI \
                     does not read the system's trust store"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name: &str| map.get(name).cloned()
    }

    fn resolve_with(args: &ConnectionArgs, pairs: &[(&str, &str)]) -> Result<Connection, CliError> {
        let env = env_of(pairs);
        resolve(args, &env)
    }

    #[test]
    fn the_default_is_nomads_http_address() {
        let c = resolve_with(&ConnectionArgs::default(), &[]).unwrap();
        assert_eq!(c.endpoint, Endpoint::Http("http://127.0.0.1:4646".into()));
        assert_eq!(c.namespace, "default");
        assert_eq!((c.token, c.region, c.http_auth), (None, None, None));
        assert!(c.tls.is_empty());
    }

    #[test]
    fn nomads_environment_is_read() {
        let c = resolve_with(
            &ConnectionArgs::default(),
            &[
                ("NOMAD_ADDR", "https://10.0.0.1:4646/"),
                ("NOMAD_TOKEN", "s3cret"),
                ("NOMAD_NAMESPACE", "prod"),
                ("NOMAD_REGION", "eu"),
                ("NOMAD_CACERT", "/ca.pem"),
                ("NOMAD_CLIENT_CERT", "/cli.pem"),
                ("NOMAD_CLIENT_KEY", "/cli-key.pem"),
                ("NOMAD_TLS_SERVER_NAME", "server.global.nomad"),
                ("NOMAD_SKIP_VERIFY", "true"),
                ("NOMAD_HTTP_AUTH", "user:pass"),
            ],
        )
        .unwrap();
        assert_eq!(c.endpoint, Endpoint::Http("https://10.0.0.1:4646".into()));
        assert_eq!(c.token.as_deref(), Some("s3cret"));
        assert_eq!(c.namespace, "prod");
        assert_eq!(c.region.as_deref(), Some("eu"));
        assert_eq!(c.http_auth.as_deref(), Some("user:pass"));
        assert_eq!(c.tls.ca_cert, Some(PathBuf::from("/ca.pem")));
        assert_eq!(c.tls.client_cert, Some(PathBuf::from("/cli.pem")));
        assert_eq!(c.tls.client_key, Some(PathBuf::from("/cli-key.pem")));
        assert_eq!(c.tls.server_name.as_deref(), Some("server.global.nomad"));
        assert!(c.tls.skip_verify);
    }

    #[test]
    fn flags_win_over_the_environment() {
        let args = ConnectionArgs {
            address: Some("http://flag:4646".into()),
            token: Some("flag-token".into()),
            namespace: Some("flag-ns".into()),
            region: Some("flag-region".into()),
            ca_cert: Some("flag-ca.pem".into()),
            ..Default::default()
        };
        let c = resolve_with(
            &args,
            &[
                ("NOMAD_ADDR", "http://env:4646"),
                ("CARAVAN_ADDR", "env:4647"),
                ("NOMAD_TOKEN", "env-token"),
                ("CARAVAN_TOKEN", "env-token-2"),
                ("NOMAD_NAMESPACE", "env-ns"),
                ("NOMAD_REGION", "env-region"),
                ("NOMAD_CACERT", "env-ca.pem"),
            ],
        )
        .unwrap();
        assert_eq!(c.endpoint, Endpoint::Http("http://flag:4646".into()));
        assert_eq!(c.token.as_deref(), Some("flag-token"));
        assert_eq!(c.namespace, "flag-ns");
        assert_eq!(c.region.as_deref(), Some("flag-region"));
        assert_eq!(c.tls.ca_cert, Some(PathBuf::from("flag-ca.pem")));
        let grpc = ConnectionArgs {
            grpc_address: Some("127.0.0.1:4647".into()),
            ..Default::default()
        };
        let c = resolve_with(&grpc, &[("NOMAD_ADDR", "http://env:4646")]).unwrap();
        assert_eq!(c.endpoint, Endpoint::Grpc("127.0.0.1:4647".into()));
    }

    #[test]
    fn caravans_variables_win_over_nomads() {
        let c = resolve_with(
            &ConnectionArgs::default(),
            &[
                ("NOMAD_ADDR", "http://nomad:4646"),
                ("CARAVAN_ADDR", "http://caravan:4647"),
                ("NOMAD_TOKEN", "nomad"),
                ("CARAVAN_TOKEN", "caravan"),
                ("NOMAD_NAMESPACE", "nomad"),
                ("CARAVAN_NAMESPACE", "caravan"),
                ("NOMAD_CACERT", "nomad.pem"),
                ("CARAVAN_CACERT", "caravan.pem"),
                ("CARAVAN_CLIENT_CERT", "c.pem"),
                ("CARAVAN_CLIENT_KEY", "k.pem"),
            ],
        )
        .unwrap();
        assert_eq!(c.endpoint, Endpoint::Grpc("http://caravan:4647".into()));
        assert_eq!(c.token.as_deref(), Some("caravan"));
        assert_eq!(c.namespace, "caravan");
        assert_eq!(c.tls.ca_cert, Some(PathBuf::from("caravan.pem")));
    }

    #[test]
    fn empty_variables_are_unset() {
        let c = resolve_with(
            &ConnectionArgs::default(),
            &[
                ("CARAVAN_ADDR", ""),
                ("NOMAD_TOKEN", ""),
                ("NOMAD_SKIP_VERIFY", ""),
            ],
        )
        .unwrap();
        assert_eq!(c.endpoint, Endpoint::Http(DEFAULT_HTTP_ADDRESS.into()));
        assert_eq!(c.token, None);
        assert!(!c.tls.skip_verify);
    }

    #[test]
    fn skip_verify_reads_go_booleans() {
        for (value, want) in [("1", true), ("T", true), ("false", false), ("nope", false)] {
            let c =
                resolve_with(&ConnectionArgs::default(), &[("NOMAD_SKIP_VERIFY", value)]).unwrap();
            assert_eq!(c.tls.skip_verify, want, "{value}");
        }
        let flag = ConnectionArgs {
            insecure: true,
            ..Default::default()
        };
        assert!(resolve_with(&flag, &[]).unwrap().tls.skip_verify);
    }

    #[test]
    fn bad_combinations_are_refused_by_name() {
        let both = ConnectionArgs {
            address: Some("http://a:1".into()),
            grpc_address: Some("b:2".into()),
            ..Default::default()
        };
        let err = resolve_with(&both, &[]).unwrap_err().to_string();
        assert!(err.contains("-grpc-address"), "{err}");
        let bare = ConnectionArgs {
            address: Some("127.0.0.1:4646".into()),
            ..Default::default()
        };
        let err = resolve_with(&bare, &[]).unwrap_err().to_string();
        assert!(err.contains("http://"), "{err}");
        let err = resolve_with(
            &ConnectionArgs::default(),
            &[("NOMAD_ADDR", "unix:///sock")],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("NOMAD_ADDR"), "{err}");
        let err = resolve_with(
            &ConnectionArgs::default(),
            &[("NOMAD_ADDR", "https://a:4646")],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("-ca-cert"), "{err}");
        let half = ConnectionArgs {
            client_cert: Some("c.pem".into()),
            ..Default::default()
        };
        assert!(resolve_with(&half, &[]).is_err());
        let err = resolve_with(
            &ConnectionArgs::default(),
            &[("CARAVAN_ADDR", "a:4647"), ("NOMAD_SKIP_VERIFY", "1")],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("NOMAD_SKIP_VERIFY"), "{err}");
        let err = resolve_with(
            &ConnectionArgs::default(),
            &[("CARAVAN_ADDR", "a:4647"), ("CARAVAN_CACERT", "ca.pem")],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("-client-key"), "{err}");
    }
}

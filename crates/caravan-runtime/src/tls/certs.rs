//! Making the agent CA and the certificates signed by it, as `nomad tls`
//! does: file names, role names and defaults follow Nomad's with `caravan`
//! in place of `nomad`.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};

use super::Role;

/// The CA certificate's file name.
pub const CA_CERT_FILE: &str = "caravan-agent-ca.pem";
/// The CA private key's file name.
pub const CA_KEY_FILE: &str = "caravan-agent-ca-key.pem";
/// How long a CA is valid by default, in days (Nomad's five years).
pub const CA_DAYS: u32 = 1825;
/// How long a certificate is valid by default, in days.
pub const CERT_DAYS: u32 = 365;

/// Why a CA or certificate could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Files are never overwritten: a key replaced by mistake cannot be
    /// recovered.
    #[error("{0} already exists")]
    Exists(PathBuf),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system reported.
        #[source]
        source: std::io::Error,
    },
    /// rcgen refused the parameters or a PEM file.
    #[error("{0}")]
    Certificate(#[from] rcgen::Error),
}

/// The files a CA or a certificate was written to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM, mode 0600).
    pub key: PathBuf,
}

/// Makes a self-signed CA valid for `days` and writes it into `dir`.
pub fn create_ca(dir: &Path, days: u32) -> Result<Written, CertError> {
    let written = Written {
        cert: dir.join(CA_CERT_FILE),
        key: dir.join(CA_KEY_FILE),
    };
    refuse_existing(&written)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, "Caravan Agent CA");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Caravan");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params, days);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    write_new(&written.cert, cert.pem().as_bytes(), 0o644)?;
    write_new(&written.key, key.serialize_pem().as_bytes(), 0o600)?;
    Ok(written)
}

/// What `caravan tls cert create` makes.
#[derive(Debug, Clone)]
pub struct CertRequest {
    /// The role the certificate names.
    pub role: Role,
    /// The region in its role name (`global` by default).
    pub region: String,
    /// How long it is valid.
    pub days: u32,
    /// Further DNS names it is valid for.
    pub dns_names: Vec<String>,
    /// Further IP addresses it is valid for.
    pub ip_addresses: Vec<IpAddr>,
    /// The signing CA's certificate.
    pub ca_cert: PathBuf,
    /// The signing CA's key.
    pub ca_key: PathBuf,
}

impl CertRequest {
    /// The file names Nomad would pick, e.g. `global-server-caravan.pem`.
    pub fn files(&self, dir: &Path) -> Written {
        let stem = format!("{}-{}-caravan", self.region, self.role.name());
        Written {
            cert: dir.join(format!("{stem}.pem")),
            key: dir.join(format!("{stem}-key.pem")),
        }
    }

    /// The names the certificate is valid for: the role name first, then
    /// `localhost` for servers and clients (which listen), then the extra
    /// ones asked for.
    pub fn dns_sans(&self) -> Vec<String> {
        let mut names = vec![self.role.dns_name(&self.region)];
        if self.role != Role::Cli {
            names.push("localhost".to_string());
        }
        names.extend(self.dns_names.iter().cloned());
        names
    }

    /// The IP addresses the certificate is valid for.
    pub fn ip_sans(&self) -> Vec<IpAddr> {
        let mut ips = Vec::new();
        if self.role != Role::Cli {
            ips.push(IpAddr::from([127, 0, 0, 1]));
        }
        ips.extend(self.ip_addresses.iter().copied());
        ips
    }
}

/// Makes the certificate `request` asks for, signed by its CA, and writes it
/// into `dir`.
pub fn create_cert(dir: &Path, request: &CertRequest) -> Result<Written, CertError> {
    let written = request.files(dir);
    refuse_existing(&written)?;
    let ca_pem = read(&request.ca_cert)?;
    let ca_key = KeyPair::from_pem(&read(&request.ca_key)?)?;
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key)?;

    let mut params = CertificateParams::new(request.dns_sans())?;
    params
        .subject_alt_names
        .extend(request.ip_sans().into_iter().map(SanType::IpAddress));
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, request.role.dns_name(&request.region));
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    // Servers and clients both listen and dial; the CLI only dials.
    params.extended_key_usages = match request.role {
        Role::Cli => vec![ExtendedKeyUsagePurpose::ClientAuth],
        Role::Server | Role::Client => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    };
    set_validity(&mut params, request.days);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    write_new(&written.cert, cert.pem().as_bytes(), 0o644)?;
    write_new(&written.key, key.serialize_pem().as_bytes(), 0o600)?;
    Ok(written)
}

/// Valid from a minute ago (clocks drift) for `days`.
fn set_validity(params: &mut CertificateParams, days: u32) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::minutes(1);
    params.not_after = now + Duration::days(i64::from(days));
}

fn refuse_existing(written: &Written) -> Result<(), CertError> {
    for path in [&written.cert, &written.key] {
        if path.exists() {
            return Err(CertError::Exists(path.clone()));
        }
    }
    Ok(())
}

fn read(path: &Path) -> Result<String, CertError> {
    std::fs::read_to_string(path).map_err(|source| CertError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes a file that must not exist yet, created with `mode` so a key is
/// never readable by others, even for a moment.
fn write_new(path: &Path, contents: &[u8], mode: u32) -> Result<(), CertError> {
    let io = |source| CertError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io)?;
    file.write_all(contents).map_err(io)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
    use webpki::{EndEntityCert, KeyUsage};

    use super::*;

    fn request(dir: &Path, role: Role, days: u32) -> CertRequest {
        CertRequest {
            role,
            region: "global".to_string(),
            days,
            dns_names: vec!["node.example".to_string()],
            ip_addresses: vec![IpAddr::from([10, 0, 0, 7])],
            ca_cert: dir.join(CA_CERT_FILE),
            ca_key: dir.join(CA_KEY_FILE),
        }
    }

    fn der(path: &Path) -> CertificateDer<'static> {
        CertificateDer::from_pem_file(path).unwrap()
    }

    /// Whether `cert` chains to `ca` for `usage` at `at`.
    fn chains(
        ca: &CertificateDer<'_>,
        cert: &CertificateDer<'_>,
        at: OffsetDateTime,
        usage: KeyUsage,
    ) -> bool {
        let anchor = webpki::anchor_from_trusted_cert(ca).unwrap();
        let seconds = u64::try_from(at.unix_timestamp()).unwrap();
        EndEntityCert::try_from(cert)
            .unwrap()
            .verify_for_usage(
                webpki::ALL_VERIFICATION_ALGS,
                &[anchor],
                &[],
                UnixTime::since_unix_epoch(std::time::Duration::from_secs(seconds)),
                usage,
                None,
                None,
            )
            .is_ok()
    }

    fn valid_for(cert: &CertificateDer<'_>, name: &str) -> bool {
        let name = ServerName::try_from(name).unwrap();
        EndEntityCert::try_from(cert)
            .unwrap()
            .verify_is_valid_for_subject_name(&name)
            .is_ok()
    }

    #[test]
    fn a_server_certificate_names_its_role_and_chains_to_the_ca_until_it_expires() {
        let dir = tempfile::tempdir().unwrap();
        let ca = create_ca(dir.path(), CA_DAYS).unwrap();
        assert_eq!(ca.cert, dir.path().join("caravan-agent-ca.pem"));
        let written = create_cert(dir.path(), &request(dir.path(), Role::Server, 30)).unwrap();
        assert_eq!(
            written.cert,
            dir.path().join("global-server-caravan.pem"),
            "Nomad's file name"
        );
        assert_eq!(
            written.key,
            dir.path().join("global-server-caravan-key.pem")
        );
        let cert = der(&written.cert);
        for name in [
            "server.global.caravan",
            "localhost",
            "127.0.0.1",
            "node.example",
            "10.0.0.7",
        ] {
            assert!(valid_for(&cert, name), "{name}");
        }
        assert!(!valid_for(&cert, "client.global.caravan"));

        let ca = der(&ca.cert);
        let now = OffsetDateTime::now_utc();
        assert!(chains(&ca, &cert, now, KeyUsage::server_auth()));
        assert!(chains(&ca, &cert, now, KeyUsage::client_auth()));
        assert!(chains(
            &ca,
            &cert,
            now + Duration::days(29),
            KeyUsage::server_auth()
        ));
        assert!(!chains(
            &ca,
            &cert,
            now + Duration::days(31),
            KeyUsage::server_auth()
        ));
    }

    #[test]
    fn a_cli_certificate_only_dials_and_names_no_host() {
        let dir = tempfile::tempdir().unwrap();
        let ca = create_ca(dir.path(), CA_DAYS).unwrap();
        let mut req = request(dir.path(), Role::Cli, CERT_DAYS);
        req.dns_names.clear();
        req.ip_addresses.clear();
        let written = create_cert(dir.path(), &req).unwrap();
        assert_eq!(written.cert, dir.path().join("global-cli-caravan.pem"));
        let cert = der(&written.cert);
        assert!(valid_for(&cert, "cli.global.caravan"));
        assert!(!valid_for(&cert, "localhost"));
        assert!(!valid_for(&cert, "127.0.0.1"));
        let ca = der(&ca.cert);
        let now = OffsetDateTime::now_utc();
        assert!(chains(&ca, &cert, now, KeyUsage::client_auth()));
        assert!(!chains(&ca, &cert, now, KeyUsage::server_auth()));
    }

    #[test]
    fn keys_are_private_and_nothing_is_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let ca = create_ca(dir.path(), CA_DAYS).unwrap();
        let written = create_cert(dir.path(), &request(dir.path(), Role::Client, 1)).unwrap();
        for key in [&ca.key, &written.key] {
            let mode = std::fs::metadata(key).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", key.display());
        }
        assert!(matches!(
            create_ca(dir.path(), CA_DAYS),
            Err(CertError::Exists(_))
        ));
        assert!(matches!(
            create_cert(dir.path(), &request(dir.path(), Role::Client, 1)),
            Err(CertError::Exists(_))
        ));
    }
}

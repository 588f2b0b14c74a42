//! The process's TLS material as a swappable holder, and the watcher that
//! re-reads `[tls]`'s files when their contents change: a usable new
//! reading replaces the old for every connection made from then on
//! (connections already open keep theirs); an unusable one — a half-written
//! file, a key that does not go with the certificate — is logged naming the
//! file and the old material stays.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use super::TlsConfig;
use super::material::{Files, Material};

/// How often the watcher reads the files.
pub const RELOAD_PERIOD: Duration = Duration::from_secs(2);

/// What one look at the files found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    /// The files hold what they held at the last look.
    Unchanged,
    /// They changed and the new material is in use.
    Reloaded,
    /// They changed but are not usable (the message names the key and
    /// file); the material in use stays.
    Refused(String),
}

/// The material in use, and what the files held at the last look.
#[derive(Debug)]
pub struct Reloadable {
    config: TlsConfig,
    current: RwLock<Arc<Material>>,
    /// Contents (or the read error) last seen, usable or not, so a bad file
    /// is reported once rather than at every look.
    seen: Mutex<Result<Files, String>>,
}

impl Reloadable {
    /// Reads and checks the files `config` names.
    pub fn load(config: &TlsConfig) -> Result<Reloadable, String> {
        let files = Files::read(config)?;
        let material = Material::parse(config, &files)?;
        Ok(Reloadable {
            config: config.clone(),
            current: RwLock::new(Arc::new(material)),
            seen: Mutex::new(Ok(files)),
        })
    }

    /// The material new connections use.
    pub fn current(&self) -> Arc<Material> {
        self.current.read().clone()
    }

    /// Reads the files once and swaps in their material when they changed
    /// and are usable.
    pub fn check(&self) -> Reload {
        let read = Files::read(&self.config);
        let mut seen = self.seen.lock();
        if *seen == read {
            return Reload::Unchanged;
        }
        *seen = read.clone();
        drop(seen);
        match read.and_then(|files| Material::parse(&self.config, &files)) {
            Ok(material) => {
                *self.current.write() = Arc::new(material);
                Reload::Reloaded
            }
            Err(err) => Reload::Refused(err),
        }
    }

    /// Starts a thread that looks at the files every [`RELOAD_PERIOD`] for
    /// as long as the process runs, logging each reload and each refusal.
    pub fn watch(self: &Arc<Self>) -> std::io::Result<()> {
        let holder = self.clone();
        std::thread::Builder::new()
            .name("tls-reload".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(RELOAD_PERIOD);
                    match holder.check() {
                        Reload::Unchanged => {}
                        Reload::Reloaded => tracing::info!(
                            cert_file = %holder.config.cert_file.display(),
                            "reloaded TLS certificates"
                        ),
                        Reload::Refused(err) => tracing::error!(
                            error = %err,
                            "the TLS files changed but are not usable; the certificates in use stay"
                        ),
                    }
                }
            })
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::certs::{self, CertRequest};
    use super::super::{Role, TlsConfig};
    use super::*;

    /// A CA in `dir` and a server certificate it signs.
    fn issue(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        certs::create_ca(dir, 10).unwrap();
        certs::create_cert(
            dir,
            &CertRequest {
                role: Role::Server,
                region: "global".into(),
                days: 10,
                dns_names: Vec::new(),
                ip_addresses: Vec::new(),
                ca_cert: dir.join(certs::CA_CERT_FILE),
                ca_key: dir.join(certs::CA_KEY_FILE),
            },
        )
        .unwrap();
    }

    fn config(dir: &Path) -> TlsConfig {
        TlsConfig {
            enabled: true,
            ca_file: dir.join("ca.pem"),
            cert_file: dir.join("cert.pem"),
            key_file: dir.join("key.pem"),
            ..TlsConfig::default()
        }
    }

    /// Copies the material issued in `from` to where `config` points.
    fn install_from(from: &Path, config: &TlsConfig) {
        let copy = |name: &str, to: &Path| std::fs::copy(from.join(name), to).map(drop).unwrap();
        copy(certs::CA_CERT_FILE, &config.ca_file);
        copy("global-server-caravan.pem", &config.cert_file);
        copy("global-server-caravan-key.pem", &config.key_file);
    }

    fn leaf(holder: &Reloadable) -> Vec<u8> {
        holder.current().identity.cert[0].to_vec()
    }

    #[test]
    fn changed_files_swap_in_only_when_usable() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        issue(&a);
        issue(&b);
        let live = dir.path().join("live");
        std::fs::create_dir_all(&live).unwrap();
        let config = config(&live);
        install_from(&a, &config);
        let holder = Reloadable::load(&config).unwrap();
        let first = leaf(&holder);
        assert_eq!(holder.check(), Reload::Unchanged);

        // Half a certificate: refused naming the file, once, and the old
        // material stays.
        let cert_b = std::fs::read(b.join("global-server-caravan.pem")).unwrap();
        std::fs::write(&config.cert_file, &cert_b[..cert_b.len() / 2]).unwrap();
        let Reload::Refused(err) = holder.check() else {
            panic!("half a certificate was not refused");
        };
        assert!(
            err.starts_with("tls.cert_file: ") && err.contains("cert.pem"),
            "{err}"
        );
        assert_eq!(holder.check(), Reload::Unchanged, "reported once");
        assert_eq!(leaf(&holder), first);

        // B's certificate beside A's key and CA: refused too.
        std::fs::write(&config.cert_file, &cert_b).unwrap();
        let Reload::Refused(err) = holder.check() else {
            panic!("a certificate without its key was accepted");
        };
        assert!(err.contains("does not go with"), "{err}");
        // B's certificate and key, still A's CA.
        std::fs::copy(b.join("global-server-caravan-key.pem"), &config.key_file).unwrap();
        let Reload::Refused(err) = holder.check() else {
            panic!("a certificate of another CA was accepted");
        };
        assert!(err.contains("not signed by"), "{err}");
        assert_eq!(leaf(&holder), first);

        // All of B: in use.
        install_from(&b, &config);
        assert_eq!(holder.check(), Reload::Reloaded);
        assert_eq!(leaf(&holder), cert_b_der(&b));

        // A file that disappears is refused naming it.
        std::fs::remove_file(&config.ca_file).unwrap();
        let Reload::Refused(err) = holder.check() else {
            panic!("a missing CA was accepted");
        };
        assert!(err.starts_with("tls.ca_file: cannot read"), "{err}");
        assert_eq!(leaf(&holder), cert_b_der(&b));
    }

    fn cert_b_der(dir: &Path) -> Vec<u8> {
        use rustls_pki_types::CertificateDer;
        use rustls_pki_types::pem::PemObject;
        CertificateDer::from_pem_file(dir.join("global-server-caravan.pem"))
            .unwrap()
            .to_vec()
    }
}

//! `tls ca create` and `tls cert create -server|-client|-cli`: the agent CA
//! and the certificates signed by it, written into the current directory
//! under Nomad's file names (`caravan` in place of `nomad`).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use caravan_runtime::tls::Role;
use caravan_runtime::tls::certs::{self, CertRequest};
use clap::{Args, Subcommand};

use crate::error::CliError;
use crate::ui::Ui;

/// `caravan tls …`.
#[derive(Debug, Subcommand)]
pub enum TlsCommand {
    /// Make the certificate authority.
    #[command(subcommand)]
    Ca(CaCommand),
    /// Make certificates signed by it.
    #[command(subcommand)]
    Cert(CertCommand),
}

/// `caravan tls ca …`.
#[derive(Debug, Subcommand)]
pub enum CaCommand {
    /// Write `caravan-agent-ca.pem` and `caravan-agent-ca-key.pem`.
    Create {
        /// How many days the CA is valid.
        #[arg(long, default_value_t = certs::CA_DAYS)]
        days: u32,
    },
}

/// `caravan tls cert …`.
#[derive(Debug, Subcommand)]
pub enum CertCommand {
    /// Write `<region>-<role>-caravan.pem` and its key.
    Create(CertArgs),
}

/// The flags of `caravan tls cert create`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("role").required(true).args(["server", "client", "cli"])))]
pub struct CertArgs {
    /// A certificate for the control plane's services (`server.<region>.caravan`).
    #[arg(long)]
    server: bool,
    /// A certificate for a client node (`client.<region>.caravan`).
    #[arg(long)]
    client: bool,
    /// A certificate for the command line (`cli.<region>.caravan`).
    #[arg(long)]
    cli: bool,
    /// The region in the role name.
    #[arg(long, default_value = "global")]
    region: String,
    /// How many days the certificate is valid.
    #[arg(long, default_value_t = certs::CERT_DAYS)]
    days: u32,
    /// A further DNS name it is valid for (repeatable).
    #[arg(long = "additional-dnsname")]
    additional_dnsname: Vec<String>,
    /// A further IP address it is valid for (repeatable).
    #[arg(long = "additional-ipaddress")]
    additional_ipaddress: Vec<IpAddr>,
    /// The CA certificate.
    #[arg(long, default_value = certs::CA_CERT_FILE)]
    ca: PathBuf,
    /// The CA's key.
    #[arg(long, default_value = certs::CA_KEY_FILE)]
    key: PathBuf,
}

impl CertArgs {
    fn role(&self) -> Role {
        match (self.server, self.client) {
            (true, _) => Role::Server,
            (_, true) => Role::Client,
            _ => Role::Cli,
        }
    }
}

/// Runs a `caravan tls` command in `dir`.
pub fn dispatch(dir: &Path, ui: &mut Ui, cmd: TlsCommand) -> Result<u8, CliError> {
    let failed = |e: certs::CertError| CliError::Usage(format!("Error: {e}"));
    match cmd {
        TlsCommand::Ca(CaCommand::Create { days }) => {
            let written = certs::create_ca(dir, days).map_err(failed)?;
            ui.output(format!(
                "==> CA certificate saved to: {}\n==> CA certificate key saved to: {}",
                shown(dir, &written.cert),
                shown(dir, &written.key)
            ));
        }
        TlsCommand::Cert(CertCommand::Create(args)) => {
            let role = args.role();
            let request = CertRequest {
                role,
                region: args.region,
                days: args.days,
                dns_names: args.additional_dnsname,
                ip_addresses: args.additional_ipaddress,
                ca_cert: dir.join(&args.ca),
                ca_key: dir.join(&args.key),
            };
            let written = certs::create_cert(dir, &request).map_err(failed)?;
            let kind = match role {
                Role::Server => "Server",
                Role::Client => "Client",
                Role::Cli => "Cli",
            };
            ui.output(format!(
                "==> Using CA file {} and CA key {}\n\
                 ==> {kind} Certificate saved to {}\n\
                 ==> {kind} Certificate key saved to {}",
                args.ca.display(),
                args.key.display(),
                shown(dir, &written.cert),
                shown(dir, &written.key)
            ));
        }
    }
    Ok(0)
}

/// A written file as the user named its directory: relative to it.
fn shown(dir: &Path, path: &Path) -> String {
    path.strip_prefix(dir).unwrap_or(path).display().to_string()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::{Cli, Command};

    fn run(dir: &Path, line: &[&str]) -> Result<String, CliError> {
        let line = crate::args::normalize(line.iter().map(|a| a.to_string()));
        let cli = Cli::try_parse_from(line).map_err(|e| CliError::Usage(e.to_string()))?;
        let Command::Tls(cmd) = cli.command else {
            panic!("not a tls command");
        };
        let (mut ui, captured) = Ui::captured();
        dispatch(dir, &mut ui, cmd)?;
        Ok(captured.stdout())
    }

    #[test]
    fn ca_then_certificates_of_each_role_under_nomads_names() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(dir.path(), &["caravan", "tls", "ca", "create"]).unwrap();
        assert!(
            out.contains("CA certificate saved to: caravan-agent-ca.pem"),
            "{out}"
        );
        for (flag, file) in [
            ("-server", "global-server-caravan.pem"),
            ("-client", "global-client-caravan.pem"),
            ("-cli", "global-cli-caravan.pem"),
        ] {
            let out = run(dir.path(), &["caravan", "tls", "cert", "create", flag]).unwrap();
            assert!(
                out.contains(&format!("Certificate saved to {file}")),
                "{out}"
            );
            assert!(dir.path().join(file).exists(), "{file}");
        }
        let out = run(
            dir.path(),
            &[
                "caravan", "tls", "cert", "create", "-server", "-region", "eu", "-days", "3",
            ],
        )
        .unwrap();
        assert!(out.contains("eu-server-caravan.pem"), "{out}");
        // Existing files are never replaced.
        assert!(run(dir.path(), &["caravan", "tls", "cert", "create", "--cli"]).is_err());
    }

    #[test]
    fn a_certificate_needs_exactly_one_role() {
        let dir = tempfile::tempdir().unwrap();
        assert!(run(dir.path(), &["caravan", "tls", "cert", "create"]).is_err());
        assert!(
            run(
                dir.path(),
                &["caravan", "tls", "cert", "create", "--server", "--cli"]
            )
            .is_err()
        );
    }
}

//! `acl bootstrap`, `acl policy apply|list|info|delete` and `acl token
//! create|list|info|self|delete`: Nomad's ACL verbs over the SDK's ACL
//! calls, printed as Nomad prints them.

use std::path::PathBuf;

use caravan_proto::{AclPolicy, AclToken};
use clap::Subcommand;

use crate::api::Api;
use crate::backend::NomadCall;
use crate::error::CliError;
use crate::format::{FormatArgs, kv, rfc3339, table};
use crate::ui::Ui;

type Result<T> = std::result::Result<T, CliError>;

/// `caravan acl …`.
#[derive(Debug, Subcommand)]
pub enum AclCommand {
    /// Create the first management token (once per cluster).
    Bootstrap,
    /// Write, list, show and delete policies.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Create, list, show and delete tokens.
    #[command(subcommand)]
    Token(TokenCommand),
}

/// `caravan acl policy …`.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Create or replace a policy from a file of rules (HCL or JSON; `-`
    /// reads standard input).
    Apply {
        /// A description of the policy.
        #[arg(long, default_value = "")]
        description: String,
        /// The policy's name.
        name: String,
        /// The rules file.
        file: PathBuf,
    },
    /// List policies.
    List {
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Show a policy and its rules.
    Info {
        /// The policy's name.
        name: String,
    },
    /// Delete a policy.
    Delete {
        /// The policy's name.
        name: String,
    },
}

/// `caravan acl token …`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token; prints its secret.
    Create {
        /// A name for the token.
        #[arg(long, default_value = "")]
        name: String,
        /// `client` (the default) or `management`.
        #[arg(long = "type", default_value = "client")]
        token_type: String,
        /// A policy of the token (repeatable).
        #[arg(long = "policy")]
        policies: Vec<String>,
        /// Replicate the token to every region.
        #[arg(long)]
        global: bool,
    },
    /// List tokens.
    List {
        #[command(flatten)]
        format: FormatArgs,
    },
    /// Show a token.
    Info {
        /// The token's accessor ID.
        accessor: String,
    },
    /// Show the token in use.
    #[command(name = "self")]
    Own,
    /// Delete a token.
    Delete {
        /// The token's accessor ID.
        accessor: String,
    },
}

fn or_na(items: &[String]) -> String {
    if items.is_empty() {
        "n/a".into()
    } else {
        items.join(",")
    }
}

/// A token as Nomad's `acl token info` prints it.
fn token_page(t: &AclToken) -> String {
    kv(&[
        ("Accessor ID", t.accessor_id.clone()),
        ("Secret ID", t.secret_id.clone()),
        ("Name", t.name.clone()),
        ("Type", t.r#type.clone()),
        ("Global", t.global.to_string()),
        ("Create Time", rfc3339(t.create_time)),
        ("Expiry Time", "<none>".into()),
        ("Create Index", t.create_revision.to_string()),
        ("Modify Index", t.modify_revision.to_string()),
        ("Policies", or_na(&t.policies)),
        ("Roles", "n/a".into()),
    ])
}

fn read_rules(file: &PathBuf) -> Result<String> {
    let read = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    };
    read.map_err(|e| CliError::Usage(format!("Error reading policy file {}: {e}", file.display())))
}

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: AclCommand) -> Result<u8> {
    match cmd {
        AclCommand::Bootstrap => {
            let token = api.acl_bootstrap().await?;
            ui.output(token_page(&token));
        }
        AclCommand::Policy(PolicyCommand::Apply {
            description,
            name,
            file,
        }) => {
            let rules = read_rules(&file)?;
            api.upsert_acl_policy(AclPolicy {
                name: name.clone(),
                description,
                rules,
                ..Default::default()
            })
            .await?;
            ui.output(format!("Successfully wrote {name:?} ACL policy!"));
        }
        AclCommand::Policy(PolicyCommand::List { format }) if format.wanted() => {
            let call = NomadCall::get("/v1/acl/policies");
            return super::print_json(api, ui, &format, "Error listing ACL policies", call).await;
        }
        AclCommand::Policy(PolicyCommand::List { .. }) => {
            let policies = api.acl_policies().await?;
            if policies.is_empty() {
                ui.output("No policies found");
            } else {
                let mut rows = vec![vec!["Name".to_string(), "Description".to_string()]];
                rows.extend(policies.into_iter().map(|p| vec![p.name, p.description]));
                ui.output(table(rows));
            }
        }
        AclCommand::Policy(PolicyCommand::Info { name }) => {
            let p = api.acl_policy(&name).await?;
            let head = kv(&[
                ("Name", p.name.clone()),
                ("Description", p.description.clone()),
                ("CreateIndex", p.create_revision.to_string()),
                ("ModifyIndex", p.modify_revision.to_string()),
            ]);
            ui.output(format!("{head}\n\nRules\n\n{}", p.rules.trim_end()));
        }
        AclCommand::Policy(PolicyCommand::Delete { name }) => {
            api.delete_acl_policy(&name).await?;
            ui.output(format!("Successfully deleted {name:?} ACL policy!"));
        }
        AclCommand::Token(TokenCommand::Create {
            name,
            token_type,
            policies,
            global,
        }) => {
            let token = api
                .upsert_acl_token(AclToken {
                    name,
                    r#type: token_type,
                    policies,
                    global,
                    ..Default::default()
                })
                .await?;
            ui.output(token_page(&token));
        }
        AclCommand::Token(TokenCommand::List { format }) if format.wanted() => {
            let call = NomadCall::get("/v1/acl/tokens");
            return super::print_json(api, ui, &format, "Error listing tokens", call).await;
        }
        AclCommand::Token(TokenCommand::List { .. }) => {
            let tokens = api.acl_tokens().await?;
            if tokens.is_empty() {
                ui.output("No tokens found");
            } else {
                let mut rows = vec![vec![
                    "Name".to_string(),
                    "Type".to_string(),
                    "Global".to_string(),
                    "Accessor ID".to_string(),
                    "Expired".to_string(),
                ]];
                rows.extend(tokens.into_iter().map(|t| {
                    vec![
                        t.name,
                        t.r#type,
                        t.global.to_string(),
                        t.accessor_id,
                        "false".to_string(),
                    ]
                }));
                ui.output(table(rows));
            }
        }
        AclCommand::Token(TokenCommand::Info { accessor }) => {
            let token = api.acl_token(&accessor).await?;
            ui.output(token_page(&token));
        }
        AclCommand::Token(TokenCommand::Own) => {
            let token = api.own_acl_token().await?;
            ui.output(token_page(&token));
        }
        AclCommand::Token(TokenCommand::Delete { accessor }) => {
            api.delete_acl_token(&accessor).await?;
            ui.output(format!("Token {accessor} successfully deleted"));
        }
    }
    Ok(0)
}

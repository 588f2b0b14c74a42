//! The parts of Nomad's job specification Caravan refuses, with the reason each is refused.
//!
//! A job that carries any of them, with a value that means something (not null, empty or
//! zero, which Nomad's API sends for every field left out), is refused naming it: running
//! the job without it would silently lose what the operator asked for. One list serves the
//! HCL decoder, the JSON conversion and `docs/nomad-compatibility.md`.

/// One refused part of the job specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// Where it is written: `job`, `group`, `task`, `resources`, `network`, `port`, `restart`,
    /// `ephemeral_disk`.
    pub within: &'static str,
    /// Its name in Nomad's JSON (`Services`).
    pub json: &'static str,
    /// Its name in an HCL job file (`service`).
    pub hcl: &'static str,
    /// Why Caravan cannot honour it.
    pub why: &'static str,
}

const fn r(
    within: &'static str,
    json: &'static str,
    hcl: &'static str,
    why: &'static str,
) -> Refused {
    Refused {
        within,
        json,
        hcl,
        why,
    }
}

const NO_CONSUL: &str = "Caravan has no Consul integration";
const NO_VAULT: &str = "Caravan has no Vault integration";
const NO_CSI: &str = "Caravan has no CSI plugins";
const NO_CNI: &str = "Caravan's group networks (host, bridge, none) take no CNI networks of the job's own, devices or fixed addresses";

/// Everything of Nomad's job specification Caravan refuses.
pub const REFUSED: &[Refused] = &[
    r(
        "job",
        "Multiregion",
        "multiregion",
        "Caravan runs a single region",
    ),
    r("job", "ConsulToken", "consul_token", NO_CONSUL),
    r("job", "ConsulNamespace", "consul_namespace", NO_CONSUL),
    r("job", "VaultToken", "vault_token", NO_VAULT),
    r("job", "VaultNamespace", "vault_namespace", NO_VAULT),
    r("job", "Consul", "consul", NO_CONSUL),
    r(
        "job",
        "Identity",
        "identity",
        "Caravan issues workload identities to tasks (a task's identity block), not to jobs",
    ),
    r("group", "Consul", "consul", NO_CONSUL),
    r("group", "CSIPlugin", "csi_plugin", NO_CSI),
    r(
        "group",
        "MaxRunDuration",
        "max_run_duration",
        "Caravan's clients do not stop allocations after a maximum run time",
    ),
    r(
        "group",
        "PreventRescheduleOnLost",
        "prevent_reschedule_on_lost",
        "Caravan always reschedules the allocations of a lost node",
    ),
    r("task", "Vault", "vault", NO_VAULT),
    r("task", "Consul", "consul", NO_CONSUL),
    r("task", "CSIPluginConfig", "csi_plugin", NO_CSI),
    r(
        "task",
        "ScalingPolicies",
        "scaling",
        "Caravan has no vertical autoscaling of tasks",
    ),
    r(
        "task",
        "Actions",
        "action",
        "Caravan's clients do not run task actions",
    ),
    r(
        "task",
        "Schedule",
        "schedule",
        "Caravan's clients do not run tasks on a time schedule",
    ),
    r("task", "Secrets", "secret", NO_VAULT),
    r(
        "task",
        "Kind",
        "kind",
        "Caravan has no Consul Connect sidecars or gateways",
    ),
    r(
        "restart",
        "RenderTemplates",
        "render_templates",
        "Caravan's clients render a task's templates again only when what they read changes, not on a restart",
    ),
    r(
        "resources",
        "SecretsMB",
        "secrets",
        "Caravan's clients do not size the secrets directory",
    ),
    r(
        "resources",
        "NUMA",
        "numa",
        "Caravan's clients do not pin tasks to NUMA nodes",
    ),
    r("network", "Device", "device", NO_CNI),
    r("network", "CIDR", "cidr", NO_CNI),
    r("network", "IP", "ip", NO_CNI),
    r("network", "CNI", "cni", NO_CNI),
    r(
        "ephemeral_disk",
        "Sticky",
        "sticky",
        "Caravan places a replacement without regard to its previous allocation's node or data",
    ),
    r(
        "ephemeral_disk",
        "Migrate",
        "migrate",
        "Caravan's clients do not move an allocation's data to its replacement",
    ),
    r(
        "port",
        "IgnoreCollision",
        "ignore_collision",
        "Caravan never gives two allocations one host port",
    ),
];

/// The refusal of a part found by its JSON name, within a kind of block.
pub(crate) fn by_json(within: &str, json: &str) -> Option<&'static Refused> {
    REFUSED
        .iter()
        .find(|r| r.within == within && r.json == json)
}

/// The refusal of a part found by its HCL name (the reason is the same wherever it is).
pub(crate) fn by_hcl(hcl: &str) -> Option<&'static Refused> {
    REFUSED.iter().find(|r| r.hcl == hcl)
}

/// `csi_plugin (CSIPluginConfig) is not supported by Caravan: <why>`.
pub(crate) fn message(r: &Refused) -> String {
    if r.hcl.eq_ignore_ascii_case(r.json) {
        format!("{} is not supported by Caravan: {}", r.hcl, r.why)
    } else {
        format!(
            "{} ({}) is not supported by Caravan: {}",
            r.hcl, r.json, r.why
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_is_found_by_both_names() {
        for r in REFUSED {
            assert!(by_hcl(r.hcl).is_some(), "{r:?}");
            assert_eq!(by_json(r.within, r.json), Some(r));
            assert!(!r.why.is_empty(), "{r:?}");
        }
    }

    #[test]
    fn the_message_names_both_spellings() {
        let m = message(by_json("task", "Vault").expect("listed"));
        assert_eq!(
            m,
            "vault is not supported by Caravan: Caravan has no Vault integration"
        );
        let m = message(by_json("task", "CSIPluginConfig").expect("listed"));
        assert_eq!(
            m,
            "csi_plugin (CSIPluginConfig) is not supported by Caravan: Caravan has no CSI plugins"
        );
    }
}

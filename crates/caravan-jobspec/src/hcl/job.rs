//! The `job` and `group` blocks of a Nomad job file, and the blocks both levels share
//! (placement rules, update, reschedule, migrate, restart).

use super::body::{BlockRef, Body, Diag};
use super::schema;
use super::task::{decode_network, decode_task, labeled_list, normalize_vault};
use crate::nomad_json::model::*;
use std::collections::BTreeMap;

/// Nomad job arguments Caravan refuses (see [`crate::refused`]).
const JOB_REFUSED_ATTRS: &[&str] = &["consul_token", "vault_token"];
/// Nomad job blocks Caravan refuses; the others it refuses are decoded into Nomad's JSON
/// and refused at conversion, as a JSON job's are.
const JOB_REFUSED_BLOCKS: &[&str] = &["consul", "identity"];
/// Nomad group blocks Caravan refuses without decoding them.
const GROUP_REFUSED_BLOCKS: &[&str] = &["csi_plugin"];

/// Decodes a `job "id" { ... }` block.
pub(crate) fn decode_job<'a>(
    block: &BlockRef<'a>,
    parent: &Body<'a, '_>,
    diag: &mut Diag,
) -> ApiJob {
    let label = parent.label(block, diag).unwrap_or_default();
    let mut b = parent.child(block, format!("job {label:?}"));
    let meta = b.string_map("meta", diag).map(to_map);
    // A job-level `task` is a group of that one task, named after it, listed first (as
    // Nomad's shorthand does).
    let shorthand: Vec<ApiTaskGroup> = b
        .blocks("task")
        .into_iter()
        .map(|t| {
            let task = decode_task(&t, &b, diag);
            ApiTaskGroup {
                name: task.name.clone(),
                tasks: Some(vec![task]),
                ..Default::default()
            }
        })
        .collect();
    // A job-level `vault` and `secret`s are every task's (as Nomad's parser spreads them).
    let vault = schema::single(&mut b, "vault", schema::VAULT, diag).map(normalize_vault);
    let secrets = labeled_list(&mut b, "secret", schema::SECRET, diag);
    let mut job = ApiJob {
        ui: schema::single(&mut b, "ui", schema::UI, diag)
            .and_then(|ui| serde_json::from_value(ui).ok()),
        multiregion: schema::single(&mut b, "multiregion", schema::MULTIREGION, diag),
        region: b.string("region", diag),
        namespace: b.string("namespace", diag),
        // As Nomad: the `id` argument wins over the label, and the name is the label.
        name: b.string("name", diag).or_else(|| Some(label.clone())),
        id: b.string("id", diag).or(Some(label)),
        r#type: b.string("type", diag),
        priority: b.int("priority", diag),
        all_at_once: b.bool("all_at_once", diag),
        datacenters: b.string_list("datacenters", diag),
        node_pool: b.string("node_pool", diag),
        constraints: decode_constraints(&mut b, diag),
        affinities: decode_affinities(&mut b, diag),
        spreads: decode_spreads(&mut b, diag),
        update: b
            .single_block("update", diag)
            .map(|blk| decode_update(&blk, &b, diag)),
        periodic: b
            .single_block("periodic", diag)
            .map(|blk| decode_periodic(&blk, &b, diag)),
        parameterized_job: b
            .single_block("parameterized", diag)
            .map(|blk| decode_parameterized(&blk, &b, diag)),
        reschedule: b
            .single_block("reschedule", diag)
            .map(|blk| decode_reschedule(&blk, &b, diag)),
        migrate: b
            .single_block("migrate", diag)
            .map(|blk| decode_migrate(&blk, &b, diag)),
        meta,
        task_groups: Some(
            b.blocks("group")
                .into_iter()
                .map(|g| decode_group(&g, &b, diag))
                .collect(),
        ),
        ..Default::default()
    };
    if !shorthand.is_empty() {
        let mut groups = shorthand;
        groups.extend(job.task_groups.take().unwrap_or_default());
        job.task_groups = Some(groups);
    }
    for group in job.task_groups.iter_mut().flatten() {
        inherit(
            group.tasks.iter_mut().flatten(),
            vault.as_ref(),
            secrets.as_ref(),
        );
    }
    b.finish(JOB_REFUSED_ATTRS, JOB_REFUSED_BLOCKS, diag);
    job
}

/// Gives tasks without their own `vault` the enclosing one, and adds the enclosing
/// `secret`s to theirs.
fn inherit<'t>(
    tasks: impl Iterator<Item = &'t mut ApiTask>,
    vault: Option<&serde_json::Value>,
    secrets: Option<&serde_json::Value>,
) {
    for task in tasks {
        if task.vault.is_none() {
            task.vault = vault.cloned();
        }
        if let Some(serde_json::Value::Array(extra)) = secrets {
            match &mut task.secrets {
                Some(serde_json::Value::Array(own)) => own.extend(extra.iter().cloned()),
                _ => task.secrets = secrets.cloned(),
            }
        }
    }
}

fn decode_group<'a>(block: &BlockRef<'a>, job: &Body<'a, '_>, diag: &mut Diag) -> ApiTaskGroup {
    let name = job.label(block, diag).unwrap_or_default();
    let mut b = job.child(block, format!("{}: group {name:?}", job.path()));
    let vault = schema::single(&mut b, "vault", schema::VAULT, diag).map(normalize_vault);
    let secrets = labeled_list(&mut b, "secret", schema::SECRET, diag);
    let volumes = schema::labeled(&mut b, "volume", schema::VOLUME, "Name", diag);
    let meta = b.string_map("meta", diag).map(to_map);
    let scaling = b
        .single_block("scaling", diag)
        .map(|blk| decode_scaling(&blk, &b, diag));
    let networks: Vec<ApiNetwork> = b
        .blocks("network")
        .into_iter()
        .map(|n| decode_network(&n, &b, &b.field_path("network"), diag))
        .collect();
    let mut group = ApiTaskGroup {
        services: schema::list(&mut b, "service", schema::SERVICE, diag),
        volumes: (!volumes.is_empty()).then(|| {
            serde_json::Value::Object(
                volumes
                    .into_iter()
                    .map(|(k, v)| (k, serde_json::Value::Object(v)))
                    .collect(),
            )
        }),
        consul: schema::single(&mut b, "consul", schema::CONSUL, diag),
        name: Some(name),
        count: b.int("count", diag),
        constraints: decode_constraints(&mut b, diag),
        affinities: decode_affinities(&mut b, diag),
        spreads: decode_spreads(&mut b, diag),
        restart_policy: b
            .single_block("restart", diag)
            .map(|blk| decode_restart(&blk, &b, diag)),
        reschedule_policy: b
            .single_block("reschedule", diag)
            .map(|blk| decode_reschedule(&blk, &b, diag)),
        migrate: b
            .single_block("migrate", diag)
            .map(|blk| decode_migrate(&blk, &b, diag)),
        update: b
            .single_block("update", diag)
            .map(|blk| decode_update(&blk, &b, diag)),
        ephemeral_disk: b.single_block("ephemeral_disk", diag).map(|blk| {
            let mut d = b.child(&blk, b.field_path("ephemeral_disk"));
            let disk = ApiEphemeralDisk {
                sticky: d.bool("sticky", diag),
                migrate: d.bool("migrate", diag),
                size_mb: d.int("size", diag),
            };
            d.finish(&[], &[], diag);
            disk
        }),
        disconnect: b.single_block("disconnect", diag).map(|blk| {
            let mut d = b.child(&blk, b.field_path("disconnect"));
            let disconnect = ApiDisconnect {
                lost_after: d.duration("lost_after", diag),
                stop_on_client_after: d.duration("stop_on_client_after", diag),
                replace: d.bool("replace", diag),
                reconcile: d.string("reconcile", diag),
            };
            d.finish(&[], &[], diag);
            disconnect
        }),
        networks: (!networks.is_empty()).then_some(networks),
        meta,
        shutdown_delay: b.duration("shutdown_delay", diag),
        max_run_duration: b.duration("max_run_duration", diag),
        stop_after_client_disconnect: b.duration("stop_after_client_disconnect", diag),
        max_client_disconnect: b.duration("max_client_disconnect", diag),
        prevent_reschedule_on_lost: b.bool("prevent_reschedule_on_lost", diag),
        scaling,
        tasks: Some(
            b.blocks("task")
                .into_iter()
                .map(|t| decode_task(&t, &b, diag))
                .collect(),
        ),
    };
    inherit(
        group.tasks.iter_mut().flatten(),
        vault.as_ref(),
        secrets.as_ref(),
    );
    b.finish(&[], GROUP_REFUSED_BLOCKS, diag);
    group
}

/// A group's `scaling` block in Nomad's JSON shape: bounds, `enabled`,
/// `type`, and the autoscaler's free-form `policy`.
fn decode_scaling<'a>(
    block: &BlockRef<'a>,
    parent: &Body<'a, '_>,
    diag: &mut Diag,
) -> serde_json::Value {
    let mut b = parent.child(block, parent.field_path("scaling"));
    let mut out = serde_json::Map::new();
    if let Some(min) = b.int("min", diag) {
        out.insert("Min".into(), min.into());
    }
    if let Some(max) = b.int("max", diag) {
        out.insert("Max".into(), max.into());
    }
    if let Some(enabled) = b.bool("enabled", diag) {
        out.insert("Enabled".into(), enabled.into());
    }
    if let Some(kind) = b.string("type", diag) {
        out.insert("Type".into(), kind.into());
    }
    if let Some(policy) = b.single_block("policy", diag) {
        let policy = b.child(&policy, b.field_path("policy")).free_form(diag);
        out.insert("Policy".into(), serde_json::Value::Object(policy));
    }
    b.finish(&[], &[], diag);
    serde_json::Value::Object(out)
}

pub(crate) fn to_map(pairs: Vec<(String, String)>) -> BTreeMap<String, String> {
    pairs.into_iter().collect()
}

/// Operators that may be written as their own argument: `regexp = "..."` instead of
/// `operator = "regexp"` and `value = "..."`.
const SHORTHAND_OPERATORS: &[&str] = &[
    "regexp",
    "version",
    "semver",
    "set_contains",
    "set_contains_any",
    "set_contains_all",
];

/// Reads attribute/operator/value of a constraint or affinity, with Nomad's shorthands.
/// Returns `None` for `distinct_hosts = false`, which Nomad drops.
fn decode_rule(
    b: &mut Body<'_, '_>,
    diag: &mut Diag,
    allow_distinct: bool,
) -> Option<(String, String, String)> {
    let mut l_target = b.string("attribute", diag).unwrap_or_default();
    let mut r_target = b.string("value", diag).unwrap_or_default();
    let mut operand = b.string("operator", diag);
    for op in SHORTHAND_OPERATORS {
        if let Some(v) = b.string(op, diag) {
            set_operand(op, b, diag, &mut operand);
            r_target = v;
        }
    }
    if allow_distinct {
        if let Some(enabled) = b.bool("distinct_hosts", diag) {
            if !enabled {
                return None;
            }
            set_operand("distinct_hosts", b, diag, &mut operand);
        }
        if let Some(property) = b.string("distinct_property", diag) {
            set_operand("distinct_property", b, diag, &mut operand);
            l_target = property;
        }
    }
    Some((
        l_target,
        r_target,
        operand.unwrap_or_else(|| "=".to_string()),
    ))
}

fn decode_constraints(parent: &mut Body<'_, '_>, diag: &mut Diag) -> Option<Vec<ApiConstraint>> {
    let blocks = parent.blocks("constraint");
    let mut out = Vec::new();
    for (i, blk) in blocks.into_iter().enumerate() {
        let mut b = parent.child(&blk, parent.field_path(&format!("constraint[{i}]")));
        if !blk.labels.is_empty() {
            b.error_at("", "constraint blocks take no labels", blk.span(), diag);
        }
        if let Some((l, r, op)) = decode_rule(&mut b, diag, true) {
            out.push(ApiConstraint {
                l_target: Some(l),
                r_target: Some(r),
                operand: Some(op),
            });
        }
        b.finish(&[], &[], diag);
    }
    (!out.is_empty()).then_some(out)
}

fn decode_affinities(parent: &mut Body<'_, '_>, diag: &mut Diag) -> Option<Vec<ApiAffinity>> {
    let blocks = parent.blocks("affinity");
    let mut out = Vec::new();
    for (i, blk) in blocks.into_iter().enumerate() {
        let mut b = parent.child(&blk, parent.field_path(&format!("affinity[{i}]")));
        let weight = b.int("weight", diag);
        if let Some((l, r, op)) = decode_rule(&mut b, diag, false) {
            out.push(ApiAffinity {
                l_target: Some(l),
                r_target: Some(r),
                operand: Some(op),
                weight,
            });
        }
        b.finish(&[], &[], diag);
    }
    (!out.is_empty()).then_some(out)
}

fn decode_spreads(parent: &mut Body<'_, '_>, diag: &mut Diag) -> Option<Vec<ApiSpread>> {
    let blocks = parent.blocks("spread");
    let mut out = Vec::new();
    for (i, blk) in blocks.into_iter().enumerate() {
        let mut b = parent.child(&blk, parent.field_path(&format!("spread[{i}]")));
        let attribute = b.string("attribute", diag);
        let weight = b.int("weight", diag);
        let mut targets = Vec::new();
        for t in b.blocks("target") {
            let Some(value) = b.label(&t, diag) else {
                continue;
            };
            let mut tb = b.child(&t, b.field_path(&format!("target {value:?}")));
            targets.push(ApiSpreadTarget {
                value: Some(value),
                percent: tb.int("percent", diag),
            });
            tb.finish(&[], &[], diag);
        }
        out.push(ApiSpread {
            attribute,
            weight,
            spread_target: (!targets.is_empty()).then_some(targets),
        });
        b.finish(&[], &[], diag);
    }
    (!out.is_empty()).then_some(out)
}

fn decode_update<'a>(
    block: &BlockRef<'a>,
    parent: &Body<'a, '_>,
    diag: &mut Diag,
) -> ApiUpdateStrategy {
    let mut b = parent.child(block, parent.field_path("update"));
    let update = ApiUpdateStrategy {
        stagger: b.duration("stagger", diag),
        max_parallel: b.int("max_parallel", diag),
        health_check: b.string("health_check", diag),
        min_healthy_time: b.duration("min_healthy_time", diag),
        healthy_deadline: b.duration("healthy_deadline", diag),
        progress_deadline: b.duration("progress_deadline", diag),
        canary: b.int("canary", diag),
        auto_revert: b.bool("auto_revert", diag),
        auto_promote: b.bool("auto_promote", diag),
    };
    b.finish(&[], &[], diag);
    update
}

fn decode_periodic<'a>(
    block: &BlockRef<'a>,
    parent: &Body<'a, '_>,
    diag: &mut Diag,
) -> ApiPeriodic {
    let mut b = parent.child(block, parent.field_path("periodic"));
    let cron = b.string("cron", diag);
    let crons = b.string_list("crons", diag);
    if cron.is_some() && crons.is_some() {
        b.error_at("crons", "set either cron or crons, not both", None, diag);
    }
    let spec = match (cron, crons) {
        (Some(one), _) => Some(OneOrMany::One(one)),
        (None, Some(many)) => Some(OneOrMany::Many(many)),
        (None, None) => None,
    };
    let periodic = ApiPeriodic {
        enabled: b.bool("enabled", diag),
        spec,
        specs: None,
        spec_type: None,
        prohibit_overlap: b.bool("prohibit_overlap", diag),
        time_zone: b.string("time_zone", diag),
    };
    b.finish(&[], &[], diag);
    periodic
}

fn decode_parameterized<'a>(
    block: &BlockRef<'a>,
    parent: &Body<'a, '_>,
    diag: &mut Diag,
) -> ApiParameterized {
    let mut b = parent.child(block, parent.field_path("parameterized"));
    let p = ApiParameterized {
        payload: b.string("payload", diag),
        meta_required: b.string_list("meta_required", diag),
        meta_optional: b.string_list("meta_optional", diag),
    };
    b.finish(&[], &[], diag);
    p
}

pub(crate) fn decode_reschedule<'a>(
    block: &BlockRef<'a>,
    parent: &Body<'a, '_>,
    diag: &mut Diag,
) -> ApiReschedulePolicy {
    let mut b = parent.child(block, parent.field_path("reschedule"));
    let r = ApiReschedulePolicy {
        attempts: b.int("attempts", diag),
        interval: b.duration("interval", diag),
        delay: b.duration("delay", diag),
        delay_function: b.string("delay_function", diag),
        max_delay: b.duration("max_delay", diag),
        unlimited: b.bool("unlimited", diag),
    };
    b.finish(&[], &[], diag);
    r
}

fn decode_migrate<'a>(
    block: &BlockRef<'a>,
    parent: &Body<'a, '_>,
    diag: &mut Diag,
) -> ApiMigrateStrategy {
    let mut b = parent.child(block, parent.field_path("migrate"));
    let m = ApiMigrateStrategy {
        max_parallel: b.int("max_parallel", diag),
        health_check: b.string("health_check", diag),
        min_healthy_time: b.duration("min_healthy_time", diag),
        healthy_deadline: b.duration("healthy_deadline", diag),
    };
    b.finish(&[], &[], diag);
    m
}

/// Decodes a `restart` block (groups and tasks have one).
pub(crate) fn decode_restart<'a>(
    block: &BlockRef<'a>,
    parent: &Body<'a, '_>,
    diag: &mut Diag,
) -> ApiRestartPolicy {
    let mut b = parent.child(block, parent.field_path("restart"));
    let r = ApiRestartPolicy {
        attempts: b.int("attempts", diag),
        interval: b.duration("interval", diag),
        delay: b.duration("delay", diag),
        mode: b.string("mode", diag),
        render_templates: b.bool("render_templates", diag),
        on_success: b.bool("on_success", diag),
    };
    b.finish(&[], &[], diag);
    r
}

fn set_operand(op: &str, b: &Body<'_, '_>, diag: &mut Diag, operand: &mut Option<String>) {
    if let Some(existing) = operand.as_deref() {
        b.error_at(
            op,
            &format!("conflicts with operator {existing:?}: set only one"),
            None,
            diag,
        );
    }
    *operand = Some(op.to_string());
}

/// Decodes the constraints of any body (tasks and devices have them too).
pub(crate) fn constraints_of(b: &mut Body<'_, '_>, diag: &mut Diag) -> Option<Vec<ApiConstraint>> {
    decode_constraints(b, diag)
}

/// Decodes the affinities of any body.
pub(crate) fn affinities_of(b: &mut Body<'_, '_>, diag: &mut Diag) -> Option<Vec<ApiAffinity>> {
    decode_affinities(b, diag)
}

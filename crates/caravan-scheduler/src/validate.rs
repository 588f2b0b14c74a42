//! Placement-rule validation: the constraint, affinity and spread blocks of a
//! job at job, group and task level, checked the way the scheduler will read
//! them, so a bad operand is refused at registration and never reaches a node.
//!
//! The shape of a job (ids, counts, resources, drivers, policies) is
//! `caravan_jobspec::validate`'s. Every problem is reported, each naming its
//! field in jobspec's style: `group "web": task "app": constraint[0]: value`.

use std::collections::BTreeSet;

use caravan_proto::{Affinity, Constraint, Job, Spread, Task, TaskGroup};

use crate::error::{ValidationError, ValidationErrors};
use crate::feasible::{CompileError, Compiled, Operator, target};

/// Validates a job's placement rules; the error lists every problem found.
pub fn validate_job(job: &Job) -> Result<(), ValidationErrors> {
    let mut e = Errors::default();
    level(&job.constraints, &job.affinities, &job.spreads, "", &mut e);
    for (group_index, tg) in job.task_groups.iter().enumerate() {
        let group = group_base(tg, group_index);
        level(&tg.constraints, &tg.affinities, &tg.spreads, &group, &mut e);
        for (task_index, task) in tg.tasks.iter().enumerate() {
            let task_at = join(&group, &task_base(task, task_index));
            level(&task.constraints, &task.affinities, &[], &task_at, &mut e);
        }
    }
    if e.0.is_empty() {
        Ok(())
    } else {
        Err(ValidationErrors(e.0))
    }
}

/// Why the scheduler refuses to place a stored job, if it does: its type is
/// not one it schedules, or a placement rule is invalid.
pub(crate) fn refusal(job: &Job) -> Option<String> {
    if !crate::feasible::schedulable_type(job) {
        return Some("invalid job: type: must be service, batch, system or sysbatch".into());
    }
    validate_job(job).err().map(|e| format!("invalid job: {e}"))
}

#[derive(Default)]
struct Errors(Vec<ValidationError>);

impl Errors {
    /// An error on `field` of the block at `block`.
    fn on(&mut self, block: &str, field: &str, message: impl Into<String>) {
        self.0
            .push(ValidationError::new(join(block, field), message));
    }
}

fn join(base: &str, field: &str) -> String {
    if base.is_empty() {
        field.to_string()
    } else {
        format!("{base}: {field}")
    }
}

fn group_base(tg: &TaskGroup, index: usize) -> String {
    if tg.name.is_empty() {
        format!("group #{}", index + 1)
    } else {
        format!("group {:?}", tg.name)
    }
}

fn task_base(task: &Task, index: usize) -> String {
    if task.name.is_empty() {
        format!("task #{}", index + 1)
    } else {
        format!("task {:?}", task.name)
    }
}

fn level(
    constraints: &[Constraint],
    affinities: &[Affinity],
    spreads: &[Spread],
    base: &str,
    e: &mut Errors,
) {
    for (i, c) in constraints.iter().enumerate() {
        constraint(c, &join(base, &format!("constraint[{i}]")), e);
    }
    for (i, a) in affinities.iter().enumerate() {
        affinity(a, &join(base, &format!("affinity[{i}]")), e);
    }
    for (i, s) in spreads.iter().enumerate() {
        spread(s, &join(base, &format!("spread[{i}]")), e);
    }
}

/// Checks what every operator needs of its targets; `None` when the operator
/// is unknown (reported by the caller, which knows the block kind).
fn operands(l: &str, op: &str, r: &str, at: &str, e: &mut Errors) -> Option<Operator> {
    let parsed = Operator::parse(op)?;
    if !target::is_known_interpolation(l) {
        e.on(at, "attribute", format!("unknown interpolation {l:?}"));
    }
    if !target::is_known_interpolation(r) {
        e.on(at, "value", format!("unknown interpolation {r:?}"));
    }
    if parsed != Operator::DistinctHosts && l.is_empty() {
        e.on(at, "attribute", "missing attribute");
    }
    match parsed {
        Operator::SetContainsAll | Operator::SetContainsAny if r.is_empty() => {
            e.on(
                at,
                "value",
                format!("operator {op:?} needs a set of values"),
            );
        }
        Operator::Eq | Operator::Ne | Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge
            if r.is_empty() =>
        {
            let shown = if op.is_empty() { "=" } else { op };
            e.on(at, "value", format!("operator {shown:?} needs a value"));
        }
        Operator::IsSet | Operator::IsNotSet if !r.is_empty() => {
            e.on(at, "value", format!("operator {op:?} takes no value"));
        }
        _ => {}
    }
    // Regexps, version requirements and limits with literal values are compiled
    // here exactly as the scheduler compiles them.
    if let Err(err) = Compiled::new(l, r, op) {
        match err {
            CompileError::Operator(_) => {}
            other => e.on(at, "value", other.to_string()),
        }
    }
    Some(parsed)
}

fn constraint(c: &Constraint, at: &str, e: &mut Errors) {
    if operands(&c.l_target, &c.operand, &c.r_target, at, e).is_none() {
        e.on(
            at,
            "operator",
            format!("unknown constraint operator {:?}", c.operand),
        );
    }
}

fn affinity(a: &Affinity, at: &str, e: &mut Errors) {
    match operands(&a.l_target, &a.operand, &a.r_target, at, e) {
        Some(
            Operator::IsSet
            | Operator::IsNotSet
            | Operator::DistinctHosts
            | Operator::DistinctProperty,
        )
        | None => e.on(
            at,
            "operator",
            format!("unknown affinity operator {:?}", a.operand),
        ),
        Some(_) => {}
    }
    if a.weight == 0 {
        e.on(at, "weight", "must not be zero");
    } else if !(-100..=100).contains(&a.weight) {
        e.on(
            at,
            "weight",
            format!("must be between -100 and 100 (got {})", a.weight),
        );
    }
}

fn spread(s: &Spread, at: &str, e: &mut Errors) {
    if s.attribute.is_empty() {
        e.on(at, "attribute", "missing attribute");
    } else if !s.attribute.starts_with("${") || !target::is_known_interpolation(&s.attribute) {
        e.on(
            at,
            "attribute",
            format!("{:?} is not a node interpolation", s.attribute),
        );
    }
    if !(0..=100).contains(&s.weight) {
        e.on(
            at,
            "weight",
            format!("must be between 0 and 100 (got {})", s.weight),
        );
    }
    let mut seen = BTreeSet::new();
    let mut sum = 0u64;
    for t in &s.targets {
        let target_at = join(at, &format!("target {:?}", t.value));
        if !seen.insert(t.value.as_str()) {
            e.on(&target_at, "value", "defined twice");
        }
        if t.percent > 100 {
            e.on(
                &target_at,
                "percent",
                format!("must be between 0 and 100 (got {})", t.percent),
            );
        }
        sum += u64::from(t.percent);
    }
    if sum > 100 {
        e.on(
            at,
            "target",
            format!("percentages add up to {sum}, more than 100"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::SpreadTarget;

    fn job() -> Job {
        Job {
            id: "j".into(),
            task_groups: vec![TaskGroup {
                name: "web".into(),
                count: 1,
                tasks: vec![Task {
                    name: "app".into(),
                    driver: "exec".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn c(l: &str, op: &str, r: &str) -> Constraint {
        Constraint {
            l_target: l.into(),
            r_target: r.into(),
            operand: op.into(),
        }
    }

    fn a(l: &str, op: &str, r: &str, weight: i32) -> Affinity {
        Affinity {
            l_target: l.into(),
            r_target: r.into(),
            operand: op.into(),
            weight,
        }
    }

    fn fields(j: &Job) -> Vec<String> {
        match validate_job(j) {
            Ok(()) => Vec::new(),
            Err(errs) => errs.0.into_iter().map(|e| e.field).collect(),
        }
    }

    /// A change to a valid job, and the one field it breaks.
    type Breakage = (fn(&mut Job), &'static str);

    fn constraint_breakages() -> Vec<Breakage> {
        vec![
            (
                |j| j.constraints.push(c("${attr.a}", "regexp", "([")),
                "constraint[0]: value",
            ),
            (
                |j| {
                    j.task_groups[0]
                        .constraints
                        .push(c("${attr.a}", "version", ">= nope"))
                },
                "group \"web\": constraint[0]: value",
            ),
            (
                |j| {
                    j.task_groups[0].tasks[0]
                        .constraints
                        .push(c("${attr.a}", "semver", "1.2"))
                },
                "group \"web\": task \"app\": constraint[0]: value",
            ),
            (
                |j| j.constraints.push(c("${attr.a}", "like", "x")),
                "constraint[0]: operator",
            ),
            (
                |j| j.constraints.push(c("${attr.a}", "set_contains_any", "")),
                "constraint[0]: value",
            ),
            (
                |j| j.constraints.push(c("${attr.a}", "=", "")),
                "constraint[0]: value",
            ),
            (
                |j| j.constraints.push(c("${attr.a}", "is_set", "x")),
                "constraint[0]: value",
            ),
            (
                |j| j.constraints.push(c("", "=", "x")),
                "constraint[0]: attribute",
            ),
            (
                |j| j.constraints.push(c("${bogus.a}", "=", "x")),
                "constraint[0]: attribute",
            ),
            (
                |j| {
                    j.task_groups[0]
                        .constraints
                        .push(c("${meta.rack}", "distinct_property", "0"))
                },
                "group \"web\": constraint[0]: value",
            ),
        ]
    }

    fn affinity_and_spread_breakages() -> Vec<Breakage> {
        vec![
            (
                |j| j.affinities.push(a("${attr.a}", "=", "x", 200)),
                "affinity[0]: weight",
            ),
            (
                |j| {
                    j.task_groups[0]
                        .affinities
                        .push(a("${attr.a}", "=", "x", 0))
                },
                "group \"web\": affinity[0]: weight",
            ),
            (
                |j| {
                    j.task_groups[0].tasks[0].affinities.push(a(
                        "${attr.a}",
                        "distinct_hosts",
                        "",
                        50,
                    ))
                },
                "group \"web\": task \"app\": affinity[0]: operator",
            ),
            (
                |j| {
                    j.spreads.push(Spread {
                        attribute: "${bogus}".into(),
                        weight: 50,
                        targets: vec![],
                    })
                },
                "spread[0]: attribute",
            ),
            (
                |j| {
                    j.task_groups[0].spreads.push(Spread {
                        attribute: String::new(),
                        weight: 50,
                        targets: vec![],
                    })
                },
                "group \"web\": spread[0]: attribute",
            ),
            (
                |j| {
                    j.spreads.push(Spread {
                        attribute: "${node.datacenter}".into(),
                        weight: 101,
                        targets: vec![],
                    })
                },
                "spread[0]: weight",
            ),
        ]
    }

    #[test]
    fn each_rule_names_its_field() {
        assert_eq!(fields(&job()), Vec::<String>::new());
        for (mutate, field) in constraint_breakages()
            .into_iter()
            .chain(affinity_and_spread_breakages())
        {
            let mut j = job();
            mutate(&mut j);
            assert_eq!(fields(&j), vec![field.to_string()]);
        }
    }

    #[test]
    fn spread_targets_must_be_distinct_and_fit_in_100_percent() {
        let mut j = job();
        let t = |v: &str, p: u32| SpreadTarget {
            value: v.into(),
            percent: p,
        };
        j.spreads.push(Spread {
            attribute: "${node.datacenter}".into(),
            weight: 0,
            targets: vec![t("dc1", 70), t("dc2", 20)],
        });
        assert!(validate_job(&j).is_ok(), "weight 0 means the default");
        j.spreads[0].targets.push(t("dc1", 20));
        assert_eq!(
            fields(&j),
            vec![
                "spread[0]: target \"dc1\": value".to_string(),
                "spread[0]: target".to_string()
            ]
        );
    }

    #[test]
    fn every_error_is_reported_and_the_shape_is_not_judged() {
        let mut j = job();
        // Shape problems are jobspec's: none of these is reported here.
        j.id.clear();
        j.priority = 900;
        j.task_groups[0].count = -1;
        j.task_groups[0].tasks[0].driver.clear();
        assert!(validate_job(&j).is_ok());
        j.constraints.push(c("${attr.a}", "regexp", "(["));
        j.task_groups[0]
            .affinities
            .push(a("${attr.a}", "=", "x", -101));
        j.task_groups[0].tasks[0]
            .constraints
            .push(c("${attr.a}", "set_contains", ""));
        let errs = validate_job(&j).unwrap_err();
        assert_eq!(errs.0.len(), 3, "{errs}");
        let text = errs.to_string();
        assert!(
            text.contains("constraint[0]: value: invalid regular expression"),
            "{text}"
        );
        assert!(
            text.contains("group \"web\": affinity[0]: weight: must be between -100 and 100"),
            "{text}"
        );
        assert!(
            text.contains("group \"web\": task \"app\": constraint[0]: value"),
            "{text}"
        );
    }

    #[test]
    fn interpolated_values_are_checked_per_node_not_here() {
        let mut j = job();
        j.constraints
            .push(c("${attr.a}", "regexp", "${meta.pattern}"));
        j.constraints
            .push(c("${attr.a}", "version", "${meta.want}"));
        j.constraints.push(c("", "distinct_hosts", ""));
        j.constraints
            .push(c("${meta.rack}", "distinct_property", ""));
        assert_eq!(fields(&j), Vec::<String>::new());
    }
}

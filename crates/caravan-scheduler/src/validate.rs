//! Job validation: everything the scheduler would trip over is rejected here
//! with an error that names the field.

use std::collections::BTreeSet;

use caravan_proto::{Affinity, Constraint, Job, JobType, Spread};

use crate::error::ValidationError;
use crate::feasible::{Compiled, Operator, target};

/// Largest count of one task group.
pub const MAX_COUNT: i32 = 50_000;

/// Validates a job for scheduling.
pub fn validate_job(job: &Job) -> Result<(), ValidationError> {
    fn err(f: impl Into<String>, m: impl Into<String>) -> ValidationError {
        ValidationError::new(f, m)
    }
    if job.id.is_empty() {
        return Err(err("id", "must not be empty"));
    }
    if job.r#type() == JobType::Unspecified {
        return Err(err("type", "must be service, batch, system or sysbatch"));
    }
    if job.priority != 0 && !(1..=100).contains(&job.priority) {
        return Err(err("priority", "must be between 1 and 100"));
    }
    if job.task_groups.is_empty() {
        return Err(err("task_groups", "a job needs at least one task group"));
    }
    constraints(&job.constraints, "constraints")?;
    affinities(&job.affinities, "affinities")?;
    spreads(&job.spreads, "spreads")?;
    let mut names = BTreeSet::new();
    for (gi, tg) in job.task_groups.iter().enumerate() {
        let at = format!("task_groups[{gi}]");
        if tg.name.is_empty() {
            return Err(err(format!("{at}.name"), "must not be empty"));
        }
        if !names.insert(tg.name.as_str()) {
            return Err(err(
                format!("{at}.name"),
                format!("duplicate task group {:?}", tg.name),
            ));
        }
        if !(0..=MAX_COUNT).contains(&tg.count) {
            return Err(err(
                format!("{at}.count"),
                format!("must be between 0 and {MAX_COUNT}"),
            ));
        }
        if tg.tasks.is_empty() {
            return Err(err(
                format!("{at}.tasks"),
                "a task group needs at least one task",
            ));
        }
        constraints(&tg.constraints, &format!("{at}.constraints"))?;
        affinities(&tg.affinities, &format!("{at}.affinities"))?;
        spreads(&tg.spreads, &format!("{at}.spreads"))?;
        if let Some(p) = &tg.reschedule_policy
            && !p.delay_function.is_empty()
            && !matches!(
                p.delay_function.as_str(),
                "constant" | "exponential" | "fibonacci"
            )
        {
            return Err(err(
                format!("{at}.reschedule_policy.delay_function"),
                "must be constant, exponential or fibonacci",
            ));
        }
        if let Some(u) = &tg.update
            && (u.max_parallel < 0 || u.canary < 0)
        {
            return Err(err(
                format!("{at}.update"),
                "max_parallel and canary must not be negative",
            ));
        }
        let mut task_names = BTreeSet::new();
        for (ti, t) in tg.tasks.iter().enumerate() {
            let tat = format!("{at}.tasks[{ti}]");
            if t.name.is_empty() {
                return Err(err(format!("{tat}.name"), "must not be empty"));
            }
            if !task_names.insert(t.name.as_str()) {
                return Err(err(
                    format!("{tat}.name"),
                    format!("duplicate task {:?}", t.name),
                ));
            }
            if t.driver.is_empty() {
                return Err(err(format!("{tat}.driver"), "must not be empty"));
            }
            constraints(&t.constraints, &format!("{tat}.constraints"))?;
            affinities(&t.affinities, &format!("{tat}.affinities"))?;
            if let Some(r) = &t.resources {
                if r.cores > 0 && r.cpu_mhz > 0 {
                    return Err(err(
                        format!("{tat}.resources"),
                        "cores and cpu are mutually exclusive",
                    ));
                }
                if r.memory_max_mb > 0 && r.memory_max_mb < r.memory_mb {
                    return Err(err(
                        format!("{tat}.resources.memory_max_mb"),
                        "must not be below memory_mb",
                    ));
                }
            }
        }
    }
    Ok(())
}

fn check_targets(l: &str, r: &str, at: &str) -> Result<(), ValidationError> {
    if !target::is_known_interpolation(l) {
        return Err(ValidationError::new(
            format!("{at}.l_target"),
            format!("unknown interpolation {l:?}"),
        ));
    }
    if !target::is_known_interpolation(r) {
        return Err(ValidationError::new(
            format!("{at}.r_target"),
            format!("unknown interpolation {r:?}"),
        ));
    }
    Ok(())
}

fn constraints(list: &[Constraint], at: &str) -> Result<(), ValidationError> {
    for (i, c) in list.iter().enumerate() {
        let at = format!("{at}[{i}]");
        check_targets(&c.l_target, &c.r_target, &at)?;
        let k = Compiled::new(&c.l_target, &c.r_target, &c.operand).map_err(|e| {
            let field = match e {
                crate::feasible::CompileError::Operator(_) => "operand",
                _ => "r_target",
            };
            ValidationError::new(format!("{at}.{field}"), e.to_string())
        })?;
        if !matches!(
            k.op,
            Operator::DistinctHosts | Operator::IsSet | Operator::IsNotSet
        ) && c.l_target.is_empty()
        {
            return Err(ValidationError::new(
                format!("{at}.l_target"),
                "must not be empty",
            ));
        }
    }
    Ok(())
}

fn affinities(list: &[Affinity], at: &str) -> Result<(), ValidationError> {
    for (i, a) in list.iter().enumerate() {
        let at = format!("{at}[{i}]");
        check_targets(&a.l_target, &a.r_target, &at)?;
        let k = Compiled::new(&a.l_target, &a.r_target, &a.operand)
            .map_err(|e| ValidationError::new(format!("{at}.r_target"), e.to_string()))?;
        if k.op.is_distinct() {
            return Err(ValidationError::new(
                format!("{at}.operand"),
                "distinct operators are constraints only",
            ));
        }
        if !(-100..=100).contains(&a.weight) {
            return Err(ValidationError::new(
                format!("{at}.weight"),
                "must be between -100 and 100",
            ));
        }
    }
    Ok(())
}

fn spreads(list: &[Spread], at: &str) -> Result<(), ValidationError> {
    for (i, s) in list.iter().enumerate() {
        let at = format!("{at}[{i}]");
        if s.attribute.is_empty() || !target::is_known_interpolation(&s.attribute) {
            return Err(ValidationError::new(
                format!("{at}.attribute"),
                "must be a node interpolation",
            ));
        }
        if !(0..=100).contains(&s.weight) {
            return Err(ValidationError::new(
                format!("{at}.weight"),
                "must be between 0 and 100",
            ));
        }
        let sum: u64 = s.targets.iter().map(|t| u64::from(t.percent)).sum();
        if sum > 100 {
            return Err(ValidationError::new(
                format!("{at}.targets"),
                "percentages add up to more than 100",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use caravan_proto::{Task, TaskGroup};

    fn job() -> Job {
        Job {
            id: "j".into(),
            r#type: JobType::Service as i32,
            task_groups: vec![TaskGroup {
                name: "g".into(),
                count: 1,
                tasks: vec![Task {
                    name: "t".into(),
                    driver: "exec".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// (mutation, offending field).
    #[test]
    fn bad_jobs_name_the_field() {
        type Mutate = fn(&mut Job);
        let rows: &[(Mutate, &str)] = &[
            (|j| j.priority = 101, "priority"),
            (|j| j.task_groups[0].count = -1, "task_groups[0].count"),
            (
                |j| {
                    j.constraints.push(Constraint {
                        l_target: "${attr.a}".into(),
                        r_target: "([".into(),
                        operand: "regexp".into(),
                    })
                },
                "constraints[0].r_target",
            ),
            (
                |j| {
                    j.task_groups[0].constraints.push(Constraint {
                        l_target: "${attr.a}".into(),
                        r_target: ">= nope".into(),
                        operand: "version".into(),
                    })
                },
                "task_groups[0].constraints[0].r_target",
            ),
            (
                |j| {
                    j.task_groups[0].tasks[0].constraints.push(Constraint {
                        l_target: "${attr.a}".into(),
                        r_target: "1.2".into(),
                        operand: "semver".into(),
                    })
                },
                "task_groups[0].tasks[0].constraints[0].r_target",
            ),
            (
                |j| {
                    j.constraints.push(Constraint {
                        l_target: "${attr.a}".into(),
                        r_target: "x".into(),
                        operand: "like".into(),
                    })
                },
                "constraints[0].operand",
            ),
            (
                |j| {
                    j.affinities.push(Affinity {
                        l_target: "${attr.a}".into(),
                        r_target: "x".into(),
                        operand: "=".into(),
                        weight: 200,
                    })
                },
                "affinities[0].weight",
            ),
            (
                |j| {
                    j.spreads.push(Spread {
                        attribute: "${bogus}".into(),
                        ..Default::default()
                    })
                },
                "spreads[0].attribute",
            ),
            (
                |j| j.task_groups[0].tasks[0].driver.clear(),
                "task_groups[0].tasks[0].driver",
            ),
        ];
        assert!(validate_job(&job()).is_ok());
        for (mutate, field) in rows {
            let mut j = job();
            mutate(&mut j);
            let e = validate_job(&j).unwrap_err();
            assert_eq!(e.field, *field, "{e}");
        }
    }
}

//! `job restart`: a job's running allocations restarted in place (or with
//! `-reschedule`, stopped and replaced) in batches, waiting for each batch,
//! as Nomad's command does: no restart while a deployment is active, a
//! pause or a question between batches, and what to do after an error.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Duration;

use caravan_model::{DeploymentStatusExt, NomadName, now_unix_ns};
use caravan_proto::{AllocClientStatus, AllocDesiredStatus, Allocation, Job, JobType};

use crate::api::Api;
use crate::args::RestartArgs;
use crate::error::CliError;
use crate::format::{SHORT_ID, limit, rfc3339};
use crate::lookup;
use crate::placement::alloc_metrics;
use crate::ui::Ui;

type Result<T> = std::result::Result<T, CliError>;

/// How often a replacement is looked for.
const POLL: Duration = Duration::from_secs(1);

/// How often the operator is told the command still waits.
const STILL_WAITING: Duration = Duration::from_secs(60);

/// The checked flags.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    batch_size: usize,
    batch_percent: bool,
    batch_wait: Duration,
    batch_wait_ask: bool,
    fail_on_error: bool,
    id_length: usize,
}

/// Checks the flags as Nomad does; `interactive` says whether questions
/// can be asked.
fn check(args: &RestartArgs, interactive: bool) -> Result<Plan> {
    let size = args.batch_size.trim();
    let digits = size.strip_suffix('%').unwrap_or(size);
    let batch_size: usize = digits
        .parse()
        .ok()
        .filter(|_| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            CliError::Usage(format!(
                "Invalid -batch-size value {:?}: batch size must be an integer or a percentage",
                args.batch_size
            ))
        })?;
    if batch_size == 0 {
        return Err(CliError::Usage(format!(
            "Invalid -batch-size value {:?}: number value must be greater than zero",
            args.batch_size
        )));
    }
    let ask_needs_tty = |flag: &str| {
        CliError::Usage(format!(
            "Invalid {flag} value \"ask\": \"ask\" cannot be used when terminal is not interactive"
        ))
    };
    let (batch_wait, batch_wait_ask) = if args.batch_wait.eq_ignore_ascii_case("ask") {
        if !interactive && !args.yes {
            return Err(ask_needs_tty("-batch-wait"));
        }
        (Duration::ZERO, true)
    } else {
        let ns = caravan_jobspec::parse_duration(&args.batch_wait).map_err(|e| {
            CliError::Usage(format!(
                "Invalid -batch-wait value {:?}: {e}",
                args.batch_wait
            ))
        })?;
        (Duration::from_nanos(u64::try_from(ns).unwrap_or(0)), false)
    };
    let fail_on_error = match args.on_error.as_str() {
        "ask" if !interactive && !args.yes => return Err(ask_needs_tty("-on-error")),
        "ask" => false,
        "fail" => true,
        other => {
            return Err(CliError::Usage(format!(
                "Invalid -on-error value {other:?}: valid options are \"ask\" and \"fail\""
            )));
        }
    };
    if args.all_tasks && !args.tasks.is_empty() {
        return Err(CliError::Usage(
            "The -all-tasks option cannot be used with -task".into(),
        ));
    }
    if args.reschedule && !args.tasks.is_empty() {
        return Err(CliError::Usage(
            "The -reschedule option cannot be used with -task".into(),
        ));
    }
    if args.no_shutdown_delay {
        return Err(CliError::Usage(
            "-no-shutdown-delay is not supported by Caravan: its clients always honour \
             shutdown_delay"
                .into(),
        ));
    }
    Ok(Plan {
        batch_size,
        batch_percent: size.ends_with('%'),
        batch_wait,
        batch_wait_ask,
        fail_on_error,
        id_length: if args.verbose { usize::MAX } else { SHORT_ID },
    })
}

/// Whether the version of the job `alloc` runs has task `task` in its group.
fn has_task(alloc: &Allocation, versions: &BTreeMap<u64, Job>, task: &str) -> bool {
    versions
        .get(&alloc.job_version)
        .and_then(|j| j.task_groups.iter().find(|g| g.name == alloc.task_group))
        .is_some_and(|g| g.tasks.iter().any(|t| t.name == task))
        || alloc.task_states.contains_key(task)
}

/// The allocations to restart, with the lines saying why others are skipped
/// (printed with -verbose).
fn eligible(
    allocs: Vec<Allocation>,
    versions: &BTreeMap<u64, Job>,
    args: &RestartArgs,
    id_length: usize,
) -> (Vec<Allocation>, Vec<String>) {
    let mut keep = Vec::new();
    let mut skipped = Vec::new();
    let now = rfc3339(now_unix_ns());
    for a in allocs {
        let id = limit(&a.id, id_length).to_string();
        let running = a.client_status() == AllocClientStatus::Running
            && a.desired_status() == AllocDesiredStatus::Run;
        if !running {
            skipped.push(format!(
                "    {now}: Skipping allocation {id:?} because desired status is {:?} and client status is {:?}",
                a.desired_status().nomad_name(),
                a.client_status().nomad_name(),
            ));
        } else if !a.next_allocation.is_empty() {
            skipped.push(format!(
                "    {now}: Skipping allocation {id:?} because it has already been replaced by {:?}",
                limit(&a.next_allocation, id_length)
            ));
        } else if !args.groups.is_empty() && !args.groups.contains(&a.task_group) {
            skipped.push(format!(
                "    {now}: Skipping allocation {id:?} because it doesn't have any of requested groups"
            ));
        } else if !args.tasks.is_empty() && !args.tasks.iter().any(|t| has_task(&a, versions, t)) {
            skipped.push(format!(
                "    {now}: Skipping allocation {id:?} because it doesn't have any of requested tasks"
            ));
        } else {
            keep.push(a);
        }
    }
    keep.sort_by_key(|a| a.create_revision);
    (keep, skipped)
}

/// English ordinals: 1st, 2nd, 3rd, 4th, 11th, 21st.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A headline of the restart.
fn headline(text: &str) -> String {
    format!("==> {}: {text}", rfc3339(now_unix_ns()))
}

/// Asks `question` on the terminal until the answer is one `read` accepts.
async fn ask<T>(
    ui: &mut Ui,
    question: &str,
    read: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>> {
    loop {
        ui.output(headline(question));
        let line = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|n| (n, line))
        })
        .await
        .map_err(|e| CliError::Other(format!("Error reading the answer: {e}")))?
        .map_err(|e| CliError::Other(format!("Error reading the answer: {e}")))?;
        if line.0 == 0 {
            return Ok(None);
        }
        match read(line.1.trim()) {
            Some(answer) => return Ok(Some(answer)),
            None => ui.output(format!("    Invalid answer {:?}", line.1.trim())),
        }
    }
}

/// Fails when the job has a deployment still in progress.
async fn no_active_deployment(api: &Api, job: &Job, id_length: usize) -> Result<()> {
    for d in api.list_deployments().await? {
        if d.job_id == job.id && d.namespace == job.namespace && !d.status().is_terminal() {
            return Err(CliError::Other(format!(
                "Deployment {:?} is {:?}",
                limit(&d.id, id_length),
                d.status().nomad_name()
            )));
        }
    }
    Ok(())
}

/// Restarts one allocation in place.
async fn restart_in_place(
    api: &Api,
    alloc: &Allocation,
    args: &RestartArgs,
    versions: &BTreeMap<u64, Job>,
    id: &str,
) -> (Vec<String>, Result<()>) {
    let now = rfc3339(now_unix_ns());
    let group = &alloc.task_group;
    if args.all_tasks {
        let line =
            format!("    {now}: Restarting all tasks in allocation {id:?} for group {group:?}");
        return (
            vec![line],
            api.restart_allocation(&alloc.id, None, true).await,
        );
    }
    if args.tasks.is_empty() {
        let line =
            format!("    {now}: Restarting running tasks in allocation {id:?} for group {group:?}");
        return (
            vec![line],
            api.restart_allocation(&alloc.id, None, false).await,
        );
    }
    let mut lines = Vec::new();
    let mut failures = Vec::new();
    for task in args.tasks.iter().filter(|t| has_task(alloc, versions, t)) {
        lines.push(format!(
            "    {now}: Restarting task {task:?} in allocation {id:?} for group {group:?}"
        ));
        if let Err(e) = api.restart_allocation(&alloc.id, Some(task), false).await {
            failures.push(format!("Failed to restart task {task:?}: {e}"));
        }
    }
    let result = if failures.is_empty() {
        Ok(())
    } else {
        Err(CliError::Other(failures.join("\n")))
    };
    (lines, result)
}

/// Stops one allocation and waits until its replacement runs, or its
/// evaluation fails to place one.
async fn reschedule(
    api: &Api,
    alloc: &Allocation,
    job: &Job,
    id: &str,
) -> (Vec<String>, Result<()>) {
    let now = rfc3339(now_unix_ns());
    let mut lines = vec![format!(
        "    {now}: Rescheduling allocation {id:?} for group {:?}",
        alloc.task_group
    )];
    let result = async {
        // Allocation lists carry no `PreviousAllocation`: the new ones are
        // read whole to find the replacement.
        let before: std::collections::BTreeSet<String> = api
            .job_allocations(&job.id)
            .await?
            .into_iter()
            .map(|a| a.id)
            .collect();
        let stopped = api
            .stop_allocation(&alloc.id)
            .await
            .map_err(|e| CliError::Other(format!("Failed to stop allocation: {e}")))?;
        let mut evals = vec![stopped.eval_id.clone()];
        // The scheduler does not replace a system job's stopped allocation by itself.
        if job.r#type() == JobType::System {
            evals.push(api.evaluate_job(&job.id, true).await?);
        }
        let started = tokio::time::Instant::now();
        let mut told = started;
        loop {
            for a in api.job_allocations(&job.id).await? {
                if before.contains(&a.id) || a.client_status() != AllocClientStatus::Running {
                    continue;
                }
                if api.allocation(&a.id).await?.previous_allocation == alloc.id {
                    return Ok(());
                }
            }
            for eval_id in evals.iter().filter(|e| !e.is_empty()) {
                let eval = api.evaluation(eval_id).await?;
                if let Some(m) = eval.failed_tg_allocs.get(&alloc.task_group) {
                    return Err(CliError::Other(format!(
                        "Evaluation {eval_id:?} has placement failures for group {:?}:\n{}",
                        alloc.task_group,
                        alloc_metrics(m, "    ")
                    )));
                }
            }
            if told.elapsed() >= STILL_WAITING {
                told = tokio::time::Instant::now();
                lines.push(format!(
                    "    {}: Still waiting for allocation {id:?} to be replaced",
                    rfc3339(now_unix_ns())
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }
    .await;
    (lines, result)
}

/// `job restart`.
pub async fn restart(api: &Api, ui: &mut Ui, args: RestartArgs) -> Result<u8> {
    let mut plan = check(&args, std::io::stdin().is_terminal())?;
    let job = lookup::job(api, &args.id).await?;
    if args.reschedule
        && !matches!(
            job.r#type(),
            JobType::Batch | JobType::Service | JobType::System
        )
    {
        return Err(CliError::Usage(format!(
            "Jobs of type {:?} are not allowed to be rescheduled.",
            job.r#type().nomad_name()
        )));
    }
    let versions: BTreeMap<u64, Job> = api
        .job_versions(&job.id)
        .await?
        .into_iter()
        .map(|j| (j.version, j))
        .collect();
    let allocs = api.job_allocations(&job.id).await?;
    let (todo, skipped) = eligible(allocs, &versions, &args, plan.id_length);
    if args.verbose {
        for line in skipped {
            ui.output(line);
        }
    }
    if todo.is_empty() {
        ui.output("No allocations to restart");
        return Ok(0);
    }
    if plan.batch_percent {
        plan.batch_size = (todo.len() * plan.batch_size).div_ceil(100).max(1);
    }
    let n = todo.len();
    ui.output(headline(&format!(
        "Restarting {n} allocation{}",
        if n == 1 { "" } else { "s" }
    )));
    let mut errors: Vec<String> = Vec::new();
    let mut canceled = false;
    let batches: Vec<&[Allocation]> = todo.chunks(plan.batch_size).collect();
    for (i, batch) in batches.iter().enumerate() {
        if let Err(e) = no_active_deployment(api, &job, plan.id_length).await {
            errors.push(e.to_string());
            break;
        }
        if plan.batch_size > 1 {
            ui.output(headline(&format!(
                "Restarting {} batch of {} allocations",
                ordinal(i + 1),
                batch.len()
            )));
        }
        let work = batch.iter().map(|a| {
            let id = limit(&a.id, plan.id_length).to_string();
            let (args, versions, job) = (&args, &versions, &job);
            async move {
                let (lines, result) = if args.reschedule {
                    reschedule(api, a, job, &id).await
                } else {
                    restart_in_place(api, a, args, versions, &id).await
                };
                let result = result.map_err(|e| format!("Error restarting allocation {id:?}: {e}"));
                (lines, result)
            }
        });
        let mut batch_errors = Vec::new();
        for (lines, result) in futures::future::join_all(work).await {
            for line in lines {
                ui.output(line);
            }
            if let Err(e) = result {
                batch_errors.push(e);
            }
        }
        errors.extend(batch_errors.iter().cloned());
        if i + 1 == batches.len() {
            break;
        }
        if !batch_errors.is_empty() && plan.fail_on_error {
            ui.output(headline("Stopping job restart due to error"));
            break;
        }
        let ask_now = !args.yes && (plan.batch_wait_ask || !batch_errors.is_empty());
        if ask_now {
            if !batch_errors.is_empty() {
                ui.error(headline(&batch_errors.join("\n")));
            }
            let (question, default_yes) = if batch_errors.is_empty() {
                ("Proceed with the next batch? [Y/n", true)
            } else {
                (
                    "Ignore the errors above and proceed with the next batch? [y/N",
                    false,
                )
            };
            let question = format!(
                "{question}{}]",
                if plan.batch_wait_ask {
                    "/<wait duration>"
                } else {
                    ""
                }
            );
            let wait_ask = plan.batch_wait_ask;
            let answer = ask(ui, &question, |a| match a.to_ascii_lowercase().as_str() {
                "" => Some((default_yes, None)),
                "y" | "yes" => Some((true, None)),
                "n" | "no" => Some((false, None)),
                other if wait_ask => caravan_jobspec::parse_duration(other).ok().map(|ns| {
                    (
                        true,
                        Some(Duration::from_nanos(u64::try_from(ns).unwrap_or(0))),
                    )
                }),
                _ => None,
            })
            .await?;
            match answer {
                Some((true, wait)) => {
                    if let Some(wait) = wait {
                        plan.batch_wait_ask = false;
                        plan.batch_wait = wait;
                        ui.output(headline(&format!(
                            "Proceeding restarts with new wait time of {}",
                            humantime::format_duration(wait)
                        )));
                    }
                }
                _ => {
                    ui.output(headline("Job restart canceled"));
                    canceled = true;
                    break;
                }
            }
        }
        if !plan.batch_wait.is_zero() {
            ui.output(headline(&format!(
                "Waiting {} before restarting the next batch",
                humantime::format_duration(plan.batch_wait)
            )));
            tokio::time::sleep(plan.batch_wait).await;
        }
    }
    if !errors.is_empty() {
        if !canceled {
            ui.output(headline("Job restart finished with errors"));
        }
        let n = errors.len();
        ui.error(format!(
            "\n{n} error{} occurred while restarting job:\n{}",
            if n == 1 { "" } else { "s" },
            errors
                .iter()
                .map(|e| format!("* {e}"))
                .collect::<Vec<_>>()
                .join("\n")
        ));
        return Ok(1);
    }
    if !canceled {
        ui.output(headline("Job restart finished"));
        ui.output("\nJob restarted successfully!");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use caravan_proto::{Task, TaskGroup};

    use super::*;

    fn args(line: &[&str]) -> RestartArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            r: RestartArgs,
        }
        let all = std::iter::once("t")
            .chain(line.iter().copied())
            .map(String::from);
        T::try_parse_from(crate::args::normalize(all)).unwrap().r
    }

    #[test]
    fn flags_are_checked_as_nomad_does() {
        let p = check(&args(&["-batch-size", "25%", "-yes", "web"]), false).unwrap();
        assert_eq!((p.batch_size, p.batch_percent), (25, true));
        let p = check(
            &args(&["-batch-wait", "10s", "-on-error", "fail", "web"]),
            false,
        )
        .unwrap();
        assert_eq!(p.batch_wait, Duration::from_secs(10));
        assert!(p.fail_on_error);
        let err = |line: &[&str]| check(&args(line), false).unwrap_err().to_string();
        assert!(err(&["-batch-size", "0", "-yes", "web"]).contains("greater than zero"));
        assert!(err(&["-batch-size", "10%20%", "-yes", "web"]).contains("integer or a percentage"));
        assert!(err(&["web"]).contains("-on-error"), "ask needs a terminal");
        assert!(err(&["-batch-wait", "ask", "-on-error", "fail", "web"]).contains("-batch-wait"));
        assert!(err(&["-all-tasks", "-task", "a", "-yes", "web"]).contains("-all-tasks"));
        assert!(err(&["-reschedule", "-task", "a", "-yes", "web"]).contains("-reschedule"));
        assert!(err(&["-no-shutdown-delay", "-yes", "web"]).contains("not supported"));
        assert!(check(&args(&["web"]), true).is_ok());
    }

    #[test]
    fn only_running_allocations_of_the_asked_groups_and_tasks_restart() {
        let alloc = |id: &str, group: &str, client: AllocClientStatus| {
            let mut a = Allocation {
                id: id.into(),
                task_group: group.into(),
                ..Default::default()
            };
            a.set_client_status(client);
            a.set_desired_status(AllocDesiredStatus::Run);
            a
        };
        let job = Job {
            task_groups: vec![
                TaskGroup {
                    name: "web".into(),
                    tasks: vec![Task {
                        name: "nginx".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                TaskGroup {
                    name: "db".into(),
                    tasks: vec![Task {
                        name: "redis".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let versions: BTreeMap<u64, Job> = [(0, job)].into();
        let allocs = vec![
            alloc("a1", "web", AllocClientStatus::Running),
            alloc("a2", "db", AllocClientStatus::Running),
            alloc("a3", "web", AllocClientStatus::Complete),
        ];
        let ids = |line: &[&str]| {
            let (keep, _) = eligible(allocs.clone(), &versions, &args(line), SHORT_ID);
            keep.into_iter().map(|a| a.id).collect::<Vec<_>>()
        };
        assert_eq!(ids(&["web"]), ["a1", "a2"]);
        assert_eq!(ids(&["-group", "db", "web"]), ["a2"]);
        assert_eq!(ids(&["-task", "nginx", "web"]), ["a1"]);
        let (_, skipped) = eligible(allocs.clone(), &versions, &args(&["web"]), SHORT_ID);
        assert!(
            skipped[0].contains("Skipping allocation \"a3\""),
            "{skipped:?}"
        );
    }

    #[test]
    fn ordinals_are_english() {
        let words: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal).to_vec();
        assert_eq!(
            words,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"
            ]
        );
    }
}

//! `job history`: a job's kept versions, newest first, each with its
//! stability and submit date, and with `-p` the diff from the version
//! before it.

use caravan_proto::Job;

use crate::format::{kv, rfc3339};

/// What one version block shows besides its identity.
#[derive(Debug, Clone, Copy, Default)]
pub struct HistoryOptions {
    /// Show the diff from the previous version (`-p`).
    pub diffs: bool,
    /// Show the whole specification as JSON (`-full`).
    pub full: bool,
}

/// The diff of `job` from `previous` as `job plan` lays it out, trimmed.
pub fn version_diff(previous: &Job, job: &Job) -> Result<String, String> {
    let diff = caravan_jobspec::diff(Some(previous), job, false).map_err(|e| e.to_string())?;
    Ok(caravan_jobspec::render_plan(&diff, false)
        .trim()
        .to_string())
}

/// One version's `Version/Stable/Submit Date[/Diff][/Full]` block;
/// `previous` is the version before it, when kept.
pub fn version_block(
    job: &Job,
    previous: Option<&Job>,
    options: HistoryOptions,
) -> Result<String, String> {
    let mut pairs = vec![
        ("Version", job.version.to_string()),
        ("Stable", job.stable.to_string()),
        ("Submit Date", rfc3339(job.submit_time_unix_ns)),
    ];
    if options.diffs
        && let Some(previous) = previous
    {
        pairs.push(("Diff", version_diff(previous, job)?));
    }
    if options.full {
        let json = serde_json::to_string_pretty(&caravan_jobspec::render_json(job))
            .map_err(|e| e.to_string())?;
        pairs.push(("Full", json));
    }
    Ok(kv(&pairs))
}

/// Every version of `versions` (any order), newest first, separated by a
/// blank line; each diffed against the next older kept version.
pub fn job_history(versions: &[Job], options: HistoryOptions) -> Result<String, String> {
    let mut sorted: Vec<&Job> = versions.iter().collect();
    sorted.sort_by_key(|j| std::cmp::Reverse(j.version));
    let blocks = sorted
        .iter()
        .enumerate()
        .map(|(i, job)| version_block(job, sorted.get(i + 1).copied(), options))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(blocks.join("\n\n"))
}

/// The block of version `version` alone, diffed against the next older
/// kept version; `None` when that version is not kept.
pub fn one_version(
    versions: &[Job],
    version: u64,
    options: HistoryOptions,
) -> Option<Result<String, String>> {
    let job = versions.iter().find(|j| j.version == version)?;
    let previous = versions
        .iter()
        .filter(|j| j.version < version)
        .max_by_key(|j| j.version);
    Some(version_block(job, previous, options))
}

#[cfg(test)]
mod tests {
    use caravan_proto::{Task, TaskGroup};

    use super::*;
    use crate::views::fixtures::*;

    fn version(v: u64, count: i32, stable: bool) -> Job {
        Job {
            id: "web".into(),
            name: "web".into(),
            namespace: "default".into(),
            version: v,
            stable,
            submit_time_unix_ns: NOW + i64::try_from(v).unwrap() * S,
            task_groups: vec![TaskGroup {
                name: "web".into(),
                count,
                tasks: vec![Task {
                    name: "server".into(),
                    driver: "raw_exec".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn versions_are_listed_newest_first_without_diffs() {
        let out = job_history(
            &[version(0, 1, true), version(1, 3, false)],
            HistoryOptions::default(),
        )
        .unwrap();
        assert_eq!(
            out,
            "Version     = 1\n\
             Stable      = false\n\
             Submit Date = 2023-11-14T22:13:21Z\n\
             \n\
             Version     = 0\n\
             Stable      = true\n\
             Submit Date = 2023-11-14T22:13:20Z"
        );
    }

    #[test]
    fn with_p_each_version_shows_its_change_from_the_one_before() {
        let options = HistoryOptions {
            diffs: true,
            full: false,
        };
        let out = job_history(&[version(0, 1, true), version(1, 3, false)], options).unwrap();
        let (newest, oldest) = out.split_once("\n\n").unwrap();
        assert!(
            newest.starts_with(
                "Version     = 1\nStable      = false\nSubmit Date = 2023-11-14T22:13:21Z\n\
                 Diff        = +/- Job: \"web\"\n+/- Task Group: \"web\"\n"
            ),
            "{newest}"
        );
        assert!(newest.contains("Count: \"1\" => \"3\""), "{newest}");
        assert!(!oldest.contains("Diff"), "{oldest}");
        let one = one_version(&[version(0, 1, true), version(1, 3, false)], 1, options)
            .unwrap()
            .unwrap();
        assert_eq!(one, newest);
        assert!(one_version(&[version(0, 1, true)], 4, options).is_none());
    }

    #[test]
    fn full_shows_the_specification_as_json() {
        let options = HistoryOptions {
            diffs: false,
            full: true,
        };
        let out = one_version(&[version(0, 1, true)], 0, options)
            .unwrap()
            .unwrap();
        assert!(out.contains("\nFull        = {\n"), "{out}");
        assert!(out.contains("\"ID\": \"web\""), "{out}");
    }
}

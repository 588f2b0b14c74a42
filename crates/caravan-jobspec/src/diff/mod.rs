//! Structured diffs of two job versions, shaped like Nomad's `JobDiff` (for `job plan`
//! and `job history -p`), with Nomad's annotations of what each change forces.

mod render;
mod services;
mod task_files;
mod tree;

pub use render::render_plan;

use crate::error::JobspecError;
use caravan_model::{group_destructive, task_destructive};
use caravan_proto::{Job, Task, TaskGroup};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use tree::Node;

/// Annotation: the change places new allocations.
pub const FORCES_CREATE: &str = "forces create";
/// Annotation: the change stops allocations.
pub const FORCES_DESTROY: &str = "forces destroy";
/// Annotation: the change replaces allocations.
pub const FORCES_DESTRUCTIVE_UPDATE: &str = "forces create/destroy update";
/// Annotation: the change updates allocations where they run.
pub const FORCES_IN_PLACE_UPDATE: &str = "forces in-place update";

/// How a field, object, task, group or job changed, with Nomad's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DiffType {
    /// Unchanged (shown only in contextual diffs).
    None,
    /// Only in the new version.
    Added,
    /// Only in the old version.
    Deleted,
    /// In both, different.
    Edited,
}

/// A primitive field that changed: `Count: "1" => "3"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct FieldDiff {
    /// How it changed.
    #[serde(rename = "Type")]
    pub diff_type: DiffType,
    /// Nomad's field name, e.g. `Count`, `Meta[owner]`, `args[0]`.
    pub name: String,
    /// The old value, empty when added.
    pub old: String,
    /// The new value, empty when deleted.
    pub new: String,
    /// What the change forces, e.g. `forces create`.
    pub annotations: Vec<String>,
}

/// A nested object that changed, e.g. `RestartPolicy`, `Constraint`, `Config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ObjectDiff {
    /// How it changed.
    #[serde(rename = "Type")]
    pub diff_type: DiffType,
    /// Nomad's object name.
    pub name: String,
    /// Its field changes.
    pub fields: Vec<FieldDiff>,
    /// Its nested object changes.
    pub objects: Vec<ObjectDiff>,
}

/// How one task changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct TaskDiff {
    /// How it changed.
    #[serde(rename = "Type")]
    pub diff_type: DiffType,
    /// The task's name.
    pub name: String,
    /// Its field changes.
    pub fields: Vec<FieldDiff>,
    /// Its object changes.
    pub objects: Vec<ObjectDiff>,
    /// What the change forces: create, destroy, create/destroy update or in-place update.
    pub annotations: Vec<String>,
}

/// How one task group changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct TaskGroupDiff {
    /// How it changed.
    #[serde(rename = "Type")]
    pub diff_type: DiffType,
    /// The group's name.
    pub name: String,
    /// Its field changes.
    pub fields: Vec<FieldDiff>,
    /// Its object changes.
    pub objects: Vec<ObjectDiff>,
    /// Its tasks, changed or not.
    pub tasks: Vec<TaskDiff>,
    /// The scheduler's desired updates (`create`, `destroy`, `in-place update`, …) by
    /// count; empty until a plan fills it in.
    pub updates: BTreeMap<String, u64>,
}

/// How a job changed between two versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct JobDiff {
    /// How it changed.
    #[serde(rename = "Type")]
    pub diff_type: DiffType,
    /// The job's ID.
    #[serde(rename = "ID")]
    pub id: String,
    /// Job-level field changes.
    pub fields: Vec<FieldDiff>,
    /// Job-level object changes.
    pub objects: Vec<ObjectDiff>,
    /// Every group, changed or not, sorted by name.
    pub task_groups: Vec<TaskGroupDiff>,
}

/// Diffs `new` against `old` (`None` when the job is new). With `contextual`, unchanged
/// fields of changed objects are included as `None`, as `job plan` shows them.
pub fn diff(old: Option<&Job>, new: &Job, contextual: bool) -> Result<JobDiff, JobspecError> {
    if let Some(old) = old
        && old.id != new.id
    {
        return Err(JobspecError::DiffIdMismatch {
            old: old.id.clone(),
            new: new.id.clone(),
        });
    }
    let (fields, objects) = diff_nodes(
        old.map(tree::job_node).as_ref(),
        Some(&tree::job_node(new)),
        contextual,
    );
    let names: BTreeSet<&str> = old
        .iter()
        .flat_map(|j| j.task_groups.iter())
        .chain(new.task_groups.iter())
        .map(|g| g.name.as_str())
        .collect();
    let empty = Job::default();
    let old_job = old.unwrap_or(&empty);
    let task_groups: Vec<TaskGroupDiff> = names
        .into_iter()
        .map(|name| {
            group_diff(
                old_job,
                find_group(old_job, name),
                new,
                find_group(new, name),
                name,
                contextual,
            )
        })
        .collect();
    let diff_type = match old {
        None => DiffType::Added,
        Some(_)
            if fields.iter().any(changed)
                || !objects.is_empty()
                || task_groups.iter().any(|g| g.diff_type != DiffType::None) =>
        {
            DiffType::Edited
        }
        Some(_) => DiffType::None,
    };
    Ok(JobDiff {
        diff_type,
        id: new.id.clone(),
        fields: keep(fields, contextual && diff_type == DiffType::Edited),
        objects,
        task_groups,
    })
}

fn changed(f: &FieldDiff) -> bool {
    f.diff_type != DiffType::None
}

/// Unchanged fields are shown only as context of an edited object in a contextual diff.
fn keep(fields: Vec<FieldDiff>, show_unchanged: bool) -> Vec<FieldDiff> {
    if show_unchanged {
        fields
    } else {
        fields.into_iter().filter(changed).collect()
    }
}

fn group_diff(
    old_job: &Job,
    old: Option<&TaskGroup>,
    new_job: &Job,
    new: Option<&TaskGroup>,
    name: &str,
    contextual: bool,
) -> TaskGroupDiff {
    let (mut fields, objects) = diff_nodes(
        old.map(tree::group_node).as_ref(),
        new.map(tree::group_node).as_ref(),
        contextual,
    );
    let group_type = match (old, new) {
        (None, _) => DiffType::Added,
        (_, None) => DiffType::Deleted,
        _ if fields.iter().any(changed) || !objects.is_empty() => DiffType::Edited,
        _ => DiffType::None,
    };
    for f in fields
        .iter_mut()
        .filter(|f| f.name == "Count" && f.diff_type == DiffType::Edited)
    {
        let (o, n) = (
            f.old.parse::<i64>().unwrap_or(0),
            f.new.parse::<i64>().unwrap_or(0),
        );
        f.annotations
            .push(if n > o { FORCES_CREATE } else { FORCES_DESTROY }.to_string());
    }
    let task_names: BTreeSet<&str> = old
        .iter()
        .chain(new.iter())
        .flat_map(|g| g.tasks.iter())
        .map(|t| t.name.as_str())
        .collect();
    let find = |g: Option<&TaskGroup>, n: &str| {
        g.and_then(|g| g.tasks.iter().find(|t| t.name == n))
            .cloned()
    };
    let group_replaced = matches!((old, new), (Some(o), Some(n)) if group_destructive(o, n));
    let tasks: Vec<TaskDiff> = task_names
        .into_iter()
        .map(|tname| {
            let (ot, nt) = (find(old, tname), find(new, tname));
            let mut td = task_diff(ot.as_ref(), nt.as_ref(), tname, contextual);
            let annotation = match (group_type, td.diff_type) {
                (DiffType::Added, _) | (_, DiffType::Added) => Some(FORCES_CREATE),
                (DiffType::Deleted, _) | (_, DiffType::Deleted) => Some(FORCES_DESTROY),
                (_, DiffType::Edited) => {
                    let destructive = group_replaced
                        || match (old, &ot, new, &nt) {
                            (Some(og), Some(ot), Some(ng), Some(nt)) => {
                                task_destructive(old_job, og, ot, new_job, ng, nt)
                            }
                            _ => true,
                        };
                    Some(if destructive {
                        FORCES_DESTRUCTIVE_UPDATE
                    } else {
                        FORCES_IN_PLACE_UPDATE
                    })
                }
                _ => None,
            };
            td.annotations.extend(annotation.map(str::to_string));
            td
        })
        .collect();
    let diff_type = match group_type {
        DiffType::None if tasks.iter().any(|t| t.diff_type != DiffType::None) => DiffType::Edited,
        t => t,
    };
    TaskGroupDiff {
        diff_type,
        name: name.to_string(),
        fields: keep(fields, contextual && diff_type == DiffType::Edited),
        objects,
        tasks,
        updates: BTreeMap::new(),
    }
}

fn task_diff(old: Option<&Task>, new: Option<&Task>, name: &str, contextual: bool) -> TaskDiff {
    let (fields, objects) = diff_nodes(
        old.map(tree::task_node).as_ref(),
        new.map(tree::task_node).as_ref(),
        contextual,
    );
    let diff_type = match (old, new) {
        (None, _) => DiffType::Added,
        (_, None) => DiffType::Deleted,
        _ if fields.iter().any(changed) || !objects.is_empty() => DiffType::Edited,
        _ => DiffType::None,
    };
    TaskDiff {
        diff_type,
        name: name.to_string(),
        fields: keep(fields, contextual && diff_type == DiffType::Edited),
        objects,
        annotations: Vec::new(),
    }
}

/// Diffs two nodes: field diffs (every field, unchanged ones as `None`) and the object
/// diffs of what changed.
fn diff_nodes(
    old: Option<&Node>,
    new: Option<&Node>,
    contextual: bool,
) -> (Vec<FieldDiff>, Vec<ObjectDiff>) {
    let empty = Node::default();
    let (o, n) = (old.unwrap_or(&empty), new.unwrap_or(&empty));
    let fields = field_diffs(&o.fields, &n.fields);

    let mut objects = Vec::new();
    let single_names: BTreeSet<&&str> = o.singles.keys().chain(n.singles.keys()).collect();
    for name in single_names {
        if let Some(d) = object_diff(name, o.singles.get(*name), n.singles.get(*name), contextual) {
            objects.push(d);
        }
    }
    let set_names: BTreeSet<&&str> = o.sets.keys().chain(n.sets.keys()).collect();
    for name in set_names {
        let (os, ns) = (
            o.sets.get(*name).map_or(&[][..], Vec::as_slice),
            n.sets.get(*name).map_or(&[][..], Vec::as_slice),
        );
        for gone in os.iter().filter(|x| !ns.contains(x)) {
            objects.extend(object_diff(name, Some(gone), None, contextual));
        }
        for added in ns.iter().filter(|x| !os.contains(x)) {
            objects.extend(object_diff(name, None, Some(added), contextual));
        }
    }
    let string_set_names: BTreeSet<&&str> =
        o.string_sets.keys().chain(n.string_sets.keys()).collect();
    for name in string_set_names {
        let (os, ns) = (
            o.string_sets.get(*name).cloned().unwrap_or_default(),
            n.string_sets.get(*name).cloned().unwrap_or_default(),
        );
        if os == ns {
            continue;
        }
        let mut fields = Vec::new();
        for v in os.iter().filter(|v| !ns.contains(v)) {
            fields.push(field(DiffType::Deleted, name, v, ""));
        }
        for v in ns.iter().filter(|v| !os.contains(v)) {
            fields.push(field(DiffType::Added, name, "", v));
        }
        if contextual {
            for v in ns.iter().filter(|v| os.contains(v)) {
                fields.push(field(DiffType::None, name, v, v));
            }
        }
        let diff_type = match (os.is_empty(), ns.is_empty()) {
            (true, _) => DiffType::Added,
            (_, true) => DiffType::Deleted,
            _ => DiffType::Edited,
        };
        objects.push(ObjectDiff {
            diff_type,
            name: name.to_string(),
            fields,
            objects: Vec::new(),
        });
    }
    objects.sort_by(|a, b| a.name.cmp(&b.name));
    (fields, objects)
}

fn object_diff(
    name: &str,
    old: Option<&Node>,
    new: Option<&Node>,
    contextual: bool,
) -> Option<ObjectDiff> {
    let diff_type = match (old, new) {
        (None, None) => return None,
        (None, Some(_)) => DiffType::Added,
        (Some(_), None) => DiffType::Deleted,
        (Some(a), Some(b)) if a == b => return None,
        _ => DiffType::Edited,
    };
    let (fields, objects) = diff_nodes(old, new, contextual);
    Some(ObjectDiff {
        diff_type,
        name: name.to_string(),
        fields: keep(fields, contextual && diff_type == DiffType::Edited),
        objects,
    })
}

fn field_diffs(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> Vec<FieldDiff> {
    let names: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    names
        .into_iter()
        .map(|name| match (old.get(name), new.get(name)) {
            (Some(o), Some(n)) if o == n => field(DiffType::None, name, o, n),
            (Some(o), Some(n)) => field(DiffType::Edited, name, o, n),
            (Some(o), None) => field(DiffType::Deleted, name, o, ""),
            (None, Some(n)) => field(DiffType::Added, name, "", n),
            (None, None) => field(DiffType::None, name, "", ""),
        })
        .collect()
}

fn field(diff_type: DiffType, name: &str, old: &str, new: &str) -> FieldDiff {
    FieldDiff {
        diff_type,
        name: name.to_string(),
        old: old.to_string(),
        new: new.to_string(),
        annotations: Vec::new(),
    }
}

fn find_group<'a>(job: &'a Job, name: &str) -> Option<&'a TaskGroup> {
    job.task_groups.iter().find(|g| g.name == name)
}

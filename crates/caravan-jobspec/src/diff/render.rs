//! A job diff as text, laid out as `nomad job plan` prints it (without colors).
//!
//! ```text
//! +/- Job: "example"
//! +/- Task Group: "cache" (1 create, 1 in-place update)
//!   +/- Count: "1" => "2" (forces create)
//!       Task: "redis"
//! ```

use super::{DiffType, FieldDiff, JobDiff, ObjectDiff, TaskDiff, TaskGroupDiff};

/// Renders a diff as `job plan` does; `verbose` also shows the fields of added and
/// deleted objects and of unchanged jobs and groups.
pub fn render_plan(diff: &JobDiff, verbose: bool) -> String {
    let (marker, _) = marker(diff.diff_type);
    let mut out = format!("{marker}Job: {:?}\n", diff.id);
    let (longest_field, mut longest_marker) = longest(&diff.fields, &diff.objects);
    for tg in &diff.task_groups {
        longest_marker = longest_marker.max(marker_len(tg.diff_type));
    }
    if diff.diff_type == DiffType::Edited || verbose {
        let fo = aligned(
            &diff.fields,
            &diff.objects,
            0,
            longest_field,
            longest_marker,
        );
        if !fo.is_empty() {
            out.push_str(&fo);
            out.push('\n');
        }
    }
    for tg in &diff.task_groups {
        let prefix = longest_marker - marker_len(tg.diff_type);
        out.push_str(&group(tg, prefix, verbose));
        out.push('\n');
    }
    out
}

fn group(tg: &TaskGroupDiff, prefix: usize, verbose: bool) -> String {
    let (marker, _) = marker(tg.diff_type);
    let mut out = format!("{marker}{}Task Group: {:?}", spaces(prefix), tg.name);
    if tg.updates.is_empty() {
        out.push('\n');
    } else {
        let updates: Vec<String> = tg
            .updates
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        out.push_str(&format!(" ({})\n", updates.join(", ")));
    }
    let (longest_field, mut longest_marker) = longest(&tg.fields, &tg.objects);
    for t in &tg.tasks {
        longest_marker = longest_marker.max(marker_len(t.diff_type));
    }
    let sub = prefix + 2;
    if verbose || tg.diff_type == DiffType::Edited {
        let fo = aligned(&tg.fields, &tg.objects, sub, longest_field, longest_marker);
        if !fo.is_empty() {
            out.push_str(&fo);
            out.push('\n');
        }
    }
    for t in &tg.tasks {
        out.push_str(&task(
            t,
            sub,
            longest_marker - marker_len(t.diff_type),
            verbose,
        ));
        out.push('\n');
    }
    out
}

fn task(t: &TaskDiff, start: usize, prefix: usize, verbose: bool) -> String {
    let (marker, _) = marker(t.diff_type);
    let mut out = format!(
        "{}{marker}{}Task: {:?}",
        spaces(start),
        spaces(prefix),
        t.name
    );
    if !t.annotations.is_empty() {
        out.push_str(&format!(" ({})", t.annotations.join(", ")));
    }
    match t.diff_type {
        DiffType::None => return out,
        DiffType::Added | DiffType::Deleted if !verbose => return out,
        _ => out.push('\n'),
    }
    let (longest_field, longest_marker) = longest(&t.fields, &t.objects);
    out.push_str(&aligned(
        &t.fields,
        &t.objects,
        start + 2,
        longest_field,
        longest_marker,
    ));
    out
}

fn aligned(
    fields: &[FieldDiff],
    objects: &[ObjectDiff],
    start: usize,
    longest_field: usize,
    longest_marker: usize,
) -> String {
    let mut lines = Vec::with_capacity(fields.len() + objects.len());
    for f in fields {
        let key_prefix = longest_marker - marker_len(f.diff_type);
        let value_prefix = longest_field - f.name.chars().count();
        lines.push(field(f, start, key_prefix, value_prefix));
    }
    for o in objects {
        lines.push(object(o, start, longest_marker - marker_len(o.diff_type)));
    }
    lines.join("\n")
}

fn field(f: &FieldDiff, start: usize, key_prefix: usize, value_prefix: usize) -> String {
    let (marker, _) = marker(f.diff_type);
    let value = match f.diff_type {
        DiffType::Added | DiffType::None => format!("{:?}", f.new),
        DiffType::Deleted => format!("{:?}", f.old),
        DiffType::Edited => format!("{:?} => {:?}", f.old, f.new),
    };
    let mut out = format!(
        "{}{marker}{}{}: {}{value}",
        spaces(start),
        spaces(key_prefix),
        f.name,
        spaces(value_prefix)
    );
    if !f.annotations.is_empty() {
        out.push_str(&format!(" ({})", f.annotations.join(", ")));
    }
    out
}

fn object(o: &ObjectDiff, start: usize, key_prefix: usize) -> String {
    let (marker, marker_len) = marker(o.diff_type);
    let (longest_field, longest_marker) = longest(&o.fields, &o.objects);
    let inner = aligned(
        &o.fields,
        &o.objects,
        start + key_prefix + 2,
        longest_field,
        longest_marker,
    );
    format!(
        "{}{marker}{}{} {{\n{inner}\n{}}}",
        spaces(start),
        spaces(key_prefix),
        o.name,
        spaces(start + marker_len + key_prefix)
    )
}

fn longest(fields: &[FieldDiff], objects: &[ObjectDiff]) -> (usize, usize) {
    let field = fields
        .iter()
        .map(|f| f.name.chars().count())
        .max()
        .unwrap_or(0);
    let marker = fields
        .iter()
        .map(|f| marker_len(f.diff_type))
        .chain(objects.iter().map(|o| marker_len(o.diff_type)))
        .max()
        .unwrap_or(0);
    (field, marker)
}

fn marker(t: DiffType) -> (&'static str, usize) {
    match t {
        DiffType::Added => ("+ ", 2),
        DiffType::Deleted => ("- ", 2),
        DiffType::Edited => ("+/- ", 4),
        DiffType::None => ("", 0),
    }
}

fn marker_len(t: DiffType) -> usize {
    marker(t).1
}

fn spaces(n: usize) -> String {
    " ".repeat(n)
}

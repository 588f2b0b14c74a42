//! Nomad's rules for a variable: where it may live (path and namespace) and
//! how big it may be. Every refusal names its field.

use std::collections::BTreeMap;

use crate::error::{GatewayError, Result};
use crate::query::ALL_NAMESPACES;

/// Longest path, as Nomad allows.
pub const MAX_PATH_LEN: usize = 128;

/// Most bytes of a variable's items (keys and values summed), as Nomad
/// allows; not configurable, so no caller can bloat the store.
pub const MAX_ITEMS_BYTES: usize = 64 * 1024;

/// Checks a path as Nomad does: 1–128 characters of `a-z A-Z 0-9 - _ ~ /`
/// (so never `.` or `..`), and under the reserved `nomad/` only
/// `nomad/jobs…`, `nomad/sentinel…` and `nomad/job-templates/<name>`.
pub fn check_path(path: &str) -> Result<()> {
    let bad = |message: String| Err(GatewayError::field("Path", message));
    if path.is_empty() {
        return bad("variable requires path".into());
    }
    if path.len() > MAX_PATH_LEN {
        return bad(format!(
            "invalid path {path:?}: longer than {MAX_PATH_LEN} characters"
        ));
    }
    if let Some(c) = path
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '~' | '/')))
    {
        return bad(format!(
            "invalid path {path:?}: {c:?} is not allowed (letters, digits, '-', '_', '~' and '/' are)"
        ));
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts[0] != "nomad" {
        return Ok(());
    }
    match parts.as_slice() {
        [_] => bad(
            "\"nomad\" is a reserved top-level directory path, but you may write variables to \
             \"nomad/jobs\", \"nomad/job-templates\", \"nomad/sentinel\", or below"
                .into(),
        ),
        [_, "jobs" | "sentinel", ..] | [_, "job-templates", _] => Ok(()),
        [_, "job-templates", ..] => bad(
            "\"nomad/job-templates\" is a reserved directory path, but you may write variables \
             at the level below it, for example, \"nomad/job-templates/template-name\""
                .into(),
        ),
        _ => bad(
            "only paths at \"nomad/jobs\" or \"nomad/job-templates\" and below are valid paths \
             under the top-level \"nomad\" directory"
                .into(),
        ),
    }
}

/// Checks the path of a read or delete: as Nomad, only that there is one
/// (a path no write could create simply is not there).
pub fn check_lookup_path(path: &str) -> Result<()> {
    if path.is_empty() {
        return Err(GatewayError::field("Path", "missing variable path"));
    }
    Ok(())
}

/// Checks the namespace a variable is written to or read from.
pub fn check_namespace(namespace: &str) -> Result<()> {
    if namespace.is_empty() {
        return Err(GatewayError::field("Namespace", "missing namespace"));
    }
    if namespace == ALL_NAMESPACES {
        return Err(GatewayError::field(
            "Namespace",
            "can not target wildcard (\"*\") namespace",
        ));
    }
    Ok(())
}

/// Checks a variable's items: at least one, 64 KiB at most.
pub fn check_items(items: &BTreeMap<String, String>) -> Result<()> {
    if items.is_empty() {
        return Err(GatewayError::field(
            "Items",
            "variable missing required Items object",
        ));
    }
    let size: usize = items.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_ITEMS_BYTES {
        return Err(GatewayError::field(
            "Items",
            format!("variables are limited to 64KiB in total size; these items are {size} bytes"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_nomads_rules() {
        for ok in [
            "a",
            "example/first",
            "a-b_c~d/E9",
            "/leading",
            "nomad/jobs",
            "nomad/jobs/web/task",
            "nomad/sentinel/x",
            "nomad/job-templates/t",
            "nomadic",
        ] {
            check_path(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        let long = "a".repeat(MAX_PATH_LEN + 1);
        for bad in [
            "",
            "..",
            "a/../b",
            "a.b",
            "a b",
            "é",
            "a?b",
            long.as_str(),
            "nomad",
            "nomad/other",
            "nomad/job-templates",
            "nomad/job-templates/a/b",
        ] {
            let err = check_path(bad).unwrap_err();
            assert!(
                err.is_bad_input() && err.to_string().starts_with("Path: "),
                "{bad}: {err}"
            );
        }
        check_path(&"a".repeat(MAX_PATH_LEN)).unwrap();
    }

    #[test]
    fn items_must_exist_and_fit() {
        let mut items = BTreeMap::new();
        assert!(
            check_items(&items)
                .unwrap_err()
                .to_string()
                .starts_with("Items: ")
        );
        items.insert("k".to_string(), "v".repeat(MAX_ITEMS_BYTES - 1));
        check_items(&items).unwrap();
        items.insert("k2".to_string(), String::new());
        let err = check_items(&items).unwrap_err();
        assert!(err.to_string().contains("64KiB"), "{err}");
    }

    #[test]
    fn the_wildcard_namespace_is_not_a_place() {
        check_namespace("default").unwrap();
        assert!(check_namespace("*").is_err());
        assert!(check_namespace("").is_err());
    }
}

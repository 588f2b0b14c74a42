//! A task's templates, with Nomad's validation texts (`Template.Validate`,
//! `ChangeScript.Validate`, `WaitConfig.Validate`, `Task.Validate`).

use super::Errors;
use crate::error::join_path as join;
use caravan_proto::Task;
use std::collections::BTreeMap;

const CHANGE_MODES: &[&str] = &["noop", "restart", "signal", "script"];

/// Checks every template of a task.
pub(super) fn check(t: &Task, tbase: &str, e: &mut Errors) {
    let mut destinations: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, tmpl) in t.templates.iter().enumerate() {
        let path = join(tbase, &format!("template[{i}]"));
        if tmpl.source.is_empty() && tmpl.data.is_empty() {
            e.on(
                &path,
                "source",
                "Must specify a source path or have an embedded template",
            );
        }
        if tmpl.destination.is_empty() {
            e.on(
                &path,
                "destination",
                "Must specify a destination for the template",
            );
        } else if super::paths::escapes_alloc_dir(&tmpl.destination) {
            e.on(
                &path,
                "destination",
                "destination escapes allocation directory",
            );
        }
        if let Some(first) = destinations.insert(&tmpl.destination, i) {
            e.on(
                &path,
                "destination",
                format!("Template {} has same destination as {}", i + 1, first + 1),
            );
            destinations.insert(&tmpl.destination, first);
        }
        change_mode(tmpl, &path, e);
        if tmpl.splay_ns < 0 {
            e.on(&path, "splay", "Must specify positive splay value");
        }
        if !tmpl.perms.is_empty()
            && u16::from_str_radix(&tmpl.perms, 8).map_or(true, |p| p > 0o7777)
        {
            e.on(
                &path,
                "perms",
                format!("Failed to parse {:?} as octal", tmpl.perms),
            );
        }
        if tmpl.uid < -1 {
            e.on(
                &path,
                "uid",
                format!("must be -1 or more (got {})", tmpl.uid),
            );
        }
        if tmpl.gid < -1 {
            e.on(
                &path,
                "gid",
                format!("must be -1 or more (got {})", tmpl.gid),
            );
        }
        if let Some(w) = &tmpl.wait {
            if w.min_ns < 0 || w.max_ns < 0 {
                e.on(&path, "wait", "min and max must be >= 0");
            } else if w.min_ns > 0 && w.max_ns > 0 && w.min_ns > w.max_ns {
                e.on(
                    &path,
                    "wait",
                    format!(
                        "wait min {} is greater than max {}",
                        crate::format_duration(w.min_ns),
                        crate::format_duration(w.max_ns)
                    ),
                );
            }
        }
        if !tmpl.data.is_empty()
            && let Err(message) =
                validate_template_text(&tmpl.data, &tmpl.left_delimiter, &tmpl.right_delimiter)
        {
            e.on(&path, "data", message);
        }
    }
}

fn change_mode(tmpl: &caravan_proto::Template, path: &str, e: &mut Errors) {
    match tmpl.change_mode.as_str() {
        "signal" => {
            if tmpl.change_signal.is_empty() {
                e.on(
                    path,
                    "change_signal",
                    "Must specify signal value when change mode is signal",
                );
            }
            if tmpl.env {
                e.on(path, "env", "cannot use signals with env var templates");
            }
        }
        "script" => match &tmpl.change_script {
            None => e.on(
                path,
                "change_script",
                "must specify change script configuration value when change mode is script",
            ),
            Some(s) => {
                if s.command.is_empty() {
                    e.on(
                        path,
                        "change_script.command",
                        "must specify script path value when change mode is script",
                    );
                }
                if s.timeout_ns < 0 {
                    e.on(path, "change_script.timeout", "must be >= 0");
                }
            }
        },
        mode if CHANGE_MODES.contains(&mode) => {}
        _ => e.on(
            path,
            "change_mode",
            "Invalid change mode. Must be one of the following: noop, signal, script, restart",
        ),
    }
}

/// Parses an inline template's text with its delimiters, as the client will before it
/// renders it: a syntax error, an unknown function or a Consul or Vault function Caravan
/// cannot back is refused at submit rather than failing the task on its node.
pub(crate) fn validate_template_text(text: &str, left: &str, right: &str) -> Result<(), String> {
    caravan_template::parse(text, left, right)
        .map(drop)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::validate_template_text;

    #[test]
    fn the_clients_parser_judges_the_text() {
        assert!(validate_template_text("a {{ env \"A\" }} b", "", "").is_ok());
        assert!(validate_template_text("no actions", "{{", "}}").is_ok());
        assert!(validate_template_text("[[ env \"A\" ]] {{", "[[", "]]").is_ok());
        assert!(validate_template_text("x\ny {{ env \"A\"", "", "").is_err());
        let consul = validate_template_text("{{ key \"a/b\" }}", "", "").unwrap_err();
        assert!(consul.contains("key"), "{consul}");
    }
}

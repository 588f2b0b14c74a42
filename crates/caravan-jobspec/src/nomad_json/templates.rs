//! A task's `Templates`, both ways.
//!
//! `VaultGrace` is accepted with Nomad's deprecation warning and dropped (Nomad ignores
//! it too); `ChangeScript.RunOnFirstRender` is refused by name, since Caravan's clients
//! run a change script only when a rendered file changes.

use super::fields::{take_bool, take_int, take_str, take_str_list};
use super::to_proto::{Conversion, is_meaningful as meaningful};
use crate::error::join_path as join;
use crate::task_defaults;
use caravan_proto::{ChangeScript, Template, TemplateWait};
use serde_json::{Map, Value, json};

/// Nomad's warning for a template's `vault_grace`.
pub(crate) const VAULT_GRACE_WARNING: &str = "VaultGrace has been deprecated as of Nomad 0.11 and ignored since Vault 0.5. Please remove VaultGrace / vault_grace from template block.";

/// A task's `Templates` list as Caravan's templates, with Nomad's defaults for what it
/// leaves out.
pub(super) fn templates_to_proto(
    value: Option<Value>,
    base: &str,
    conv: &mut Conversion,
) -> Vec<Template> {
    let items = match value {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            conv.err(
                join(base, "Templates"),
                format!("must be a list (got {other})"),
            );
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let path = join(base, &format!("template[{i}]"));
        let Value::Object(mut f) = item else {
            conv.err(path, "must be an object");
            continue;
        };
        if f.remove("VaultGrace").as_ref().is_some_and(meaningful) {
            conv.warnings.push(format!("{path}: {VAULT_GRACE_WARNING}"));
        }
        let splay_given = f.get("Splay").is_some_and(|v| !v.is_null());
        let mut template = Template {
            source: take_str(&mut f, "SourcePath", &path, conv),
            destination: take_str(&mut f, "DestPath", &path, conv),
            data: take_str(&mut f, "EmbeddedTmpl", &path, conv),
            change_mode: take_str(&mut f, "ChangeMode", &path, conv),
            change_signal: take_str(&mut f, "ChangeSignal", &path, conv),
            change_script: change_script(f.remove("ChangeScript"), &path, conv),
            splay_ns: take_int(&mut f, "Splay", &path, conv),
            perms: take_str(&mut f, "Perms", &path, conv),
            uid: owner(&mut f, "Uid", &path, conv),
            gid: owner(&mut f, "Gid", &path, conv),
            left_delimiter: take_str(&mut f, "LeftDelim", &path, conv),
            right_delimiter: take_str(&mut f, "RightDelim", &path, conv),
            env: take_bool(&mut f, "Envvars", &path, conv),
            wait: wait(f.remove("Wait"), &path, conv),
            error_on_missing_key: take_bool(&mut f, "ErrMissingKey", &path, conv),
            once: take_bool(&mut f, "Once", &path, conv),
        };
        for (unknown, v) in f {
            if meaningful(&v) {
                conv.err(join(&path, &unknown), "is not a field of a template");
            }
        }
        if !splay_given {
            template.splay_ns = task_defaults::TEMPLATE_SPLAY_NS;
        }
        task_defaults::template(&mut template);
        out.push(template);
    }
    out
}

/// A file owner id; left out (or null) is -1, "leave it to the client".
fn owner(f: &mut Map<String, Value>, name: &str, path: &str, conv: &mut Conversion) -> i32 {
    if f.get(name).is_none_or(Value::is_null) {
        f.remove(name);
        return task_defaults::OWNER_UNSET;
    }
    take_int(f, name, path, conv)
}

fn change_script(value: Option<Value>, base: &str, conv: &mut Conversion) -> Option<ChangeScript> {
    let path = join(base, "change_script");
    let mut f = match value {
        None | Some(Value::Null) => return None,
        Some(Value::Object(f)) => f,
        Some(other) => {
            conv.err(path, format!("must be an object (got {other})"));
            return None;
        }
    };
    if f.remove("RunOnFirstRender")
        .as_ref()
        .is_some_and(meaningful)
    {
        conv.err(
            join(&path, "run_on_first_render"),
            "is not supported by Caravan: its clients run a change script only when a rendered file changes",
        );
    }
    let script = ChangeScript {
        command: take_str(&mut f, "Command", &path, conv),
        args: take_str_list(&mut f, "Args", &path, conv),
        timeout_ns: take_int(&mut f, "Timeout", &path, conv),
        fail_on_error: take_bool(&mut f, "FailOnError", &path, conv),
    };
    for (unknown, v) in f {
        if meaningful(&v) {
            conv.err(join(&path, &unknown), "is not a field of a change script");
        }
    }
    Some(script)
}

fn wait(value: Option<Value>, base: &str, conv: &mut Conversion) -> Option<TemplateWait> {
    let path = join(base, "wait");
    let mut f = match value {
        None | Some(Value::Null) => return None,
        Some(Value::Object(f)) => f,
        Some(other) => {
            conv.err(path, format!("must be an object (got {other})"));
            return None;
        }
    };
    let wait = TemplateWait {
        min_ns: take_int(&mut f, "Min", &path, conv),
        max_ns: take_int(&mut f, "Max", &path, conv),
    };
    for (unknown, v) in f {
        if meaningful(&v) {
            conv.err(join(&path, &unknown), "is not a field of a template's wait");
        }
    }
    Some(wait)
}

/// A task's templates in Nomad's JSON (`null` when it has none).
pub(super) fn templates_to_api(templates: &[Template]) -> Option<Value> {
    if templates.is_empty() {
        return None;
    }
    let owner = |id: i32| (id != task_defaults::OWNER_UNSET).then_some(id);
    Some(Value::Array(
        templates
            .iter()
            .map(|t| {
                json!({
                    "SourcePath": t.source,
                    "DestPath": t.destination,
                    "EmbeddedTmpl": t.data,
                    "ChangeMode": t.change_mode,
                    "ChangeSignal": t.change_signal,
                    "ChangeScript": t.change_script.as_ref().map(|s| json!({
                        "Command": s.command,
                        "Args": s.args,
                        "Timeout": s.timeout_ns,
                        "FailOnError": s.fail_on_error,
                    })),
                    "Splay": t.splay_ns,
                    "Perms": t.perms,
                    "Uid": owner(t.uid),
                    "Gid": owner(t.gid),
                    "LeftDelim": t.left_delimiter,
                    "RightDelim": t.right_delimiter,
                    "Envvars": t.env,
                    "VaultGrace": 0,
                    "Wait": t.wait.as_ref().map(|w| json!({"Min": w.min_ns, "Max": w.max_ns})),
                    "ErrMissingKey": t.error_on_missing_key,
                    "Once": t.once,
                })
            })
            .collect(),
    ))
}

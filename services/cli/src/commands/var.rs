//! `var get`, `var put`, `var list`, `var purge`: Nomad Variables, with
//! Nomad's check-and-set guard on writes (a put creates unless told
//! `-force` or `-check-index`).

use std::collections::BTreeMap;
use std::io::Read;

use caravan_proto::{VariableDecrypted, VariableMetadata};
use serde_json::{Map, Value, json};

use crate::api::Api;
use crate::args::VarCommand;
use crate::error::CliError;
use crate::format::{kv, rfc3339, table};
use crate::ui::Ui;

type Result<T> = std::result::Result<T, CliError>;

pub(super) async fn dispatch(api: &Api, ui: &mut Ui, cmd: VarCommand) -> Result<u8> {
    match cmd {
        VarCommand::Get {
            item,
            out,
            template,
            path,
        } => {
            let out = Out::parse(&out, template)?;
            get(api, ui, &path, item.as_deref(), &out).await
        }
        VarCommand::Put {
            force,
            check_index,
            input,
            args,
        } => {
            let spec = PutSpec::parse(&args, &input)?;
            put(api, ui, spec, force, check_index).await
        }
        VarCommand::List {
            out,
            template,
            prefix,
        } => {
            let out = Out::parse(&out, template)?;
            list(api, ui, prefix.as_deref().unwrap_or(""), &out).await
        }
        VarCommand::Purge { check_index, path } => purge(api, ui, &path, check_index).await,
        VarCommand::Lock(args) => super::var_lock::lock(api, ui, args).await,
    }
}

/// How `var get` and `var list` print: `-out table|json|go-template`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Out {
    Table,
    Json,
    Template(String),
}

impl Out {
    fn parse(out: &str, template: Option<String>) -> Result<Out> {
        let parsed = match out {
            "table" => Out::Table,
            "json" => Out::Json,
            "go-template" => match template {
                Some(t) => return Ok(Out::Template(t)),
                None => {
                    return Err(CliError::Usage(
                        "A template must be supplied using '-template' when using go-template \
                         formatting"
                            .into(),
                    ));
                }
            },
            other => {
                return Err(CliError::Usage(format!(
                    "Invalid value {other:?} for \"-out\"; valid values are [go-template, json, table]"
                )));
            }
        };
        if template.is_some() {
            return Err(CliError::Usage(
                "The -template flag is only valid when using 'go-template' formatting".into(),
            ));
        }
        Ok(parsed)
    }

    /// `data` as JSON or through the template.
    fn render(&self, data: &Value) -> Result<String> {
        match self {
            Out::Template(t) => crate::format::output::template(t, data),
            _ => Ok(pretty(data)),
        }
    }
}

fn metadata_json(m: &VariableMetadata) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("Namespace".into(), json!(m.namespace));
    out.insert("Path".into(), json!(m.path));
    out.insert("CreateIndex".into(), json!(m.create_revision));
    out.insert("CreateTime".into(), json!(m.create_time));
    out.insert("ModifyIndex".into(), json!(m.modify_revision));
    out.insert("ModifyTime".into(), json!(m.modify_time));
    out
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// A variable as `var get` shows it: its metadata, then its items.
fn variable_page(v: &VariableDecrypted) -> String {
    let m = v.meta.clone().unwrap_or_default();
    let head = kv(&[
        ("Namespace", m.namespace),
        ("Path", m.path),
        ("Create Time", rfc3339(m.create_time)),
        ("Check Index", m.modify_revision.to_string()),
    ]);
    let items: Vec<(&str, &str)> = v
        .items
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    format!("{head}\n\nItems\n{}", kv(&items))
}

async fn get(api: &Api, ui: &mut Ui, path: &str, item: Option<&str>, out: &Out) -> Result<u8> {
    let v = api.variable(path).await?;
    if let Some(item) = item {
        let value = v
            .items
            .get(item)
            .ok_or_else(|| CliError::NotFound(format!("Variable {path:?} has no item {item:?}")))?;
        ui.output(value);
        return Ok(0);
    }
    if *out == Out::Table {
        ui.output(variable_page(&v));
    } else {
        let mut obj = metadata_json(&v.meta.clone().unwrap_or_default());
        obj.insert("Items".into(), json!(v.items));
        ui.output(out.render(&Value::Object(obj))?);
    }
    Ok(0)
}

async fn list(api: &Api, ui: &mut Ui, prefix: &str, out: &Out) -> Result<u8> {
    let vars = api.list_variables(prefix).await?;
    if *out != Out::Table {
        let all: Vec<Value> = vars
            .iter()
            .map(|m| Value::Object(metadata_json(m)))
            .collect();
        ui.output(out.render(&Value::Array(all))?);
        return Ok(0);
    }
    if vars.is_empty() {
        ui.output("No matching variables found");
        return Ok(0);
    }
    let mut rows = vec![vec![
        "Namespace".to_string(),
        "Path".to_string(),
        "Last Updated".to_string(),
    ]];
    rows.extend(
        vars.iter()
            .map(|m| vec![m.namespace.clone(), m.path.clone(), rfc3339(m.modify_time)]),
    );
    ui.output(table(rows));
    Ok(0)
}

/// Reports a lost check-and-set as Nomad does; exit code 1.
fn cas_conflict(ui: &mut Ui, asked: u64, current: Option<&VariableDecrypted>) -> u8 {
    let m = current.and_then(|v| v.meta.clone()).unwrap_or_default();
    let mut text = format!(
        "Check-and-Set conflict\n\n    Your provided check-index ({asked}) does not match the\n    server-side index ({}).\n",
        m.modify_revision
    );
    if m.modify_revision > 0 {
        text.push_str(&format!(
            "    The server-side item was last updated on {}.\n",
            rfc3339(m.modify_time)
        ));
    }
    text.push_str(&format!(
        "    If you are sure you want to perform this operation, add the -force or\n    -check-index={} flag before the positional arguments.",
        m.modify_revision
    ));
    ui.error(text);
    1
}

/// What `var put`'s arguments and specification say to write.
#[derive(Debug, Default, PartialEq)]
struct PutSpec {
    path: String,
    namespace: Option<String>,
    items: BTreeMap<String, String>,
    modify_index: Option<u64>,
}

impl PutSpec {
    /// Reads `PATH [@spec.json|-] [k=v…]` or `@spec.json|- [k=v…]`.
    fn parse(args: &[String], input: &str) -> Result<PutSpec> {
        if input != "json" {
            return Err(CliError::Usage(format!(
                "Invalid value {input:?} for \"-in\"; only json is supported"
            )));
        }
        let mut spec = PutSpec::default();
        let mut rest = args.iter().peekable();
        let first = rest
            .next()
            .ok_or_else(|| CliError::Usage("Not enough arguments: give a variable path".into()))?;
        let mut path = None;
        if let Some(source) = spec_source(first) {
            spec = read_spec(&source)?;
        } else {
            path = Some(first.clone());
            if let Some(source) = rest.peek().and_then(|a| spec_source(a)) {
                rest.next();
                spec = read_spec(&source)?;
            }
        }
        if let Some(path) = path {
            spec.path = path;
        }
        if spec.path.is_empty() {
            return Err(CliError::Usage(
                "The variable specification names no Path; give one as the first argument".into(),
            ));
        }
        for arg in rest {
            let (k, v) = arg.split_once('=').ok_or_else(|| {
                CliError::Usage(format!("Invalid item {arg:?}: items are key=value"))
            })?;
            if k.is_empty() {
                return Err(CliError::Usage(format!("Invalid item {arg:?}: empty key")));
            }
            if v.is_empty() {
                spec.items.remove(k);
                continue;
            }
            let value = match v.strip_prefix('@') {
                Some(file) => read_text(file)?,
                None if v == "-" => read_stdin()?,
                None => v.to_string(),
            };
            spec.items.insert(k.to_string(), value);
        }
        Ok(spec)
    }
}

/// Where a specification comes from, if `arg` names one (`@file`, `-`).
fn spec_source(arg: &str) -> Option<String> {
    if arg == "-" {
        return Some("-".into());
    }
    arg.strip_prefix('@').map(str::to_string)
}

fn read_text(file: &str) -> Result<String> {
    std::fs::read_to_string(file).map_err(|e| CliError::ReadFile {
        path: file.to_string(),
        message: e.to_string(),
    })
}

fn read_stdin() -> Result<String> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| CliError::Other(format!("Error reading standard input: {e}")))?;
    Ok(text)
}

/// A JSON specification: `Path`, `Namespace`, `Items`, `ModifyIndex`.
fn read_spec(source: &str) -> Result<PutSpec> {
    let (name, text) = if source == "-" {
        ("<stdin>".to_string(), read_stdin()?)
    } else {
        (source.to_string(), read_text(source)?)
    };
    let bad = |message: String| CliError::JobFile {
        path: name.clone(),
        message,
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let obj = v
        .as_object()
        .ok_or_else(|| bad("a variable specification is a JSON object".into()))?;
    let string = |field: &str| match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(format!("{field}: must be a string"))),
    };
    let mut spec = PutSpec {
        path: string("Path")?.unwrap_or_default(),
        namespace: string("Namespace")?.filter(|n| !n.is_empty()),
        ..Default::default()
    };
    match obj.get("ModifyIndex") {
        None | Some(Value::Null) => {}
        Some(v) => {
            let index = v
                .as_u64()
                .ok_or_else(|| bad("ModifyIndex: must be a non-negative integer".into()))?;
            spec.modify_index = (index > 0).then_some(index);
        }
    }
    match obj.get("Items") {
        None | Some(Value::Null) => {}
        Some(Value::Object(items)) => {
            for (k, v) in items {
                let Value::String(s) = v else {
                    return Err(bad(format!("Items.{k}: must be a string")));
                };
                spec.items.insert(k.clone(), s.clone());
            }
        }
        Some(_) => return Err(bad("Items: must be an object of strings".into())),
    }
    Ok(spec)
}

async fn put(
    api: &Api,
    ui: &mut Ui,
    spec: PutSpec,
    force: bool,
    check_index: Option<u64>,
) -> Result<u8> {
    let cas = if force {
        None
    } else {
        Some(check_index.or(spec.modify_index).unwrap_or(0))
    };
    let cas_revision = cas
        .map(|c| {
            i64::try_from(c).map_err(|_| {
                CliError::Usage(format!("Invalid -check-index value {c}: out of range"))
            })
        })
        .transpose()?;
    let path = spec.path.clone();
    let namespace = spec
        .namespace
        .unwrap_or_else(|| api.namespace().to_string());
    let resp = api
        .put_variable(&namespace, &spec.path, spec.items, cas_revision)
        .await?;
    if !resp.written {
        return Ok(cas_conflict(ui, cas.unwrap_or(0), resp.variable.as_ref()));
    }
    let index = resp
        .variable
        .and_then(|v| v.meta)
        .map_or(resp.revision, |m| m.modify_revision);
    ui.output(format!(
        "Created variable {path:?} with modify index {index}"
    ));
    Ok(0)
}

async fn purge(api: &Api, ui: &mut Ui, path: &str, check_index: Option<u64>) -> Result<u8> {
    let cas = check_index
        .map(|c| {
            i64::try_from(c).map_err(|_| {
                CliError::Usage(format!("Invalid -check-index value {c}: out of range"))
            })
        })
        .transpose()?;
    let resp = api.delete_variable(path, cas).await?;
    if !resp.deleted {
        return Ok(cas_conflict(
            ui,
            check_index.unwrap_or(0),
            resp.conflict.as_ref(),
        ));
    }
    ui.output(format!("Successfully purged variable {path:?}!"));
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn put_reads_a_path_then_items() {
        let spec = PutSpec::parse(&args("a/b user=me pass=x=y"), "json").unwrap();
        assert_eq!(spec.path, "a/b");
        assert_eq!(spec.items.get("pass").map(String::as_str), Some("x=y"));
        assert_eq!(spec.items.len(), 2);
        assert!(PutSpec::parse(&args("a/b novalue"), "json").is_err());
        assert!(PutSpec::parse(&args("a/b =v"), "json").is_err());
        assert!(PutSpec::parse(&args("a/b k=v"), "hcl").is_err());
    }

    #[test]
    fn put_merges_a_spec_file_with_items() {
        let dir = std::env::temp_dir().join(format!("caravan-var-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("spec.json");
        std::fs::write(
            &file,
            r#"{"Path": "from/spec", "Namespace": "team", "ModifyIndex": 7,
                "Items": {"a": "1", "b": "2"}}"#,
        )
        .unwrap();
        let value = dir.join("value.txt");
        std::fs::write(&value, "from a file").unwrap();
        let f = file.display();
        let spec =
            PutSpec::parse(&args(&format!("@{f} b= c=@{}", value.display())), "json").unwrap();
        assert_eq!(spec.path, "from/spec");
        assert_eq!(spec.namespace.as_deref(), Some("team"));
        assert_eq!(spec.modify_index, Some(7));
        assert_eq!(spec.items.get("a").map(String::as_str), Some("1"));
        assert!(
            !spec.items.contains_key("b"),
            "an empty value removes the item"
        );
        assert_eq!(spec.items.get("c").map(String::as_str), Some("from a file"));
        // A path before the spec wins over the spec's.
        let spec = PutSpec::parse(&args(&format!("other @{f}")), "json").unwrap();
        assert_eq!(spec.path, "other");
        std::fs::write(&file, r#"{"Items": {"a": 1}}"#).unwrap();
        let err = PutSpec::parse(&args(&format!("p @{f}")), "json").unwrap_err();
        assert!(err.to_string().contains("Items.a"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_page_shows_metadata_then_items() {
        let v = VariableDecrypted {
            meta: Some(VariableMetadata {
                namespace: "default".into(),
                path: "a".into(),
                modify_revision: 12,
                ..Default::default()
            }),
            items: [("user".to_string(), "me".to_string())].into(),
        };
        let page = variable_page(&v);
        assert!(page.contains("Path        = a"), "{page}");
        assert!(page.contains("Check Index = 12"), "{page}");
        assert!(page.ends_with("Items\nuser = me"), "{page}");
    }
}

//! `-json` and `-t '<go template>'`: a read verb prints Nomad's JSON (what
//! the HTTP API answered, indented by four spaces as Nomad's CLI indents it)
//! or that JSON through a Go template, instead of its table, so scripts
//! written against Nomad's CLI read Caravan's unchanged.
//!
//! Templates run on [`gotmpl`], a port of Go's `text/template`: actions,
//! pipelines, `range`, `with`, variables, `printf`, `index`, `len`, `slice`,
//! comparisons. Nomad's extra `sprig_*` functions are not offered; a
//! template that calls one fails naming the function.

use clap::Args;
use serde_json::Value;

use crate::error::CliError;

/// The flags of a read verb that prints JSON or a template instead of a table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct FormatArgs {
    /// Print Nomad's JSON of what was read.
    #[arg(long)]
    pub json: bool,
    /// Print what was read through a Go template (`{{ range . }}{{ .ID }}{{ end }}`).
    #[arg(short = 't', value_name = "TEMPLATE")]
    pub template: Option<String>,
}

impl FormatArgs {
    /// Whether JSON or a template was asked for instead of the table.
    pub fn wanted(&self) -> bool {
        self.json || self.template.is_some()
    }

    /// `data` as asked: JSON or the template's output.
    pub fn render(&self, data: &Value) -> Result<String, CliError> {
        match (self.json, &self.template) {
            (true, Some(_)) => Err(CliError::Usage(
                "Both json and template formatting are not allowed".into(),
            )),
            (true, None) => Ok(pretty(data)),
            (false, Some(t)) => template(t, data),
            (false, None) => Err(CliError::Usage("no formatting option given".into())),
        }
    }
}

/// JSON indented by four spaces, as Nomad's CLI prints it.
pub fn pretty(data: &Value) -> String {
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    // A `Value` always serializes.
    let _ = serde::Serialize::serialize(data, &mut ser);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Runs the Go template `source` over `data`.
pub fn template(source: &str, data: &Value) -> Result<String, CliError> {
    if source.is_empty() {
        return Err(CliError::Usage(
            "template needs to be specified in golang's text/template format.".into(),
        ));
    }
    let parsed = gotmpl::Template::new("")
        .parse(source)
        .map_err(|e| CliError::Usage(format!("Error formatting the data: {e}")))?;
    parsed
        .execute_to_string(&to_template_value(data))
        .map_err(|e| CliError::Other(format!("Error formatting the data: {e}")))
}

/// JSON as the template engine's values: objects are maps (fields read as
/// `.Name`), integers stay integers.
fn to_template_value(v: &Value) -> gotmpl::Value {
    match v {
        Value::Null => gotmpl::Value::Nil,
        Value::Bool(b) => gotmpl::Value::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                gotmpl::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                gotmpl::Value::Uint(u)
            } else {
                gotmpl::Value::Float(n.as_f64().unwrap_or(0.0))
            }
        }
        Value::String(s) => gotmpl::Value::String(s.as_str().into()),
        Value::Array(items) => gotmpl::Value::List(
            items
                .iter()
                .map(to_template_value)
                .collect::<Vec<_>>()
                .into(),
        ),
        Value::Object(map) => gotmpl::Value::Map(std::sync::Arc::new(
            map.iter()
                .map(|(k, v)| (k.as_str().into(), to_template_value(v)))
                .collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn jobs() -> Value {
        json!([
            {"ID": "web", "Priority": 50, "Status": "running",
             "TaskGroups": [{"Name": "web", "Count": 3}], "Meta": {"team": "a"}},
            {"ID": "cron", "Priority": 70, "Status": "dead", "TaskGroups": [], "Meta": null},
        ])
    }

    #[test]
    fn json_is_indented_by_four_spaces() {
        let out = FormatArgs {
            json: true,
            template: None,
        }
        .render(&json!({"ID": "web", "Count": [1]}))
        .unwrap();
        assert_eq!(
            out,
            "{\n    \"Count\": [\n        1\n    ],\n    \"ID\": \"web\"\n}"
        );
    }

    #[test]
    fn templates_range_printf_index_len_and_pipes() {
        let t = |src: &str| template(src, &jobs()).unwrap();
        assert_eq!(t("{{ range . }}{{ .ID }} {{ end }}"), "web cron ");
        assert_eq!(
            t(r#"{{ range . }}{{ printf "%s=%d;" .ID .Priority }}{{ end }}"#),
            "web=50;cron=70;"
        );
        assert_eq!(t("{{ (index . 0).ID }}"), "web");
        assert_eq!(t("{{ len . }}"), "2");
        assert_eq!(t(r#"{{ index . 1 "ID" | printf "%s!" | len }}"#), "5");
        assert_eq!(
            t(r#"{{ range . }}{{ if eq .Status "running" }}{{ .ID }}{{ end }}{{ end }}"#),
            "web"
        );
        assert_eq!(t(r#"{{ index (index . 0).Meta "team" }}"#), "a");
        assert_eq!(
            t("{{ range $i, $j := . }}{{ $i }}:{{ len $j.TaskGroups }} {{ end }}"),
            "0:1 1:0 "
        );
    }

    #[test]
    fn bad_requests_are_clear() {
        let both = FormatArgs {
            json: true,
            template: Some("x".into()),
        };
        assert_eq!(
            both.render(&json!(1)).unwrap_err().to_string(),
            "Both json and template formatting are not allowed"
        );
        let err = template("{{ .ID ", &jobs()).unwrap_err().to_string();
        assert!(err.starts_with("Error formatting the data"), "{err}");
        let err = template(r#"{{ sprig_upper "x" }}"#, &jobs())
            .unwrap_err()
            .to_string();
        assert!(err.contains("sprig_upper"), "{err}");
    }
}

//! The evaluator against HCL's semantics and Nomad's pass-through of run-time references.

use std::collections::BTreeMap;

use hcl_edit::structure::Structure;

use super::value::Value;
use super::{Env, FileAccess, evaluate};

/// Evaluates the value of `a = ...` in `src` with `var.*` from `vars`, as in a job file.
fn eval_with(src: &str, vars: &[(&str, Value)]) -> Result<Value, String> {
    let body = hcl_edit::parser::parse_body(src).map_err(|e| format!("parse: {e}"))?;
    let Some(Structure::Attribute(a)) = body.iter().next() else {
        panic!("no attribute")
    };
    let env = Env {
        vars: Some(
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        ),
        locals: Some(BTreeMap::new()),
        files: Some(FileAccess::default()),
        passthrough: true,
    };
    evaluate(&a.value, src, &env, &None).map_err(|e| e.message)
}

fn eval(src: &str) -> Result<Value, String> {
    eval_with(src, &[])
}

fn s(v: &str) -> Value {
    Value::String(v.to_string())
}

fn hcl(src: &str) -> Value {
    eval(&format!("a = {src}")).expect("evaluates")
}

#[test]
fn runtime_references_pass_through_as_nomad_writes_them() {
    // Nomad's own cases: the text reaches the client byte for byte.
    for case in [
        "plain",
        "foo-${BAR}",
        "foo-${attr.network.dev-us-east1-relay-vpc.external-ip.0}",
        r#"${env["BLAH"]}"#,
        r#"${mixed-indexing.0[3]["FOO"].5}"#,
        r#"with spaces ${   root.  field[  "FOO"].5  }"#,
        "${NOMAD_PORT_http}",
        "http://${ attr.unique.network.ip-address }:${NOMAD_PORT_http}/x",
        "${node.unique.name}-${meta.rack}",
    ] {
        let src = format!("a = \"{case}\"");
        assert_eq!(eval(&src), Ok(s(case)), "{case}");
    }
    // A bare reference is wrapped in a new `${}`.
    assert_eq!(eval("a = meta.mytest"), Ok(s("${meta.mytest}")));
    // Known names still evaluate beside unknown ones.
    assert_eq!(
        eval_with("a = \"${var.x}-${NOMAD_ALLOC_ID}\"", &[("x", s("web"))]),
        Ok(s("web-${NOMAD_ALLOC_ID}"))
    );
}

#[test]
fn escapes_resolve_but_interpolations_do_not() {
    assert_eq!(
        eval(r#"a = "tab\there \"q\" $${lit} %%{lit}""#),
        Ok(s("tab\there \"q\" ${lit} %{lit}"))
    );
}

#[test]
fn heredocs_strip_indent_and_interpolate() {
    let src = "a = <<-EOT\n    echo ${NOMAD_ALLOC_ID}\n      done ${1 + 1}\n    EOT\n";
    assert_eq!(eval(src), Ok(s("echo ${NOMAD_ALLOC_ID}\n  done 2\n")));
}

#[test]
fn a_lone_interpolation_keeps_its_type() {
    assert_eq!(hcl("\"${3 * 4}\""), Value::from(12));
    assert_eq!(hcl("\"${[1, 2]}\""), hcl("[1, 2]"));
    assert_eq!(hcl("\"n=${3 * 4}\""), s("n=12"));
}

#[test]
fn arithmetic_comparison_and_logic() {
    assert_eq!(hcl("1 + 2 * 3"), Value::from(7));
    assert_eq!(hcl("(1 + 2) * 3"), Value::from(9));
    assert_eq!(hcl("7 / 2"), hcl("3.5"));
    assert_eq!(hcl("7 % 3"), Value::from(1));
    assert_eq!(hcl("-(2 - 5)"), Value::from(3));
    assert_eq!(hcl("\"2\" + 1"), Value::from(3));
    assert_eq!(hcl("3 >= 3 && 2 < 1 || !false"), Value::Bool(true));
    assert_eq!(hcl("1 == \"1\""), Value::Bool(false));
    assert_eq!(hcl("[1, \"a\"] == [1, \"a\"]"), Value::Bool(true));
    assert!(eval("a = 1 / 0").unwrap_err().contains("divide by zero"));
    assert!(
        eval("a = true + 1")
            .unwrap_err()
            .contains("a number is required")
    );
}

#[test]
fn conditionals_unify_and_skip_the_branch_not_taken() {
    assert_eq!(hcl("true ? 1 : 2"), Value::from(1));
    assert_eq!(hcl("false ? 1 : \"x\""), s("x"));
    assert_eq!(hcl("true ? 1 : \"x\""), s("1"));
    assert_eq!(hcl("\"true\" ? \"y\" : \"n\""), s("y"));
    // The branch not taken may fail.
    assert_eq!(hcl("true ? 1 : [][0]"), Value::from(1));
    assert!(
        eval("a = true ? 1 : false")
            .unwrap_err()
            .contains("Inconsistent conditional result types")
    );
    assert!(
        eval("a = null ? 1 : 2")
            .unwrap_err()
            .contains("Null condition")
    );
}

#[test]
fn for_expressions() {
    assert_eq!(
        hcl("[for s in [\"a\", \"b\"] : upper(s)]"),
        hcl("[\"A\", \"B\"]")
    );
    assert_eq!(
        hcl("[for i, s in [\"a\", \"b\"] : \"${i}${s}\"]"),
        hcl("[\"0a\", \"1b\"]")
    );
    assert_eq!(
        hcl("{for k, v in {b = 2, a = 1} : v => k}"),
        hcl("{\"1\" = \"a\", \"2\" = \"b\"}")
    );
    assert_eq!(
        hcl("[for n in [1, 2, 3, 4] : n * n if n % 2 == 0]"),
        hcl("[4, 16]")
    );
    assert_eq!(
        hcl("{for s in [\"ab\", \"ac\", \"b\"] : substr(s, 0, 1) => s...}"),
        hcl("{a = [\"ab\", \"ac\"], b = [\"b\"]}")
    );
    assert!(
        eval("a = {for s in [\"x\", \"x\"] : s => 1}")
            .unwrap_err()
            .contains("Duplicate object key")
    );
    // Iteration variables shadow and then go out of scope.
    assert_eq!(
        eval_with("a = [for x in [1] : [for x in [2] : x]]", &[]),
        Ok(hcl("[[2]]"))
    );
}

#[test]
fn splats_and_indexes() {
    let list = "[{name = \"a\", ports = [1]}, {name = \"b\", ports = [2]}]";
    assert_eq!(hcl(&format!("{list}[*].name")), hcl("[\"a\", \"b\"]"));
    assert_eq!(hcl(&format!("{list}.*.name")), hcl("[\"a\", \"b\"]"));
    assert_eq!(hcl(&format!("{list}[*].ports[0]")), hcl("[1, 2]"));
    assert_eq!(hcl(&format!("{list}[1].name")), s("b"));
    assert_eq!(hcl("{a = {b = 1}}.a.b"), Value::from(1));
    assert_eq!(hcl("{a = 1}[\"a\"]"), Value::from(1));
    assert_eq!(hcl("[10, 20].1"), Value::from(20));
    assert_eq!(hcl("null[*]"), hcl("[]"));
    assert_eq!(hcl("\"x\"[*]"), hcl("[\"x\"]"));
    assert!(eval("a = [1][5]").unwrap_err().contains("Invalid index"));
    assert!(
        eval("a = {a = 1}.b")
            .unwrap_err()
            .contains("does not have an attribute named \"b\"")
    );
}

#[test]
fn template_directives_and_strip_markers() {
    assert_eq!(hcl("\"%{ if true }yes%{ else }no%{ endif }\""), s("yes"));
    assert_eq!(
        hcl("\"%{ for x in [1, 2, 3] }${x},%{ endfor }\""),
        s("1,2,3,")
    );
    assert_eq!(hcl("\"a  ${~ \"b\" ~}  c\""), s("abc"));
    let src = "a = <<EOT\nitems:\n%{ for k, v in {x = 1, y = 2} ~}\n  ${k}: ${v}\n%{ endfor ~}\nend\nEOT\n";
    // `~}` strips the newline and the indentation after it, as HCL does.
    assert_eq!(eval(src), Ok(s("items:\nx: 1\ny: 2\nend\n")));
    assert!(eval("a = \"x${null}\"").unwrap_err().contains("null value"));
    // A lone interpolation is its value, null included.
    assert_eq!(hcl("\"${null}\""), Value::Null);
}

#[test]
fn objects_take_names_expressions_and_reject_duplicates() {
    assert_eq!(hcl("{a = 1, \"b.c\" = 2}"), hcl("{\"a\" = 1, \"b.c\" = 2}"));
    assert_eq!(
        eval_with("a = {(var.k) = 1}", &[("k", s("key"))]),
        Ok(hcl("{key = 1}"))
    );
    let keys: Vec<String> = (0..2_000).map(|i| format!("k{i} = {i}")).collect();
    let src = format!("a = {{\n{}\n\"k1999\" = 0\n}}", keys.join("\n"));
    assert_eq!(eval(&src), Err("duplicate object key \"k1999\"".into()));
}

#[test]
fn function_calls_try_can_convert_and_expansion() {
    assert_eq!(hcl("max([1, 5, 3]...)"), Value::from(5));
    assert_eq!(hcl("try({}.a, \"fallback\")"), s("fallback"));
    assert_eq!(hcl("can({}.a)"), Value::Bool(false));
    assert_eq!(hcl("can(1)"), Value::Bool(true));
    assert_eq!(hcl("convert([\"1\", \"2\"], list(number))"), hcl("[1, 2]"));
    assert!(
        eval("a = nosuch(1)")
            .unwrap_err()
            .contains("There is no function named \"nosuch\"")
    );
    assert!(
        eval("a = templatefile(\"x\", {})")
            .unwrap_err()
            .contains("no function named \"templatefile\"")
    );
    assert!(
        eval("a = rsadecrypt(\"x\", \"y\")")
            .unwrap_err()
            .contains("RUSTSEC-2023-0071")
    );
    assert!(
        eval("a = try({}.a, {}.b)")
            .unwrap_err()
            .contains("no expression succeeded")
    );
}

#[test]
fn defaults_and_var_files_allow_neither_variables_nor_functions() {
    let expr: hcl_edit::expr::Expression = "var.x".parse().expect("parses");
    let err = super::constant(&expr).unwrap_err();
    assert!(err.message.contains("Variables not allowed"), "{err:?}");
    let expr: hcl_edit::expr::Expression = "upper(\"x\")".parse().expect("parses");
    let err = super::constant(&expr).unwrap_err();
    assert!(
        err.message.contains("Function calls not allowed"),
        "{err:?}"
    );
}

#[test]
fn errors_carry_the_span_of_the_failing_expression() {
    let src = "a = [1, 2, {}.missing]";
    let body = hcl_edit::parser::parse_body(src).expect("parses");
    let Some(Structure::Attribute(a)) = body.iter().next() else {
        panic!("no attribute")
    };
    let env = Env {
        vars: Some(BTreeMap::new()),
        passthrough: true,
        files: Some(FileAccess::default()),
        ..Default::default()
    };
    let err = evaluate(&a.value, src, &env, &None).unwrap_err();
    let span = err.span.expect("a span");
    assert_eq!(&src[span], ".missing");
}

//! Go text/template's control structures, parse errors and the no-panic properties.

use super::*;
use crate::*;

#[test]
fn pipelines_and_variables() {
    assert_eq!(
        t(r#"{{ "abc" | printf "%s-%d" 4 }}"#),
        "%!s(int=4)-%!d(string=abc)"
    );
    assert_eq!(t(r#"{{ $x := "a" }}{{ $x = "b" }}{{ $x }}"#), "b");
    assert_eq!(t(r#"{{ "x" | toUpper | printf "[%s]" }}"#), "[X]");
    assert_eq!(
        t(r#"{{ with $v := "in" }}{{ $v }}{{ . }}{{ end }}"#),
        "inin"
    );
}

#[test]
fn range_forms() {
    assert_eq!(
        t(r#"{{ range $i, $e := split "," "a,b,c" }}{{ $i }}={{ $e }};{{ end }}"#),
        "0=a;1=b;2=c;"
    );
    assert_eq!(
        t(r#"{{ range split "," "" }}x{{ else }}empty{{ end }}"#),
        "empty"
    );
    assert_eq!(t(r#"{{ range loop 3 }}{{ . }}{{ end }}"#), "012");
    assert_eq!(t(r#"{{ range loop 1 3 }}{{ . }}{{ end }}"#), "12");
    assert_eq!(
        t(r#"{{ range $k, $v := parseJSON "{\"b\":2,\"a\":1}" }}{{ $k }}{{ $v }}{{ end }}"#),
        "a1b2"
    );
    // `$` is the data of the whole render (nil here) inside a range.
    assert_eq!(t(r#"{{ range loop 1 }}{{ $ }}{{ end }}"#), "<no value>");
}

#[test]
fn if_with_else() {
    assert_eq!(
        t(r#"{{ if eq 1 2 }}a{{ else if eq 2 2 }}b{{ else }}c{{ end }}"#),
        "b"
    );
    assert_eq!(t(r#"{{ with "" }}x{{ else }}none{{ end }}"#), "none");
    assert_eq!(
        t(r#"{{ if and 1 0 }}t{{ else }}f{{ end }}{{ or 0 "" "z" }}{{ not 0 }}"#),
        "fztrue"
    );
}

#[test]
fn comparisons_and_builtins() {
    assert_eq!(
        t(r#"{{ ne 1 2 }} {{ lt 1 2 }} {{ le 2 2 }} {{ gt "b" "a" }} {{ ge 1 2 }}"#),
        "true true true true false"
    );
    assert_eq!(
        t(r#"{{ len (split "," "a,b") }} {{ index (split "," "a,b") 1 }}"#),
        "2 b"
    );
    assert_eq!(
        t(r#"{{ print "a" 1 2 "b" }}|{{ println "x" }}|"#),
        "a1 2b|x\n|"
    );
    assert_eq!(
        t(r#"{{ printf "%05.1f|%q|%v" 3.14159 "s" true }}"#),
        "003.1|\"s\"|true"
    );
}

#[test]
fn whitespace_trim_and_comments() {
    assert_eq!(t("a  {{- \"b\" -}}  \n c"), "abc");
    assert_eq!(t("a {{/* note */}} b"), "a  b");
    assert_eq!(t("a {{- /* note */ -}} b"), "ab");
}

#[test]
fn custom_delimiters() {
    let tpl = parse(r#"[[ env "HOME" ]] {{ literal }}"#, "[[", "]]").unwrap();
    let w = World::new();
    let r = render(&tpl, &w.ctx()).unwrap();
    assert_eq!(r.text.as_deref(), Some("/home/app {{ literal }}"));
}

#[test]
fn define_and_template() {
    assert_eq!(
        t(r#"{{ define "x" }}<{{ . }}>{{ end }}{{ template "x" "v" }}"#),
        "<v>"
    );
}

#[test]
fn missing_key_default_and_error() {
    let mut w = World::new().var("app/db", &[("user", "u1")]);
    assert_eq!(
        w.text(r#"{{ with nomadVar "app/db" }}{{ .user }}/{{ .nope }}{{ end }}"#),
        "u1/<no value>"
    );
    w.strict = true;
    let e = w.err(r#"{{ with nomadVar "app/db" }}{{ .nope }}{{ end }}"#);
    assert!(e.contains("nope"), "{e}");
    assert!(e.contains("map has no entry for key"), "{e}");
}

#[test]
fn parse_refuses_unsupported_and_unknown_functions() {
    let e = parse(r#"{{ key "a" }}"#, "", "").unwrap_err().to_string();
    assert_eq!(
        e,
        "function \"key\" is not supported by Caravan: it reads Consul's KV store"
    );
    let e = parse(r#"{{ with secret "kv/x" }}{{ end }}"#, "", "")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "function \"secret\" is not supported by Caravan: it reads Vault"
    );
    let e = parse(r#"{{ range service "web" }}{{ end }}"#, "", "")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("function \"service\" is not supported by Caravan"),
        "{e}"
    );
    let e = parse(r#"{{ foo }}"#, "", "").unwrap_err().to_string();
    assert!(e.contains("function \"foo\" not defined"), "{e}");
    assert!(parse("{{ if }}", "", "").is_err());
    assert!(
        parse("a{{ end }}b", "", "")
            .unwrap_err()
            .to_string()
            .contains("unexpected {{end}}")
    );
    assert!(parse("a{{ else }}b", "", "").is_err());
    assert!(
        parse("{{ break }}", "", "")
            .unwrap_err()
            .to_string()
            .contains("{{break}} outside {{range}}")
    );
    assert!(
        parse(
            "{{ range loop 2 }}{{ if 1 }}{{ continue }}{{ end }}{{ end }}",
            "",
            ""
        )
        .is_ok()
    );
    assert!(parse("{{ range loop 2 }}{{ else }}{{ break }}{{ end }}", "", "").is_err());
    let e = parse("\n{{ if 1 }}{{ bar 1 }}{{ end }}", "", "")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "template: line 2: function \"bar\" not defined");
    assert!(parse("{{ .X", "", "").is_err());
}

#[test]
fn parse_never_panics_on_nasty_inputs() {
    let nasty = [
        "",
        "{{",
        "}}",
        "{{}}",
        "{{-}}",
        "{{- -}}",
        "{{/*",
        "{{/* */",
        "{{ \"unterminated }}",
        "{{ `raw",
        "{{ 'c }}",
        "{{ $ }}",
        "{{ $x }}",
        "{{ $x := }}",
        "{{ range }}{{ end }}",
        "{{ else }}",
        "{{ if 1 }}{{ else }}{{ else }}{{ end }}",
        "{{ (((( }}",
        "{{ ) }}",
        "{{ 1e999999 }}",
        "{{ 0x }}",
        "{{ 99999999999999999999999 }}",
        "{{ .a.b.c.d | | }}",
        "{{ template }}",
        "{{ define \"a\" }}",
        "{{ block \"b\" . }}",
        "{{ break }}",
        "{{ continue }}",
        "\u{0}{{ \u{0} }}",
        "{{ \"\\xff\" }}",
        "{{ 'ab' }}",
        "{{ nil }}",
        "{{ nil | print }}",
        "{{ range $i, $j, $k := . }}{{ end }}",
        "{{ with $x := 1 }}{{ else with 2 }}{{ end }}",
        "{{ printf \"%\" }}",
        "{{{{}}}}",
        "{{-1}}",
        "{{- 1 -}}",
        "{{ .Field.Method arg }}",
    ];
    for text in nasty {
        for (l, r) in [("", ""), ("[[", "]]"), ("<", ">")] {
            if let Ok(tpl) = parse(text, l, r) {
                let w = World::new();
                let _ = render(&tpl, &w.ctx());
            }
        }
    }
    // Deep nesting must not overflow the stack at parse or render time.
    let deep = format!("{}{}", "{{ if 1 }}".repeat(2000), "{{ end }}".repeat(2000));
    if let Ok(tpl) = parse(&deep, "", "") {
        let _ = render(&tpl, &World::new().ctx());
    }
    let parens = format!("{{{{ {}1{} }}}}", "(".repeat(5000), ")".repeat(5000));
    let _ = parse(&parens, "", "");
}

#[test]
fn random_texts_never_panic() {
    use rand::{Rng, SeedableRng};
    const PIECES: &[&str] = &[
        "{{",
        "}}",
        "{{-",
        "-}}",
        " ",
        "\n",
        "if",
        "else",
        "end",
        "range",
        "with",
        "define",
        "template",
        "block",
        "break",
        "continue",
        "$",
        "$x",
        ":=",
        "=",
        ".",
        ".a",
        "|",
        "(",
        ")",
        "\"s\"",
        "`r`",
        "'c'",
        "1",
        "-1",
        "1.5",
        "0x1f",
        "nil",
        "true",
        "/*",
        "*/",
        ",",
        "nomadVar",
        "nomadService",
        "\"web\"",
        "\"a/b@ns\"",
        "env",
        "printf",
        "\"%d\"",
        "index",
        "len",
        "eq",
        "and",
        "or",
        "not",
        "loop",
        "split",
        "toJSON",
        "parseJSON",
        "key",
        "add",
        "divide",
        "0",
        "indent",
        "regexMatch",
        "\"(\"",
        "slice",
        "call",
        "print",
    ];
    let mut rng = rand_pcg::Pcg64::seed_from_u64(44);
    let w = World::new().var("a/b", &[("k", "v")]);
    let mut rendered = 0;
    for _ in 0..5000 {
        let n = rng.random_range(1..24);
        let text: String = (0..n)
            .map(|_| PIECES[rng.random_range(0..PIECES.len())])
            .collect();
        if let Ok(tpl) = parse(&text, "", "") {
            let _ = render(&tpl, &w.ctx());
            rendered += 1;
        }
    }
    // The alphabet makes valid texts too, so rendering is exercised, not only parse errors.
    assert!(rendered > 100, "only {rendered} texts parsed");
}

#[test]
fn go_semantics_edge_cases() {
    let w = World::new();
    let e = w.err("{{ eq 1 1.0 }}");
    assert!(e.contains("incompatible types for comparison"), "{e}");
    // `and` stops at the first falsy argument without evaluating the rest.
    assert_eq!(t("{{ and 0 (index 1 2) }}"), "0");
    assert_eq!(
        t(r#"{{ index (parseJSON "{\"a\":1}") "b" }}"#),
        "<no value>"
    );
    assert!(w.err("{{ len 3 }}").contains("len"));
    assert_eq!(
        t("{{ with $x := 0 }}a{{ else with 2 }}{{ . }}{{ end }}"),
        "2"
    );
    assert_eq!(t("{{ range 3 }}{{ . }}{{ end }}"), "012");
    assert_eq!(
        t(
            r#"{{ range $i, $e := split "," "x,y" }}{{ if eq $i 1 }}{{ break }}{{ end }}{{ $e }}{{ end }}"#
        ),
        "x"
    );
    assert_eq!(t(r#"{{ eq "a" "b" "a" }} {{ slice "abc" 1 2 }}"#), "true b");
    assert_eq!(
        t(r#"{{ (parseJSON "{\"a\":{\"b\":[1,2]}}").a.b }}"#),
        "[1 2]"
    );
    assert_eq!(
        t("{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}"),
        "2"
    );
    assert_eq!(t("{{ .Foo }}|{{ print nil }}"), "<no value>|<nil>");
    assert_eq!(
        t(r#"{{ html "<a>" }} {{ js "'" }} {{ urlquery "a b" }}"#),
        "&lt;a&gt; \\' a+b"
    );
}

#[test]
fn execute_template_renders_a_define_into_a_pipeline() {
    assert_eq!(
        t(
            r#"{{ define "x" }}<{{ . }}>{{ end }}{{ executeTemplate "x" "v" | toUpper }}|{{ executeTemplate "x" }}"#
        ),
        "<V>|<<no value>>"
    );
    let e = World::new().err(
        r#"{{ define "loop" }}{{ executeTemplate "loop" }}{{ end }}{{ executeTemplate "loop" }}"#,
    );
    assert_eq!(
        e,
        "execution error: executeTemplate: calls nest deeper than 16"
    );
    assert!(
        World::new()
            .err(r#"{{ executeTemplate "nope" }}"#)
            .contains("nope")
    );
}

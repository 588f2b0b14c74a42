//! Unit tests: control structures, functions and the dep protocol, with the outputs Go's
//! text/template and consul-template print for the same texts.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

struct World {
    env: BTreeMap<String, String>,
    data: BTreeMap<Dep, DepValue>,
    strict: bool,
}

impl World {
    fn new() -> Self {
        let env = [("NOMAD_REGION", "global"), ("HOME", "/home/app")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        World {
            env,
            data: BTreeMap::new(),
            strict: false,
        }
    }

    fn var(mut self, path: &str, items: &[(&str, &str)]) -> Self {
        let v = Variable {
            namespace: "default".into(),
            path: path.into(),
            items: items
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            create_index: 1,
            modify_index: 2,
        };
        self.data.insert(
            Dep::Var {
                namespace: "default".into(),
                path: path.into(),
            },
            DepValue::Var(Some(v)),
        );
        self
    }

    fn ctx(&self) -> Context<'_> {
        Context {
            env: &self.env,
            namespace: "default",
            data: &self.data,
            error_on_missing_key: self.strict,
        }
    }

    fn render(&self, text: &str) -> Result<Rendered, TemplateError> {
        render(&parse(text, "", "")?, &self.ctx())
    }

    /// The rendered text; panics (failing the test) when withheld or failed.
    fn text(&self, text: &str) -> String {
        match self.render(text) {
            Ok(Rendered { text: Some(t), .. }) => t,
            other => panic!("{text:?} did not render: {other:?}"),
        }
    }

    fn err(&self, text: &str) -> String {
        match self.render(text) {
            Err(e) => e.to_string(),
            Ok(r) => panic!("{text:?} rendered {r:?}"),
        }
    }
}

fn t(text: &str) -> String {
    World::new().text(text)
}

fn var_dep(path: &str) -> Dep {
    Dep::Var {
        namespace: "default".into(),
        path: path.into(),
    }
}

// ---- control structures ----

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

// ---- parse errors ----

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

// ---- the dep protocol ----

#[test]
fn missing_deps_are_collected_in_one_pass() {
    let w = World::new();
    let r = w
        .render(r#"{{ with nomadVar "a" }}{{ .x }}{{ end }}{{ range nomadService "web" }}{{ .Address }}{{ end }}{{ nomadVarExists "b@other" }}"#)
        .unwrap();
    assert_eq!(r.text, None);
    let want: BTreeSet<Dep> = [
        var_dep("a"),
        Dep::Var {
            namespace: "other".into(),
            path: "b".into(),
        },
        Dep::Service {
            namespace: "default".into(),
            name: "web".into(),
            tag: None,
        },
    ]
    .into_iter()
    .collect();
    assert_eq!(r.deps, want);
    assert_eq!(r.missing, want);
}

#[test]
fn missing_dep_withholds_even_a_failing_text() {
    let mut w = World::new();
    w.strict = true;
    let r = w
        .render(r#"{{ with nomadVar "a" }}{{ .x }}{{ end }}{{ (nomadVar "b").y }}"#)
        .unwrap();
    assert_eq!(r.text, None);
    assert!(r.missing.contains(&var_dep("b")));
}

#[test]
fn var_that_does_not_exist_blocks_without_being_missing() {
    let mut w = World::new();
    w.data.insert(var_dep("gone"), DepValue::Var(None));
    let r = w
        .render(r#"{{ with nomadVar "gone" }}{{ .x }}{{ end }}"#)
        .unwrap();
    assert_eq!(r.text, None);
    assert_eq!(r.deps, [var_dep("gone")].into_iter().collect());
    assert!(r.missing.is_empty());
    // nomadVarExists answers false for it and renders.
    assert_eq!(w.text(r#"{{ nomadVarExists "gone" }}"#), "false");
}

#[test]
fn nomad_var_items() {
    let w = World::new().var("app/db", &[("user", "u1"), ("pass", "p@ss")]);
    assert_eq!(
        w.text(r#"{{ with nomadVar "app/db" }}{{ .user }}:{{ .pass }}{{ end }}"#),
        "u1:p@ss"
    );
    assert_eq!(
        w.text(r#"{{ range $k, $v := nomadVar "/app/db/" }}{{ $k }}={{ $v }};{{ end }}"#),
        "pass=p@ss;user=u1;"
    );
    assert_eq!(w.text(r#"{{ index (nomadVar "app/db") "user" }}"#), "u1");
    assert_eq!(w.text(r#"{{ nomadVarExists "app/db" }}"#), "true");
    assert_eq!(
        w.text(r#"{{ len (nomadVar "") }}{{ nomadVarExists "" }}"#),
        "0false"
    );
    let e = w.err(r#"{{ nomadVar "a@b@c" }}"#);
    assert!(e.contains("nomad.var.get: invalid format"), "{e}");
}

#[test]
fn nomad_var_list_and_safe_form() {
    let mut w = World::new();
    let dep = Dep::VarList {
        namespace: "default".into(),
        prefix: "app/".into(),
    };
    w.data.insert(
        dep.clone(),
        DepValue::VarList(vec![
            VariableMeta {
                namespace: "default".into(),
                path: "app/a".into(),
                create_index: 3,
                modify_index: 4,
            },
            VariableMeta {
                namespace: "default".into(),
                path: "app/b".into(),
                create_index: 5,
                modify_index: 6,
            },
        ]),
    );
    assert_eq!(
        w.text(r#"{{ range nomadVarList "app/" }}{{ .Path }}@{{ .ModifyIndex }} {{ end }}"#),
        "app/a@4 app/b@6 "
    );
    let all = w.render(r#"{{ nomadVarList }}"#).unwrap();
    assert_eq!(
        all.missing,
        [Dep::VarList {
            namespace: "default".into(),
            prefix: "".into()
        }]
        .into_iter()
        .collect()
    );
    w.data.insert(dep, DepValue::VarList(vec![]));
    assert_eq!(w.text(r#"{{ len (nomadVarList "app/") }}"#), "0");
    let r = w.render(r#"{{ len (nomadVarListSafe "app/") }}"#).unwrap();
    assert_eq!(r.text, None);
    assert!(r.missing.is_empty());
    let e = w.err(r#"{{ nomadVarList "a" "b" }}"#);
    assert!(e.contains("single \"prefix\""), "{e}");
}

fn instance(id: &str, port: u32, tags: &[&str]) -> ServiceInstance {
    ServiceInstance {
        id: id.into(),
        service_name: "web".into(),
        namespace: "default".into(),
        node_id: "n1".into(),
        datacenter: "dc1".into(),
        job_id: "j".into(),
        alloc_id: format!("alloc-{id}"),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        address: "10.0.0.1".into(),
        port,
        create_index: 1,
        modify_index: 1,
    }
}

fn with_web() -> World {
    let mut w = World::new();
    let instances = vec![
        instance("a", 8001, &["v2", "blue"]),
        instance("b", 8002, &["v1"]),
        instance("c", 8003, &["v1"]),
    ];
    for tag in [None, Some("v1".to_string())] {
        w.data.insert(
            Dep::Service {
                namespace: "default".into(),
                name: "web".into(),
                tag,
            },
            DepValue::Service(instances.clone()),
        );
    }
    w
}

#[test]
fn nomad_service_forms() {
    let w = with_web();
    assert_eq!(
        w.text(r#"{{ range nomadService "web" }}{{ .Address }}:{{ .Port }} {{ .Tags }} {{ .Node }}/{{ .Datacenter }}/{{ .AllocID }};{{ end }}"#),
        "10.0.0.1:8001 [blue v2] n1/dc1/alloc-a;10.0.0.1:8002 [v1] n1/dc1/alloc-b;10.0.0.1:8003 [v1] n1/dc1/alloc-c;"
    );
    assert_eq!(
        w.text(r#"{{ range nomadService "v1.web@global" }}{{ .ID }}{{ end }}"#),
        "bc"
    );
    let e = w.err(r#"{{ nomadService "web@mars" }}"#);
    assert!(e.contains("region \"mars\" is not served"), "{e}");
    let e = w.err(r#"{{ nomadService "bad name" }}"#);
    assert!(e.contains("nomad.service: invalid format"), "{e}");
    let e = w.err(r#"{{ nomadService "a" "b" }}"#);
    assert!(
        e.contains("expected arguments <service> or <count> <key> <service>"),
        "{e}"
    );
}

#[test]
fn nomad_service_rendezvous_is_stable_and_sized() {
    let w = with_web();
    let one = w.text(r#"{{ range nomadService 2 "alloc-1" "web" }}{{ .ID }}{{ end }}"#);
    assert_eq!(one.len(), 2);
    assert_eq!(
        one,
        w.text(r#"{{ range nomadService 2 "alloc-1" "web" }}{{ .ID }}{{ end }}"#)
    );
    let all = w.text(r#"{{ range nomadService 9 "alloc-1" "web" }}{{ .ID }}{{ end }}"#);
    assert!(all.starts_with(&one), "{all} vs {one}");
    assert_eq!(all.len(), 3);
    let e = w.err(r#"{{ nomadService "2" "k" "web" }}"#);
    assert!(e.contains("expected integer for <count> argument"), "{e}");
}

#[test]
fn nomad_services_and_by_tag() {
    let mut w = World::new();
    w.data.insert(
        Dep::Services {
            namespace: "default".into(),
        },
        DepValue::Services(vec![
            ServiceStub {
                name: "web".into(),
                tags: vec!["b".into(), "a".into()],
            },
            ServiceStub {
                name: "db".into(),
                tags: vec!["a".into()],
            },
        ]),
    );
    assert_eq!(
        w.text(r#"{{ range nomadServices }}{{ .Name }}{{ .Tags }} {{ end }}"#),
        "db[a] web[a b] "
    );
    assert_eq!(
        w.text(r#"{{ range $tag, $s := nomadServices | byTag }}{{ $tag }}:{{ range $s }}{{ .Name }},{{ end }} {{ end }}"#),
        "a:db,web, b:web, "
    );
}

// ---- helpers ----

#[test]
fn env_functions() {
    assert_eq!(
        t(r#"{{ env "HOME" }}|{{ env "NOPE" }}|{{ envOrDefault "NOPE" "d" }}"#),
        "/home/app||d"
    );
    let e = World::new().err(r#"{{ mustEnv "NOPE" }}"#);
    assert!(e.contains("NOPE"), "{e}");
}

#[test]
fn string_functions() {
    assert_eq!(t(r#"{{ "a,b" | split "," | join ";" }}"#), "a;b");
    assert_eq!(t(r#"{{ "aXbX" | replaceAll "X" "-" }}"#), "a-b-");
    assert_eq!(t(r#"{{ "Hi" | toLower }}{{ "hi" | toUpper }}"#), "hiHI");
    assert_eq!(
        t(r#"{{ "hello wORLD o'neil" | toTitle }}"#),
        "Hello WORLD O'neil"
    );
    assert_eq!(
        t(
            r#"{{ "  x  " | trimSpace }}|{{ "--x--" | trim "-" }}|{{ "ab" | trimPrefix "a" }}|{{ "ab" | trimSuffix "b" }}"#
        ),
        "x|x|b|a"
    );
    assert_eq!(t(r#"{{ "a\nb\n\nc" | indent 2 }}"#), "  a\n  b\n\n  c");
    assert!(
        World::new()
            .err(r#"{{ "a" | indent -1 }}"#)
            .contains("positive integer")
    );
    assert!(
        World::new()
            .err(r#"{{ 1 | toLower }}"#)
            .contains("expected string, got int")
    );
}

#[test]
fn list_membership_functions() {
    let list = r#"(split "," "a,b,c")"#;
    assert_eq!(
        t(&format!(
            r#"{{{{ in {list} "b" }}}} {{{{ in {list} "z" }}}} {{{{ {list} | contains "c" }}}}"#
        )),
        "true false true"
    );
    assert_eq!(t(r#"{{ in "haystack" "st" }}"#), "true");
    assert_eq!(
        t(&format!(
            r#"{{{{ {list} | containsAll (split "," "a,b") }}}} {{{{ {list} | containsAll (split "," "a,z") }}}}"#
        )),
        "true false"
    );
    assert_eq!(
        t(&format!(
            r#"{{{{ {list} | containsAny (split "," "z,c") }}}} {{{{ {list} | containsAny (split "," "z") }}}}"#
        )),
        "true false"
    );
    assert_eq!(
        t(&format!(
            r#"{{{{ {list} | containsNone (split "," "z") }}}} {{{{ {list} | containsNotAll (split "," "a,z") }}}}"#
        )),
        "true true"
    );
}

#[test]
fn parse_functions() {
    assert_eq!(
        t(
            r#"{{ parseBool "true" }} {{ parseBool "" }} {{ parseInt "-42" }} {{ parseUint "7" }} {{ parseFloat "1.5" }} {{ parseInt "" }}"#
        ),
        "true false -42 7 1.5 0"
    );
    let e = World::new().err(r#"{{ parseInt "x" }}"#);
    assert!(e.contains("parseInt"), "{e}");
    assert!(
        World::new()
            .err(r#"{{ parseBool "yes" }}"#)
            .contains("parseBool")
    );
}

#[test]
fn arithmetic_functions() {
    // The piped value is the left operand: `a | subtract b` is a - b.
    assert_eq!(
        t(
            r#"{{ 5 | add 2 }} {{ 5 | subtract 2 }} {{ 5 | multiply 2 }} {{ 5 | divide 2 }} {{ 5 | modulo 2 }}"#
        ),
        "7 3 10 2 1"
    );
    assert_eq!(t(r#"{{ 5.0 | divide 2 }} {{ 1 | add 0.5 }}"#), "2.5 1.5");
    assert_eq!(
        t(r#"{{ 5 | minimum 2 }} {{ 5 | maximum 2 }} {{ minimum 1.5 3 }}"#),
        "2 5 1.5"
    );
    assert!(
        World::new()
            .err(r#"{{ 5 | divide 0 }}"#)
            .contains("division by zero")
    );
    assert!(
        World::new()
            .err(r#"{{ "a" | add 1 }}"#)
            .contains("add: unknown type")
    );
    assert_eq!(t(r#"{{ parseInt "10" | add 1 }}"#), "11");
}

#[test]
fn encoding_functions() {
    assert_eq!(
        t(r#"{{ "hi there" | base64Encode }} {{ "aGkgdGhlcmU=" | base64Decode }}"#),
        "aGkgdGhlcmU= hi there"
    );
    assert_eq!(
        t(r#"{{ "??>" | base64URLEncode }} {{ "Pz8-" | base64URLDecode }}"#),
        "Pz8- ??>"
    );
    assert!(
        World::new()
            .err(r#"{{ "!!" | base64Decode }}"#)
            .contains("base64Decode")
    );
    assert_eq!(
        t(r#"{{ "abc" | sha256Hex }}"#),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        t(r#"{{ "abc" | md5sum }}"#),
        "900150983cd24fb0d6963f7d28e17f72"
    );
}

#[test]
fn regex_functions() {
    assert_eq!(
        t(r#"{{ "v1.2.3" | regexMatch "^v[0-9]+" }} {{ "abc" | regexMatch "^z" }}"#),
        "true false"
    );
    assert_eq!(
        t(
            r##"{{ "a1b22" | regexReplaceAll "[0-9]+" "#" }} {{ "ab" | regexReplaceAll "(a)(b)" "$2$1" }}"##
        ),
        "a#b# ba"
    );
    assert!(
        World::new()
            .err(r#"{{ "a" | regexMatch "(" }}"#)
            .contains("regexMatch")
    );
}

#[test]
fn json_functions() {
    assert_eq!(
        t(r#"{{ parseJSON "{\"b\":[1,\"<x>\"],\"a\":null}" | toJSON }}"#),
        r#"{"a":null,"b":[1,"\u003cx\u003e"]}"#
    );
    assert_eq!(
        t(r#"{{ parseJSON "{\"a\":{\"b\":true},\"c\":[]}" | toJSONPretty }}"#),
        "{\n  \"a\": {\n    \"b\": true\n  },\n  \"c\": []\n}"
    );
    assert_eq!(
        t(r#"{{ (parseJSON "{\"n\":1.5}").n }} {{ len (parseJSON "") }}"#),
        "1.5 0"
    );
    let w = World::new().var("app/db", &[("user", "u1")]);
    assert_eq!(
        w.text(r#"{{ nomadVar "app/db" | toJSON }}"#),
        r#"{"user":"u1"}"#
    );
    assert!(
        World::new()
            .err(r#"{{ parseJSON "{" }}"#)
            .contains("parseJSON")
    );
    assert_eq!(
        t(r#"{{ parseJSON "[1e21, 1e-7, 0.5, -0]" | toJSON }}"#),
        "[1e+21,1e-7,0.5,-0]"
    );
}

#[test]
fn explode_map_nests_paths() {
    assert_eq!(
        t(r#"{{ (parseJSON "{\"a/b\":1,\"a/c\":2,\"d\":3}" | explodeMap) | toJSON }}"#),
        r#"{"a":{"b":1,"c":2},"d":3}"#
    );
    assert!(
        World::new()
            .err(r#"{{ parseJSON "{\"a\":1,\"a/b\":2}" | explodeMap }}"#)
            .contains("not a map")
    );
}

#[test]
fn timestamp_layouts() {
    let rfc = t("{{ timestamp }}");
    assert_eq!(rfc.len(), "2006-01-02T15:04:05Z".len(), "{rfc}");
    assert!(rfc.ends_with('Z'), "{rfc}");
    let day = t(r#"{{ timestamp "2006-01-02" }}"#);
    assert_eq!(day, rfc[..10]);
    assert!(t(r#"{{ timestamp "unix" }}"#).parse::<i64>().is_ok());
    assert!(
        World::new()
            .err(r#"{{ timestamp "a" "b" }}"#)
            .contains("wrong number of arguments")
    );
}

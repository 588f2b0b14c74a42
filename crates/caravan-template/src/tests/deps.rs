//! The dep protocol and the functions that read cluster state.

use std::collections::BTreeSet;

use super::*;
use crate::*;

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

#[test]
fn secrets_provider_template_renders_key_value_lines() {
    // The template Caravan's `nomad` secrets provider writes, with the namespace in the path.
    let mut w = World::new();
    w.data.insert(
        Dep::Var {
            namespace: "prod".into(),
            path: "app/creds".into(),
        },
        DepValue::Var(Some(Variable {
            namespace: "prod".into(),
            path: "app/creds".into(),
            items: [
                ("a".to_string(), "1".to_string()),
                ("b".to_string(), "2".to_string()),
            ]
            .into(),
            create_index: 1,
            modify_index: 1,
        })),
    );
    let text = "{{ with nomadVar \"app/creds@prod\" }}{{ range $k, $v := . }}secret.db.{{ $k }}={{ $v }}\n{{ end }}{{ end }}";
    assert_eq!(w.text(text), "secret.db.a=1\nsecret.db.b=2\n");
}

#[test]
fn templates_are_send_sync_and_services_render_in_id_order() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Template>();
    send_sync::<Rendered>();
    let mut w = with_web();
    let dep = Dep::Service {
        namespace: "default".into(),
        name: "web".into(),
        tag: None,
    };
    let Some(DepValue::Service(list)) = w.data.get_mut(&dep) else {
        panic!("no web")
    };
    list.reverse();
    assert_eq!(
        w.text(r#"{{ range nomadService "web" }}{{ .ID }}{{ end }}"#),
        "abc"
    );
}

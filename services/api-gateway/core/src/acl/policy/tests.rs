use super::*;

fn caps(ns: &NamespacePolicy) -> Vec<&str> {
    let mut c: Vec<&str> = ns.capabilities.iter().map(String::as_str).collect();
    c.sort_unstable();
    c
}

#[test]
fn hcl_policies_expand_like_nomad() {
    let p = parse(
        r#"
        namespace "default" {
          policy = "read"
        }
        namespace "prod-*" {
          policy = "write"
          capabilities = ["alloc-node-exec"]
          variables {
            path "app/*" { capabilities = ["read"] }
          }
        }
        node { policy = "read" }
        agent { policy = "write" }
        operator { policy = "read" }
        quota { policy = "read" }
        plugin { policy = "list" }
        host_volume "scratch" { policy = "write" }
        "#,
    )
    .unwrap();
    assert_eq!(p.namespaces.len(), 2);
    assert_eq!(
        caps(&p.namespaces[0]),
        vec![
            "csi-list-volume",
            "csi-read-volume",
            "host-volume-read",
            "list-jobs",
            "list-scaling-policies",
            "parse-job",
            "read-job",
            "read-job-scaling",
            "read-scaling-policy",
        ]
    );
    let prod = &p.namespaces[1];
    assert_eq!(prod.name, "prod-*");
    for cap in [
        "alloc-node-exec",
        "submit-job",
        "read-logs",
        "host-volume-read",
    ] {
        assert!(prod.capabilities.iter().any(|c| c == cap), "{cap}");
    }
    assert_eq!(prod.variables[0].path, "app/*");
    assert_eq!(prod.variables[0].capabilities, vec!["read", "list"]);
    assert_eq!(p.node.as_deref(), Some("read"));
    assert_eq!(p.agent.as_deref(), Some("write"));
    assert_eq!(
        p.operator.unwrap().capabilities,
        vec!["license-read", "keyring-read"]
    );
    assert_eq!(p.plugin.as_deref(), Some("list"));
    assert_eq!(
        p.host_volumes[0].capabilities,
        vec!["mount-readonly", "mount-readwrite"]
    );
}

#[test]
fn scale_and_deny_expand_like_nomad() {
    let p =
        parse(r#"namespace "a" { policy = "scale" }  namespace "b" { policy = "deny" }"#).unwrap();
    assert_eq!(
        caps(&p.namespaces[0]),
        vec![
            "list-scaling-policies",
            "read-job",
            "read-job-scaling",
            "read-scaling-policy",
            "scale-job",
            "submit-recommendation",
        ]
    );
    assert_eq!(caps(&p.namespaces[1]), vec!["deny"]);
    let hv = parse(r#"namespace "c" { capabilities = ["host-volume-write"] }"#).unwrap();
    assert_eq!(
        caps(&hv.namespaces[0]),
        vec![
            "host-volume-create",
            "host-volume-delete",
            "host-volume-read",
            "host-volume-register",
            "host-volume-write",
        ]
    );
    let denied =
        parse(r#"namespace "d" { variables { path "*" { capabilities = ["read", "deny"] } } }"#)
            .unwrap();
    assert_eq!(denied.namespaces[0].variables[0].capabilities, vec!["deny"]);
}

#[test]
fn json_policies_parse_like_hcl() {
    let json = parse(
        r#"{"namespace": {"default": {"policy": "write",
             "variables": {"path": {"x/*": {"capabilities": ["write"]}}}}},
            "node": {"policy": "read"}}"#,
    )
    .unwrap();
    let hcl = parse(
        r#"namespace "default" {
             policy = "write"
             variables { path "x/*" { capabilities = ["write"] } }
           }
           node { policy = "read" }"#,
    )
    .unwrap();
    assert_eq!(json, hcl);
    let list =
        parse(r#"{"namespace": [{"a": {"policy": "read"}}, {"b": {"policy": "deny"}}]}"#).unwrap();
    assert_eq!(list.namespaces.len(), 2);
}

#[test]
fn empty_rules_grant_nothing() {
    assert_eq!(parse("").unwrap(), Policy::default());
}

#[test]
fn one_line_blocks_parse_as_in_nomad() {
    let p =
        parse(r#"namespace "a" { policy = "read" } node { policy = "write" } # x { y }"#).unwrap();
    assert_eq!(p.namespaces[0].name, "a");
    assert_eq!(p.node.as_deref(), Some("write"));
    let braces = parse(r#"namespace "a{b" { policy = "read" }"#).unwrap_err();
    assert!(braces.0.contains("Invalid namespace name"), "{braces}");
}

#[test]
fn bad_policies_name_the_problem() {
    let cases = [
        (" \n", "Invalid policy"),
        (
            r#"namespace "x" { policy = "nope" }"#,
            "Invalid namespace policy",
        ),
        (
            r#"namespace "x" { capabilities = ["fly"] }"#,
            "Invalid namespace capability 'fly'",
        ),
        (
            r#"namespace "bad name" { policy = "read" }"#,
            "Invalid namespace name",
        ),
        (r#"node { policy = "list" }"#, "Invalid node policy"),
        (
            r#"bogus { policy = "read" }"#,
            "Invalid or duplicate policy keys: bogus",
        ),
        (r#"namespace "x" { polcy = "read" }"#, "polcy"),
        (r#"namespace "x" { variables { } }"#, "no variable paths"),
        (
            r#"namespace "x" { variables { path "/a" { capabilities = ["read"] } } }"#,
            "leading '/'",
        ),
        (
            r#"namespace "x" { variables { path "a" { capabilities = ["fly"] } } }"#,
            "Invalid variable capability 'fly'",
        ),
        ("namespace \"x\" {", "Failed to parse ACL Policy"),
        ("{\"namespace\": ", "Failed to parse ACL Policy"),
        (
            r#"node { policy = "read" } node { policy = "write" }"#,
            "duplicate",
        ),
        (
            r#"operator { capabilities = ["fly"] }"#,
            "Invalid operator capability",
        ),
    ];
    for (rules, want) in cases {
        let e = parse(rules).unwrap_err();
        assert!(e.0.contains(want), "{rules}: {e}");
    }
}

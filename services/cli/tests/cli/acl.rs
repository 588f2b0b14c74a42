//! `caravan acl` against a dev cluster started with ACLs: bootstrap once,
//! a policy applied from a file, a client token that may read but not
//! write, `-token` on every verb, and deletes.

#![allow(clippy::unwrap_used)]

use crate::common::{cli, options};
use caravan_cli::{DevCluster, DevOptions};

/// The value of `Key = value` in a `kv` page.
fn field(page: &str, key: &str) -> String {
    page.lines()
        .find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no {key} in:\n{page}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acl_bootstrap_policies_and_tokens_like_nomad() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(DevOptions {
        acl_enabled: true,
        ..options(dir.path())
    })
    .await
    .expect("dev cluster starts");
    let address = cluster.http_address();

    let (code, _, err) = cli(&address, &["job", "status"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("Permission denied"), "{err}");

    let (code, out, err) = cli(&address, &["acl", "bootstrap"]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(field(&out, "Type"), "management");
    assert_eq!(field(&out, "Policies"), "n/a");
    let root = field(&out, "Secret ID");
    let (code, _, err) = cli(&address, &["acl", "bootstrap"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("ACL bootstrap already done"), "{err}");

    let t = ["-token", root.as_str()];
    let with = |line: &[&'static str]| -> Vec<String> {
        t.iter()
            .map(|s| s.to_string())
            .chain(line.iter().map(|s| s.to_string()))
            .collect()
    };
    let run = |line: Vec<String>| {
        let address = address.clone();
        async move {
            let refs: Vec<&str> = line.iter().map(String::as_str).collect();
            cli(&address, &refs).await
        }
    };
    let (code, out, err) = run(with(&["job", "status"])).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");

    let rules = dir.path().join("readonly.hcl");
    std::fs::write(
        &rules,
        "namespace \"default\" {\n  policy = \"read\"\n}\nnode {\n  policy = \"read\"\n}\n",
    )
    .unwrap();
    let mut apply = with(&["acl", "policy", "apply", "-description", "Read only"]);
    apply.push("readonly".into());
    apply.push(rules.display().to_string());
    let (code, out, err) = run(apply).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(out.trim(), "Successfully wrote \"readonly\" ACL policy!");
    let bad = dir.path().join("bad.hcl");
    std::fs::write(&bad, "namespace \"default\" { policy = \"fly\" }").unwrap();
    let mut apply = with(&["acl", "policy", "apply", "bad"]);
    apply.push(bad.display().to_string());
    let (code, _, err) = run(apply).await;
    assert_eq!(code, 1);
    assert!(err.contains("Invalid namespace policy"), "{err}");
    let (_, out, _) = run(with(&["acl", "policy", "list"])).await;
    assert!(
        out.starts_with("Name") && out.contains("readonly  Read only"),
        "{out}"
    );
    let (_, out, _) = run(with(&["acl", "policy", "info", "readonly"])).await;
    assert!(out.contains("Rules\n\nnamespace \"default\""), "{out}");

    let (code, out, err) = run(with(&[
        "acl", "token", "create", "-name", "reader", "-policy", "readonly",
    ]))
    .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(field(&out, "Type"), "client");
    assert_eq!(field(&out, "Policies"), "readonly");
    let reader = field(&out, "Secret ID");
    let accessor = field(&out, "Accessor ID");
    let (_, out, _) = run(with(&["acl", "token", "list"])).await;
    assert!(out.contains("reader") && out.contains(&accessor), "{out}");
    assert!(!out.contains(&reader), "secrets are not listed: {out}");

    // The reader token: reads pass, writes and ACL admin do not.
    let (code, out, err) = cli(&address, &["-token", &reader, "acl", "token", "self"]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(field(&out, "Secret ID"), reader);
    assert_eq!(field(&out, "Accessor ID"), accessor);
    let (code, _, err) = cli(&address, &["-token", &reader, "job", "status"]).await;
    assert_eq!(code, 0, "{err}");
    let job = dir.path().join("job.hcl");
    std::fs::write(
        &job,
        "job \"web\" {\n  type = \"batch\"\n  group \"g\" {\n    task \"t\" {\n      driver = \"mock\"\n    }\n  }\n}\n",
    )
    .unwrap();
    let job = job.display().to_string();
    let (code, _, err) = cli(
        &address,
        &["-token", &reader, "job", "run", "-detach", &job],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("Permission denied"), "{err}");
    let (code, _, err) = cli(&address, &["-token", &reader, "acl", "token", "list"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("Permission denied"), "{err}");
    let (code, _, err) = cli(&address, &["-token", "nope", "job", "status"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("ACL token not found"), "{err}");

    let mut delete = with(&["acl", "token", "delete"]);
    delete.push(accessor.clone());
    let (code, out, _) = run(delete).await;
    assert_eq!(code, 0);
    assert_eq!(out.trim(), format!("Token {accessor} successfully deleted"));
    let (code, _, _) = cli(&address, &["-token", &reader, "job", "status"]).await;
    assert_eq!(code, 1, "a deleted token no longer works");
    let (code, out, _) = run(with(&["acl", "policy", "delete", "readonly"])).await;
    assert_eq!(code, 0);
    assert_eq!(out.trim(), "Successfully deleted \"readonly\" ACL policy!");
    cluster.stop().await.unwrap();
}

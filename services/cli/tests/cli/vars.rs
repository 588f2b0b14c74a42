//! `caravan var` against a dev cluster: put, get, list and purge, the
//! check-and-set guard of put and purge, and the dev cluster's own
//! variables key kept in its data dir.

#![allow(clippy::unwrap_used)]

use crate::common::{cli, options};
use caravan_cli::DevCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn var_put_get_list_and_purge_like_nomad() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = DevCluster::start(options(dir.path()))
        .await
        .expect("dev cluster starts");
    let address = cluster.http_address();
    let key_file = dir.path().join("client").join("variables.key");
    let key = std::fs::read_to_string(&key_file).expect("caravan dev writes a variables key");
    assert_eq!(key.trim().len(), 44, "base64 of 32 bytes: {key}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the key is readable by its owner only");
    }

    let (code, out, err) = cli(
        &address,
        &["var", "put", "app/db", "user=me", "pass=s3cret"],
    )
    .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.starts_with("Created variable \"app/db\" with modify index "),
        "{out}"
    );
    let index: u64 = out.trim().rsplit(' ').next().unwrap().parse().unwrap();

    // Without -force or -check-index a put only creates.
    let (code, _, err) = cli(&address, &["var", "put", "app/db", "user=you"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("Check-and-Set conflict"), "{err}");
    assert!(err.contains(&format!("-check-index={index}")), "{err}");

    let check = format!("-check-index={index}");
    let (code, out, err) = cli(&address, &["var", "put", &check, "app/db", "user=you"]).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    let (code, out, err) = cli(
        &address,
        &["var", "put", "-force", "app/db", "user=them", "x=1"],
    )
    .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");

    let (code, out, _) = cli(&address, &["var", "get", "app/db"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("Path        = app/db"), "{out}");
    assert!(out.contains("Items\nuser = them\nx    = 1"), "{out}");
    let (_, out, _) = cli(&address, &["var", "get", "-item", "user", "app/db"]).await;
    assert_eq!(out.trim(), "them");
    let (_, out, _) = cli(&address, &["var", "get", "-out", "json", "app/db"]).await;
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["Items"]["x"], "1");
    let (code, _, err) = cli(&address, &["var", "get", "app/none"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("variable not found"), "{err}");

    cli(&address, &["var", "put", "other", "k=v"]).await;
    let (_, out, _) = cli(&address, &["var", "list"]).await;
    assert!(out.starts_with("Namespace"), "{out}");
    assert!(out.contains("app/db") && out.contains("other"), "{out}");
    let (_, out, _) = cli(&address, &["var", "list", "app/"]).await;
    assert!(out.contains("app/db") && !out.contains("other"), "{out}");
    let (_, out, _) = cli(&address, &["var", "list", "zzz"]).await;
    assert_eq!(out.trim(), "No matching variables found");

    let (code, _, err) = cli(&address, &["var", "put", "bad.path", "k=v"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("Path: invalid path"), "{err}");

    let (code, _, err) = cli(&address, &["var", "purge", "-check-index=1", "app/db"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("Check-and-Set conflict"), "{err}");
    let (code, out, _) = cli(&address, &["var", "purge", "app/db"]).await;
    assert_eq!(code, 0);
    assert_eq!(out.trim(), "Successfully purged variable \"app/db\"!");
    let (code, _, _) = cli(&address, &["var", "get", "app/db"]).await;
    assert_eq!(code, 1);

    cluster.stop().await.expect("dev cluster stops cleanly");
}

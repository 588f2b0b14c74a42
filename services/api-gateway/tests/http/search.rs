//! Prefix and fuzzy search in Nomad's shapes: `Matches` and `Truncations`
//! per context, Nomad's context names, its limit of 20 and its refusals.

use serde_json::{Value, json};

use crate::common::{Backend, TestGateway};
use crate::fixtures::{body, client_node, nomad_job, register_node};

async fn register(gw: &TestGateway, id: &str) -> Value {
    let r = gw.http("PUT", "/v1/jobs", &body(&nomad_job(id, 1))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

async fn search(gw: &TestGateway, path: &str, request: Value) -> Value {
    let r = gw.http("POST", path, &body(&request)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.header("X-Nomad-Index").is_some());
    r.json()
}

pub async fn prefix_search_finds_ids_in_each_context(backend: Backend) {
    let gw = TestGateway::start(backend, "http-search-prefix").await;
    let eval_id = register(&gw, "example").await["EvalID"]
        .as_str()
        .unwrap()
        .to_string();
    register(&gw, "other").await;
    let found = search(
        &gw,
        "/v1/search",
        json!({"Prefix": "exa", "Context": "jobs"}),
    )
    .await;
    assert_eq!(found["Matches"], json!({"jobs": ["example"]}));
    assert_eq!(found["Truncations"], json!({"jobs": false}));
    assert!(found["Index"].as_u64().unwrap() > 0);
    // `all` searches every context; the ones without a match are null.
    let found = search(
        &gw,
        "/v1/search",
        json!({"Prefix": &eval_id[..8], "Context": "all"}),
    )
    .await;
    let matches = found["Matches"].as_object().unwrap();
    let mut names: Vec<&str> = matches.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "allocs",
            "deployment",
            "evals",
            "jobs",
            "namespaces",
            "nodes",
            "scaling_policy"
        ]
    );
    assert_eq!(found["Matches"]["evals"], json!([eval_id]));
    assert_eq!(found["Matches"]["jobs"], Value::Null);
    // The same search with its arguments in the query string.
    let r = gw
        .http("GET", "/v1/search?prefix=oth&context=jobs", b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["Matches"]["jobs"], json!(["other"]));
    gw.stop().await;
}

pub async fn prefix_search_truncates_at_twenty(backend: Backend) {
    let gw = TestGateway::start(backend, "http-search-truncate").await;
    for i in 0..21 {
        register(&gw, &format!("batch-{i:02}")).await;
    }
    let found = search(
        &gw,
        "/v1/search",
        json!({"Prefix": "batch-", "Context": "jobs"}),
    )
    .await;
    let jobs = found["Matches"]["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 20);
    assert_eq!(jobs[0], "batch-00");
    assert_eq!(found["Truncations"]["jobs"], true);
    let found = search(
        &gw,
        "/v1/search",
        json!({"Prefix": "batch-2", "Context": "jobs"}),
    )
    .await;
    assert_eq!(found["Matches"]["jobs"], json!(["batch-20"]));
    assert_eq!(found["Truncations"]["jobs"], false);
    gw.stop().await;
}

pub async fn fuzzy_search_matches_names_with_their_scope(backend: Backend) {
    let gw = TestGateway::start(backend, "http-search-fuzzy").await;
    register(&gw, "example").await;
    let mut node = client_node("n1", "");
    node.name = "example-node".into();
    register_node(&gw, node).await;
    let found = search(
        &gw,
        "/v1/search/fuzzy",
        json!({"Text": "XAMPLE", "Context": "all"}),
    )
    .await;
    assert_eq!(
        found["Matches"]["jobs"],
        json!([{"ID": "example", "Scope": ["default", "example"]}])
    );
    assert_eq!(
        found["Matches"]["nodes"],
        json!([{"ID": "example-node", "Scope": ["n1"]}])
    );
    assert_eq!(found["Truncations"]["jobs"], false);
    // Groups and tasks of jobs are contexts of their own.
    let found = search(
        &gw,
        "/v1/search/fuzzy",
        json!({"Text": "ap", "Context": "jobs"}),
    )
    .await;
    assert_eq!(
        found["Matches"]["tasks"],
        json!([{"ID": "app", "Scope": ["default", "example", "web"]}])
    );
    gw.stop().await;
}

/// A namespace is found as soon as it exists, jobs or none, by prefix and
/// by fuzzy search.
pub async fn namespaces_without_jobs_are_found(backend: Backend) {
    let gw = TestGateway::start(backend, "http-search-ns").await;
    for name in ["staging", "stage-2"] {
        let r = gw
            .http(
                "PUT",
                &format!("/v1/namespace/{name}"),
                &body(&json!({"Name": name})),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let found = search(
        &gw,
        "/v1/search",
        json!({"Prefix": "stag", "Context": "namespaces"}),
    )
    .await;
    assert_eq!(
        found["Matches"]["namespaces"],
        json!(["stage-2", "staging"])
    );
    let found = search(
        &gw,
        "/v1/search",
        json!({"Prefix": "", "Context": "namespaces"}),
    )
    .await;
    assert_eq!(
        found["Matches"]["namespaces"],
        json!(["default", "stage-2", "staging"])
    );
    let found = search(
        &gw,
        "/v1/search/fuzzy",
        json!({"Text": "GING", "Context": "namespaces"}),
    )
    .await;
    assert_eq!(found["Matches"]["namespaces"], json!([{"ID": "staging"}]));
    gw.stop().await;
}

pub async fn searches_refuse_unknown_contexts_and_short_text(backend: Backend) {
    let gw = TestGateway::start(backend, "http-search-bad").await;
    for (path, request, field) in [
        (
            "/v1/search",
            json!({"Prefix": "x", "Context": "job"}),
            "Context",
        ),
        ("/v1/search", json!({"Prefix": "x"}), "Context"),
        (
            "/v1/search/fuzzy",
            json!({"Text": "x", "Context": "all"}),
            "Text",
        ),
        (
            "/v1/search/fuzzy",
            json!({"Text": "xy", "Context": "nope"}),
            "Context",
        ),
    ] {
        let r = gw.http("POST", path, &body(&request)).await;
        assert_eq!(r.status, 400, "{request}");
        assert!(r.text().starts_with(&format!("{field}:")), "{}", r.text());
    }
    let r = gw.http("POST", "/v1/search", b"{").await;
    assert_eq!(r.status, 400);
    gw.stop().await;
}

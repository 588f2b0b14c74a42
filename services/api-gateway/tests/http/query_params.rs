//! Query parameters read as Nomad reads them: booleans with Go's
//! `strconv.ParseBool`, waits with `time.ParseDuration`, indexes as unsigned
//! integers; anything else is a 400 naming the parameter.

use crate::common::{Backend, TestGateway};
use crate::fixtures::{body, nomad_job};

async fn register(gw: &TestGateway, id: &str) {
    let r = gw.http("PUT", "/v1/jobs", &body(&nomad_job(id, 1))).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

pub async fn purge_accepts_gos_capitalised_true(backend: Backend) {
    let gw = TestGateway::start(backend, "http-purge-True").await;
    register(&gw, "web").await;
    register(&gw, "api").await;
    let r = gw.http("DELETE", "/v1/job/web?purge=True", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(gw.job("web").await.is_none());
    let r = gw
        .http("DELETE", "/v1/job/api?purge=T&global=FALSE", b"")
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(gw.job("api").await.is_none());
    gw.stop().await;
}

pub async fn purge_false_only_stops_the_job(backend: Backend) {
    let gw = TestGateway::start(backend, "http-purge-False").await;
    register(&gw, "web").await;
    let r = gw.http("DELETE", "/v1/job/web?purge=False", b"").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(gw.job("web").await.unwrap().stop);
    gw.stop().await;
}

pub async fn a_bad_boolean_is_400_naming_it_and_stops_nothing(backend: Backend) {
    let gw = TestGateway::start(backend, "http-bad-bool").await;
    register(&gw, "web").await;
    for (query, name) in [("purge=yes", "purge"), ("purge=1&global=on", "global")] {
        let r = gw
            .http("DELETE", &format!("/v1/job/web?{query}"), b"")
            .await;
        assert_eq!(r.status, 400, "{query}: {}", r.text());
        assert!(r.text().starts_with(&format!("{name}:")), "{}", r.text());
    }
    assert!(!gw.job("web").await.unwrap().stop);
    let r = gw.http("GET", "/v1/nodes?resources=yes", b"").await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("resources"), "{}", r.text());
    let r = gw.http("GET", "/v1/nodes?os=2", b"").await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("os"), "{}", r.text());
    gw.stop().await;
}

pub async fn stale_reads_as_a_boolean_on_every_read(backend: Backend) {
    let gw = TestGateway::start(backend, "http-stale").await;
    register(&gw, "web").await;
    for path in [
        "/v1/jobs?stale",
        "/v1/jobs?stale=False",
        "/v1/job/web?stale=true",
        "/v1/evaluations?stale=1",
        "/v1/nodes?stale=f",
    ] {
        let r = gw.http("GET", path, b"").await;
        assert_eq!(r.status, 200, "{path}: {}", r.text());
    }
    for path in ["/v1/jobs?stale=maybe", "/v1/job/web?stale=yes"] {
        let r = gw.http("GET", path, b"").await;
        assert_eq!(r.status, 400, "{path}");
        assert!(r.text().starts_with("stale:"), "{}", r.text());
    }
    gw.stop().await;
}

pub async fn waits_and_indexes_read_as_go_does(backend: Backend) {
    let gw = TestGateway::start(backend, "http-wait-forms").await;
    register(&gw, "web").await;
    let index: u64 = gw
        .http("GET", "/v1/jobs", b"")
        .await
        .header("X-Nomad-Index")
        .unwrap()
        .parse()
        .unwrap();
    // Each wait form is accepted; with a past index the answer is immediate.
    for wait in ["5s", "1m30s", "300ms", "1h0m0.5s"] {
        let r = gw
            .http("GET", &format!("/v1/jobs?index=1&wait={wait}"), b"")
            .await;
        assert_eq!(r.status, 200, "{wait}: {}", r.text());
    }
    // A current index with a short wait blocks for about that long.
    let started = std::time::Instant::now();
    let r = gw
        .http("GET", &format!("/v1/jobs?index={index}&wait=300ms"), b"")
        .await;
    assert_eq!(r.status, 200);
    assert!(started.elapsed() >= std::time::Duration::from_millis(290));
    for (query, name) in [
        ("wait=5", "wait"),
        ("wait=1d", "wait"),
        ("index=-1", "index"),
        ("index=%2B1", "index"),
    ] {
        let r = gw.http("GET", &format!("/v1/jobs?{query}"), b"").await;
        assert_eq!(r.status, 400, "{query}");
        assert!(r.text().starts_with(&format!("{name}:")), "{}", r.text());
    }
    // The event stream reads its index the same way.
    for index in ["-1", "%2B1", "1.0"] {
        let r = gw
            .http("GET", &format!("/v1/event/stream?index={index}"), b"")
            .await;
        assert_eq!(r.status, 400, "{index}");
        assert!(r.text().starts_with("index:"), "{}", r.text());
    }
    gw.stop().await;
}

/// `per_page` and `next_token` walk the job list a page at a time, in
/// `namespace.id` order, the token answered in `X-Nomad-NextToken`;
/// `reverse` walks it backwards and `filter` keeps what its expression
/// selects.
pub async fn lists_page_by_next_token_and_filter_by_expression(backend: Backend) {
    let gw = TestGateway::start(backend, "http-paging").await;
    for id in ["d", "b", "a", "c", "e"] {
        register(&gw, id).await;
    }
    let ids = |r: &crate::common::HttpAnswer| -> Vec<String> {
        r.json()
            .as_array()
            .expect("a list")
            .iter()
            .map(|j| j["ID"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let mut seen = Vec::new();
    let mut path = "/v1/jobs?per_page=2".to_string();
    loop {
        let r = gw.http("GET", &path, b"").await;
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        let page = ids(&r);
        assert!(page.len() <= 2, "{page:?}");
        seen.extend(page);
        match r.header("X-Nomad-NextToken") {
            Some(token) => path = format!("/v1/jobs?per_page=2&next_token={token}"),
            None => break,
        }
    }
    assert_eq!(seen, ["a", "b", "c", "d", "e"]);

    let r = gw
        .http("GET", "/v1/jobs?per_page=2&reverse=true", b"")
        .await;
    assert_eq!(ids(&r), ["e", "d"]);
    assert_eq!(r.header("X-Nomad-NextToken"), Some("default.c"));

    let r = gw
        .http(
            "GET",
            "/v1/jobs?filter=ID%20matches%20%22%5E%5Bbd%5D%24%22",
            b"",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(ids(&r), ["b", "d"]);

    for (query, name) in [
        ("filter=ID%20%3D%20a", "filter"),
        ("per_page=-3", "per_page"),
    ] {
        let r = gw.http("GET", &format!("/v1/jobs?{query}"), b"").await;
        assert_eq!(r.status, 400, "{query}: {}", r.text());
        assert!(r.text().starts_with(&format!("{name}:")), "{}", r.text());
    }
    gw.stop().await;
}

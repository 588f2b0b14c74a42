//! Scenario 5: bad jobs are refused with a client error naming the problem
//! and write nothing; a driver no node has is not a validation error but a
//! placement failure that blocks until a node with the driver joins.

use caravan_integration_tests::{Cluster, jobs};
use caravan_proto::EvalStatus;
use serde_json::{Value, json};

use crate::{wait_eval, wait_running};

/// The gateway's default `max_body_bytes`; a larger body is refused by its
/// announced length, before it is read.
const MAX_BODY_BYTES: usize = 4 << 20;

/// A valid mock job to break one field of.
fn base() -> Value {
    jobs::service_job("v", 1, jobs::mock_task(100, 64))
}

fn task(job: &mut Value) -> &mut Value {
    &mut job["Job"]["TaskGroups"][0]["Tasks"][0]
}

/// (case, body, status, words the answer must contain).
fn bad_requests() -> Vec<(&'static str, Vec<u8>, u16, Vec<&'static str>)> {
    let json = |v: &Value| serde_json::to_vec(v).unwrap();
    let mut no_driver = base();
    task(&mut no_driver)
        .as_object_mut()
        .unwrap()
        .remove("Driver");
    let mut negative = base();
    negative["Job"]["TaskGroups"][0]["Count"] = json!(-1);
    let mut regexp = base();
    regexp["Job"]["Constraints"] =
        json!([{"LTarget": "${attr.kernel.name}", "RTarget": "[a-", "Operand": "regexp"}]);
    let mut cpu0 = base();
    task(&mut cpu0)["Resources"]["CPU"] = json!(0);
    let mut huge = base();
    huge["Job"]["Meta"] = json!({ "blob": "x".repeat(10 * 1024 * 1024) });
    vec![
        (
            "malformed JSON",
            br#"{"Job": {"ID": "v","#.to_vec(),
            400,
            vec!["JSON syntax error", "line 1"],
        ),
        (
            "task without a driver",
            json(&no_driver),
            400,
            vec![r#"task "t""#, "missing driver"],
        ),
        (
            "negative count",
            json(&negative),
            400,
            vec![r#"group "g""#, "count", "-1"],
        ),
        (
            "bad regexp",
            json(&regexp),
            400,
            vec!["constraint[0]", "invalid regular expression"],
        ),
        (
            "cpu 0",
            json(&cpu0),
            400,
            vec![r#"task "t""#, "resources.cpu", "got 0"],
        ),
        // Over the gateway's max_body_bytes (4 MiB): 413 Payload Too Large,
        // the HTTP status for it, refused before the body is read.
        (
            "10 MB body",
            json(&huge),
            413,
            vec!["length limit exceeded"],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_jobs_are_refused_naming_the_problem_and_write_nothing() {
    let mut c = Cluster::new("validation").await.unwrap();
    c.start_gateway(&[]).await.unwrap();
    let http = c.http().unwrap();
    let before = c.state.key_revisions().await.unwrap();

    for (case, body, status, words) in bad_requests() {
        let reply = if body.len() > MAX_BODY_BYTES {
            http.put_announced("/v1/jobs", body.len()).await.unwrap()
        } else {
            http.put_bytes("/v1/jobs", body).await.unwrap()
        };
        let text = reply.text();
        assert_eq!(reply.status, status, "{case}: {text}");
        for w in words {
            assert!(text.contains(w), "{case}: answer {text:?} lacks {w:?}");
        }
        let after = c.state.key_revisions().await.unwrap();
        assert_eq!(before, after, "{case} wrote to etcd");
    }

    // The same check sees a write: the valid job changes the prefix.
    let reply = http.put_json("/v1/jobs", &base()).await.unwrap();
    assert_eq!(reply.status, 200, "{}", reply.text());
    let after = c.state.key_revisions().await.unwrap();
    assert!(after.len() > before.len(), "a valid register writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_no_node_has_blocks_until_a_node_with_it_joins() {
    let mut c = Cluster::new("missing-driver").await.unwrap();
    c.start_control_plane().await.unwrap();
    c.start_client("mock-only", &[("drivers", "mock")])
        .await
        .unwrap();
    let http = c.http().unwrap();

    let job = jobs::service_job("exec", 1, jobs::raw_exec_task("exec sleep 300"));
    let reply = http.put_json("/v1/jobs", &job).await.unwrap();
    assert_eq!(
        reply.status,
        200,
        "not a validation error: {}",
        reply.text()
    );
    let register = jobs::eval_id(&reply.json().unwrap()).unwrap();

    let done = wait_eval(&c, &register, EvalStatus::Complete).await;
    let metrics = done
        .failed_tg_allocs
        .get("g")
        .unwrap_or_else(|| panic!("no failed placement for group g: {done:?}"));
    assert_eq!(
        metrics.constraint_filtered.get("missing drivers"),
        Some(&1),
        "{metrics:?}"
    );
    let blocked = wait_eval(&c, &done.blocked_eval, EvalStatus::Blocked).await;
    assert_eq!(blocked.job_id, "exec");
    assert!(c.state.allocs().await.unwrap().is_empty());

    let exec_node = c
        .start_client("with-raw-exec", &[("drivers", "raw_exec")])
        .await
        .unwrap();
    let running = wait_running(&c, "exec", 1).await;
    assert_eq!(running[0].node_id, exec_node);
    wait_eval(&c, &blocked.id, EvalStatus::Complete).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_driver_config_is_refused_at_register_plan_and_validate() {
    let mut c = Cluster::new("driver-config").await.unwrap();
    c.start_gateway(&[]).await.unwrap();
    let http = c.http().unwrap();
    let mut job = jobs::service_job(
        "cache",
        1,
        json!({
            "Name": "redis",
            "Driver": "docker",
            "Config": {"image": "redis:7", "imagee": "typo", "ports": ["db", "admin"], "privileged": true},
            "Resources": {"CPU": 100, "MemoryMB": 64},
        }),
    );
    job["Job"]["TaskGroups"][0]["Networks"] =
        json!([{"DynamicPorts": [{"Label": "db", "To": 6379}]}]);
    let before = c.state.key_revisions().await.unwrap();
    let words = [
        r#"task "redis": config.imagee: the docker driver has no option "imagee""#,
        r#"config.ports[1]: port label "admin" is not defined in the group's network"#,
        "config.privileged: not supported by Caravan's docker driver",
    ];
    for path in ["/v1/jobs", "/v1/job/cache/plan"] {
        let reply = http.put_json(path, &job).await.unwrap();
        let text = reply.text();
        assert_eq!(reply.status, 400, "{path}: {text}");
        for w in words {
            assert!(text.contains(w), "{path}: {text:?} lacks {w:?}");
        }
    }
    // As Nomad's, the validate endpoint answers 200 with the errors listed.
    let reply = http.put_json("/v1/validate/job", &job).await.unwrap();
    let v = reply.ok_json().unwrap();
    assert_eq!(v["DriverConfigValidated"], false, "{v}");
    let errors = v["ValidationErrors"].to_string();
    for w in words {
        assert!(
            errors.contains(&w.replace('"', "\\\"")),
            "{errors} lacks {w:?}"
        );
    }
    assert_eq!(
        before,
        c.state.key_revisions().await.unwrap(),
        "nothing written"
    );
}

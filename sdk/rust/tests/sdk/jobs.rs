//! A job's life through the client: register, evaluations and allocations,
//! status, versions and revert, scale, plan, stop; the event stream seeing
//! it; a parameterized job dispatched.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use caravan_client::proto::{AllocClientStatus, EvalStatus, JobStatus};
use caravan_client::{Client, Error};
use futures::StreamExt;

use crate::common::{WAIT, cluster, eventually_some, hcl, service_job};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_registered_scaled_reverted_and_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let client = Client::connect(cluster.address()).await.unwrap();

    let mut events = client.events().stream(["Job:web"]).await.unwrap();
    let registered = client.jobs().register(service_job("web", 1)).await.unwrap();
    let eval = client
        .evals()
        .wait(&registered.eval_id, WAIT)
        .await
        .unwrap();
    assert_eq!(eval.status(), EvalStatus::Complete, "{eval:?}");
    assert_eq!(client.evals().get(&eval.id).await.unwrap().job_id, "web");
    assert!(
        client
            .evals()
            .list("")
            .await
            .unwrap()
            .iter()
            .any(|e| e.id == eval.id),
        "the evaluation is listed"
    );
    let placed = client.evals().allocations(&eval.id).await.unwrap();
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_eq!(placed[0].job_id, "web");
    let alloc = client.allocs().get(&placed[0].id).await.unwrap();
    assert_eq!(alloc.task_group, "web");
    let listed = client.allocs().list(&alloc.id[..8]).await.unwrap();
    assert_eq!(listed.len(), 1);

    let running = eventually_some("the job to run", WAIT, || async {
        let status = client.jobs().status("web").await.ok()?;
        (status.summary.get("web")?.running == 1).then_some(status)
    })
    .await;
    assert_eq!(running.job.status(), JobStatus::Running);
    // The allocation's directory, served by the client node running it.
    let root = client.allocs().stat_file(&alloc.id, "/").await.unwrap();
    assert!(root.is_dir, "{root:?}");
    let entries = client.allocs().list_files(&alloc.id, "/").await.unwrap();
    assert!(
        entries.iter().any(|f| f.name == "app" && f.is_dir),
        "{entries:?}"
    );
    let err = client
        .allocs()
        .stat_file(&alloc.id, "/nope")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let unknown = "00000000-0000-0000-0000-000000000000";
    let err = client
        .allocs()
        .signal(unknown, None, "SIGHUP")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(client.jobs().list("we").await.unwrap().len(), 1);
    assert!(client.jobs().get("nope").await.unwrap_err().is_not_found());

    // The event stream saw the registration after the subscription.
    let event = tokio::time::timeout(WAIT, events.next())
        .await
        .expect("an event within the wait")
        .expect("the stream goes on")
        .unwrap();
    assert_eq!(
        (
            event.topic.as_str(),
            event.r#type.as_str(),
            event.key.as_str()
        ),
        ("Job", "JobRegistered", "web")
    );
    assert_eq!(event.index, registered.job_modify_revision);

    // Version 1 (count 2), then a dry run of count 3, then a revert to 0.
    client.jobs().register(service_job("web", 2)).await.unwrap();
    let plan = client
        .jobs()
        .plan(service_job("web", 3), true)
        .await
        .unwrap();
    assert!(plan.diff.contains("Count"), "{}", plan.diff);
    let versions = client.jobs().versions("web").await.unwrap();
    assert_eq!(
        versions.iter().map(|j| j.version).collect::<Vec<_>>(),
        vec![1, 0]
    );
    let reverted = client.jobs().revert("web", 0).await.unwrap();
    let eval = client.evals().wait(&reverted.eval_id, WAIT).await.unwrap();
    assert_eq!(eval.status(), EvalStatus::Complete);
    let job = client.jobs().get("web").await.unwrap();
    assert_eq!((job.version, job.task_groups[0].count), (2, 1));

    let scaled = client.jobs().scale("web", "web", 3).await.unwrap();
    client.evals().wait(&scaled.eval_id, WAIT).await.unwrap();
    assert_eq!(
        client.jobs().get("web").await.unwrap().task_groups[0].count,
        3
    );
    eventually_some("three allocations to run", WAIT, || async {
        let allocs = client.jobs().allocations("web").await.ok()?;
        let running = allocs
            .iter()
            .filter(|a| a.client_status() == AllocClientStatus::Running)
            .count();
        (running == 3).then_some(())
    })
    .await;
    let err = client.jobs().scale("web", "nope", 1).await.unwrap_err();
    assert!(
        matches!(err, Error::NotFound { .. } | Error::InvalidArgument { .. }),
        "{err:?}"
    );
    assert!(!client.jobs().evaluations("web").await.unwrap().is_empty());

    let stopped = client.jobs().stop("web", false).await.unwrap();
    client.evals().wait(&stopped.eval_id, WAIT).await.unwrap();
    let job = client.jobs().get("web").await.unwrap();
    assert!(job.stop, "the job is marked stopped");
    eventually_some("every allocation to stop", WAIT, || async {
        let allocs = client.jobs().allocations("web").await.ok()?;
        allocs
            .iter()
            .all(|a| a.client_status() != AllocClientStatus::Running)
            .then_some(())
    })
    .await;
    cluster.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn invalid_jobs_name_their_field() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let client = Client::builder()
        .address(cluster.address())
        .timeout(Duration::from_secs(10))
        .connect()
        .await
        .unwrap();
    let mut job = service_job("bad", 1);
    job.task_groups[0].count = -1;
    match client.jobs().register(job.clone()).await.unwrap_err() {
        Error::InvalidArgument { field, message } => {
            let field = field.unwrap_or_else(|| panic!("no field in {message:?}"));
            assert!(field.contains("count"), "{field} in {message}");
        }
        other => panic!("not InvalidArgument: {other:?}"),
    }
    let checked = client.jobs().validate(job).await.unwrap();
    assert!(!checked.errors.is_empty());
    assert!(
        client.jobs().list("bad").await.unwrap().is_empty(),
        "nothing written"
    );
    cluster.stop().await.unwrap();
}

const PARAMETERIZED: &str = r#"
job "report" {
  type = "batch"
  parameterized {
    payload       = "optional"
    meta_required = ["customer"]
  }
  group "g" {
    task "t" {
      driver = "mock"
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_parameterized_job_dispatched() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let client = Client::connect(cluster.address()).await.unwrap();
    client.jobs().register(hcl(PARAMETERIZED)).await.unwrap();

    let err = client
        .jobs()
        .dispatch("report", Vec::new(), BTreeMap::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let meta = BTreeMap::from([("customer".to_string(), "acme".to_string())]);
    let child = client
        .jobs()
        .dispatch("report", b"quarterly".to_vec(), meta)
        .await
        .unwrap();
    assert!(
        child.dispatched_job_id.starts_with("report/dispatch-"),
        "{child:?}"
    );
    let job = client.jobs().get(&child.dispatched_job_id).await.unwrap();
    assert_eq!(job.parent_id, "report");
    assert_eq!(job.payload, b"quarterly");
    assert!(job.dispatched);
    let eval = client.evals().wait(&child.eval_id, WAIT).await.unwrap();
    assert_eq!(eval.job_id, child.dispatched_job_id);
    eventually_some("the dispatched child to complete", WAIT, || async {
        let allocs = client
            .jobs()
            .allocations(&child.dispatched_job_id)
            .await
            .ok()?;
        (allocs.len() == 1 && allocs[0].client_status() == AllocClientStatus::Complete)
            .then_some(())
    })
    .await;
    cluster.stop().await.unwrap();
}

/// The README's five lines, as written there, against a dev cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_readme_example_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path()).await;
    let address = cluster.address();
    let placed = async {
        use caravan_client::{
            Client,
            proto::{Job, JobType, Task, TaskGroup},
        };
        let client = Client::connect(address).await?;
        let job = Job {
            id: "hello".into(),
            r#type: JobType::Batch.into(),
            task_groups: vec![TaskGroup {
                name: "g".into(),
                count: 1,
                tasks: vec![Task {
                    name: "t".into(),
                    driver: "mock".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let eval = client
            .evals()
            .wait(
                &client.jobs().register(job).await?.eval_id,
                std::time::Duration::from_secs(60),
            )
            .await?;
        println!(
            "{:?}",
            client
                .evals()
                .allocations(&eval.id)
                .await?
                .iter()
                .map(|a| (&a.id, &a.node_name))
                .collect::<Vec<_>>()
        );
        client.evals().allocations(&eval.id).await
    }
    .await
    .unwrap();
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_eq!(placed[0].job_id, "hello");
    cluster.stop().await.unwrap();
}

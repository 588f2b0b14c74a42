use std::io::Write;

use super::*;

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

fn sets(pairs: &[&str]) -> Vec<String> {
    pairs.iter().map(|s| s.to_string()).collect()
}

fn err(result: anyhow::Result<impl std::fmt::Debug>) -> String {
    format!("{:#}", result.unwrap_err())
}

#[test]
fn the_shared_store_reaches_every_service_and_a_service_may_override_it() {
    let f = file(
        r#"
[store]
endpoints = ["http://10.0.0.1:2379"]
prefix = "/shared"

[scheduler-worker]
workers = 3
store = { prefix = "/worker" }
"#,
    );
    let layers = Layers::read(
        Some(f.path()),
        &sets(&[
            "eval-broker.grpc_addr=127.0.0.1:0",
            "store.endpoints=http://a:1,http://b:2",
        ]),
        &[],
    )
    .unwrap();
    let configs = Configs::read(&layers).unwrap();
    let broker = configs.broker.unwrap();
    assert_eq!(broker.grpc_addr, "127.0.0.1:0");
    assert_eq!(broker.store.prefix, "/shared");
    assert_eq!(
        broker.store.endpoints,
        vec!["http://a:1", "http://b:2"],
        "a shared override beats the file"
    );
    let worker = configs.worker.unwrap();
    assert_eq!(worker.workers, 3);
    assert_eq!(worker.store.prefix, "/worker");
    assert!(configs.applier.is_some() && configs.watcher.is_some());
}

#[test]
fn only_the_services_named_run_and_configuring_another_is_refused() {
    let only = sets(&["eval-broker", "plan-applier"]);
    let layers = Layers::read(None, &[], &only).unwrap();
    let configs = Configs::read(&layers).unwrap();
    assert!(configs.broker.is_some() && configs.applier.is_some());
    assert!(configs.watcher.is_none() && configs.worker.is_none());
    let e = err(Layers::read(
        None,
        &sets(&["scheduler-worker.workers=2"]),
        &only,
    ));
    assert!(
        e.contains("scheduler-worker is configured but not among"),
        "{e}"
    );
    let e = err(Layers::read(None, &[], &sets(&["api-gateway"])));
    assert!(e.contains("\"api-gateway\" is not a service"), "{e}");
}

#[test]
fn what_no_service_reads_is_refused_by_name() {
    let f = file("[eval-brokr]\nleader_ttl_ms = 1\n");
    let e = err(Layers::read(Some(f.path()), &[], &[]));
    assert!(e.contains("[eval-brokr] is neither a service"), "{e}");

    let e = err(Layers::read(None, &sets(&["grpc_addr=x"]), &[]));
    assert!(e.contains("-set \"grpc_addr=x\""), "{e}");

    let layers = Layers::read(None, &sets(&["plan-applier.leader_tll_ms=5"]), &[]).unwrap();
    let e = err(Configs::read(&layers));
    assert!(e.contains("plan-applier.leader_tll_ms"), "{e}");

    let layers = Layers::read(None, &sets(&["telemetry.log_fromat=json"]), &[]).unwrap();
    let e = err(layers.process());
    assert!(e.contains("telemetry.log_fromat"), "{e}");
}

#[test]
fn telemetry_and_tls_are_the_processs_not_a_services() {
    let layers =
        Layers::read(None, &sets(&["eval-broker.telemetry.log_format=json"]), &[]).unwrap();
    let e = err(Configs::read(&layers));
    assert!(e.contains("eval-broker.telemetry"), "{e}");
    let layers = Layers::read(None, &sets(&["scheduler-worker.tls.enabled=true"]), &[]).unwrap();
    let e = err(Configs::read(&layers));
    assert!(e.contains("scheduler-worker.tls"), "{e}");

    let f = file("[telemetry]\nlog_format = \"json\"\n[shutdown]\ndeadline_ms = 100\n");
    let layers = Layers::read(Some(f.path()), &sets(&["shutdown.deadline_ms=200"]), &[]).unwrap();
    let process = layers.process().unwrap();
    assert_eq!(process.telemetry.log_format, "json");
    assert_eq!(process.shutdown.deadline_ms, 200, "-set beats the file");
}

#[test]
fn a_bad_value_names_its_service() {
    let layers =
        Layers::read(None, &sets(&["deployment-watcher.leader_ttl_ms=soon"]), &[]).unwrap();
    let e = err(Configs::read(&layers));
    assert!(
        e.contains("deployment-watcher") && e.contains("leader_ttl_ms"),
        "{e}"
    );
}

#[test]
fn one_dash_flags_parse_and_nomads_server_verbs_are_refused_not_run() {
    use clap::Parser;
    let line = "caravan server -config s.toml -set store.prefix=/x -services eval-broker,plan-applier members";
    let words = crate::args::normalize(line.split_whitespace().map(String::from));
    let cli = crate::args::with_room(|| crate::args::Cli::try_parse_from(&words).unwrap());
    let crate::args::Command::Server(args) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert_eq!(args.config.as_deref(), Some(Path::new("s.toml")));
    assert_eq!(args.set, ["store.prefix=/x"]);
    assert_eq!(args.services, ["eval-broker", "plan-applier"]);
    let (mut ui, _) = Ui::captured();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let refused = runtime.block_on(run(args, &mut ui)).unwrap_err();
    let text = refused.to_string();
    assert!(
        text.contains("caravan server members") && text.contains("gossip"),
        "{text}"
    );
}

//! Jobs in Nomad's JSON format (`{"Job": {…}}`), as the HTTP API takes them.

use serde_json::{Value, json};

/// A service job with one group of `count` copies of `task`, in `dc1`.
pub fn service_job(id: &str, count: i64, task: Value) -> Value {
    json!({
        "Job": {
            "ID": id,
            "Name": id,
            "Type": "service",
            "Datacenters": ["dc1"],
            "TaskGroups": [{
                "Name": "g",
                "Count": count,
                "Tasks": [task],
            }],
        }
    })
}

/// A `mock` task that runs for an hour and asks for `cpu` MHz and
/// `memory` MB.
pub fn mock_task(cpu: i64, memory: i64) -> Value {
    json!({
        "Name": "t",
        "Driver": "mock",
        "Config": { "run_for": "1h" },
        "Resources": { "CPU": cpu, "MemoryMB": memory },
    })
}

/// A `raw_exec` task running `script` with `/bin/sh -c`.
pub fn raw_exec_task(script: &str) -> Value {
    json!({
        "Name": "t",
        "Driver": "raw_exec",
        "Config": { "command": "/bin/sh", "args": ["-c", script] },
        "Resources": { "CPU": 20, "MemoryMB": 16 },
    })
}

/// The id of the eval a register or deregister answer names.
pub fn eval_id(reply: &Value) -> anyhow::Result<String> {
    reply
        .get("EvalID")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .ok_or_else(|| anyhow::anyhow!("no EvalID in {reply}"))
}

//! `alloc exec`: a command run in an allocation's task, on the node running
//! it. Who may run one is decided here, once: `alloc-exec` in the alloc's
//! namespace, and whether the caller may also run commands outside any
//! isolation (`alloc-node-exec`, which the node requires of drivers such as
//! `raw_exec`). The surfaces (Nomad's WebSocket endpoint) only translate
//! frames to [`ExecInput`] and [`ExecOutput`] messages.

use caravan_proto::client_node_service_client::ClientNodeServiceClient;
use caravan_proto::exec_input::Input;
use caravan_proto::{ExecInput, ExecOutput, ExecSetup};
use futures::Stream;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::acl::Acl;
use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;

/// The namespace capability an exec needs.
pub const ALLOC_EXEC: &str = "alloc-exec";
/// The capability an exec in a task without file system isolation needs too.
pub const ALLOC_NODE_EXEC: &str = "alloc-node-exec";

type NodeClient = ClientNodeServiceClient<
    InterceptedService<
        Channel,
        fn(tonic::Request<()>) -> std::result::Result<tonic::Request<()>, tonic::Status>,
    >,
>;

/// The allocation an exec runs in: its namespace, and its node dialled.
#[derive(Debug)]
pub struct ExecTarget {
    /// The alloc's id.
    pub alloc_id: String,
    /// The alloc's namespace, where the caller's capabilities are checked.
    pub namespace: String,
    node: NodeClient,
}

/// Finds the allocation `alloc_id` and dials its node.
pub fn target(gw: &Gateway, alloc_id: &str) -> Result<ExecTarget> {
    if alloc_id.is_empty() {
        return Err(GatewayError::field(
            "alloc_id",
            "must provide a valid alloc id",
        ));
    }
    let snap = gw.cache.snapshot();
    let alloc = snap
        .alloc(alloc_id)
        .ok_or_else(|| GatewayError::NotFound(format!("Unknown allocation \"{alloc_id}\"")))?;
    let node = snap
        .node(&alloc.node_id)
        .ok_or_else(|| GatewayError::NotFound(format!("Unknown node \"{}\"", alloc.node_id)))?;
    Ok(ExecTarget {
        alloc_id: alloc.id.clone(),
        namespace: alloc.namespace.clone(),
        node: crate::client_fs::dial(node)?,
    })
}

/// Whether `acl` (`None` with ACLs off) may exec in `namespace`: an error
/// when it may not, else whether it may also exec without isolation.
pub fn rights(acl: Option<&Acl>, namespace: &str) -> Result<bool> {
    let Some(acl) = acl else {
        return Ok(true);
    };
    if !acl.allow_ns_op(namespace, ALLOC_EXEC) {
        return Err(GatewayError::PermissionDenied("Permission denied".into()));
    }
    Ok(acl.allow_ns_op(namespace, ALLOC_NODE_EXEC))
}

/// What a caller asks to run, checked: a task and a command.
pub fn setup(alloc_id: &str, task: &str, command: Vec<String>, tty: bool) -> Result<ExecSetup> {
    if task.is_empty() {
        return Err(GatewayError::field("task", "must provide task name"));
    }
    if command.is_empty() || command[0].is_empty() {
        return Err(GatewayError::field("command", "command is not present"));
    }
    Ok(ExecSetup {
        alloc_id: alloc_id.to_string(),
        task: task.to_string(),
        command,
        tty,
        node_exec_allowed: false,
    })
}

/// Starts `setup` on the target's node with the caller's rights
/// (`node_exec` from [`rights`]); `inputs` carry the command's stdin and
/// terminal sizes. The node's answers: output, then the exit code.
pub async fn start(
    mut target: ExecTarget,
    mut setup: ExecSetup,
    node_exec: bool,
    inputs: impl Stream<Item = ExecInput> + Send + 'static,
) -> Result<tonic::Streaming<ExecOutput>> {
    setup.node_exec_allowed = node_exec;
    setup.alloc_id.clone_from(&target.alloc_id);
    let first = ExecInput {
        input: Some(Input::Setup(setup)),
    };
    let stream = futures::StreamExt::chain(futures::stream::iter([first]), inputs);
    let answer = target
        .node
        .exec_task(stream)
        .await
        .map_err(GatewayError::Upstream)?;
    Ok(answer.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_takes_alloc_exec_and_node_exec_apart() {
        assert!(rights(None, "default").unwrap(), "ACLs off: everything");
        let policy = crate::acl::policy::parse(
            r#"namespace "default" { capabilities = ["alloc-exec"] }
               namespace "ops" { capabilities = ["alloc-exec", "alloc-node-exec"] }"#,
        )
        .unwrap();
        let acl = Acl::compile([&policy]);
        assert!(!rights(Some(&acl), "default").unwrap());
        assert!(rights(Some(&acl), "ops").unwrap());
        let denied = rights(Some(&acl), "other").unwrap_err();
        assert!(matches!(denied, GatewayError::PermissionDenied(_)));
    }

    #[test]
    fn a_setup_needs_a_task_and_a_command() {
        let e = setup("a", "", vec!["sh".into()], false).unwrap_err();
        assert!(e.to_string().starts_with("task"), "{e}");
        let e = setup("a", "t", vec![], false).unwrap_err();
        assert!(e.to_string().starts_with("command"), "{e}");
        let ok = setup("a", "t", vec!["sh".into()], true).unwrap();
        assert!(ok.tty && !ok.node_exec_allowed);
    }
}

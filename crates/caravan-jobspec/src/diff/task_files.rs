//! A task's artifacts, templates and workload identities as Nomad's diff names them
//! (`Artifact`, `Template`, `ChangeScript`, `Template.Wait`, `Identity`); any change to
//! them replaces the task's allocations.

use super::tree::Node;
use caravan_proto::{Artifact, Template, WorkloadIdentity};

pub(super) fn artifacts(artifacts: &[Artifact]) -> Vec<Node> {
    artifacts
        .iter()
        .map(|a| {
            let mut n = Node::default();
            n.field("GetterSource", &a.source)
                .field("GetterMode", &a.mode)
                .field("RelativeDest", &a.destination)
                .field("Chown", a.chown)
                .map("GetterOptions", &a.options)
                .map("GetterHeaders", &a.headers);
            n
        })
        .collect()
}

pub(super) fn templates(templates: &[Template]) -> Vec<Node> {
    templates.iter().map(template).collect()
}

fn template(t: &Template) -> Node {
    let mut n = Node::default();
    n.field("SourcePath", &t.source)
        .field("DestPath", &t.destination)
        .field("EmbeddedTmpl", &t.data)
        .field("ChangeMode", &t.change_mode)
        .field("ChangeSignal", &t.change_signal)
        .field("Splay", t.splay_ns)
        .field("Perms", &t.perms)
        .field("Uid", t.uid)
        .field("Gid", t.gid)
        .field("LeftDelim", &t.left_delimiter)
        .field("RightDelim", &t.right_delimiter)
        .field("Envvars", t.env)
        .field("ErrMissingKey", t.error_on_missing_key)
        .field("Once", t.once)
        .single(
            "ChangeScript",
            t.change_script.as_ref().map(|s| {
                let mut n = Node::default();
                n.field("Command", &s.command)
                    .field("Timeout", s.timeout_ns)
                    .field("FailOnError", s.fail_on_error)
                    .strings("Args", &s.args);
                n
            }),
        )
        .single(
            "Template.Wait",
            t.wait.as_ref().map(|w| {
                let mut n = Node::default();
                n.field("Min", w.min_ns).field("Max", w.max_ns);
                n
            }),
        );
    n
}

pub(super) fn identities(ids: &[WorkloadIdentity]) -> Vec<Node> {
    ids.iter()
        .map(|id| {
            let mut n = Node::default();
            n.field("Name", &id.name)
                .field("Env", id.env)
                .field("File", id.file)
                .field("TTL", id.ttl_ns)
                .field("ChangeMode", &id.change_mode)
                .field("ChangeSignal", &id.change_signal)
                .strings("Audience", &id.audience);
            n
        })
        .collect()
}

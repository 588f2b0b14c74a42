//! Unit tests: control structures, functions and the dep protocol, with the outputs Go's
//! text/template and consul-template print for the same texts.

mod control;
mod deps;
mod functions;

use std::collections::BTreeMap;

use super::*;

pub(super) struct World {
    pub env: BTreeMap<String, String>,
    pub data: BTreeMap<Dep, DepValue>,
    pub strict: bool,
}

impl World {
    pub fn new() -> Self {
        let env = [("NOMAD_REGION", "global"), ("HOME", "/home/app")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        World {
            env,
            data: BTreeMap::new(),
            strict: false,
        }
    }

    pub fn var(mut self, path: &str, items: &[(&str, &str)]) -> Self {
        let v = Variable {
            namespace: "default".into(),
            path: path.into(),
            items: items
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            create_index: 1,
            modify_index: 2,
        };
        self.data.insert(
            Dep::Var {
                namespace: "default".into(),
                path: path.into(),
            },
            DepValue::Var(Some(v)),
        );
        self
    }

    pub fn ctx(&self) -> Context<'_> {
        Context {
            env: &self.env,
            namespace: "default",
            data: &self.data,
            error_on_missing_key: self.strict,
        }
    }

    pub fn render(&self, text: &str) -> Result<Rendered, TemplateError> {
        render(&parse(text, "", "")?, &self.ctx())
    }

    /// The rendered text; panics (failing the test) when withheld or failed.
    pub fn text(&self, text: &str) -> String {
        match self.render(text) {
            Ok(Rendered { text: Some(t), .. }) => t,
            other => panic!("{text:?} did not render: {other:?}"),
        }
    }

    pub fn err(&self, text: &str) -> String {
        match self.render(text) {
            Err(e) => e.to_string(),
            Ok(r) => panic!("{text:?} rendered {r:?}"),
        }
    }
}

pub(super) fn t(text: &str) -> String {
    World::new().text(text)
}

pub(super) fn var_dep(path: &str) -> Dep {
    Dep::Var {
        namespace: "default".into(),
        path: path.into(),
    }
}

pub(super) fn instance(id: &str, port: u32, tags: &[&str]) -> ServiceInstance {
    ServiceInstance {
        id: id.into(),
        service_name: "web".into(),
        namespace: "default".into(),
        node_id: "n1".into(),
        datacenter: "dc1".into(),
        job_id: "j".into(),
        alloc_id: format!("alloc-{id}"),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        address: "10.0.0.1".into(),
        port,
        create_index: 1,
        modify_index: 1,
    }
}

pub(super) fn with_web() -> World {
    let mut w = World::new();
    let instances = vec![
        instance("a", 8001, &["v2", "blue"]),
        instance("b", 8002, &["v1"]),
        instance("c", 8003, &["v1"]),
    ];
    for tag in [None, Some("v1".to_string())] {
        w.data.insert(
            Dep::Service {
                namespace: "default".into(),
                name: "web".into(),
                tag,
            },
            DepValue::Service(instances.clone()),
        );
    }
    w
}

//! The event stream: which changes a subscriber wants ([`Filter`]), what a
//! store change means as a Nomad event ([`Change`]), and the live
//! [`subscribe`] stream of them, fed by a watch of the store from the
//! subscriber's index on, with a heartbeat every 30 seconds. The HTTP and
//! gRPC transports only render it.

use std::time::Duration;

use caravan_proto::event::Payload;
use caravan_proto::{Allocation, Deployment, Evaluation, Job, Node, ServiceRegistration};
use std::collections::HashMap;

use caravan_model::AllocClientStatusExt;
use caravan_state::status_batch::decode_batch;
use caravan_state::{
    Keyspace, Snapshot, StateKey, StateObject, carry_client_part, decode, decode_status, lay_status,
};
use caravan_store::{EventKind, WatchBatch};
use futures::StreamExt;
use futures::stream::BoxStream;

use crate::error::{GatewayError, Result};
use crate::gateway::Gateway;
use crate::query::{ALL_NAMESPACES, DEFAULT_NAMESPACE};

/// How often an idle stream says it is alive.
pub const HEARTBEAT: Duration = Duration::from_secs(30);

/// The topics Caravan publishes.
pub const TOPICS: [&str; 6] = [
    "Job",
    "Evaluation",
    "Allocation",
    "Deployment",
    "Node",
    "Service",
];

/// What a subscriber asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// (topic, key) pairs; `*` matches anything. Empty until [`Filter::finish`],
    /// which makes it match every topic.
    pub topics: Vec<(String, String)>,
    /// The namespace wanted, or `*` for all.
    pub namespace: String,
    /// Resume after this revision; 0 starts from now.
    pub index: i64,
    /// With ACLs on, the subscriber's: events it may not read are left out
    /// (jobs and what belongs to them need `read-job` in their namespace,
    /// nodes `node` read).
    pub acl: Option<std::sync::Arc<crate::acl::Acl>>,
}

impl Default for Filter {
    fn default() -> Self {
        Filter {
            topics: Vec::new(),
            namespace: DEFAULT_NAMESPACE.into(),
            index: 0,
            acl: None,
        }
    }
}

impl Filter {
    /// Adds a `Topic` or `Topic:Key` subscription; errors name `field`.
    pub fn add_topic(&mut self, field: &str, raw: &str) -> Result<()> {
        let (topic, key) = raw.split_once(':').unwrap_or((raw, "*"));
        if topic != "*" && !TOPICS.contains(&topic) {
            return Err(GatewayError::field(
                field,
                format!("unknown topic {topic:?}; one of {}", TOPICS.join(", ")),
            ));
        }
        self.topics.push((topic.to_string(), key.to_string()));
        Ok(())
    }

    /// Sets the namespace; an empty one keeps the default.
    pub fn set_namespace(&mut self, namespace: &str) {
        if !namespace.is_empty() {
            self.namespace = namespace.to_string();
        }
    }

    /// Sets the revision to resume after; a negative one is refused.
    pub fn set_index(&mut self, index: i64) -> Result<()> {
        if index < 0 {
            return Err(GatewayError::field(
                "index",
                format!("invalid index {:?}", index.to_string()),
            ));
        }
        self.index = index;
        Ok(())
    }

    /// The filter as asked, subscribing to everything if no topic was named.
    pub fn finish(mut self) -> Filter {
        if self.topics.is_empty() {
            self.topics.push(("*".into(), "*".into()));
        }
        self
    }

    /// Whether an event on `topic` about `key` in `namespace` (none for
    /// cluster-wide objects like nodes) is wanted.
    pub fn wants(&self, topic: &str, key: &str, namespace: Option<&str>) -> bool {
        if let Some(acl) = &self.acl {
            let readable = match namespace {
                Some(ns) => acl.allow_ns_op(ns, "read-job"),
                None => acl.allow_node_read(),
            };
            if !readable {
                return false;
            }
        }
        if let Some(ns) = namespace
            && self.namespace != ALL_NAMESPACES
            && self.namespace != ns
        {
            return false;
        }
        self.topics
            .iter()
            .any(|(t, k)| (t == "*" || t == topic) && (k == "*" || k == key))
    }

    /// Whether `change` is wanted: a subscription's key matches its key or
    /// one of its filter keys (a service instance is found by its service's
    /// name and its job as well as by its own id).
    pub fn wants_change(&self, change: &Change) -> bool {
        std::iter::once(&change.key)
            .chain(&change.filter_keys)
            .any(|key| self.wants(change.topic, key, change.namespace.as_deref()))
    }

    /// The first revision the watch must deliver (0: from now).
    fn start_revision(&self) -> i64 {
        if self.index > 0 { self.index + 1 } else { 0 }
    }
}

/// One store change as a Nomad event.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// Job, Evaluation, Allocation, Deployment, Node or Service.
    pub topic: &'static str,
    /// Nomad's event type, e.g. `JobRegistered`.
    pub kind: &'static str,
    /// The object's ID.
    pub key: String,
    /// Other keys a subscription may name to get the event (a service
    /// instance's job and service name).
    pub filter_keys: Vec<String>,
    /// The object's namespace; none for nodes.
    pub namespace: Option<String>,
    /// The revision that made the change.
    pub revision: i64,
    /// The object after the change; none on a deletion (or a value that
    /// did not decode), where only the key and namespace are known. A
    /// `Service` event always has its instance (on a deregistration only its
    /// namespace, service name and id).
    pub object: Option<Payload>,
}

/// One store change (`event`, its key parsed) as a Nomad event, if it is
/// on a published topic. Evaluations, allocations and deployments are only
/// published while they exist; jobs and nodes also on deletion. A status
/// batch is [`classify_batch`]'s.
fn classify_key(
    key: StateKey,
    event: &caravan_store::Event,
    allocs: &mut AllocFold<'_>,
) -> Option<Change> {
    let put = event.kind == EventKind::Put;
    fn obj<T: StateObject>(put: bool, event: &caravan_store::Event) -> Option<T> {
        put.then(|| decode::<T>(&event.kv).ok()).flatten()
    }
    let revision = event.kv.mod_revision;
    let change = |topic, kind, key, namespace, object| Change {
        topic,
        kind,
        key,
        filter_keys: Vec::new(),
        namespace,
        revision,
        object,
    };
    match key {
        StateKey::Job { namespace, id } => {
            let kind = if put {
                "JobRegistered"
            } else {
                "JobDeregistered"
            };
            let job = obj::<Job>(put, event).map(Payload::Job);
            Some(change("Job", kind, id, Some(namespace), job))
        }
        StateKey::Eval(id) => {
            let eval = obj::<Evaluation>(put, event)?;
            let ns = eval.namespace.clone();
            let object = Some(Payload::Evaluation(eval));
            Some(change(
                "Evaluation",
                "EvaluationUpdated",
                id,
                Some(ns),
                object,
            ))
        }
        StateKey::Alloc(_) | StateKey::AllocStatus(_) => {
            let alloc = match &key {
                StateKey::AllocStatus(id) => {
                    let status = put.then(|| decode_status(&event.kv).ok())??;
                    allocs.status(id, &status, revision)?
                }
                _ => allocs.record(put.then(|| decode::<Allocation>(&event.kv).ok())??),
            };
            let ns = alloc.namespace.clone();
            let id = alloc.id.clone();
            let object = Some(Payload::Allocation(alloc));
            Some(change(
                "Allocation",
                "AllocationUpdated",
                id,
                Some(ns),
                object,
            ))
        }
        StateKey::Deployment(id) => {
            let d = obj::<Deployment>(put, event)?;
            let ns = d.namespace.clone();
            let object = Some(Payload::Deployment(d));
            let kind = "DeploymentStatusUpdate";
            Some(change("Deployment", kind, id, Some(ns), object))
        }
        StateKey::Node(id) => {
            let kind = if put {
                "NodeRegistration"
            } else {
                "NodeDeregistration"
            };
            let node = obj::<Node>(put, event).map(|n| Payload::Node(crate::nodes::public(n)));
            Some(change("Node", kind, id, None, node))
        }
        StateKey::Service {
            namespace,
            name,
            id,
        } => {
            let mut reg = obj::<ServiceRegistration>(put, event).unwrap_or_default();
            reg.namespace = namespace.clone();
            reg.service_name = name;
            reg.id = id.clone();
            let kind = if put {
                "ServiceRegistration"
            } else {
                "ServiceDeregistration"
            };
            let filter_keys = [&reg.job_id, &reg.service_name]
                .into_iter()
                .filter(|k| !k.is_empty())
                .cloned()
                .collect();
            Some(Change {
                filter_keys,
                ..change(
                    "Service",
                    kind,
                    id,
                    Some(namespace),
                    Some(Payload::Service(reg)),
                )
            })
        }
        _ => None,
    }
}

/// Allocations as the stream shows them: an allocation's record and its
/// client's status are two keys, and each event of either is published as
/// the whole allocation, folded with the other key as last seen in the
/// stream, else as the gateway's cache holds it (without placement metrics).
pub struct AllocFold<'a> {
    snap: &'a Snapshot,
    seen: HashMap<String, Allocation>,
}

impl<'a> AllocFold<'a> {
    /// Folds over the allocations of `snap`.
    pub fn new(snap: &'a Snapshot) -> Self {
        AllocFold {
            snap,
            seen: HashMap::new(),
        }
    }

    fn held(&self, id: &str) -> Option<&Allocation> {
        self.seen
            .get(id)
            .or_else(|| self.snap.alloc(id).map(|a| a.as_ref()))
    }

    /// A record event: the record, under the client's status last seen.
    fn record(&mut self, mut record: Allocation) -> Allocation {
        if let Some(held) = self.held(&record.id) {
            carry_client_part(&mut record, held);
        }
        self.seen.insert(record.id.clone(), record.clone());
        record
    }

    /// An entry written with a status batch: as a status event, unless the
    /// allocation's client is done with it and the entry says otherwise
    /// (a late report, which no reader ever chooses).
    fn entry(
        &mut self,
        id: &str,
        status: &caravan_proto::AllocStatus,
        revision: i64,
    ) -> Option<Allocation> {
        let held = self.held(id)?;
        if held.client_status().is_terminal() && !status.client_status().is_terminal() {
            return None;
        }
        self.status(id, status, revision)
    }

    /// A status event: the allocation last seen, under this status; none
    /// when the allocation is not known (gone already).
    fn status(
        &mut self,
        id: &str,
        status: &caravan_proto::AllocStatus,
        revision: i64,
    ) -> Option<Allocation> {
        let mut alloc = self.held(id)?.clone();
        lay_status(&mut alloc, status, revision);
        self.seen.insert(id.to_owned(), alloc.clone());
        Some(alloc)
    }
}

/// The wanted changes of one revision.
#[derive(Debug, Clone, PartialEq)]
pub struct RevisionEvents {
    /// The revision.
    pub index: i64,
    /// Its wanted changes, never empty.
    pub changes: Vec<Change>,
}

/// The wanted changes of a watch batch, grouped by revision; revisions with
/// nothing wanted are left out. Allocations are folded over `snap`.
pub fn group(
    keys: &Keyspace,
    filter: &Filter,
    batch: &WatchBatch,
    snap: &Snapshot,
) -> Vec<RevisionEvents> {
    let mut out: Vec<RevisionEvents> = Vec::new();
    let mut allocs = AllocFold::new(snap);
    for event in &batch.events {
        let changes = match keys.parse(&event.kv.key) {
            Ok(StateKey::JobStatus { .. }) => classify_batch(event, &mut allocs),
            Ok(key) => classify_key(key, event, &mut allocs).into_iter().collect(),
            Err(_) => Vec::new(),
        };
        for change in changes {
            if !filter.wants_change(&change) {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.index == change.revision => last.changes.push(change),
                _ => out.push(RevisionEvents {
                    index: change.revision,
                    changes: vec![change],
                }),
            }
        }
    }
    out
}

/// The allocation events of a status batch written (`event`, of a
/// `job_status/` key):
/// one per entry written with it. Entries moved into it from a freed batch
/// keep an earlier revision and change no allocation, so they publish
/// nothing; neither does freeing a batch.
fn classify_batch(event: &caravan_store::Event, allocs: &mut AllocFold<'_>) -> Vec<Change> {
    if event.kind != EventKind::Put {
        return Vec::new();
    }
    let revision = event.kv.mod_revision;
    let Ok(entries) = decode_batch(&event.kv) else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter(|e| e.revision == revision)
        .filter_map(|e| allocs.entry(&e.alloc_id, &e.status, revision))
        .map(|alloc| Change {
            topic: "Allocation",
            kind: "AllocationUpdated",
            key: alloc.id.clone(),
            filter_keys: Vec::new(),
            namespace: Some(alloc.namespace.clone()),
            revision,
            object: Some(Payload::Allocation(alloc)),
        })
        .collect()
}

/// What a subscription yields.
#[derive(Debug, Clone, PartialEq)]
pub enum Tick {
    /// The wanted changes of one watch batch, one entry per revision.
    Events(Vec<RevisionEvents>),
    /// Nothing happened for [`HEARTBEAT`].
    Heartbeat,
}

/// The live event stream for `filter`, from the revision after its index
/// (or from now), ending when the gateway shuts down or the caller drops it.
/// A start revision already compacted away fails here or as the stream's
/// first item, depending on the store.
pub async fn subscribe(gw: &Gateway, filter: Filter) -> Result<BoxStream<'static, Result<Tick>>> {
    let watch = gw
        .store
        .watch(gw.keys().root(), filter.start_revision())
        .await?;
    let keys = gw.keys().clone();
    let cache = std::sync::Arc::clone(&gw.cache);
    let events = watch.stream.map(move |batch| match batch {
        Ok(batch) => Ok(Tick::Events(group(
            &keys,
            &filter,
            &batch,
            &cache.snapshot(),
        ))),
        Err(err) => Err(GatewayError::from(err)),
    });
    let heartbeats = futures::stream::unfold((), |()| async {
        tokio::time::sleep(HEARTBEAT).await;
        Some((Ok(Tick::Heartbeat), ()))
    });
    let ticks = futures::stream::select(events, heartbeats)
        .filter(|tick| {
            futures::future::ready(!matches!(tick, Ok(Tick::Events(revs)) if revs.is_empty()))
        })
        .take_until(gw.shutdown.clone().cancelled_owned());
    Ok(ticks.boxed())
}

#[cfg(test)]
mod tests {
    use caravan_store::{Event, KeyValue};

    use super::*;

    fn event(kind: EventKind, key: Vec<u8>, value: Vec<u8>, revision: i64) -> Event {
        Event {
            kind,
            kv: KeyValue {
                key,
                value,
                create_revision: 1,
                mod_revision: revision,
                version: 1,
                lease: 0,
            },
        }
    }

    fn put(key: Vec<u8>, value: Vec<u8>, revision: i64) -> Event {
        event(EventKind::Put, key, value, revision)
    }

    #[test]
    fn topics_filter_by_key_and_namespace() {
        let mut f = Filter::default();
        f.add_topic("topics[0]", "Job:web").unwrap();
        f.add_topic("topics[1]", "Evaluation").unwrap();
        f.set_index(7).unwrap();
        assert_eq!(f.start_revision(), 8);
        assert!(f.wants("Job", "web", Some("default")));
        assert!(!f.wants("Job", "api", Some("default")));
        assert!(f.wants("Evaluation", "e1", Some("default")));
        assert!(!f.wants("Node", "n1", None));
        let mut all = Filter::default();
        all.set_namespace("*");
        let all = all.finish();
        assert_eq!(all.start_revision(), 0);
        assert!(all.wants("Job", "x", Some("other")));
        let err = Filter::default()
            .add_topic("topics[2]", "Nope")
            .unwrap_err();
        assert!(err.to_string().starts_with("topics[2]: "), "{err}");
        let err = Filter::default().set_index(-1).unwrap_err();
        assert_eq!(err.to_string(), "index: invalid index \"-1\"");
    }

    #[test]
    fn changes_group_by_revision_and_decode() {
        let keys = Keyspace::new("/t");
        let web = Job {
            id: "web".into(),
            namespace: "default".into(),
            ..Default::default()
        };
        let batch = WatchBatch {
            revision: 6,
            events: vec![
                put(keys.job("default", "web"), caravan_state::encode(&web), 5),
                put(keys.node("n1"), b"not a node".to_vec(), 5),
                put(keys.job("default", "api"), Vec::new(), 6),
                event(EventKind::Delete, keys.node("n1"), Vec::new(), 6),
            ],
        };
        let mut filter = Filter::default();
        filter.add_topic("topic", "Job:web").unwrap();
        filter.add_topic("topic", "Node").unwrap();
        let revs = group(
            &keys,
            &filter,
            &batch,
            &Snapshot::new(caravan_state::Tables::new()),
        );
        assert_eq!(revs.len(), 2, "{revs:#?}");
        assert_eq!(revs[0].index, 5);
        assert_eq!(revs[0].changes[0].kind, "JobRegistered");
        let Some(Payload::Job(job)) = &revs[0].changes[0].object else {
            panic!("no decoded job: {revs:#?}");
        };
        assert_eq!(job.id, "web");
        assert_eq!(revs[0].changes[1].kind, "NodeRegistration");
        assert_eq!(revs[0].changes[1].object, None);
        assert_eq!(revs[1].index, 6);
        assert_eq!(revs[1].changes.len(), 1);
        assert_eq!(revs[1].changes[0].kind, "NodeDeregistration");
    }

    /// The allocations a batch publishes on the `Allocation` topic, with
    /// the revision of each event.
    fn allocation_events(keys: &Keyspace, batch: &WatchBatch) -> Vec<(i64, Allocation)> {
        let mut filter = Filter::default();
        filter.add_topic("topic", "Allocation").unwrap();
        let snap = Snapshot::new(caravan_state::Tables::new());
        group(keys, &filter, batch, &snap)
            .iter()
            .flat_map(|r| &r.changes)
            .map(|c| match &c.object {
                Some(Payload::Allocation(a)) => (c.revision, a.clone()),
                other => panic!("not an allocation: {other:?}"),
            })
            .collect()
    }

    /// An allocation's record and its client's status are two keys; an
    /// event of either is the whole allocation, the other key folded in
    /// (from the cache, else from the batch itself).
    #[test]
    fn allocation_events_fold_the_record_and_the_status() {
        use caravan_proto::{AllocClientStatus, AllocDesiredStatus};
        use prost::Message;
        let keys = Keyspace::new("/t");
        let mut placed = Allocation {
            id: "a1".into(),
            namespace: "default".into(),
            job_id: "web".into(),
            ..Default::default()
        };
        placed.set_client_status(AllocClientStatus::Pending);
        placed.set_desired_status(AllocDesiredStatus::Run);
        let mut running = placed.clone();
        running.set_client_status(AllocClientStatus::Running);
        let status = caravan_state::client_part(&running).encode_to_vec();
        let mut stopped = placed.clone();
        stopped.set_desired_status(AllocDesiredStatus::Stop);
        let batch = WatchBatch {
            revision: 7,
            events: vec![
                put(keys.alloc("a1"), caravan_state::encode(&placed), 5),
                put(keys.alloc_status("a1"), status, 6),
                put(keys.alloc("a1"), caravan_state::encode(&stopped), 7),
                put(keys.alloc_status("gone"), Vec::new(), 7),
            ],
        };
        let shown: Vec<(i64, AllocClientStatus, AllocDesiredStatus, i64)> =
            allocation_events(&keys, &batch)
                .into_iter()
                .map(|(rev, a)| {
                    let shown = (a.client_status(), a.desired_status());
                    (rev, shown.0, shown.1, a.client_modify_revision)
                })
                .collect();
        assert_eq!(
            shown,
            vec![
                (5, AllocClientStatus::Pending, AllocDesiredStatus::Run, 0),
                (6, AllocClientStatus::Running, AllocDesiredStatus::Run, 6),
                (7, AllocClientStatus::Running, AllocDesiredStatus::Stop, 6),
            ],
            "a status of an allocation not known is no event"
        );
    }

    /// A status batch is an allocation event per entry written with it;
    /// entries moved into it, late reports of finished allocations and
    /// freeing a batch publish nothing.
    #[test]
    fn status_batches_are_allocation_events_of_their_new_entries() {
        use caravan_proto::{AllocClientStatus, AllocDesiredStatus};
        use caravan_state::status_batch::encode_batch;
        let keys = Keyspace::new("/t");
        let placed = |id: &str| {
            let mut a = Allocation {
                id: id.into(),
                namespace: "default".into(),
                job_id: "web".into(),
                ..Default::default()
            };
            a.set_client_status(AllocClientStatus::Pending);
            a.set_desired_status(AllocDesiredStatus::Run);
            a
        };
        let with = |client| {
            let mut a = placed("x");
            a.set_client_status(client);
            caravan_state::client_part(&a)
        };
        let running = with(AllocClientStatus::Running);
        let complete = with(AllocClientStatus::Complete);
        let b1 = keys.job_status("default", "web", "b1");
        let batch = WatchBatch {
            revision: 9,
            events: vec![
                put(keys.alloc("a1"), caravan_state::encode(&placed("a1")), 3),
                put(keys.alloc("a2"), caravan_state::encode(&placed("a2")), 4),
                put(
                    b1.clone(),
                    encode_batch([
                        ("a1", &complete, 0),
                        ("a2", &running, 0),
                        ("gone", &running, 0),
                    ]),
                    6,
                ),
                // a1 finished: a late report of it running is no event.
                put(
                    keys.job_status("default", "web", "b2"),
                    encode_batch([("a1", &running, 0)]),
                    7,
                ),
                // b1 freed, a2's entry moved with its revision: no event.
                put(
                    keys.job_status("default", "web", "b3"),
                    encode_batch([("a1", &complete, 6), ("a2", &running, 6)]),
                    8,
                ),
                event(EventKind::Delete, b1, Vec::new(), 8),
            ],
        };
        let shown: Vec<(i64, String, AllocClientStatus, i64)> = allocation_events(&keys, &batch)
            .into_iter()
            .map(|(rev, a)| {
                (
                    rev,
                    a.id.clone(),
                    a.client_status(),
                    a.client_modify_revision,
                )
            })
            .collect();
        assert_eq!(
            shown,
            vec![
                (3, "a1".to_string(), AllocClientStatus::Pending, 0),
                (4, "a2".to_string(), AllocClientStatus::Pending, 0),
                (6, "a1".to_string(), AllocClientStatus::Complete, 6),
                (6, "a2".to_string(), AllocClientStatus::Running, 6),
            ]
        );
    }

    /// A service instance's put and delete are `ServiceRegistration` and
    /// `ServiceDeregistration` events keyed by its id, found by its
    /// service's name (and its job) too, in its namespace only.
    #[test]
    fn service_instances_are_events_found_by_service_name() {
        let keys = Keyspace::new("/t");
        let id = "_nomad-task-a1-web-web-http";
        let reg = ServiceRegistration {
            job_id: "shop".into(),
            alloc_id: "a1".into(),
            address: "10.0.0.7".into(),
            port: 8080,
            ..Default::default()
        };
        let key = keys.service("prod", "web", id);
        let batch = WatchBatch {
            revision: 8,
            events: vec![
                put(key.clone(), caravan_state::encode(&reg), 7),
                event(EventKind::Delete, key, Vec::new(), 8),
            ],
        };
        let mut by_name = Filter::default();
        by_name.add_topic("topic", "Service:web").unwrap();
        by_name.set_namespace("prod");
        let revs = group(
            &keys,
            &by_name,
            &batch,
            &Snapshot::new(caravan_state::Tables::new()),
        );
        assert_eq!(revs.len(), 2, "{revs:#?}");
        let registered = &revs[0].changes[0];
        assert_eq!(registered.kind, "ServiceRegistration");
        assert_eq!(registered.key, id);
        assert_eq!(registered.filter_keys, ["shop", "web"]);
        let Some(Payload::Service(service)) = &registered.object else {
            panic!("no service payload: {registered:?}");
        };
        assert_eq!(service.namespace, "prod");
        assert_eq!(service.service_name, "web");
        assert_eq!(service.id, id);
        assert_eq!(service.port, 8080);
        assert_eq!(service.modify_revision, 7);
        let gone = &revs[1].changes[0];
        assert_eq!(gone.kind, "ServiceDeregistration");
        let Some(Payload::Service(gone_service)) = &gone.object else {
            panic!("no service payload: {gone:?}");
        };
        assert_eq!(gone_service.service_name, "web");

        let mut by_job = Filter::default();
        by_job.add_topic("topic", "Service:shop").unwrap();
        by_job.set_namespace("prod");
        assert_eq!(
            group(
                &keys,
                &by_job,
                &batch,
                &Snapshot::new(caravan_state::Tables::new())
            )
            .len(),
            1,
            "the put names its job"
        );
        let mut other_name = Filter::default();
        other_name.add_topic("topic", "Service:api").unwrap();
        other_name.set_namespace("prod");
        assert!(
            group(
                &keys,
                &other_name,
                &batch,
                &Snapshot::new(caravan_state::Tables::new())
            )
            .is_empty()
        );
        let mut other_ns = Filter::default();
        other_ns.add_topic("topic", "Service").unwrap();
        assert!(
            group(
                &keys,
                &other_ns,
                &batch,
                &Snapshot::new(caravan_state::Tables::new())
            )
            .is_empty(),
            "the default namespace sees nothing of prod"
        );
        let mut jobs = Filter::default();
        jobs.add_topic("topic", "Job").unwrap();
        jobs.set_namespace("*");
        assert!(
            group(
                &keys,
                &jobs,
                &batch,
                &Snapshot::new(caravan_state::Tables::new())
            )
            .is_empty()
        );
    }
}

//! Values as stored: prost bytes in, messages out with their revisions filled
//! from the key's metadata (docs/state-layout.md, "Revisions").

use caravan_model::AllocExt;
use caravan_proto::{
    Allocation, Deployment, Evaluation, Job, JobSubmission, Namespace, Node, NodePool,
    NodeScoreMeta, SchedulerConfiguration, ServiceRegistration, Variable,
};
use caravan_store::{KeyValue, Revision};
use prost::Message;

use crate::error::{Result, StateError};
use crate::{packed_ids, packed_names};

/// A message stored as a value, whose revision fields come from the key.
pub trait StateObject: Message + Default {
    /// Sets `create_revision`/`modify_revision` from the key's metadata and
    /// resolves the fields stored as 0 that mean "the revision of this write".
    fn fill_revisions(&mut self, create_revision: Revision, mod_revision: Revision);

    /// The key's mod revision, once filled.
    fn modify_revision(&self) -> Revision;

    /// The bytes the store keeps for this message: its protobuf encoding,
    /// unless the type stores something shorter that [`Self::unpack_stored`]
    /// turns back into the same message.
    fn stored_bytes(&self) -> Vec<u8> {
        self.encode_to_vec()
    }

    /// Decodes the bytes the store keeps.
    fn decode_stored(bytes: &[u8]) -> std::result::Result<Self, prost::DecodeError> {
        Self::decode(bytes)
    }

    /// Puts back, after decoding, what [`Self::stored_bytes`] left out.
    fn unpack_stored(&mut self) {}
}

impl StateObject for Job {
    fn fill_revisions(&mut self, create_revision: Revision, mod_revision: Revision) {
        self.create_revision = create_revision;
        self.modify_revision = mod_revision;
        if self.job_modify_revision == 0 {
            self.job_modify_revision = mod_revision;
        }
    }
    fn modify_revision(&self) -> Revision {
        self.modify_revision
    }
}

impl StateObject for Evaluation {
    fn fill_revisions(&mut self, create_revision: Revision, mod_revision: Revision) {
        self.create_revision = create_revision;
        self.modify_revision = mod_revision;
        if self.job_modify_revision == 0 {
            self.job_modify_revision = mod_revision;
        }
    }
    fn modify_revision(&self) -> Revision {
        self.modify_revision
    }
}

impl StateObject for Allocation {
    fn fill_revisions(&mut self, create_revision: Revision, mod_revision: Revision) {
        self.create_revision = create_revision;
        self.modify_revision = mod_revision;
        if self.alloc_modify_revision == 0 {
            self.alloc_modify_revision = mod_revision;
        }
        // Filled by the fold with its status key's, never stored.
        self.client_modify_revision = 0;
    }
    fn modify_revision(&self) -> Revision {
        self.modify_revision
    }

    /// Stored shorter, and read back whole: the ids that are canonical
    /// UUIDs as 16 bytes each ([`crate::packed_ids`]), a name of the form
    /// `<job>.<group>[<index>]` and the `default` namespace as a number
    /// ([`crate::packed_names`]), and the placement metrics' score of the
    /// allocation's own node (the one score the scheduler keeps) without
    /// its node id, which the record carries already. A record of ~290
    /// bytes loses about 145.
    fn stored_bytes(&self) -> Vec<u8> {
        let bytes = self.encode_to_vec();
        let mut tail = Vec::new();
        let own = |s: &NodeScoreMeta| !s.node_id.is_empty() && s.node_id == self.node_id;
        let metrics = self
            .metrics
            .as_deref()
            .filter(|m| m.score_meta.iter().any(own));
        if let Some(metrics) = metrics {
            let mut packed = metrics.clone();
            for score in packed.score_meta.iter_mut().filter(|s| own(s)) {
                score.node_id.clear();
            }
            prost::encoding::message::encode(ALLOC_METRICS, &packed, &mut tail);
        }
        let ids = packed_ids::packed(self);
        if let Some(ids) = &ids {
            prost::encoding::bytes::encode(packed_ids::PACKED_IDS, ids, &mut tail);
        }
        let names = packed_names::packed(self);
        if let Some(names) = &names {
            prost::encoding::uint64::encode(packed_names::PACKED_NAMES, names, &mut tail);
        }
        if tail.is_empty() {
            return bytes;
        }
        let ids = ids.unwrap_or_default();
        let names = names.unwrap_or_default();
        let dropped = |tag: u32| {
            (tag == ALLOC_METRICS && metrics.is_some())
                || packed_ids::drops(&ids, tag)
                || packed_names::drops(names, tag)
        };
        with_fields_replaced(&bytes, dropped, &tail).unwrap_or(bytes)
    }

    /// Decodes field by field, putting the packed ids back.
    fn decode_stored(bytes: &[u8]) -> std::result::Result<Self, prost::DecodeError> {
        decode_alloc_fields(bytes, |_| false, |_, _| {})
    }

    /// Gives a stored score without a node id the allocation's own node (no
    /// score is ever written without one).
    fn unpack_stored(&mut self) {
        let Some(metrics) = self.metrics.as_deref_mut() else {
            return;
        };
        for score in metrics.score_meta.iter_mut() {
            if score.node_id.is_empty() {
                score.node_id.clone_from(&self.node_id);
            }
        }
    }
}

/// `bytes` (an encoded message) without the fields `dropped` names,
/// followed by `tail` (encoded fields); `None` if `bytes` does not decode.
fn with_fields_replaced(
    bytes: &[u8],
    dropped: impl Fn(u32) -> bool,
    tail: &[u8],
) -> Option<Vec<u8>> {
    use prost::encoding::{DecodeContext, decode_key, skip_field};
    let mut out = Vec::with_capacity(bytes.len());
    let mut buf = bytes;
    while !buf.is_empty() {
        let field_start = bytes.len() - buf.len();
        let (field, wire_type) = decode_key(&mut buf).ok()?;
        skip_field(wire_type, field, &mut buf, DecodeContext::default()).ok()?;
        if !dropped(field) {
            out.extend_from_slice(&bytes[field_start..bytes.len() - buf.len()]);
        }
    }
    out.extend_from_slice(tail);
    Some(out)
}

macro_rules! plain_revisions {
    ($($t:ty),*) => {$(
        impl StateObject for $t {
            fn fill_revisions(&mut self, create_revision: Revision, mod_revision: Revision) {
                self.create_revision = create_revision;
                self.modify_revision = mod_revision;
            }
            fn modify_revision(&self) -> Revision {
                self.modify_revision
            }
        }
    )*};
}

plain_revisions!(
    Node,
    Deployment,
    SchedulerConfiguration,
    Variable,
    Namespace,
    NodePool,
    JobSubmission,
    ServiceRegistration
);

/// The bytes to store for `msg`.
pub fn encode<T: StateObject>(msg: &T) -> Vec<u8> {
    msg.stored_bytes()
}

/// How much of a stored allocation a reader keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AllocDetail {
    /// Everything stored.
    #[default]
    Full,
    /// Everything but the placement metrics: what lists, client streams and
    /// status bookkeeping read (task states included). Metrics are read by
    /// whoever shows one whole allocation, from the store. Like
    /// [`AllocDetail::Scheduling`], such an allocation must never be written
    /// back: rewrites read the stored value first.
    WithoutMetrics,
    /// What scheduling, verification and the servers' bookkeeping read: no
    /// placement metrics, and task states only once the allocation is
    /// finished on its client or asked to stop (reschedule timing and a batch
    /// job's "ran successfully" read them then; nothing does while it runs).
    /// Skipping them saves most of the decoding and about half the memory of
    /// a cached allocation, the bulk of a cache at a million allocations.
    /// Such an allocation must never be written back: rewrites read the
    /// stored value first.
    Scheduling,
}

/// Field numbers of `Allocation` a [`AllocDetail::Scheduling`] decode may
/// skip (alloc.proto).
const ALLOC_TASK_STATES: u32 = 17;
const ALLOC_METRICS: u32 = 19;

/// Decodes a stored allocation keeping `detail` of it, filling its
/// revisions from `kv`'s metadata.
pub fn decode_alloc(kv: &KeyValue, detail: AllocDetail) -> Result<Allocation> {
    let mut alloc = match detail {
        AllocDetail::Full => decode(kv),
        AllocDetail::WithoutMetrics => filled(kv, decode_without_metrics(&kv.value)),
        AllocDetail::Scheduling => filled(kv, decode_for_scheduling(&kv.value)),
    }?;
    shrink_maps(&mut alloc);
    Ok(alloc)
}

/// Gives back the room decoding leaves in an allocation's per-task maps (a
/// vector's first push reserves four entries): a cache holds the allocation
/// for long, one per placement.
fn shrink_maps(alloc: &mut Allocation) {
    alloc.task_states.shrink();
    if let Some(resources) = alloc.allocated_resources.as_mut() {
        resources.tasks.shrink();
    }
}

/// Decodes field by field, skipping the placement metrics.
fn decode_without_metrics(bytes: &[u8]) -> std::result::Result<Allocation, prost::DecodeError> {
    decode_alloc_fields(bytes, |tag| tag == ALLOC_METRICS, |_, _| {})
}

/// Decodes a stored allocation field by field, leaving undecoded the
/// fields `skip` names and handing each of them to `skipped` (its number
/// and its whole encoding, tag and length included). The packed ids and
/// names fields are read here, and what they hold put back once every
/// field is in.
fn decode_alloc_fields<'a>(
    bytes: &'a [u8],
    skip: impl Fn(u32) -> bool,
    mut skipped: impl FnMut(u32, &'a [u8]),
) -> std::result::Result<Allocation, prost::DecodeError> {
    // prost's field-level decoding is what its generated code calls; it is
    // public, if undocumented, API.
    use prost::encoding::{DecodeContext, WireType, decode_key, decode_varint, skip_field};
    let mut alloc = Allocation::default();
    let mut packed: Option<&'a [u8]> = None;
    let mut names: Option<u64> = None;
    let mut buf = bytes;
    while !buf.is_empty() {
        let field_start = bytes.len() - buf.len();
        let (tag, wire_type) = decode_key(&mut buf)?;
        if tag == packed_ids::PACKED_IDS && wire_type == WireType::LengthDelimited {
            let before = buf;
            skip_field(wire_type, tag, &mut buf, DecodeContext::default())?;
            // The length, then the value: what the skip stepped over.
            let mut value = &before[..before.len() - buf.len()];
            decode_varint(&mut value)?;
            packed = Some(value);
            continue;
        }
        if tag == packed_names::PACKED_NAMES && wire_type == WireType::Varint {
            names = Some(decode_varint(&mut buf)?);
            continue;
        }
        if skip(tag) {
            skip_field(wire_type, tag, &mut buf, DecodeContext::default())?;
            skipped(tag, &bytes[field_start..bytes.len() - buf.len()]);
        } else {
            alloc.merge_field(tag, wire_type, &mut buf, DecodeContext::default())?;
        }
    }
    if let Some(packed) = packed {
        packed_ids::unpack(&mut alloc, packed);
    }
    if let Some(names) = names {
        packed_names::unpack(&mut alloc, names);
    }
    Ok(alloc)
}

/// Whether a [`AllocDetail::Scheduling`] reader needs the task states: the
/// scheduler reads them only of allocations no longer live.
pub(crate) fn keeps_task_states(alloc: &Allocation) -> bool {
    !alloc.is_live()
}

/// Decodes field by field, skipping the metrics and setting the task
/// states aside until the statuses say whether they are wanted (fields may
/// come in any order).
fn decode_for_scheduling(bytes: &[u8]) -> std::result::Result<Allocation, prost::DecodeError> {
    let mut task_states: Vec<&[u8]> = Vec::new();
    let mut alloc = decode_alloc_fields(
        bytes,
        |tag| tag == ALLOC_METRICS || tag == ALLOC_TASK_STATES,
        |tag, field| {
            if tag == ALLOC_TASK_STATES {
                task_states.push(field);
            }
        },
    )?;
    if keeps_task_states(&alloc) {
        for field in task_states {
            alloc.merge(field)?;
        }
    }
    Ok(alloc)
}

/// Decodes a stored value, filling its revisions from `kv`'s metadata.
pub fn decode<T: StateObject>(kv: &KeyValue) -> Result<T> {
    filled(kv, T::decode_stored(kv.value.as_slice()))
}

/// `decoded` with its revisions filled from `kv`, or the error naming `kv`.
fn filled<T: StateObject>(
    kv: &KeyValue,
    decoded: std::result::Result<T, prost::DecodeError>,
) -> Result<T> {
    let mut msg = decoded.map_err(|source| StateError::Decode {
        key: String::from_utf8_lossy(&kv.key).into_owned(),
        source,
    })?;
    msg.fill_revisions(kv.create_revision, kv.mod_revision);
    msg.unpack_stored();
    Ok(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: Vec<u8>, create: Revision, modify: Revision) -> KeyValue {
        KeyValue {
            key: key.as_bytes().to_vec(),
            value,
            create_revision: create,
            mod_revision: modify,
            version: 1,
            lease: 0,
        }
    }

    #[test]
    fn revisions_come_from_the_key_not_the_bytes() {
        let stored = Node {
            id: "n1".into(),
            create_revision: 999,
            modify_revision: 999,
            ..Default::default()
        };
        let node: Node = decode(&kv("/c/nodes/n1", encode(&stored), 3, 8)).unwrap();
        assert_eq!((node.create_revision, node.modify_revision), (3, 8));
        assert_eq!(node.id, "n1");
    }

    #[test]
    fn zero_revision_fields_resolve_to_the_write() {
        let job: Job = decode(&kv("/c/jobs/d/j", encode(&Job::default()), 5, 9)).unwrap();
        assert_eq!(job.job_modify_revision, 9);
        let eval: Evaluation =
            decode(&kv("/c/evals/e", encode(&Evaluation::default()), 9, 9)).unwrap();
        assert_eq!(eval.job_modify_revision, 9);
        let alloc: Allocation =
            decode(&kv("/c/allocs/a", encode(&Allocation::default()), 4, 12)).unwrap();
        assert_eq!(alloc.alloc_modify_revision, 12);
        assert_eq!((alloc.create_revision, alloc.modify_revision), (4, 12));
    }

    fn full_alloc() -> Allocation {
        use caravan_proto::{AllocMetric, TaskEvent, TaskState};
        let mut a = Allocation {
            id: "a1".into(),
            node_id: "n1".into(),
            job_id: "web".into(),
            metrics: Some(Box::new(AllocMetric {
                nodes_evaluated: 7,
                ..Default::default()
            })),
            ..Default::default()
        };
        a.task_states.insert(
            "t".into(),
            TaskState {
                state: "running".into(),
                events: vec![TaskEvent {
                    r#type: "Started".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
        );
        a.set_desired_status(caravan_proto::AllocDesiredStatus::Run);
        a.set_client_status(caravan_proto::AllocClientStatus::Running);
        a
    }

    #[test]
    fn the_own_nodes_score_is_stored_without_its_node_id() {
        use caravan_proto::{AllocMetric, NodeScoreMeta};
        let score = |node: &str| NodeScoreMeta {
            node_id: node.into(),
            norm_score: 0.5,
            ..Default::default()
        };
        let mut written = full_alloc();
        // Not canonical (upper case), so only the score is stored shorter.
        written.node_id = "31CB356C-09C7-4412-B66A-56E775D69534".into();
        written.metrics = Some(Box::new(AllocMetric {
            nodes_evaluated: 7,
            score_meta: vec![score(&written.node_id), score("another-node")],
            ..Default::default()
        }));
        let stored = encode(&written);
        assert_eq!(stored.len() + 38, written.encode_to_vec().len());
        let read: Allocation = decode(&kv("/c/allocs/a1", stored.clone(), 2, 2)).unwrap();
        let mut expected = written.clone();
        expected.fill_revisions(2, 2);
        assert_eq!(read, expected);
        for detail in [AllocDetail::Full, AllocDetail::WithoutMetrics] {
            let read = decode_alloc(&kv("/c/allocs/a1", stored.clone(), 2, 2), detail).unwrap();
            assert_eq!(read.node_id, written.node_id);
        }
        // A record stored before (the node id written out) reads the same.
        let old: Allocation = decode(&kv("/c/allocs/a1", written.encode_to_vec(), 2, 2)).unwrap();
        assert_eq!(old, expected);
    }

    #[test]
    fn a_derived_name_and_the_default_namespace_are_stored_as_a_number() {
        let mut written = full_alloc();
        written.task_group = "cache".into();
        written.name = "web.cache[12]".into();
        written.namespace = "default".into();
        let stored = encode(&written);
        let mut plain = written.clone();
        plain.name.clear();
        plain.namespace.clear();
        // The name (15 bytes with its tag and length) and the namespace (9)
        // become a field of 3 bytes.
        assert_eq!(stored.len(), encode(&plain).len() + 3);
        for detail in [
            AllocDetail::Full,
            AllocDetail::WithoutMetrics,
            AllocDetail::Scheduling,
        ] {
            let read = decode_alloc(&kv("/c/allocs/a1", stored.clone(), 2, 2), detail).unwrap();
            assert_eq!(
                (read.name.as_str(), read.namespace.as_str()),
                ("web.cache[12]", "default"),
                "{detail:?}"
            );
        }
        let read: Allocation = decode(&kv("/c/allocs/a1", stored, 2, 2)).unwrap();
        let mut expected = written.clone();
        expected.fill_revisions(2, 2);
        assert_eq!(read, expected);

        // The field may come first, before the job and group it names from.
        let mut first = Vec::new();
        prost::encoding::uint64::encode(packed_names::PACKED_NAMES, &((13 << 1) | 1), &mut first);
        first.extend(plain.encode_to_vec());
        let read: Allocation = decode(&kv("/c/allocs/a1", first, 2, 2)).unwrap();
        assert_eq!(read.name, "web.cache[12]");

        // A name of another form, in another namespace, is stored as written.
        let mut odd = written.clone();
        odd.name = "web.cache[012]".into();
        odd.namespace = "prod".into();
        assert_eq!(encode(&odd).len(), encode(&plain).len() + 16 + 6);
        let read: Allocation = decode(&kv("/c/allocs/a1", encode(&odd), 2, 2)).unwrap();
        assert_eq!((read.name, read.namespace), (odd.name, odd.namespace));
    }

    fn ids(a: &mut Allocation) -> [&mut String; 8] {
        [
            &mut a.id,
            &mut a.node_id,
            &mut a.eval_id,
            &mut a.deployment_id,
            &mut a.previous_allocation,
            &mut a.next_allocation,
            &mut a.followup_eval_id,
            &mut a.preempted_by_allocation,
        ]
    }

    #[test]
    fn canonical_ids_are_stored_as_16_bytes_and_read_back_whole() {
        use caravan_proto::{AllocMetric, NodeScoreMeta};
        let mut written = full_alloc();
        for id in ids(&mut written).into_iter().take(4) {
            *id = uuid::Uuid::new_v4().to_string();
        }
        written.metrics = Some(Box::new(AllocMetric {
            score_meta: vec![NodeScoreMeta {
                node_id: written.node_id.clone(),
                ..Default::default()
            }],
            ..Default::default()
        }));
        let stored = encode(&written);
        // Four ids of 38 bytes become a 3-byte field head, a mask and 64
        // bytes; the score's copy of the node id goes (38).
        assert_eq!(
            stored.len() + 4 * 38 - 68 + 38,
            written.encode_to_vec().len()
        );
        let mut expected = written.clone();
        expected.fill_revisions(2, 2);
        assert_eq!(
            decode::<Allocation>(&kv("/c/allocs/x", stored.clone(), 2, 2)).unwrap(),
            expected
        );
        for detail in [
            AllocDetail::Full,
            AllocDetail::WithoutMetrics,
            AllocDetail::Scheduling,
        ] {
            let read = decode_alloc(&kv("/c/allocs/x", stored.clone(), 2, 2), detail).unwrap();
            assert_eq!(read.id, written.id, "{detail:?}");
            assert_eq!(read.node_id, written.node_id, "{detail:?}");
            assert_eq!(read.eval_id, written.eval_id, "{detail:?}");
            assert_eq!(read.deployment_id, written.deployment_id, "{detail:?}");
        }

        // Every field packs, in any mix with ids that do not.
        let mut all = full_alloc();
        for (n, id) in ids(&mut all).into_iter().enumerate() {
            *id = if n % 3 == 1 {
                format!("not-a-uuid-{n}")
            } else {
                uuid::Uuid::new_v4().to_string()
            };
        }
        let read: Allocation = decode(&kv("/c/allocs/x", encode(&all), 2, 2)).unwrap();
        let mut expected = all.clone();
        expected.fill_revisions(2, 2);
        assert_eq!(read, expected);
        // A record stored before reads the same.
        let old: Allocation = decode(&kv("/c/allocs/x", all.encode_to_vec(), 2, 2)).unwrap();
        assert_eq!(old, expected);
    }

    #[test]
    fn ids_that_would_not_read_back_the_same_are_stored_as_written() {
        let mut written = full_alloc();
        let uuid = uuid::Uuid::new_v4();
        written.id = uuid.to_string().to_uppercase();
        written.node_id = uuid.braced().to_string();
        written.eval_id = uuid.simple().to_string();
        written.deployment_id = format!(" {uuid}");
        let stored = encode(&written);
        let read: Allocation = decode(&kv("/c/allocs/x", stored, 2, 2)).unwrap();
        let mut expected = written.clone();
        expected.fill_revisions(2, 2);
        assert_eq!(read, expected);
    }

    #[test]
    fn a_damaged_packed_ids_field_is_an_error_or_a_short_read_never_a_panic() {
        let mut written = full_alloc();
        written.node_id = uuid::Uuid::new_v4().to_string();
        let stored = encode(&written);
        // The field's length claims more than is stored.
        let mut cut = stored.clone();
        cut.truncate(cut.len() - 3);
        for detail in [
            AllocDetail::Full,
            AllocDetail::WithoutMetrics,
            AllocDetail::Scheduling,
        ] {
            let err = decode_alloc(&kv("/c/allocs/cut", cut.clone(), 2, 2), detail).unwrap_err();
            assert!(err.to_string().contains("/c/allocs/cut"), "{err}");
        }
        // A mask naming more ids than the value holds: those are left empty.
        let mut short = written.encode_to_vec();
        prost::encoding::bytes::encode(packed_ids::PACKED_IDS, &vec![0b11u8; 17], &mut short);
        let read: Allocation = decode(&kv("/c/allocs/short", short, 2, 2)).unwrap();
        assert_eq!(read.id.len(), 36, "the first id is read");
        assert_eq!(read.node_id, written.node_id, "the second, absent, is kept");
    }

    #[test]
    fn the_skipped_field_numbers_are_the_protos() {
        let only = |a: Allocation| {
            prost::encoding::decode_key(&mut encode(&a).as_slice())
                .unwrap()
                .0
        };
        let mut metrics = Allocation::default();
        metrics.metrics = full_alloc().metrics;
        assert_eq!(only(metrics), ALLOC_METRICS);
        let states = Allocation {
            task_states: full_alloc().task_states,
            ..Default::default()
        };
        assert_eq!(only(states), ALLOC_TASK_STATES);
    }

    #[test]
    fn a_scheduling_read_drops_metrics_and_live_task_states_only() {
        let full = full_alloc();
        let stored = kv("/c/allocs/a1", encode(&full), 4, 12);
        let lean = decode_alloc(&stored, AllocDetail::Scheduling).unwrap();
        assert!(lean.metrics.is_none());
        assert!(lean.task_states.is_empty());
        let mut expected = full.clone();
        expected.metrics = None;
        expected.task_states.clear();
        expected.fill_revisions(4, 12);
        assert_eq!(lean, expected, "every other field is kept");
        assert_eq!(
            decode_alloc(&stored, AllocDetail::Full).unwrap(),
            decode::<Allocation>(&stored).unwrap()
        );

        // Finished, or asked to stop: the task states are read, so kept.
        let mut failed = full.clone();
        failed.set_client_status(caravan_proto::AllocClientStatus::Failed);
        let lean = decode_alloc(
            &kv("/c/allocs/a1", encode(&failed), 4, 12),
            AllocDetail::Scheduling,
        )
        .unwrap();
        assert_eq!(lean.task_states, full.task_states);
        assert!(lean.metrics.is_none());
        let mut stopping = full;
        stopping.set_desired_status(caravan_proto::AllocDesiredStatus::Stop);
        let lean = decode_alloc(
            &kv("/c/allocs/a1", encode(&stopping), 4, 12),
            AllocDetail::Scheduling,
        )
        .unwrap();
        assert_eq!(lean.task_states.len(), 1);
        assert!(
            decode_alloc(
                &kv("/c/allocs/a1", vec![0xff, 0xff], 4, 12),
                AllocDetail::Scheduling
            )
            .is_err()
        );
    }

    #[test]
    fn a_read_without_metrics_keeps_every_other_field() {
        let full = full_alloc();
        let stored = kv("/c/allocs/a1", encode(&full), 4, 12);
        let read = decode_alloc(&stored, AllocDetail::WithoutMetrics).unwrap();
        assert!(read.metrics.is_none());
        assert_eq!(read.task_states, full.task_states, "live task states kept");
        let mut expected = full;
        expected.metrics = None;
        expected.fill_revisions(4, 12);
        assert_eq!(read, expected);
        let err = decode_alloc(
            &kv("/c/allocs/bad", vec![0xff, 0xff], 4, 12),
            AllocDetail::WithoutMetrics,
        )
        .unwrap_err();
        assert!(err.to_string().contains("/c/allocs/bad"), "{err}");
    }

    #[test]
    fn a_cached_alloc_holds_its_task_maps_without_spare_room() {
        let mut full = full_alloc();
        full.allocated_resources = Some(caravan_proto::AllocatedResources {
            tasks: [(
                "t",
                caravan_proto::AllocatedTaskResources {
                    cpu_mhz: 100,
                    ..Default::default()
                },
            )]
            .into(),
            shared: None,
        });
        let stored = kv("/c/allocs/a1", encode(&full), 4, 12);
        // Decoded as prost does, each one-entry map reserves room for more.
        let roomy = Allocation::decode(stored.value.as_slice()).unwrap();
        assert!(roomy.task_states.capacity() > 1);
        for detail in [AllocDetail::Full, AllocDetail::WithoutMetrics] {
            let read = decode_alloc(&stored, detail).unwrap();
            assert_eq!(read.task_states.capacity(), 1, "{detail:?}");
            let tasks = &read.allocated_resources.as_ref().unwrap().tasks;
            assert_eq!((tasks.len(), tasks.capacity()), (1, 1), "{detail:?}");
        }
    }

    #[test]
    fn resolved_revision_fields_are_kept() {
        let stored = Job {
            job_modify_revision: 5,
            ..Default::default()
        };
        // A status-only rewrite carries the resolved spec revision forward.
        let job: Job = decode(&kv("/c/jobs/d/j", encode(&stored), 5, 20)).unwrap();
        assert_eq!(job.job_modify_revision, 5);
        assert_eq!(job.modify_revision, 20);
        let stored = Allocation {
            alloc_modify_revision: 7,
            ..Default::default()
        };
        let alloc: Allocation = decode(&kv("/c/allocs/a", encode(&stored), 7, 30)).unwrap();
        assert_eq!(alloc.alloc_modify_revision, 7);
    }

    #[test]
    fn bad_bytes_name_the_key() {
        let err =
            decode::<Allocation>(&kv("/c/allocs/bad", vec![0xff, 0xff, 0xff], 1, 1)).unwrap_err();
        assert!(matches!(err, StateError::Decode { .. }));
        assert!(err.to_string().contains("/c/allocs/bad"), "{err}");
    }
}

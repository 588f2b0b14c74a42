//! Values as stored: prost bytes in, messages out with their revisions filled
//! from the key's metadata (docs/state-layout.md, "Revisions").

use caravan_proto::{Allocation, Deployment, Evaluation, Job, Node, SchedulerConfiguration};
use caravan_store::{KeyValue, Revision};
use prost::Message;

use crate::error::{Result, StateError};

/// A message stored as a value, whose revision fields come from the key.
pub trait StateObject: Message + Default {
    /// Sets `create_revision`/`modify_revision` from the key's metadata and
    /// resolves the fields stored as 0 that mean "the revision of this write".
    fn fill_revisions(&mut self, create_revision: Revision, mod_revision: Revision);

    /// The key's mod revision, once filled.
    fn modify_revision(&self) -> Revision;
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
    }
    fn modify_revision(&self) -> Revision {
        self.modify_revision
    }
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

plain_revisions!(Node, Deployment, SchedulerConfiguration);

/// The bytes to store for `msg`.
pub fn encode<T: Message>(msg: &T) -> Vec<u8> {
    msg.encode_to_vec()
}

/// Decodes a stored value, filling its revisions from `kv`'s metadata.
pub fn decode<T: StateObject>(kv: &KeyValue) -> Result<T> {
    let mut msg = T::decode(kv.value.as_slice()).map_err(|source| StateError::Decode {
        key: String::from_utf8_lossy(&kv.key).into_owned(),
        source,
    })?;
    msg.fill_revisions(kv.create_revision, kv.mod_revision);
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

//! The namespace an object named by id lives in, from the watch cache: a
//! request naming an allocation, evaluation, deployment or scaling policy
//! is checked where the object lives, not only where it says it looks.

use caravan_state::Snapshot;

/// An object a request names by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    /// An allocation, by id.
    Alloc(String),
    /// An evaluation, by id.
    Eval(String),
    /// A deployment, by id.
    Deployment(String),
    /// A scaling policy, by id.
    ScalingPolicy(String),
}

/// The namespace `object` lives in; `None` when the cache holds no such
/// object (the handler then answers that it is not found).
pub fn owner_namespace(snap: &Snapshot, object: &Object) -> Option<String> {
    match object {
        Object::Alloc(id) => snap.alloc(id).map(|a| a.namespace.clone()),
        Object::Eval(id) => snap.eval(id).map(|e| e.namespace.clone()),
        Object::Deployment(id) => snap.deployment(id).map(|d| d.namespace.clone()),
        Object::ScalingPolicy(id) => {
            crate::scaling::get(snap, id).map(|found| found.job.namespace.clone())
        }
    }
}

//! The values a task's templates read, kept fresh: one loop per dependency
//! reads it, then blocks on the gateway until it changes, storing each new
//! value in a shared cache and bumping its generation so the renderer
//! wakes. Loops start as renders name new dependencies and stop with the
//! watcher.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use caravan_template::{Dep, DepValue};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::source;
use crate::node_api::NodeApi;

/// The fetched values, and a generation bumped on every change.
#[derive(Debug)]
pub struct Cache {
    data: Mutex<BTreeMap<Dep, DepValue>>,
    /// The last failed read of each dependency not read since.
    errors: Mutex<BTreeMap<Dep, String>>,
    generation: watch::Sender<u64>,
}

impl Cache {
    fn new() -> Self {
        Cache {
            data: Mutex::new(BTreeMap::new()),
            errors: Mutex::new(BTreeMap::new()),
            generation: watch::channel(0).0,
        }
    }

    /// What has been fetched so far.
    pub fn snapshot(&self) -> BTreeMap<Dep, DepValue> {
        self.data.lock().clone()
    }

    /// Told of every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Why reading `dep` last failed, if it did.
    pub fn error(&self, dep: &Dep) -> Option<String> {
        self.errors.lock().get(dep).cloned()
    }

    fn store(&self, dep: &Dep, value: DepValue) {
        self.errors.lock().remove(dep);
        let changed = {
            let mut data = self.data.lock();
            if data.get(dep) == Some(&value) {
                false
            } else {
                data.insert(dep.clone(), value);
                true
            }
        };
        if changed {
            self.generation.send_modify(|g| *g += 1);
        }
    }
}

/// The dependency loops of one task's templates.
#[derive(Debug)]
pub struct Watcher {
    cache: Arc<Cache>,
    api: Arc<NodeApi>,
    token: Option<String>,
    loops: Mutex<BTreeMap<Dep, AbortHandle>>,
}

impl Watcher {
    /// A watcher reading as `token` (the task's identity).
    pub fn new(api: Arc<NodeApi>, token: Option<String>) -> Self {
        Watcher {
            cache: Arc::new(Cache::new()),
            api,
            token,
            loops: Mutex::new(BTreeMap::new()),
        }
    }

    /// The values.
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Watches every dep of `deps` not watched yet, and stops watching
    /// those no render reads any more.
    pub fn watch(&self, deps: &BTreeSet<Dep>) {
        let mut loops = self.loops.lock();
        loops.retain(|dep, handle| {
            let keep = deps.contains(dep);
            if !keep {
                handle.abort();
            }
            keep
        });
        for dep in deps {
            if loops.contains_key(dep) {
                continue;
            }
            let task = tokio::spawn(follow(
                Arc::clone(&self.cache),
                Arc::clone(&self.api),
                self.token.clone(),
                dep.clone(),
            ));
            loops.insert(dep.clone(), task.abort_handle());
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        for handle in self.loops.get_mut().values() {
            handle.abort();
        }
    }
}

/// Reads `dep`, then follows its changes for as long as it is watched.
async fn follow(cache: Arc<Cache>, api: Arc<NodeApi>, token: Option<String>, dep: Dep) {
    let mut after = None;
    let mut backoff = Duration::from_millis(250);
    loop {
        match source::fetch(&api, token.as_deref(), &dep, after).await {
            Ok(got) => {
                cache.store(&dep, got.value);
                after = Some(got.revision);
                backoff = Duration::from_millis(250);
            }
            Err(status) => {
                tracing::warn!(?dep, %status, "template dependency read failed; retrying");
                cache
                    .errors
                    .lock()
                    .insert(dep.clone(), status.message().to_string());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
}

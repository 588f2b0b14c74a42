//! Watches of the embedded store. A watch pulls from the store's event log at
//! its own pace instead of having writers push to it: writers never wait for
//! a slow watcher and hold no per-watcher buffer, and a watcher that falls
//! behind the retained history gets `Compacted`, as a slow etcd watcher does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use tokio::sync::{Notify, watch};

use crate::error::{Result, StoreError};
use crate::store::{Watch, WatchProgress};
use crate::types::{Range, Revision, WatchBatch};

use super::Shared;

/// Most events put in one batch; a revision is never split, so a larger
/// transaction still arrives whole.
const MAX_BATCH_EVENTS: usize = 1024;

/// The progress side of one embedded watch.
#[derive(Debug, Default)]
struct ProgressRequests {
    requested: AtomicBool,
    wakeup: Notify,
    closed: AtomicBool,
}

#[async_trait]
impl WatchProgress for ProgressRequests {
    async fn request_progress(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed("watch stream dropped".into()));
        }
        self.requested.store(true, Ordering::Release);
        self.wakeup.notify_one();
        Ok(())
    }
}

/// Marks the progress side closed when the stream goes away.
struct CloseOnDrop(Arc<ProgressRequests>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Release);
    }
}

struct Cursor {
    shared: Arc<Shared>,
    range: Range,
    next: Revision,
    revisions: watch::Receiver<Revision>,
    progress: CloseOnDrop,
    failed: bool,
}

impl Cursor {
    async fn next_batch(&mut self) -> Option<Result<WatchBatch>> {
        if self.failed {
            return None;
        }
        loop {
            // Marking the revision seen before reading the log means a write
            // landing after the read still wakes the wait below.
            self.revisions.borrow_and_update();
            let progress = &self.progress.0;
            let (step, next) = self.shared.with_state(|state| {
                let current = state.kv.revision();
                match state
                    .kv
                    .events_since(self.next, &self.range, MAX_BATCH_EVENTS)
                {
                    Err(err) => (Some(Err(err)), self.next),
                    Ok(got) if !got.events.is_empty() => {
                        let batch = WatchBatch {
                            revision: (got.next - 1).min(current),
                            events: got.events,
                        };
                        (Some(Ok(batch)), got.next)
                    }
                    Ok(got) => {
                        // Everything up to `current` is delivered, so a
                        // pending progress request can be answered now.
                        let answer =
                            got.next > current && progress.requested.swap(false, Ordering::AcqRel);
                        let batch = answer.then(|| {
                            Ok(WatchBatch {
                                revision: current,
                                events: Vec::new(),
                            })
                        });
                        (batch, got.next)
                    }
                }
            });
            self.next = next;
            match step {
                Some(Err(err)) => {
                    self.failed = true;
                    return Some(Err(err));
                }
                Some(batch) => return Some(batch),
                None => {}
            }
            tokio::select! {
                changed = self.revisions.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                _ = self.progress.0.wakeup.notified() => {}
            }
        }
    }
}

/// Opens a watch of `prefix` from `start` (0: from the next change).
pub(super) fn open(shared: Arc<Shared>, prefix: &[u8], start: Revision) -> Watch {
    let progress = Arc::new(ProgressRequests::default());
    let next = if start > 0 {
        start
    } else {
        shared.state.lock().kv.revision() + 1
    };
    let cursor = Cursor {
        revisions: shared.revisions.subscribe(),
        shared,
        range: Range::prefix(prefix),
        next,
        progress: CloseOnDrop(progress.clone()),
        failed: false,
    };
    let stream = futures::stream::unfold(cursor, |mut cursor| async move {
        let item = cursor.next_batch().await?;
        Some((item, cursor))
    });
    Watch {
        stream: Box::pin(stream),
        progress,
    }
}

//! Watches over etcd's watch stream: one gRPC stream per watch, opened once
//! etcd confirms the watcher exists (so nothing written after `watch`
//! returns is missed), with compaction cancels mapped to `Compacted`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client as ec;

use crate::error::{Result, StoreError};
use crate::store::{Watch, WatchProgress};
use crate::types::{Revision, WatchBatch};

use super::convert::{self, Context};

/// etcd stops a catch-up response after this many revisions (its
/// `watchBatchMaxRevs`) while still stamping it with its current revision.
const ETCD_BATCH_MAX_REVS: usize = 1000;

/// Progress requests for one etcd watch, and leaving its member.
struct EtcdProgress {
    requests: tokio::sync::Mutex<ec::WatchRequestSender>,
    lost: OnLost,
}

#[async_trait]
impl WatchProgress for EtcdProgress {
    async fn request_progress(&self) -> Result<()> {
        self.requests
            .lock()
            .await
            .request_progress()
            .await
            .map_err(|err| StoreError::Closed(format!("watch is gone: {err}")))
    }

    fn abandon(&self, why: &str) {
        (self.lost)(&StoreError::Unavailable(format!(
            "the watch lags the store: {why}"
        )));
    }
}

/// Told when a watch fails with `Unavailable`, so the next request goes to
/// another member.
pub(super) type OnLost = Arc<dyn Fn(&StoreError) + Send + Sync>;

struct Cursor {
    answers: ec::WatchResponseStream,
    lost: OnLost,
    /// The first revision not yet delivered, for the `Compacted` error.
    next: Revision,
    done: bool,
}

impl Cursor {
    async fn next_batch(&mut self) -> Option<Result<WatchBatch>> {
        if self.done {
            return None;
        }
        loop {
            let answer = match self.answers.message().await {
                Ok(Some(answer)) => answer,
                Ok(None) => {
                    self.done = true;
                    return Some(Err(StoreError::Closed("etcd ended the watch".into())));
                }
                Err(err) => {
                    self.done = true;
                    let err = convert::error(err, Context::revision(self.next));
                    if let StoreError::Unavailable(_) = err {
                        (self.lost)(&err);
                    }
                    return Some(Err(err));
                }
            };
            if answer.compact_revision() > 0 {
                self.done = true;
                return Some(Err(StoreError::Compacted {
                    requested: self.next,
                    compact_revision: answer.compact_revision(),
                }));
            }
            if answer.canceled() {
                self.done = true;
                return Some(Err(StoreError::Closed(format!(
                    "etcd canceled the watch: {}",
                    answer.cancel_reason()
                ))));
            }
            if answer.created() {
                continue;
            }
            let header = answer.header().map_or(0, |h| h.revision());
            let events: Vec<_> = answer.events().iter().filter_map(convert::event).collect();
            let Some(last) = events.last().map(|e| e.kv.mod_revision) else {
                // An answer without events is a progress notification.
                return Some(Ok(WatchBatch {
                    revision: header,
                    events,
                }));
            };
            self.next = last + 1;
            // A full catch-up answer may stop short of the revision in its
            // header; claim only what it holds, so `revision` never runs
            // ahead of events still to come.
            let revisions: BTreeSet<_> = events.iter().map(|e| e.kv.mod_revision).collect();
            let revision = if revisions.len() >= ETCD_BATCH_MAX_REVS {
                last
            } else {
                header.max(last)
            };
            return Some(Ok(WatchBatch { revision, events }));
        }
    }
}

/// Opens a watch of `prefix` from `start` (0: from the next change);
/// `lost` hears of the watch failing with `Unavailable` later.
pub(super) async fn open(
    client: &ec::WatchClient,
    prefix: &[u8],
    start: Revision,
    timeout: Duration,
    lost: impl Fn(&StoreError) + Send + Sync + 'static,
) -> Result<Watch> {
    let mut options = ec::WatchOptions::new().with_prefix();
    if start > 0 {
        options = options.with_start_revision(start);
    }
    let mut client = client.clone();
    let opened = async {
        let stream = client
            .watch(prefix.to_vec(), Some(options))
            .await
            .map_err(|err| convert::error(err, Context::revision(start)))?;
        let (requests, mut answers) = stream.split();
        // Waiting for `created` makes "from the next change" mean after this
        // call returns, not after etcd gets round to it.
        let created = answers
            .message()
            .await
            .map_err(|err| convert::error(err, Context::revision(start)))?
            .ok_or_else(|| StoreError::Closed("etcd ended the watch at creation".into()))?;
        Ok::<_, StoreError>((requests, answers, created))
    };
    let (requests, answers, created) =
        tokio::time::timeout(timeout, opened).await.map_err(|_| {
            StoreError::Unavailable(format!("etcd did not create the watch within {timeout:?}"))
        })??;
    if created.canceled() && created.compact_revision() == 0 {
        return Err(StoreError::InvalidArgument(format!(
            "etcd refused the watch: {}",
            created.cancel_reason()
        )));
    }
    let header = created.header().map_or(0, |h| h.revision());
    let lost: OnLost = Arc::new(lost);
    let mut cursor = Cursor {
        answers,
        lost: Arc::clone(&lost),
        next: if start > 0 { start } else { header + 1 },
        done: false,
    };
    let mut first = None;
    if created.compact_revision() > 0 {
        cursor.done = true;
        first = Some(Err(StoreError::Compacted {
            requested: start,
            compact_revision: created.compact_revision(),
        }));
    }
    let stream = futures::stream::unfold((cursor, first), |(mut cursor, first)| async move {
        let item = match first {
            Some(item) => item,
            None => cursor.next_batch().await?,
        };
        Some((item, (cursor, None)))
    });
    Ok(Watch {
        stream: Box::pin(stream),
        progress: Arc::new(EtcdProgress {
            requests: tokio::sync::Mutex::new(requests),
            lost,
        }),
    })
}

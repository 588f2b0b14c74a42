//! The etcd members a store talks to: one lazily built connection per
//! endpoint, one of them pinned for every request until it fails, then the
//! next. etcd-client's own balance over several endpoints keeps handing
//! requests to a member that is down (each fails with a connect error), so
//! failover is done here, the way etcd's own Go client pins an endpoint.
//!
//! Clients made with [`Members::sibling`] have connections of their own but
//! share which member is pinned: a member one of them leaves, every one of
//! them leaves, and each drops its connection to it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use etcd_client as ec;
use parking_lot::Mutex;

use crate::error::{Result, StoreError};

use super::convert::{self, Context};
use super::tls::EtcdTls;

/// One endpoint and its connection, built on first use and dropped when the
/// member fails, so the next use starts from a fresh channel.
struct Member {
    endpoint: String,
    /// The connection, and the member's failure count when it was made.
    client: Mutex<Option<(u64, ec::Client)>>,
}

impl Member {
    /// `endpoint`, not connected yet.
    fn new(endpoint: &str) -> Self {
        Member {
            endpoint: endpoint.to_string(),
            client: Mutex::new(None),
        }
    }
}

/// Which member is in use, shared by siblings.
struct Choice {
    pinned: AtomicUsize,
    /// How many times each member was left (their sum: how many times the
    /// pinned member changed). A connection made before its member's last
    /// failure (left by a sibling) is not used again.
    failures: Vec<AtomicU64>,
}

/// The endpoints of one etcd cluster and which one is in use.
pub(super) struct Members {
    members: Vec<Member>,
    choice: Arc<Choice>,
    options: ec::ConnectOptions,
    /// Read again for every connection, so rotated files are picked up.
    tls: Option<EtcdTls>,
}

impl Members {
    /// Members for `endpoints` (not connected yet), each connected with
    /// `options` and, when given, `tls`.
    pub fn new(endpoints: &[String], options: ec::ConnectOptions, tls: Option<EtcdTls>) -> Self {
        Members {
            members: endpoints.iter().map(|e| Member::new(e)).collect(),
            choice: Arc::new(Choice {
                pinned: AtomicUsize::new(0),
                failures: endpoints.iter().map(|_| AtomicU64::new(0)).collect(),
            }),
            options,
            tls,
        }
    }

    /// The same members with no connections yet, sharing this one's choice
    /// of member. Each connection's tasks run on the runtime that first
    /// uses it.
    pub fn sibling(&self) -> Self {
        Members {
            members: self
                .members
                .iter()
                .map(|m| Member::new(&m.endpoint))
                .collect(),
            choice: Arc::clone(&self.choice),
            options: self.options.clone(),
            tls: self.tls.clone(),
        }
    }

    /// How many endpoints there are: the most attempts one request gets.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Every endpoint, for messages.
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(|m| m.endpoint.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Member `index`'s endpoint, for messages.
    pub fn endpoint(&self, index: usize) -> &str {
        &self.members[index].endpoint
    }

    /// How many times the pinned member changed.
    pub fn failovers(&self) -> u64 {
        self.choice
            .failures
            .iter()
            .map(|f| f.load(Ordering::Acquire))
            .sum()
    }

    /// The pinned member's index.
    pub fn pinned_index(&self) -> usize {
        self.choice.pinned.load(Ordering::Acquire) % self.members.len()
    }

    /// Member `index`'s client, connecting it if needed. Connecting is
    /// lazy: an unreachable member fails on first request, and a connection
    /// that fails is the member's failure (see [`failed`](Self::failed)).
    /// The TLS files are read here, so a new connection uses the files as
    /// they are now.
    pub async fn client(&self, index: usize) -> Result<ec::Client> {
        let member = &self.members[index];
        let failures = self.choice.failures[index].load(Ordering::Acquire);
        {
            let mut slot = member.client.lock();
            match &*slot {
                Some((made, client)) if *made == failures => return Ok(client.clone()),
                // Made before a sibling left the member.
                Some(_) => *slot = None,
                None => {}
            }
        }
        let options = match &self.tls {
            Some(tls) => self.options.clone().with_tls(tls.options()?),
            None => self.options.clone(),
        };
        let client = ec::Client::connect([member.endpoint.as_str()], Some(options))
            .await
            .map_err(|err| convert::error(err, Context::default()))?;
        let mut slot = member.client.lock();
        Ok(slot.get_or_insert((failures, client)).1.clone())
    }

    /// Records that member `index` failed with `err`: if it is still the
    /// pinned one, its connections (this client's and its siblings') are
    /// dropped and the next member pinned.
    pub fn failed(&self, index: usize, err: &StoreError) {
        let next = (index + 1) % self.members.len();
        let choice = &self.choice;
        if choice
            .pinned
            .compare_exchange(index, next, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            choice.failures[index].fetch_add(1, Ordering::AcqRel);
            self.members[index].client.lock().take();
            if self.members.len() > 1 {
                tracing::warn!(
                    failed = %self.members[index].endpoint,
                    next = %self.members[next].endpoint,
                    %err,
                    "etcd member unreachable; switching to the next"
                );
            }
        }
    }
}

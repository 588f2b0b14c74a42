//! Caravan's state store: the [`Store`] trait over etcd's model (revisions,
//! transactions, watches, leases, elections), its etcd backend, its embedded
//! twin, and leadership with fenced writes.
//!
//! Both backends pass one conformance suite (`tests/conformance`, with
//! leadership cases in `tests/leadership`), instantiated by `tests/mem.rs`
//! and `tests/etcd.rs`; the etcd run needs `CARAVAN_TEST_ETCD` pointing at a
//! running etcd (`scripts/test` starts one) and fails without it.

mod backoff;
mod error;
mod etcd;
mod group_commit;
mod leadership;
mod mem;
pub mod metrics;
mod patience;
mod read_prefix;
mod store;
mod types;

pub use backoff::Backoff;
pub use error::{Result, StoreError};
pub use etcd::{EtcdClientCert, EtcdConfig, EtcdStore, EtcdTls};
pub use group_commit::{Committer, GroupCommit, GroupLimits};
pub use leadership::{FencingToken, Leadership, LeadershipError, current_leader, election_name};
pub use mem::{MemStore, MemStoreConfig};
pub use patience::with_member_timeout;
pub use read_prefix::{read_prefix, read_prefix_keys};
pub use store::{Store, Watch, WatchProgress, WatchStream};
pub use types::*;

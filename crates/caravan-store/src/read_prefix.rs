//! A whole prefix read in pages, every page at the revision of the first,
//! for the readers of kinds no watch cache holds.

use crate::error::Result;
use crate::store::Store;
use crate::types::{KeyValue, Range, Revision, prefix_end};

/// Every key under `prefix`, read `page` keys per request, all at the
/// revision of the first request; and that revision.
pub async fn read_prefix(
    store: &dyn Store,
    prefix: &[u8],
    page: i64,
) -> Result<(Vec<KeyValue>, Revision)> {
    read_prefix_with(store, prefix, page, false).await
}

/// As [`read_prefix`], the keys and their revisions only (no values): for a
/// sweep that judges a key by its name.
pub async fn read_prefix_keys(
    store: &dyn Store,
    prefix: &[u8],
    page: i64,
) -> Result<(Vec<KeyValue>, Revision)> {
    read_prefix_with(store, prefix, page, true).await
}

async fn read_prefix_with(
    store: &dyn Store,
    prefix: &[u8],
    page: i64,
    keys_only: bool,
) -> Result<(Vec<KeyValue>, Revision)> {
    let end = prefix_end(prefix);
    let mut start = prefix.to_vec();
    let mut revision = 0;
    let mut out = Vec::new();
    loop {
        let mut range = Range::between(start.clone(), end.clone()).with_limit(page);
        if keys_only {
            range = range.keys_only();
        }
        if revision != 0 {
            range = range.at_revision(revision);
        }
        let got = store.range(range).await?;
        if revision == 0 {
            revision = got.revision;
        }
        let more = got.more;
        if let Some(last) = got.kvs.last() {
            start = last.key.clone();
            start.push(0);
        }
        let empty = got.kvs.is_empty();
        out.extend(got.kvs);
        if !more || empty {
            return Ok((out, revision));
        }
    }
}

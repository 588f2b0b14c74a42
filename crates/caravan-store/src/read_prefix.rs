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
    let end = prefix_end(prefix);
    let mut start = prefix.to_vec();
    let mut revision = 0;
    let mut out = Vec::new();
    loop {
        let mut range = Range::between(start.clone(), end.clone()).with_limit(page);
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

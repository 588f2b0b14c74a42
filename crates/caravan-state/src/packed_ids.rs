//! An allocation record's ids stored as 16 bytes each instead of 36
//! characters (docs/state-layout.md, "Values"): four ids of 38 bytes made
//! up half of a record. Only canonical ids are packed (a UUID written in
//! lower case with hyphens, as Caravan makes them), so unpacking gives back
//! exactly the string written; any other id is stored as written.

use caravan_proto::Allocation;
use uuid::Uuid;

/// The stored form's field of packed ids (reserved in alloc.proto's
/// `Allocation`).
pub(crate) const PACKED_IDS: u32 = 38;

/// An id field that may be packed: its field number, and the field read
/// and written.
struct IdField {
    tag: u32,
    get: fn(&Allocation) -> &String,
    set: fn(&mut Allocation) -> &mut String,
}

macro_rules! id_fields {
    ($($tag:literal => $name:ident),* $(,)?) => {
        [$(IdField { tag: $tag, get: |a| &a.$name, set: |a| &mut a.$name }),*]
    };
}

/// The id fields, in the order of their bits.
const FIELDS: [IdField; 8] = id_fields![
    1 => id,
    7 => node_id,
    9 => eval_id,
    10 => deployment_id,
    20 => previous_allocation,
    21 => next_allocation,
    25 => followup_eval_id,
    24 => preempted_by_allocation,
];

/// The 16 bytes of `id` if it is a canonical UUID.
pub(crate) fn canonical(id: &str) -> Option<[u8; 16]> {
    if id.len() != uuid::fmt::Hyphenated::LENGTH {
        return None;
    }
    let parsed = Uuid::try_parse(id).ok()?;
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    (parsed.hyphenated().encode_lower(&mut buf) == id).then(|| *parsed.as_bytes())
}

/// The `packed_ids` value of `alloc`: a byte whose bits name the entries
/// of [`FIELDS`] that are canonical, then their 16 bytes each; `None` when
/// none is.
pub(crate) fn packed(alloc: &Allocation) -> Option<Vec<u8>> {
    let mut packed = vec![0u8];
    for (bit, f) in FIELDS.iter().enumerate() {
        if let Some(bytes) = canonical((f.get)(alloc)) {
            packed[0] |= 1 << bit;
            packed.extend_from_slice(&bytes);
        }
    }
    (packed[0] != 0).then_some(packed)
}

/// Whether field `tag` is left out of the stored bytes, `packed` holding
/// it.
pub(crate) fn drops(packed: &[u8], tag: u32) -> bool {
    let mask = packed.first().copied().unwrap_or(0);
    FIELDS
        .iter()
        .enumerate()
        .any(|(bit, f)| f.tag == tag && mask & (1 << bit) != 0)
}

/// Puts the ids of a stored `packed_ids` value back into their fields.
pub(crate) fn unpack(alloc: &mut Allocation, packed: &[u8]) {
    let Some((&mask, mut rest)) = packed.split_first() else {
        return;
    };
    for (bit, f) in FIELDS.iter().enumerate() {
        if mask & (1 << bit) == 0 {
            continue;
        }
        let Some((bytes, tail)) = rest.split_first_chunk::<16>() else {
            return;
        };
        rest = tail;
        *(f.set)(alloc) = Uuid::from_bytes(*bytes).hyphenated().to_string();
    }
}

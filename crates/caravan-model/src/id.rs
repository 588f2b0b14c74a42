//! The ids Caravan makes for allocations and evaluations.
//!
//! A random (version 4) UUID scatters the ids made together across every
//! B-tree that keys them: each service's cache, the client's tables, etcd's
//! index. A plan's thousand new allocations then touch a thousand leaves, and
//! a persistent tree copies each one's path. Ids that lead with their clock
//! sort together instead, and their leaves are the ones last touched.
//!
//! The clock must not make the short ids (the first eight digits, as the CLI
//! prints them) alike, as a version 7 UUID's would for a minute at a time. So
//! the lead is the clock's milliseconds modulo 2^20 (it wraps every 17.5
//! minutes, which locality does not mind) followed by 12 bits counted per id:
//! ids made together still sort together, and their first eight digits
//! differ. The other 90 bits are random, so ids stay unique without a
//! coordinator. The layout is RFC 9562's version 8 (vendor-specific).

/// The 32-bit lead of an id made at `unix_ns`, `seq` ids after the maker's
/// first: the clock's milliseconds (modulo 2^20) in the top 20 bits, `seq`
/// added below them.
pub fn id_lead(unix_ns: i64, seq: u32) -> u32 {
    let ms = u64::try_from(unix_ns).unwrap_or(0) / 1_000_000;
    // Truncating keeps the low 32 bits; the shift keeps the low 20 of those.
    ((ms as u32) << 12).wrapping_add(seq)
}

/// A version 8 UUID string: `lead` in its first 32 bits, the rest of
/// `random` after them (less the version and variant bits).
pub fn ordered_uuid(lead: u32, random: [u8; 16]) -> String {
    let mut bytes = random;
    bytes[..4].copy_from_slice(&lead.to_be_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    uuid::Uuid::from_bytes(bytes).hyphenated().to_string()
}

/// A fresh time-ordered id, made now: the ids of a service's evaluations.
/// Each process counts from a random start, so two processes' ids made in the
/// same millisecond do not share their short forms.
pub fn fresh_id() -> String {
    use std::sync::LazyLock;
    use std::sync::atomic::{AtomicU32, Ordering};
    static MADE: LazyLock<AtomicU32> = LazyLock::new(|| {
        let [a, b, c, d, ..] = uuid::Uuid::new_v4().into_bytes();
        AtomicU32::new(u32::from_be_bytes([a, b, c, d]))
    });
    let seq = MADE.fetch_add(1, Ordering::Relaxed);
    ordered_uuid(
        id_lead(crate::now_unix_ns(), seq),
        uuid::Uuid::new_v4().into_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_made_together_sort_together_and_keep_distinct_short_ids() {
        let ns = 1_764_000_000_123_456_789;
        let ids: Vec<String> = (0..3)
            .map(|i| ordered_uuid(id_lead(ns, 7 + i), [0xff; 16]))
            .collect();
        // 1,764,000,000,123 ms is 0x19a_b697_e87b; its low 20 bits 0x7e87b.
        assert_eq!(ids[0], "7e87b007-ffff-8fff-bfff-ffffffffffff");
        assert_eq!(&ids[1][..8], "7e87b008");
        assert_eq!(&ids[2][..8], "7e87b009");
        let later = ordered_uuid(id_lead(ns + 1_000_000, 0), [0; 16]);
        assert_eq!(later, "7e87c000-0000-8000-8000-000000000000");
        assert!(ids.windows(2).all(|w| w[0] < w[1]) && ids[2] < later);
        let parsed = uuid::Uuid::parse_str(&later).unwrap();
        assert_eq!(parsed.get_version_num(), 8);
        assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122);
    }

    #[test]
    fn fresh_ids_made_in_a_row_ascend_with_distinct_short_ids() {
        let ids: Vec<String> = (0..100).map(|_| fresh_id()).collect();
        let mut short: Vec<&str> = ids.iter().map(|id| &id[..8]).collect();
        short.sort_unstable();
        short.dedup();
        assert_eq!(short.len(), 100);
        assert!(ids.iter().all(|id| &id[14..15] == "8"));
    }

    #[test]
    fn a_clock_before_the_epoch_counts_as_zero() {
        assert_eq!(id_lead(-5, 3), 3);
    }
}

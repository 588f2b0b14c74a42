//! A small deterministic PRNG so the same evaluation and state give the same plan.

/// SplitMix64: tiny, fast and good enough to shuffle nodes and pick ports.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
    /// The clock and the count of ids made, when ids lead with them.
    clock: Option<(i64, u32)>,
}

impl Rng {
    /// Seeds from any bytes (the eval id and snapshot revision).
    pub fn from_seed_parts(parts: &[&[u8]]) -> Self {
        // FNV-1a folds the seed material into one word.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for part in parts {
            for b in *part {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
            h ^= 0xff;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Self {
            state: h,
            clock: None,
        }
    }

    /// The same generator, making ids that lead with `unix_ns` (the
    /// evaluation's clock) and a count from a seeded start: ids made together
    /// sort together, and their short forms stay distinct
    /// ([`caravan_model::ordered_uuid`]). The random sequence is unchanged.
    pub fn clocked(mut self, unix_ns: i64) -> Self {
        // Seeded, so evaluations scheduled in the same millisecond start
        // their counts apart.
        let start = (self.state >> 52) as u32;
        self.clock = Some((unix_ns, start));
        self
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        // Multiply-shift avoids the modulo bias for the sizes used here.
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }

    /// A UUID string: time-ordered (version 8, see [`Rng::clocked`]) on a
    /// clocked generator, random (version 4) otherwise.
    pub fn uuid(&mut self) -> String {
        let a = self.next_u64().to_be_bytes();
        let b = self.next_u64().to_be_bytes();
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&a);
        bytes[8..].copy_from_slice(&b);
        if let Some((unix_ns, seq)) = self.clock.as_mut() {
            let lead = caravan_model::id_lead(*unix_ns, *seq);
            *seq = seq.wrapping_add(1);
            return caravan_model::ordered_uuid(lead, bytes);
        }
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let mut s = String::with_capacity(36);
        for (i, byte) in bytes.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                s.push('-');
            }
            s.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
            s.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_uuid_shape() {
        let mut a = Rng::from_seed_parts(&[b"eval-1", &7i64.to_be_bytes()]);
        let mut b = Rng::from_seed_parts(&[b"eval-1", &7i64.to_be_bytes()]);
        assert_eq!(a.next_u64(), b.next_u64());
        let u = a.uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        let mut c = Rng::from_seed_parts(&[b"eval-2", &7i64.to_be_bytes()]);
        assert_ne!(b.next_u64(), c.next_u64());
    }

    #[test]
    fn clocked_ids_sort_by_their_clock_and_count() {
        let ns = 1_764_000_000_123_456_789i64;
        let mut a = Rng::from_seed_parts(&[b"eval-1"]).clocked(ns);
        let mut plain = Rng::from_seed_parts(&[b"eval-1"]);
        let first = a.uuid();
        let second = a.uuid();
        assert_eq!(&first[14..15], "8");
        assert_ne!(first[..8], second[..8]);
        assert!(first < second);
        // The clock does not change the random sequence.
        plain.uuid();
        plain.uuid();
        assert_eq!(a.next_u64(), plain.next_u64());
        // An evaluation a millisecond later makes ids that sort after.
        let mut later = Rng::from_seed_parts(&[b"eval-0"]).clocked(ns + 1_000_000);
        assert!(later.uuid() > second);
        let mut same = Rng::from_seed_parts(&[b"eval-1"]).clocked(ns);
        assert_eq!(same.uuid(), first);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut r = Rng::from_seed_parts(&[b"x"]);
        let mut v: Vec<u32> = (0..100).collect();
        r.shuffle(&mut v);
        let mut s = v.clone();
        s.sort_unstable();
        assert_eq!(s, (0..100).collect::<Vec<_>>());
        assert_ne!(v, s);
    }
}

//! Redis Cluster's hash slots: a key's slot (CRC16 of the key or of its `{...}` hash tag),
//! and the split of the 16384 slots into contiguous ranges, one per shard in worker order.
//! Pure functions; `cluster.rs` speaks the protocol, `route.rs` maps keys to shards.

/// Redis Cluster's hash slots.
pub const SLOTS: usize = 16384;

/// CRC16, polynomial 0x1021, initial value 0 (XMODEM), as Redis Cluster hashes keys
/// (`crc16.c` of Redis), a byte at a time through a table made at compile time.
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16[usize::from((crc >> 8) as u8 ^ b)]
    })
}

/// The CRC of each byte value.
const CRC16: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// The hash slot of `key`: of the bytes between its first `{` and the next `}` when there are
/// some, of the whole key otherwise (Redis's `keyHashSlot`).
pub fn key_slot(key: &[u8]) -> usize {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    usize::from(crc16(hashed)) % SLOTS
}

/// The first slot of shard `shard` of `n`.
pub fn first_slot(shard: usize, n: usize) -> usize {
    shard * SLOTS / n
}

/// The shard of `n` that owns `slot`: the last one whose first slot is not after it.
pub fn owner(slot: usize, n: usize) -> usize {
    ((slot + 1) * n - 1) / SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_those_of_redis_cluster() {
        // Values from Redis's documentation and `CLUSTER KEYSLOT` of redis-server 7.0.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        // An empty tag hashes the whole key; only the first `{` counts.
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"{"), crc16(b"{") as usize % SLOTS);
    }

    #[test]
    fn every_slot_has_one_owner_and_ranges_are_contiguous() {
        for n in [1, 2, 3, 4, 7, 64, 16384] {
            let mut last = 0;
            for slot in 0..SLOTS {
                let o = owner(slot, n);
                assert!(o < n);
                assert!(o == last || o == last + 1, "n {n} slot {slot}");
                assert!(first_slot(o, n) <= slot && slot < first_slot(o + 1, n));
                last = o;
            }
            assert_eq!(last, n - 1);
        }
    }
}

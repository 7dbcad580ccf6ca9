//! KEP-5866's shard hash: 64-bit FNV-1a of an object's uid (or namespace), and the slot it falls in.
//!
//! The API server's `shardRange(object.metadata.uid, '0x..', '0x..')`
//! selector hashes the same bytes with the same function, so a range this
//! module assigns and the objects the server sends for it agree exactly.

/// FNV-1a's 64-bit offset basis.
const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a's 64-bit prime.
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a of `bytes`: xor each byte in, then multiply by the prime.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(OFFSET_BASIS, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(PRIME))
}

/// The shard hash of an object's uid (or namespace), as the API server computes it.
pub fn shard_hash(value: &str) -> u64 {
    fnv1a64(value.as_bytes())
}

/// splitmix64's finalizer: a bijection of `u64` that spreads every input bit
/// over the output. Only used inside the assignment rule, never on the wire.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_should_match_the_published_test_vectors() {
        // From the FNV reference test suite (Fowler, Noll, Vo).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"b"), 0xaf63_df4c_8601_f1a5);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn shard_hash_should_hash_the_utf8_bytes_of_the_value() {
        let uid = "6f1a2b3c-0000-4000-8000-00000000abcd";
        assert_eq!(shard_hash(uid), fnv1a64(uid.as_bytes()));
    }

    #[test]
    fn mix64_should_spread_neighbouring_inputs_apart() {
        let a = mix64(1);
        let b = mix64(2);
        assert!((a ^ b).count_ones() > 16);
    }
}

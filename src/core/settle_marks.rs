//! Settle marks: which reservations of a key were settled, and what each settle applied, so that a
//! reservation settles at most once. A key's marks are a hash beside it, named `mark_name(key)`:
//! a field per settled reservation's id, its value what that settle applied. The hash expires
//! when the last window it guards stops counting (`mark_expiry`).
//!
//! The name is the key's, then `:settled:` and four characters from `@` to `O` that put it in the
//! key's cluster slot. A slot is CRC16 of the name (of its `{tag}` if it has one, which the mark's
//! name, starting with the key's, then shares), and CRC16 is linear over GF(2): the four
//! characters' low nibbles (16 bits) reach every value of the slot's 14 bits.

/// What follows the key in its marks' name, before the four characters.
pub const MARK_INFIX: &[u8] = b":settled:";

/// CRC16 (XMODEM: polynomial 0x1021, no reflection, initial 0), as Redis Cluster hashes names.
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ b)])
}

const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// For each of the slot's 14 bits, the four characters' nibbles (the first character's in the
/// lowest 4 bits) whose CRC16 contribution flips that bit alone within the slot: the inverse of
/// the linear map from the nibbles to the slot, found once by Gaussian elimination (the test
/// checks each column).
const SLOT_BIT_NIBBLES: [u16; 14] =
    [0x88d4, 0x808a, 0x9007, 0x9efb, 0x19a2, 0x0c93, 0x1184, 0x8eed, 0x1efb, 0x8022, 0x89c4, 0x82aa, 0x9447, 0x967b];

/// The name of `key`'s settle marks: in `key`'s cluster slot.
pub fn mark_name(key: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(key.len() + MARK_INFIX.len() + 4);
    name.extend_from_slice(key);
    name.extend_from_slice(MARK_INFIX);
    name.extend_from_slice(b"@@@@");
    // The slot bits that `@@@@` leaves different from the key's, each flipped back.
    let differ = (crc16(key) ^ crc16(&name)) & 0x3fff;
    let nibbles = (0..14).filter(|bit| differ >> bit & 1 == 1).fold(0, |n, bit| n ^ SLOT_BIT_NIBBLES[bit]);
    let at = name.len() - 4;
    for (i, c) in name[at..].iter_mut().enumerate() {
        *c = b'@' | (nibbles >> (4 * i) & 15) as u8;
    }
    name
}

/// When a key's marks expire after a settle: not before they did, nor before what the reservation
/// counted stops counting (`counts_until`), nor before the key the settle wrote to expires (an
/// overage charged to a later window: settled again while that counts, it would charge again).
pub fn mark_expiry(counts_until: i64, key_expiry: Option<i64>, marks_expiry: Option<i64>) -> i64 {
    counts_until.max(key_expiry.unwrap_or(i64::MIN)).max(marks_expiry.unwrap_or(i64::MIN))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Redis Cluster's slot of a name: CRC16 of its `{tag}` if it has a non-empty one, else of all.
    fn slot(name: &[u8]) -> u16 {
        let tagged = name.iter().position(|&b| b == b'{').and_then(|open| {
            let close = name[open + 1..].iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &name[open + 1..open + 1 + close])
        });
        crc16(tagged.unwrap_or(name)) & 0x3fff
    }

    #[test]
    fn crc16_is_redis_clusters() {
        // The check value of CRC16/XMODEM, and slots Redis documents.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
    }

    #[test]
    fn each_column_flips_its_slot_bit_alone() {
        let at = |nibbles: u16| crc16(&(0..4).map(|i| b'@' | (nibbles >> (4 * i) & 15) as u8).collect::<Vec<_>>());
        for (bit, &nibbles) in SLOT_BIT_NIBBLES.iter().enumerate() {
            assert_eq!((at(nibbles) ^ at(0)) & 0x3fff, 1 << bit, "bit {bit}");
        }
    }

    #[test]
    fn marks_expire_with_the_last_window_they_guard() {
        assert_eq!(mark_expiry(5_000, None, None), 5_000);
        assert_eq!(mark_expiry(5_000, Some(9_000), None), 9_000);
        assert_eq!(mark_expiry(5_000, Some(4_000), Some(12_000)), 12_000);
    }

    proptest! {
        #[test]
        fn marks_share_their_keys_slot(key in proptest::collection::vec(any::<u8>(), 0..80)) {
            let name = mark_name(&key);
            prop_assert_eq!(slot(&name), slot(&key));
            prop_assert!(name.starts_with(&key) && name[key.len()..].starts_with(MARK_INFIX));
            prop_assert!(name[name.len() - 4..].iter().all(|c| (b'@'..=b'O').contains(c)));
        }
    }
}

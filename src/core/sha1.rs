//! SHA-1 (FIPS 180-4), only to name a key inside a reservation the way the Functions library can:
//! Lua there has `redis.sha1hex` and nothing else to hash with. Not a security measure: a
//! reservation is checked against its key to catch mistakes (one sent with another key), not
//! forgeries, which give a caller nothing a negative COST would not.

/// The digest of `data`.
pub fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];
    let bits = (data.len() as u64).wrapping_mul(8);
    // The message, a 1 bit, zeros to 56 bytes mod 64, then its length in bits (big-endian).
    let tail_len = (data.len() % 64 + 9).div_ceil(64) * 64;
    let whole = data.len() - data.len() % 64;
    let mut tail = [0u8; 128];
    tail[..data.len() - whole].copy_from_slice(&data[whole..]);
    tail[data.len() - whole] = 0x80;
    tail[tail_len - 8..tail_len].copy_from_slice(&bits.to_be_bytes());
    for block in data[..whole].chunks_exact(64).chain(tail[..tail_len].chunks_exact(64)) {
        compress(&mut h, block);
    }
    let mut digest = [0; 20];
    for (out, word) in digest.chunks_exact_mut(4).zip(h) {
        out.copy_from_slice(&word.to_be_bytes());
    }
    digest
}

fn compress(h: &mut [u32; 5], block: &[u8]) {
    let mut w = [0u32; 80];
    for (i, word) in block.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
    }
    for i in 16..80 {
        w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
    }
    let [mut a, mut b, mut c, mut d, mut e] = *h;
    for (i, &word) in w.iter().enumerate() {
        let (f, k) = match i {
            0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
            20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
            40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
            _ => (b ^ c ^ d, 0xCA62_C1D6),
        };
        let t = a.rotate_left(5).wrapping_add(f).wrapping_add(e).wrapping_add(k).wrapping_add(word);
        (e, d, c, b, a) = (d, c, b.rotate_left(30), a, t);
    }
    for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
        *x = x.wrapping_add(y);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(d: [u8; 20]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn known_digests() {
        // FIPS 180 examples, and lengths around the padding's edges (55, 56, 63, 64 bytes).
        assert_eq!(hex(sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(hex(sha1(b"abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(
            hex(sha1(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        assert_eq!(hex(sha1(&[b'a'; 55])), "c1c8bbdc22796e28c0e15163d20899b65621d65a");
        assert_eq!(hex(sha1(&[b'a'; 56])), "c2db330f6083854c99d4b5bfb6e8f29f201be699");
        assert_eq!(hex(sha1(&[b'a'; 63])), "03f09f5b158a7a8cdad920bddc29b81c18a551f5");
        assert_eq!(hex(sha1(&[b'a'; 64])), "0098ba824b5c16427bd7a1122a5a442a25ec644d");
        assert_eq!(hex(sha1(&[b'a'; 1_000])), "291e9a6c66994949b57ba5e650361e98fc36b1ba");
    }
}

package io.github.redisratelimit;

import java.nio.charset.StandardCharsets;

/** Cluster slots: CRC16 of a key's hash tag, or of the whole key, mod 16384. */
final class Slots {
    private Slots() {
    }

    static int slot(String key) {
        byte[] b = key.getBytes(StandardCharsets.UTF_8);
        int from = 0;
        int to = b.length;
        for (int open = 0; open < b.length; open++) {
            if (b[open] == '{') {
                for (int end = open + 1; end < b.length; end++) {
                    if (b[end] == '}') {
                        if (end > open + 1) {
                            from = open + 1;
                            to = end;
                        }
                        break;
                    }
                }
                break;
            }
        }
        int crc = 0;
        for (int i = from; i < to; i++) {
            crc ^= (b[i] & 0xff) << 8;
            for (int bit = 0; bit < 8; bit++) {
                crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
            }
            crc &= 0xffff;
        }
        return crc % 16384;
    }
}

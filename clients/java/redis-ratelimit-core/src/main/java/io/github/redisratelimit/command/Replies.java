package io.github.redisratelimit.command;

import io.github.redisratelimit.Decision;
import io.github.redisratelimit.UnexpectedReplyException;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Reading replies as the transports give them: Long, String, null, List, Map or Boolean. */
final class Replies {
    private Replies() {
    }

    static Long integer(Object v) {
        if (v instanceof Long n) {
            return n;
        }
        if (v instanceof Boolean b) {
            return b ? 1L : 0L;
        }
        return null;
    }

    /** The reply's n integers, or an UnexpectedReplyException naming what. */
    static long[] integers(Object reply, int n, String what) {
        if (!(reply instanceof List<?> items) || items.size() != n) {
            throw new UnexpectedReplyException(what, reply);
        }
        long[] out = new long[n];
        for (int i = 0; i < n; i++) {
            Long v = integer(items.get(i));
            if (v == null) {
                throw new UnexpectedReplyException(what, reply);
            }
            out[i] = v;
        }
        return out;
    }

    static List<?> list(Object reply, String what) {
        if (reply instanceof List<?> items) {
            return items;
        }
        throw new UnexpectedReplyException(what, reply);
    }

    /** A duration in ms as the server sends it; a negative one is Decision.FOREVER. */
    static Duration ms(long n) {
        return n < 0 ? Decision.FOREVER : Duration.ofMillis(n);
    }

    /** A map reply's fields: a RESP3 map, or RESP2's flat list of names and values. */
    static Map<String, Object> fields(Object reply) {
        Map<String, Object> out = new HashMap<>();
        if (reply instanceof Map<?, ?> map) {
            map.forEach((k, v) -> out.put(String.valueOf(k), v));
        } else if (reply instanceof List<?> items) {
            for (int i = 0; i + 1 < items.size(); i += 2) {
                out.put(String.valueOf(items.get(i)), items.get(i + 1));
            }
        }
        return out;
    }
}

package io.github.redisratelimit;

/**
 * One key of {@code RATELIMIT.TOP}: its count over the covered span, at most {@code error} too many.
 *
 * @param key the key
 * @param count its count
 * @param error the count's error bound
 */
public record TopEntry(String key, long count, long error) {
}

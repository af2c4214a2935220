package io.github.redisratelimit;

/**
 * {@code HIT}'s, {@code SLIDE}'s or {@code GCRA}'s answer with {@code RESERVE}: the decision, and
 * the reservation to settle with what was used.
 *
 * @param decision the limit's answer
 * @param key the key reserved on
 * @param token the reservation as the server made it: opaque, for {@code key} only, settled at most
 *     once; {@code null} when denied
 * @param amount what was reserved: the call's cost, or its tokens
 */
public record Reservation(Decision decision, String key, String token, long amount) {
}

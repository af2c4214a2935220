package io.github.redisratelimit;

/**
 * {@code SETTLE}'s answer for one key: its limit after the settle, and the tokens applied.
 *
 * @param decision the limit as it is after the settle
 * @param applied negative: given back; positive: charged beyond the reservation (a reservation
 *     settled before: what the first settle applied)
 */
public record Settlement(Decision decision, long applied) {
}

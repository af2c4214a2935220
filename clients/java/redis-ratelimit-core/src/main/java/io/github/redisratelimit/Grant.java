package io.github.redisratelimit;

/**
 * {@code GCRA}'s answer with {@code PARTIAL}: the decision and the tokens taken.
 *
 * @param decision the bucket's answer
 * @param granted the tokens taken: at least one when allowed, 0 when not
 */
public record Grant(Decision decision, long granted) {
}

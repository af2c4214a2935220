package io.github.redisratelimit;

import java.util.List;

/**
 * {@code HITALL}'s answer with {@code TOKENS} and {@code RESERVE}: every limit decided, and one
 * reservation of the token keys.
 *
 * @param decision every limit's answer
 * @param keys the token keys, in order: what the reservation is settled on
 * @param token the reservation ({@code null} when denied)
 * @param amount the tokens reserved on each token key
 */
public record MultiReservation(MultiDecision decision, List<String> keys, String token, long amount) {
    /**
     * The keys, kept as given.
     *
     * @param decision every limit's answer
     * @param keys the token keys
     * @param token the reservation
     * @param amount the tokens reserved
     */
    public MultiReservation {
        keys = List.copyOf(keys);
    }
}

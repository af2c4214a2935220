package io.github.redisratelimit;

import java.time.Duration;

/**
 * A sliding-window limit ({@code RATELIMIT.SLIDE}): the previous window weighted by its overlap.
 *
 * @param limit hits admitted per window, at least 1
 * @param window the window's length in whole milliseconds
 * @param cost what the call counts for (nonzero; a negative one gives back)
 */
public record Sliding(long limit, Duration window, long cost) {
    /**
     * {@code limit} per sliding {@code window}, counting 1 a call.
     *
     * @param limit hits admitted per window
     * @param window the window's length
     * @return the limit
     */
    public static Sliding of(long limit, Duration window) {
        return new Sliding(limit, window, 1);
    }

    /**
     * The same limit, counting {@code cost} a call (negative: given back).
     *
     * @param cost what the call counts for
     * @return the limit
     */
    public Sliding withCost(long cost) {
        return new Sliding(limit, window, cost);
    }

    /**
     * Checks the limit as {@code slide} would, with no round trip.
     *
     * @throws InvalidArgumentException what {@code slide} would refuse
     */
    public void validate() {
        io.github.redisratelimit.command.Commands.slide("", this);
    }
}

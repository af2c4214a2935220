package io.github.redisratelimit;

import io.github.redisratelimit.command.Checks;
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
     * Checks the limit as the server would.
     *
     * @param limit see the record
     * @param window see the record
     * @param cost see the record
     * @throws InvalidArgumentException what {@code slide} would refuse
     */
    public Sliding {
        Checks.positive(limit, "limit");
        Checks.lengthMs(window, "window");
        Checks.nonzero(cost, "COST");
    }

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
     * Nothing to check: the constructor checked the limit as the server would.
     *
     * @deprecated an invalid limit cannot be made; remove the call
     */
    @Deprecated
    public void validate() {
    }
}

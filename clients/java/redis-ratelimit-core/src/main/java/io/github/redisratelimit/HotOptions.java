package io.github.redisratelimit;

import java.time.Duration;
import java.util.Objects;

/**
 * A hot limit's tuning ({@link RateLimiter#hot(String, Fixed, HotOptions)}).
 *
 * @param horizon how much of this process's demand a block covers (10 ms by default)
 * @param guard taken off each block's deadline, with a thousandth of the time its window had
 *     left, for scheduling and the clocks' rates (2 ms by default)
 * @param failOpen admit when Redis cannot be reached and too few tokens are held (not where the
 *     server refused the call); by default the take throws the error
 */
public record HotOptions(Duration horizon, Duration guard, boolean failOpen) {
    /** A horizon of 10 ms, a guard of 2 ms, closed when Redis cannot be reached. */
    public static final HotOptions DEFAULT = new HotOptions(Duration.ofMillis(10), Duration.ofMillis(2), false);

    /**
     * The options, checked.
     *
     * @param horizon how much of the demand a block covers, above zero
     * @param guard taken off each block's deadline, not negative
     * @param failOpen admit when Redis cannot be reached
     * @throws InvalidArgumentException a horizon not above zero, a negative guard
     */
    public HotOptions {
        Objects.requireNonNull(horizon, "horizon");
        Objects.requireNonNull(guard, "guard");
        if (horizon.isNegative() || horizon.isZero()) {
            throw new InvalidArgumentException("the horizon must be above zero");
        }
        if (guard.isNegative()) {
            throw new InvalidArgumentException("the guard must not be negative");
        }
    }

    /**
     * These options, admitting when Redis cannot be reached.
     *
     * @return the options
     */
    public HotOptions failingOpen() {
        return new HotOptions(horizon, guard, true);
    }

    /**
     * These options with another horizon.
     *
     * @param horizon how much of the demand a block covers
     * @return the options
     */
    public HotOptions withHorizon(Duration horizon) {
        return new HotOptions(horizon, guard, failOpen);
    }

    /**
     * These options with another guard.
     *
     * @param guard taken off each block's deadline
     * @return the options
     */
    public HotOptions withGuard(Duration guard) {
        return new HotOptions(horizon, guard, failOpen);
    }
}

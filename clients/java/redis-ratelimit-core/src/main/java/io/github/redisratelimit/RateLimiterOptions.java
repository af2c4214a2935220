package io.github.redisratelimit;

import java.time.Duration;
import java.util.Objects;

/**
 * How a limiter finds its backend and bounds the calls it makes on its own.
 *
 * @param loadLibrary load the Functions library where the server has neither it nor the module
 *     (else a {@link LibraryNotLoadedException})
 * @param backgroundTimeout the deadline of each call the limiter makes on its own: finding the
 *     backend, a held permit's renewals (at most a third of its lease) and its release
 */
public record RateLimiterOptions(boolean loadLibrary, Duration backgroundTimeout) {
    /** The library loaded when missing, 5 s for the limiter's own calls. */
    public static final RateLimiterOptions DEFAULT = new RateLimiterOptions(true, Duration.ofSeconds(5));

    /**
     * The options, checked.
     *
     * @param loadLibrary load the library when missing
     * @param backgroundTimeout the deadline of the limiter's own calls, above zero
     */
    public RateLimiterOptions {
        Objects.requireNonNull(backgroundTimeout, "backgroundTimeout");
        if (backgroundTimeout.isNegative() || backgroundTimeout.isZero()) {
            throw new InvalidArgumentException("the background timeout must be above zero");
        }
    }

    /**
     * The same options, expecting the library loaded already on a server without the module.
     *
     * @return the options
     */
    public RateLimiterOptions withoutLibraryLoad() {
        return new RateLimiterOptions(false, backgroundTimeout);
    }

    /**
     * The same options with another deadline for the limiter's own calls.
     *
     * @param timeout the deadline, above zero
     * @return the options
     */
    public RateLimiterOptions withBackgroundTimeout(Duration timeout) {
        return new RateLimiterOptions(loadLibrary, timeout);
    }
}

package io.github.redisratelimit;

import java.time.Duration;

/** Every permit of the key is in use: what {@code withPermit} and {@code hold} throw. */
public class PermitUnavailableException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    /** The permits in use. */
    private final long inUse;
    /** The permits there are. */
    private final long limit;
    /** How long until the earliest lease ends. */
    private final Duration wait;

    /**
     * The exception.
     *
     * @param inUse the permits in use
     * @param limit the permits there are
     * @param wait how long until the earliest lease ends
     */
    public PermitUnavailableException(long inUse, long limit, Duration wait) {
        super("no permit available: " + inUse + " of " + limit + " in use, the first ends in " + wait);
        this.inUse = inUse;
        this.limit = limit;
        this.wait = wait;
    }

    /**
     * The permits in use.
     *
     * @return their count
     */
    public long inUse() {
        return inUse;
    }

    /**
     * The permits there are.
     *
     * @return the limit
     */
    public long limit() {
        return limit;
    }

    /**
     * How long until the earliest lease ends: the soonest a permit frees itself.
     *
     * @return the wait
     */
    public Duration waitTime() {
        return wait;
    }
}

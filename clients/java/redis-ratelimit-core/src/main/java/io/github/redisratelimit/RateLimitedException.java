package io.github.redisratelimit;

import java.time.Duration;

/** An adaptive limit's {@code call} waited its longest and the fleet's limit still had no room. */
public final class RateLimitedException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    /** The adaptive limit's key. */
    private final String key;
    /** How long it would still have had the caller wait. */
    private final transient Duration retryAfter;

    /**
     * The adaptive limit at {@code key} had no room within the wait.
     *
     * @param key the adaptive limit's key
     * @param retryAfter how long it would still have had the caller wait
     */
    public RateLimitedException(String key, Duration retryAfter) {
        super("'" + key + "' has no room for " + retryAfter);
        this.key = key;
        this.retryAfter = retryAfter;
    }

    /**
     * The adaptive limit's key.
     *
     * @return the key
     */
    public String key() {
        return key;
    }

    /**
     * How long the limit would still have had the caller wait.
     *
     * @return the wait
     */
    public Duration retryAfter() {
        return retryAfter;
    }
}

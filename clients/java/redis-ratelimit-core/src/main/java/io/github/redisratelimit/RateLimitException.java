package io.github.redisratelimit;

/**
 * What the limiter throws, but for arguments it refuses ({@link InvalidArgumentException}) and
 * the Redis client's own connection errors, which pass through as the client throws them.
 */
public class RateLimitException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /**
     * An exception with a message.
     *
     * @param message what happened
     */
    public RateLimitException(String message) {
        super(message);
    }

    /**
     * An exception with a message and a cause.
     *
     * @param message what happened
     * @param cause what caused it
     */
    public RateLimitException(String message, Throwable cause) {
        super(message, cause);
    }
}

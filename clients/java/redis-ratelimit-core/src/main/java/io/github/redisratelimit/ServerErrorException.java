package io.github.redisratelimit;

/**
 * An error reply of the server ({@code ERR ...}, {@code WRONGTYPE ...}, {@code NOPERM ...}):
 * the adapters throw it for every error reply, whatever the Redis client.
 */
public class ServerErrorException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    /**
     * The server's error.
     *
     * @param message the reply as the server sent it
     * @param cause the Redis client's exception, or {@code null}
     */
    public ServerErrorException(String message, Throwable cause) {
        super(message, cause);
    }
}

package io.github.redisratelimit;

/** An argument refused before any round trip, worded as the server words it. */
public class InvalidArgumentException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    /**
     * The refusal.
     *
     * @param message the server's words, without its {@code ERR}
     */
    public InvalidArgumentException(String message) {
        super(message);
    }
}

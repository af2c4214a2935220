package io.github.redisratelimit;

/** A held permit's lease ended before the work did (its renewal found it gone). */
public class PermitLostException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    /**
     * The exception.
     *
     * @param key the permit's key
     */
    public PermitLostException(String key) {
        super("permit of " + key + " lost before the work ended");
    }
}

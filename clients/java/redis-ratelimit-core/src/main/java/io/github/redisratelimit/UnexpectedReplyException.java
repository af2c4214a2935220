package io.github.redisratelimit;

/**
 * A reply of a shape its command does not answer: a server of another version, or a proxy in
 * between that changed it.
 */
public class UnexpectedReplyException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    /**
     * The reply that could not be read.
     *
     * @param what the call
     * @param reply the reply
     */
    public UnexpectedReplyException(String what, Object reply) {
        super("unexpected reply for " + what + ": " + reply);
    }
}

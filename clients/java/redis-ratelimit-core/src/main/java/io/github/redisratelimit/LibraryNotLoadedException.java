package io.github.redisratelimit;

/**
 * The server has neither the module nor the Functions library, and the limiter was told not to
 * load it.
 */
public class LibraryNotLoadedException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    /** The exception. */
    public LibraryNotLoadedException() {
        super("the server has neither the ratelimit module nor its Functions library "
                + "(loadmodule .../libredis_ratelimit.so, or FUNCTION LOAD with Library.source())");
    }
}

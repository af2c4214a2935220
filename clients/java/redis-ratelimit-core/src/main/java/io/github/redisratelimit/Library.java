package io.github.redisratelimit;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/** The Functions library: what the limiter loads with FUNCTION LOAD on a server without the module. */
public final class Library {
    private Library() {
    }

    /** The library's name in FUNCTION LIST. */
    public static final String NAME = "ratelimit";

    private static final String SOURCE = read();

    private static String read() {
        try (InputStream in = Library.class.getResourceAsStream("ratelimit.lua")) {
            if (in == null) {
                throw new IllegalStateException("the jar lacks io/github/redisratelimit/ratelimit.lua");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * The library's source, functions/ratelimit.lua in the repository.
     *
     * @return the Lua source, as FUNCTION LOAD takes it
     */
    public static String source() {
        return SOURCE;
    }
}

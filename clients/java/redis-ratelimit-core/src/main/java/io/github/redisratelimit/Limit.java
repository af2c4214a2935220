package io.github.redisratelimit;

import io.github.redisratelimit.command.Checks;
import java.time.Duration;
import java.util.Objects;

/**
 * One key's limit in {@code RATELIMIT.HITALL}.
 *
 * @param key the counter
 * @param limit hits admitted per window, at least 1
 * @param window the window's length in whole milliseconds, or {@code null} for a calendar window
 * @param calendar a calendar window instead of {@code window}, or {@code null}
 */
public record Limit(String key, long limit, Duration window, Calendar calendar) {
    /**
     * Checks the limit as the server would.
     *
     * @param key see the record
     * @param limit see the record
     * @param window see the record
     * @param calendar see the record
     * @throws InvalidArgumentException what {@code hitAll} would refuse of one limit
     */
    public Limit {
        Objects.requireNonNull(key, "key");
        Checks.fixedWindow(window, calendar);
        Checks.positive(limit, "limit");
    }

    /**
     * {@code limit} per {@code window} on {@code key}.
     *
     * @param key the counter
     * @param limit hits admitted per window
     * @param window the window's length
     * @return the limit
     */
    public static Limit of(String key, long limit, Duration window) {
        return new Limit(key, limit, window, null);
    }

    /**
     * {@code limit} per calendar unit on {@code key}.
     *
     * @param key the counter
     * @param limit hits admitted per window
     * @param calendar the calendar unit
     * @return the limit
     */
    public static Limit of(String key, long limit, Calendar calendar) {
        return new Limit(key, limit, null, calendar);
    }
}

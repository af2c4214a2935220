package io.github.redisratelimit.command;

import io.github.redisratelimit.Calendar;
import io.github.redisratelimit.InvalidArgumentException;
import java.time.Duration;

/**
 * The argument checks that the limits' records (in their constructors) and the builders share,
 * each worded as the server words its refusal. Not for applications: a record that exists has
 * passed them.
 */
public final class Checks {
    private Checks() {
    }

    /** The longest window or lease the server takes: 2^62 - 1 ms. */
    static final long MAX_MS = (1L << 62) - 1;

    /** The longest window, Retry-After or reset an adaptive limit takes, in ms. */
    public static final long MAX_SPAN_MS = 1L << 40;
    /** The server's bound on a GCRA bucket's spans in ns: half of a long. */
    static final long MAX_SPAN_NS = Long.MAX_VALUE / 2;

    /**
     * The refusal, worded as the server's error.
     *
     * @param message the server's words, without {@code ERR}
     * @return the exception to throw
     */
    public static InvalidArgumentException invalid(String message) {
        return new InvalidArgumentException(message);
    }

    /**
     * Refuses {@code n} below 1.
     *
     * @param n the value
     * @param name its name in the server's words
     */
    public static void positive(long n, String name) {
        if (n < 1) {
            throw invalid(name + " must be an integer >= 1");
        }
    }

    /**
     * Refuses {@code n} of 0.
     *
     * @param n the value
     * @param name its name in the server's words
     */
    public static void nonzero(long n, String name) {
        if (n == 0) {
            throw invalid(name + " must be a nonzero integer");
        }
    }

    /**
     * A window or lease in whole milliseconds, from 1 ms to 2^62 ms.
     *
     * @param d the length
     * @param name its name in the server's words
     * @return the milliseconds
     */
    public static long lengthMs(Duration d, String name) {
        if (d == null || d.isNegative() || d.getNano() % 1_000_000 != 0 || d.compareTo(Duration.ofMillis(1)) < 0) {
            throw invalid(name + " must be a whole number of milliseconds from 1ms to 2^62 ms");
        }
        if (d.getSeconds() > MAX_MS / 1000 || d.toMillis() > MAX_MS) {
            throw invalid(name + " is too large");
        }
        return d.toMillis();
    }

    /**
     * Refuses a GCRA bucket whose spans in nanoseconds would pass half of a long, as the server
     * does.
     *
     * @param maxBurst the burst beyond the first token, at least 0
     * @param perPeriod tokens per period, at least 1
     * @param period the period, above 0
     * @param tokens what a call takes
     */
    public static void gcraSpans(long maxBurst, long perPeriod, Duration period, long tokens) {
        long periodNs;
        try {
            periodNs = period.toNanos();
        } catch (ArithmeticException e) {
            throw invalid("period would cause an overflow");
        }
        long within = MAX_SPAN_NS / Math.max(periodNs / perPeriod, 1);
        if (maxBurst >= within) {
            throw invalid("(max_burst + 1) * period / tokens_per_period would cause an overflow");
        }
        if (tokens > within || tokens < -within) {
            throw invalid("TOKENS * period / tokens_per_period would cause an overflow");
        }
    }

    /**
     * A fixed window: a calendar unit or a length, not both.
     *
     * @param window the length, or {@code null} with a calendar unit
     * @param calendar the calendar unit, or {@code null}
     */
    public static void fixedWindow(Duration window, Calendar calendar) {
        if (calendar != null) {
            if (window != null) {
                throw invalid("give a window or a calendar, not both");
            }
            return;
        }
        lengthMs(window, "window");
    }

    /**
     * A zone: only for a calendar window, and naming one.
     *
     * @param calendar whether the window is a calendar unit
     * @param zone the zone, or {@code null} for UTC
     */
    public static void zone(boolean calendar, String zone) {
        if (zone == null) {
            return;
        }
        if (!calendar) {
            throw invalid("TZ needs a calendar window (day, week, month or year)");
        }
        if (zone.isEmpty()) {
            throw invalid("TZ must name a zone");
        }
    }
}

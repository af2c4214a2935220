package io.github.redisratelimit;

import io.github.redisratelimit.command.Checks;
import java.time.Duration;
import java.util.Objects;

/**
 * How the provider answered a call ({@code RATELIMIT.REPORT}): build it from {@link #ok()} or
 * {@link #throttle()} and the provider's figures.
 *
 * @param throttled a 429, a 503, or a timeout counted as one
 * @param retryAfter the provider's Retry-After (only when throttled; null: none)
 * @param limit the provider's stated limit per window (0: none)
 * @param remaining what the provider says remains (-1: nothing said), until {@code resetAfter}
 * @param resetAfter when the provider's remaining resets (null with no remaining)
 * @param age how long ago the call was decided (null: not said): a throttle on a call decided
 *     after the epoch's cut cuts again (with no remaining stated)
 */
public record Report(boolean throttled, Duration retryAfter, long limit, long remaining, Duration resetAfter, Duration age) {
    /**
     * Checks the report as the server would.
     *
     * @param throttled see the record
     * @param retryAfter see the record
     * @param limit see the record
     * @param remaining see the record
     * @param resetAfter see the record
     * @param age see the record
     * @throws InvalidArgumentException what {@code report} would refuse
     */
    public Report {
        if (retryAfter != null && !throttled) {
            throw Checks.invalid("syntax error: RETRY needs THROTTLED");
        }
        if (limit < 0 || limit > Adaptive.MAX_SCALED) {
            throw Checks.invalid(limit < 0 ? "LIMIT must be an integer >= 1" : "LIMIT is too large");
        }
        if ((remaining >= 0) != (resetAfter != null)) {
            throw Checks.invalid(remaining >= 0 ? "syntax error: REMAINING needs RESET" : "syntax error: RESET needs REMAINING");
        }
        if (remaining > Adaptive.MAX_SCALED) {
            throw Checks.invalid("REMAINING is too large");
        }
        if (age != null && age.isNegative()) {
            throw Checks.invalid("AGE must be an integer >= 0");
        }
    }

    /**
     * A report that does not say when its call was decided.
     *
     * @param throttled see the record
     * @param retryAfter see the record
     * @param limit see the record
     * @param remaining see the record
     * @param resetAfter see the record
     */
    public Report(boolean throttled, Duration retryAfter, long limit, long remaining, Duration resetAfter) {
        this(throttled, retryAfter, limit, remaining, resetAfter, null);
    }

    /**
     * The provider answered.
     *
     * @return an OK report
     */
    public static Report ok() {
        return new Report(false, null, 0, -1, null);
    }

    /**
     * The provider throttled the call (a 429, a 503, a timeout counted as one).
     *
     * @return a THROTTLED report
     */
    public static Report throttle() {
        return new Report(true, null, 0, -1, null);
    }

    /**
     * With the provider's Retry-After: the whole fleet waits until then.
     *
     * @param wait the wait
     * @return this report with it
     */
    public Report withRetryAfter(Duration wait) {
        return new Report(throttled, wait, limit, remaining, resetAfter, age);
    }

    /**
     * With the provider's stated limit per window: it caps the learned one.
     *
     * @param stated the stated limit, at least 1
     * @return this report with it
     */
    public Report withLimit(long stated) {
        Checks.positive(stated, "LIMIT");
        return new Report(throttled, retryAfter, stated, remaining, resetAfter, age);
    }

    /**
     * With what the provider says remains and when it resets: the fleet takes no more until then.
     *
     * @param left what remains, at least 0
     * @param reset when it resets
     * @return this report with it
     */
    public Report withRemaining(long left, Duration reset) {
        if (left < 0) {
            throw Checks.invalid("REMAINING must be an integer >= 0");
        }
        return new Report(throttled, retryAfter, limit, left, Objects.requireNonNull(reset, "reset"), age);
    }

    /**
     * With how long ago the call was decided (its ADAPT's answer): a throttle on a call decided
     * after the epoch's cut cuts again (with no remaining stated), where the burst before it cuts once.
     *
     * @param since the call's age, at least 0
     * @return this report with it
     */
    public Report withAge(Duration since) {
        return new Report(throttled, retryAfter, limit, remaining, resetAfter, Objects.requireNonNull(since, "since"));
    }
}

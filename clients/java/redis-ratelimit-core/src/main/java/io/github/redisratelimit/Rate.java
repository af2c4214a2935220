package io.github.redisratelimit;

import io.github.redisratelimit.command.Checks;
import java.time.Duration;

/**
 * A GCRA bucket ({@code RATELIMIT.GCRA}): a burst of {@code maxBurst + 1}, then {@code perPeriod}
 * tokens every {@code period}, smoothly.
 *
 * @param maxBurst the burst beyond the first token, at least 0
 * @param perPeriod tokens per period, at least 1
 * @param period the period, to the nanosecond
 * @param tokens what the call takes (nonzero; negative ones are given back)
 * @param align whether the tokens come back {@code perPeriod} at once, at each multiple of
 *     {@code period} since the Unix epoch ({@code ALIGN}: Spring Cloud Gateway's bucket, with a
 *     period of a second), rather than one every {@code period / perPeriod}
 */
public record Rate(long maxBurst, long perPeriod, Duration period, long tokens, boolean align) {
    /**
     * Checks the bucket as the server would.
     *
     * @param maxBurst see the record
     * @param perPeriod see the record
     * @param period see the record
     * @param tokens see the record
     * @param align see the record
     * @throws InvalidArgumentException what {@code gcra} would refuse
     */
    public Rate {
        if (maxBurst < 0) {
            throw Checks.invalid("max_burst must be an integer >= 0");
        }
        Checks.positive(perPeriod, "tokens_per_period");
        if (period == null || period.isNegative() || period.isZero()) {
            throw Checks.invalid("period must be > 0");
        }
        Checks.nonzero(tokens, "TOKENS");
        Checks.gcraSpans(maxBurst, perPeriod, period, tokens);
    }

    /**
     * A bucket of {@code maxBurst + 1} refilled by {@code perPeriod} every {@code period}, taking
     * 1 token a call.
     *
     * @param maxBurst the burst beyond the first token
     * @param perPeriod tokens per period
     * @param period the period
     * @return the bucket
     */
    public static Rate of(long maxBurst, long perPeriod, Duration period) {
        return new Rate(maxBurst, perPeriod, period, 1, false);
    }

    /**
     * The same bucket, taking {@code tokens} a call (negative: given back).
     *
     * @param tokens what the call takes
     * @return the bucket
     */
    public Rate withTokens(long tokens) {
        return new Rate(maxBurst, perPeriod, period, tokens, align);
    }

    /**
     * The same bucket, its tokens coming back {@code perPeriod} at once at each multiple of
     * {@code period} since the Unix epoch. Not for reservations: a settle gives back against the
     * running clock.
     *
     * @return the bucket
     */
    public Rate aligned() {
        return new Rate(maxBurst, perPeriod, period, tokens, true);
    }

    /**
     * Nothing to check: the constructor checked the bucket as the server would.
     *
     * @deprecated an invalid bucket cannot be made; remove the call
     */
    @Deprecated
    public void validate() {
    }
}

package io.github.redisratelimit;

import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * One limit's answer ({@code HIT}, {@code SLIDE}, {@code PEEK}, {@code GCRA}, and each limit of
 * {@code HITALL}).
 *
 * @param allowed admitted ({@code PEEK}: would be)
 * @param count the counter after the call ({@code SLIDE}: the estimate, rounded up; {@code GCRA}:
 *     tokens in use)
 * @param remaining what is left before the limit
 * @param limit the quota ({@code GCRA}: the capacity, {@code maxBurst + 1})
 * @param resetAfter how long until the window ends ({@code SLIDE}: until the estimate is 0;
 *     {@code GCRA}: until the bucket is full); zero when nothing is counted; {@link #FOREVER} for
 *     a counter without TTL ({@code PEEK})
 * @param retryAfter zero when allowed; else how long until the same call would be admitted if
 *     nothing else happened ({@link #FOREVER}: never, the cost is above the limit)
 * @param window the window ({@code GCRA}: the period); zero where the call names none
 *     ({@code PEEK}) or it varies (a calendar window)
 */
public record Decision(boolean allowed, long count, long remaining, long limit, Duration resetAfter,
        Duration retryAfter, Duration window) {
    /** A wait or a reset that never comes: a cost above the limit, or a counter without TTL. */
    public static final Duration FOREVER = Duration.ofSeconds(Long.MAX_VALUE, 999_999_999);

    /** No decision: what a {@link MultiDecision} with no limit has as its tightest. */
    static final Decision NONE = new Decision(false, 0, 0, 0, Duration.ZERO, Duration.ZERO, Duration.ZERO);

    /**
     * This answer's HTTP headers: {@code RateLimit-Policy} and {@code RateLimit} (the IETF draft's
     * fields), and {@code Retry-After} when denied (RFC 9110), in whole seconds rounded up.
     *
     * @param name the limit's name in them
     * @return the headers, in that order
     */
    public Map<String, String> headers(String name) {
        return Headers.of(List.of(name), List.of(this));
    }
}

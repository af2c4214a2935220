package io.github.redisratelimit.gateway;

import jakarta.validation.constraints.AssertTrue;
import java.time.Duration;
import java.util.List;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;

/**
 * A route's configuration: the gateway's ({@code replenishRate}, {@code burstCapacity},
 * {@code requestedTokens}) and what it lacks. With none of the new properties it is the
 * gateway's bucket, decision for decision.
 */
public class NativeRedisRateLimiterConfig extends RedisRateLimiter.Config {
    /** The limiters a route can use. */
    public enum Algorithm {
        /** The gateway's bucket: {@code replenishRate} tokens back at each boundary of {@code replenishPeriod}. */
        BUCKET,
        /** A smooth bucket (GCRA): a token back every {@code replenishPeriod / replenishRate}. */
        GCRA,
        /** Fixed windows: {@code limit} per {@code window}, or {@code limits}. */
        FIXED,
        /** Sliding windows: {@code limit} per {@code window}, or {@code limits}. */
        SLIDING
    }

    private boolean replenishRateGiven;
    private Duration replenishPeriod = Duration.ofSeconds(1);
    private Algorithm algorithm;
    private long limit;
    private String window;
    private List<String> limits = List.of();
    private String zone;
    private boolean align;
    private boolean shadow;

    /** A configuration of the gateway's defaults. */
    // The gateway's own setter, called on this before a subclass's fields are set, reads none of them.
    @SuppressWarnings("this-escape")
    public NativeRedisRateLimiterConfig() {
        // The gateway holds replenishRate to @Min(1): a route that sets a window instead still
        // binds. isComplete() tells the two apart.
        super.setReplenishRate(1);
    }

    /**
     * A copy of the gateway's own configuration (the Java DSL's, or one put by hand).
     *
     * @param gateway its configuration
     * @return this package's, with the same bucket
     */
    static NativeRedisRateLimiterConfig of(RedisRateLimiter.Config gateway) {
        NativeRedisRateLimiterConfig config = new NativeRedisRateLimiterConfig();
        // In the order the gateway's own binding sets them: a capacity below the rate is its
        // to refuse or take, not this copy's.
        config.setBurstCapacity(gateway.getBurstCapacity());
        config.setReplenishRate(gateway.getReplenishRate());
        config.setRequestedTokens(gateway.getRequestedTokens());
        return config;
    }

    @Override
    public NativeRedisRateLimiterConfig setReplenishRate(int replenishRate) {
        replenishRateGiven = true;
        super.setReplenishRate(replenishRate);
        return this;
    }

    /**
     * Sets the bucket's capacity, held to the gateway's rules: not below a replenish rate
     * given before it (the default one does not count), at most 2^53 - 1.
     */
    @Override
    public NativeRedisRateLimiterConfig setBurstCapacity(long burstCapacity) {
        if (replenishRateGiven) {
            super.setBurstCapacity(burstCapacity);
            return this;
        }
        super.setReplenishRate(0);
        try {
            super.setBurstCapacity(burstCapacity);
        } finally {
            super.setReplenishRate(1);
        }
        return this;
    }

    @Override
    public NativeRedisRateLimiterConfig setRequestedTokens(int requestedTokens) {
        super.setRequestedTokens(requestedTokens);
        return this;
    }

    /**
     * The period {@code replenishRate} tokens come back in: 1 second by default, as the
     * gateway's.
     *
     * @return the period
     */
    public Duration getReplenishPeriod() {
        return replenishPeriod;
    }

    /**
     * Sets the period {@code replenishRate} tokens come back in ({@code 1m}, {@code 1h}, ...).
     *
     * @param replenishPeriod the period
     * @return this
     */
    public NativeRedisRateLimiterConfig setReplenishPeriod(Duration replenishPeriod) {
        this.replenishPeriod = replenishPeriod;
        return this;
    }

    /**
     * The limiter, when given: else a fixed window where a limit is given, the gateway's bucket
     * where none is.
     *
     * @return the limiter given, or null
     */
    public Algorithm getAlgorithm() {
        return algorithm;
    }

    /**
     * Sets the limiter.
     *
     * @param algorithm the limiter
     * @return this
     */
    public NativeRedisRateLimiterConfig setAlgorithm(Algorithm algorithm) {
        this.algorithm = algorithm;
        return this;
    }

    /**
     * The requests (tokens) a window admits; 0 when the route gives none.
     *
     * @return the limit
     */
    public long getLimit() {
        return limit;
    }

    /**
     * Sets the requests (tokens) a window admits.
     *
     * @param limit the limit
     * @return this
     */
    public NativeRedisRateLimiterConfig setLimit(long limit) {
        this.limit = limit;
        return this;
    }

    /**
     * The window: a duration ({@code 1m}, {@code 1h}, {@code PT10S}) or a calendar one
     * ({@code day}, {@code week}, {@code month}, {@code year}).
     *
     * @return the window, or null
     */
    public String getWindow() {
        return window;
    }

    /**
     * Sets the window.
     *
     * @param window a duration or day, week, month or year
     * @return this
     */
    public NativeRedisRateLimiterConfig setWindow(String window) {
        this.window = window;
        return this;
    }

    /**
     * Several limits, each {@code limit/window} ({@code 100/1m}, {@code 5000/day}), decided all
     * or nothing: a request counts on every one, or on none.
     *
     * @return the limits
     */
    public List<String> getLimits() {
        return limits;
    }

    /**
     * Sets several limits, decided all or nothing.
     *
     * @param limits each {@code limit/window}
     * @return this
     */
    public NativeRedisRateLimiterConfig setLimits(List<String> limits) {
        this.limits = limits == null ? List.of() : List.copyOf(limits);
        return this;
    }

    /**
     * The calendar windows' time zone: UTC (default), an offset such as {@code +05:30}, or a name
     * such as {@code Europe/Paris} (the module's alone).
     *
     * @return the zone, or null
     */
    public String getZone() {
        return zone;
    }

    /**
     * Sets the calendar windows' time zone.
     *
     * @param zone the zone
     * @return this
     */
    public NativeRedisRateLimiterConfig setZone(String zone) {
        this.zone = zone;
        return this;
    }

    /**
     * Whether fixed windows start at multiples of their length since the Unix epoch (each
     * minute, each hour) rather than at a key's first request.
     *
     * @return false by default
     */
    public boolean isAlign() {
        return align;
    }

    /**
     * Sets whether fixed windows are aligned.
     *
     * @param align whether they are
     * @return this
     */
    public NativeRedisRateLimiterConfig setAlign(boolean align) {
        this.align = align;
        return this;
    }

    /**
     * Whether the route only observes: a request its limits deny is admitted anyway, counted in
     * {@link NativeRedisRateLimiter#getShadowDenied()} and logged at DEBUG.
     *
     * @return false by default
     */
    public boolean isShadow() {
        return shadow;
    }

    /**
     * Sets shadow mode.
     *
     * @param shadow whether the route only observes
     * @return this
     */
    public NativeRedisRateLimiterConfig setShadow(boolean shadow) {
        this.shadow = shadow;
        return this;
    }

    /**
     * The limiter the route uses.
     *
     * @return the algorithm given, or the one its properties imply
     */
    public Algorithm algorithm() {
        if (algorithm != null) {
            return algorithm;
        }
        return limit > 0 || window != null || !limits.isEmpty() ? Algorithm.FIXED : Algorithm.BUCKET;
    }

    /**
     * Whether the properties make one limiter: checked when a route's properties bind.
     *
     * @return whether they do
     */
    @AssertTrue(message = "give replenishRate (and burstCapacity) for a bucket, or limit and window, or limits "
            + "(each limit/window) for windows; zone for calendar windows only, align for fixed windows only")
    public boolean isComplete() {
        try {
            Plan.of(this, "");
            return true;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    /**
     * Whether a replenish rate was given (the default one does not count).
     *
     * @return whether it was
     */
    boolean replenishRateGiven() {
        return replenishRateGiven;
    }

    @Override
    public String toString() {
        return super.toString() + "[replenishPeriod=" + replenishPeriod + ", algorithm=" + algorithm()
                + ", limit=" + limit + ", window=" + window + ", limits=" + limits + ", zone=" + zone
                + ", align=" + align + ", shadow=" + shadow + "]";
    }
}

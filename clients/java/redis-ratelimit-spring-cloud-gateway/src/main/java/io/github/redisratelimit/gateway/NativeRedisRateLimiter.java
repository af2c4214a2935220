package io.github.redisratelimit.gateway;

import io.github.redisratelimit.AllOptions;
import io.github.redisratelimit.AsyncRateLimiter;
import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.MultiDecision;
import jakarta.validation.constraints.AssertTrue;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.springframework.beans.BeansException;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.cloud.gateway.route.RouteDefinitionRouteLocator;
import org.springframework.cloud.gateway.support.ConfigurationService;
import org.springframework.context.ApplicationContext;
import org.springframework.data.redis.core.ReactiveStringRedisTemplate;
import org.springframework.data.redis.core.script.RedisScript;
import reactor.core.publisher.Mono;

/**
 * Spring Cloud Gateway's {@link RedisRateLimiter}, decided by the redis-ratelimit module (or its
 * Functions library, loaded when missing) in one call on one key.
 *
 * <p>Its routes, properties ({@code replenishRate}, {@code burstCapacity}, {@code requestedTokens}
 * under {@code spring.cloud.gateway.server.webflux.redis-rate-limiter}), headers and fail-open
 * answer are the gateway's: the same bucket, refilled {@code replenishRate} tokens at each whole
 * second of the server's clock, makes the same decisions as the gateway's Lua script. Its
 * {@link Config} adds per-minute to per-month limits ({@code limit} and {@code window}, calendar
 * windows), {@code replenishPeriod}, sliding windows, GCRA, several limits decided all or nothing
 * ({@code limits}), shadow mode, and the {@code RateLimit} / {@code Retry-After} headers beside the
 * gateway's own.
 */
public class NativeRedisRateLimiter extends RedisRateLimiter {
    private static final Log log = LogFactory.getLog(NativeRedisRateLimiter.class);

    private AsyncRateLimiter limiter;
    private Config defaultConfig;
    private boolean includeRateLimitHeaders = true;
    private final AtomicLong shadowDenied = new AtomicLong();

    /**
     * The bean the starter makes: its calls go through {@code limiter}; the template and script are
     * the gateway's, kept for what the gateway's own code reads of them.
     *
     * @param limiter where the calls go
     * @param redisTemplate the gateway's template
     * @param script the gateway's script
     * @param configurationService binds the routes' properties
     */
    public NativeRedisRateLimiter(AsyncRateLimiter limiter, ReactiveStringRedisTemplate redisTemplate,
            RedisScript<List<Long>> script, ConfigurationService configurationService) {
        super(redisTemplate, script, configurationService);
        this.limiter = limiter;
    }

    /**
     * A limiter with a default configuration, for the Java DSL (as the gateway's own): its calls go
     * through the context's {@link AsyncRateLimiter}.
     *
     * @param defaultReplenishRate tokens per second
     * @param defaultBurstCapacity tokens the bucket holds
     */
    public NativeRedisRateLimiter(int defaultReplenishRate, long defaultBurstCapacity) {
        this(defaultReplenishRate, defaultBurstCapacity, 1);
    }

    /**
     * A limiter with a default configuration, for the Java DSL (as the gateway's own).
     *
     * @param defaultReplenishRate tokens per second
     * @param defaultBurstCapacity tokens the bucket holds
     * @param defaultRequestedTokens tokens a request takes
     */
    public NativeRedisRateLimiter(int defaultReplenishRate, long defaultBurstCapacity, int defaultRequestedTokens) {
        super(defaultReplenishRate, defaultBurstCapacity, defaultRequestedTokens);
        this.defaultConfig = new Config();
        this.defaultConfig.setReplenishRate(defaultReplenishRate);
        this.defaultConfig.setBurstCapacity(defaultBurstCapacity);
        this.defaultConfig.setRequestedTokens(defaultRequestedTokens);
    }

    @Override
    public void setApplicationContext(ApplicationContext context) throws BeansException {
        super.setApplicationContext(context);
        if (limiter == null) {
            limiter = context.getBean(AsyncRateLimiter.class);
        }
    }

    /** A route's properties bind into this package's {@link Config}. */
    @Override
    public Config newConfig() {
        return new Config();
    }

    /**
     * Whether the responses carry {@code RateLimit-Policy}, {@code RateLimit} and, when denied,
     * {@code Retry-After} beside the gateway's headers (when it sends headers at all).
     *
     * @return true by default
     */
    public boolean isIncludeRateLimitHeaders() {
        return includeRateLimitHeaders;
    }

    /**
     * Sets whether the responses carry the {@code RateLimit} headers.
     *
     * @param includeRateLimitHeaders whether they do
     */
    public void setIncludeRateLimitHeaders(boolean includeRateLimitHeaders) {
        this.includeRateLimitHeaders = includeRateLimitHeaders;
    }

    /**
     * The requests that routes in shadow mode admitted though their limits denied them.
     *
     * @return the count since the start
     */
    public long getShadowDenied() {
        return shadowDenied.get();
    }

    /**
     * The route's configuration: its own, else this limiter's default, else the
     * {@code defaultFilters} one (the gateway's lookup).
     *
     * @param routeId the route
     * @return its configuration
     * @throws IllegalArgumentException when there is none
     */
    protected RedisRateLimiter.Config routeConfig(String routeId) {
        RedisRateLimiter.Config config = getConfig().getOrDefault(routeId, defaultConfig);
        if (config == null) {
            config = getConfig().get(RouteDefinitionRouteLocator.DEFAULT_FILTERS);
        }
        if (config == null) {
            throw new IllegalArgumentException("No Configuration found for route " + routeId + " or defaultFilters");
        }
        return config;
    }

    @Override
    public Mono<Response> isAllowed(String routeId, String id) {
        if (limiter == null) {
            throw new IllegalStateException("NativeRedisRateLimiter is not initialized");
        }
        RedisRateLimiter.Config given = routeConfig(routeId);
        Config config = given instanceof Config own ? own : Config.of(given);
        Plan plan;
        try {
            plan = Plan.of(config, "request_rate_limiter.{" + routeId + "." + id + "}.");
        } catch (IllegalArgumentException e) {
            // A configuration put by hand (the Java DSL's) that makes no limiter: as the gateway's
            // own answers whatever goes wrong past the route's lookup.
            return failOpen(config, e);
        }
        if (plan.decided() != null) {
            return Mono.just(respond(config, plan, plan.decided()));
        }
        return Mono.fromFuture(() -> send(plan)).map(answer -> respond(config, plan, answer))
                .onErrorResume(e -> failOpen(config, e));
    }

    /** As the gateway's own: Redis out of reach lets traffic through, reported as -1 tokens left. */
    private Mono<Response> failOpen(Config config, Throwable e) {
        log.error("Error determining if user allowed from redis", e);
        return Mono.just(new Response(true, gatewayHeaders(config, -1L)));
    }

    private CompletableFuture<MultiDecision> send(Plan plan) {
        if (plan.rate() != null) {
            return limiter.gcra(plan.key(), plan.rate()).thenApply(d -> new MultiDecision(d.allowed(), List.of(d)));
        }
        if (plan.fixed() != null) {
            return limiter.hit(plan.key(), plan.fixed()).thenApply(d -> new MultiDecision(d.allowed(), List.of(d)));
        }
        if (plan.sliding() != null) {
            return limiter.slide(plan.key(), plan.sliding()).thenApply(d -> new MultiDecision(d.allowed(), List.of(d)));
        }
        List<Limit> limits = plan.limits();
        AllOptions options = plan.options();
        return limiter.hitAll(limits, options);
    }

    private Response respond(Config config, Plan plan, MultiDecision answer) {
        boolean allowed = answer.allowed();
        if (!allowed && config.isShadow()) {
            shadowDenied.incrementAndGet();
            if (log.isDebugEnabled()) {
                log.debug("shadow mode: admitted a request its limits deny on " + plan.key());
            }
            allowed = true;
        }
        Map<String, String> headers = gatewayHeaders(config, answer.tightest().remaining());
        if (isIncludeHeaders() && includeRateLimitHeaders) {
            headers.putAll(answer.headers(plan.names()));
            if (allowed) {
                headers.remove("Retry-After");
            }
        }
        return new Response(allowed, headers);
    }

    /** The gateway's own headers; its rate and capacity only where the route is a bucket. */
    private Map<String, String> gatewayHeaders(Config config, long tokensLeft) {
        if (config.algorithm() == Config.Algorithm.BUCKET || config.algorithm() == Config.Algorithm.GCRA) {
            return new HashMap<>(getHeaders(config, tokensLeft));
        }
        Map<String, String> headers = new HashMap<>();
        if (isIncludeHeaders()) {
            headers.put(getRemainingHeader(), Long.toString(tokensLeft));
            headers.put(getRequestedTokensHeader(), String.valueOf(config.getRequestedTokens()));
        }
        return headers;
    }

    /**
     * A route's configuration: the gateway's ({@code replenishRate}, {@code burstCapacity},
     * {@code requestedTokens}) and what it lacks. With none of the new properties it is the
     * gateway's bucket, decision for decision.
     */
    public static class Config extends RedisRateLimiter.Config {
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
        public Config() {
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
        static Config of(RedisRateLimiter.Config gateway) {
            Config config = new Config();
            // In the order the gateway's own binding sets them: a capacity below the rate is its
            // to refuse or take, not this copy's.
            config.setBurstCapacity(gateway.getBurstCapacity());
            config.setReplenishRate(gateway.getReplenishRate());
            config.setRequestedTokens(gateway.getRequestedTokens());
            return config;
        }

        @Override
        public Config setReplenishRate(int replenishRate) {
            replenishRateGiven = true;
            super.setReplenishRate(replenishRate);
            return this;
        }

        /**
         * Sets the bucket's capacity, held to the gateway's rules: not below a replenish rate
         * given before it (the default one does not count), at most 2^53 - 1.
         */
        @Override
        public Config setBurstCapacity(long burstCapacity) {
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
        public Config setRequestedTokens(int requestedTokens) {
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
        public Config setReplenishPeriod(Duration replenishPeriod) {
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
        public Config setAlgorithm(Algorithm algorithm) {
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
        public Config setLimit(long limit) {
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
        public Config setWindow(String window) {
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
        public Config setLimits(List<String> limits) {
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
        public Config setZone(String zone) {
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
        public Config setAlign(boolean align) {
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
        public Config setShadow(boolean shadow) {
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
}

package io.github.redisratelimit.gateway;

import io.github.redisratelimit.AllOptions;
import io.github.redisratelimit.AsyncRateLimiter;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.MultiDecision;
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
 * {@link NativeRedisRateLimiterConfig} adds per-minute to per-month limits ({@code limit} and
 * {@code window}, calendar windows), {@code replenishPeriod}, sliding windows, GCRA, several limits
 * decided all or nothing ({@code limits}), shadow mode, and the {@code RateLimit} /
 * {@code Retry-After} headers beside the gateway's own.
 */
public class NativeRedisRateLimiter extends RedisRateLimiter {
    private static final Log log = LogFactory.getLog(NativeRedisRateLimiter.class);

    private AsyncRateLimiter limiter;
    private NativeRedisRateLimiterConfig defaultConfig;
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
        this.defaultConfig = new NativeRedisRateLimiterConfig();
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

    /** A route's properties bind into this package's {@link NativeRedisRateLimiterConfig}. */
    @Override
    public NativeRedisRateLimiterConfig newConfig() {
        return new NativeRedisRateLimiterConfig();
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
        NativeRedisRateLimiterConfig config = given instanceof NativeRedisRateLimiterConfig own ? own : NativeRedisRateLimiterConfig.of(given);
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
    private Mono<Response> failOpen(NativeRedisRateLimiterConfig config, Throwable e) {
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

    private Response respond(NativeRedisRateLimiterConfig config, Plan plan, MultiDecision answer) {
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
    private Map<String, String> gatewayHeaders(NativeRedisRateLimiterConfig config, long tokensLeft) {
        if (config.algorithm() == NativeRedisRateLimiterConfig.Algorithm.BUCKET || config.algorithm() == NativeRedisRateLimiterConfig.Algorithm.GCRA) {
            return new HashMap<>(getHeaders(config, tokensLeft));
        }
        Map<String, String> headers = new HashMap<>();
        if (isIncludeHeaders()) {
            headers.put(getRemainingHeader(), Long.toString(tokensLeft));
            headers.put(getRequestedTokensHeader(), String.valueOf(config.getRequestedTokens()));
        }
        return headers;
    }
}

package io.github.redisratelimit.jedis;

import io.github.redisratelimit.AsyncRateLimiter;
import io.github.redisratelimit.RateLimiter;
import io.github.redisratelimit.RateLimiterOptions;
import io.github.redisratelimit.spi.Transport;
import java.util.Objects;
import redis.clients.jedis.UnifiedJedis;

/**
 * The limiters over Jedis: a {@code UnifiedJedis}, such as {@code JedisPooled} or
 * {@code JedisCluster} (every call to its key's primary).
 */
public final class JedisRateLimiters {
    private JedisRateLimiters() {
    }

    /**
     * The transport over a Jedis client, for the limiters' constructors.
     *
     * @param jedis the client
     * @return its transport
     */
    public static Transport transport(UnifiedJedis jedis) {
        return JedisTransport.of(Objects.requireNonNull(jedis, "jedis"));
    }

    /**
     * A blocking limiter over a Jedis client.
     *
     * @param jedis the client
     * @return the limiter
     */
    public static RateLimiter create(UnifiedJedis jedis) {
        return new RateLimiter(transport(jedis));
    }

    /**
     * A blocking limiter over a Jedis client.
     *
     * @param jedis the client
     * @param options how it finds its backend and bounds its own calls
     * @return the limiter
     */
    public static RateLimiter create(UnifiedJedis jedis, RateLimiterOptions options) {
        return new RateLimiter(transport(jedis), options);
    }

    /**
     * An asynchronous limiter over a Jedis client: Jedis blocks, so each future is completed in the
     * caller's thread.
     *
     * @param jedis the client
     * @param options how it finds its backend and bounds its own calls
     * @return the limiter
     */
    public static AsyncRateLimiter async(UnifiedJedis jedis, RateLimiterOptions options) {
        return new AsyncRateLimiter(transport(jedis), options);
    }
}

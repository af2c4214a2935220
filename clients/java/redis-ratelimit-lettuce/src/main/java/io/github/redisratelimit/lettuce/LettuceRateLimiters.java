package io.github.redisratelimit.lettuce;

import io.github.redisratelimit.AsyncRateLimiter;
import io.github.redisratelimit.RateLimiter;
import io.github.redisratelimit.RateLimiterOptions;
import io.github.redisratelimit.spi.Transport;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import java.util.Objects;

/**
 * The limiters over a Lettuce connection: a {@code StatefulRedisConnection} (standalone, Sentinel's
 * primary, or master-replica) or a {@code StatefulRedisClusterConnection}, of any codec. Blocking
 * ({@link RateLimiter}), asynchronous ({@link AsyncRateLimiter}) and reactive
 * ({@link ReactiveRateLimiter}) share one connection and never block its event loop.
 */
public final class LettuceRateLimiters {
    private LettuceRateLimiters() {
    }

    /**
     * The transport over a connection, for the limiters' constructors.
     *
     * @param connection the connection
     * @return its transport
     */
    public static Transport transport(StatefulRedisConnection<?, ?> connection) {
        return LettuceTransport.of(Objects.requireNonNull(connection, "connection"));
    }

    /**
     * The transport over a cluster connection: every call goes to its key's primary.
     *
     * @param connection the cluster connection
     * @return its transport
     */
    public static Transport transport(StatefulRedisClusterConnection<?, ?> connection) {
        return LettuceTransport.of(Objects.requireNonNull(connection, "connection"));
    }

    /**
     * A blocking limiter over a connection.
     *
     * @param connection the connection
     * @return the limiter
     */
    public static RateLimiter create(StatefulRedisConnection<?, ?> connection) {
        return new RateLimiter(transport(connection));
    }

    /**
     * A blocking limiter over a cluster connection.
     *
     * @param connection the cluster connection
     * @return the limiter
     */
    public static RateLimiter create(StatefulRedisClusterConnection<?, ?> connection) {
        return new RateLimiter(transport(connection));
    }

    /**
     * An asynchronous limiter over a connection.
     *
     * @param connection the connection
     * @param options how it finds its backend and bounds its own calls
     * @return the limiter
     */
    public static AsyncRateLimiter async(StatefulRedisConnection<?, ?> connection, RateLimiterOptions options) {
        return new AsyncRateLimiter(transport(connection), options);
    }

    /**
     * An asynchronous limiter over a cluster connection.
     *
     * @param connection the cluster connection
     * @param options how it finds its backend and bounds its own calls
     * @return the limiter
     */
    public static AsyncRateLimiter async(StatefulRedisClusterConnection<?, ?> connection, RateLimiterOptions options) {
        return new AsyncRateLimiter(transport(connection), options);
    }

    /**
     * A reactive limiter over a connection.
     *
     * @param connection the connection
     * @return the limiter
     */
    public static ReactiveRateLimiter reactive(StatefulRedisConnection<?, ?> connection) {
        return new ReactiveRateLimiter(new AsyncRateLimiter(transport(connection)));
    }

    /**
     * A reactive limiter over a cluster connection.
     *
     * @param connection the cluster connection
     * @return the limiter
     */
    public static ReactiveRateLimiter reactive(StatefulRedisClusterConnection<?, ?> connection) {
        return new ReactiveRateLimiter(new AsyncRateLimiter(transport(connection)));
    }
}

package io.github.redisratelimit.gateway;

import io.github.redisratelimit.lettuce.LettuceRateLimiters;
import io.github.redisratelimit.spi.Transport;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.cluster.api.async.RedisAdvancedClusterAsyncCommands;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.data.redis.connection.RedisConnection;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import reactor.core.scheduler.Schedulers;

/**
 * The limiter's transport over the application context's Lettuce connection (standalone, Sentinel,
 * master/replica or Cluster, with its TLS and credentials), opened at the first call, off the event
 * loop: a Redis that is down at start-up does not stop the gateway, whose limiter fails open until
 * it is back (and opens the connection again at the next call).
 */
final class ContextTransport implements Transport, DisposableBean {
    private final LettuceConnectionFactory factory;
    private CompletableFuture<Transport> opened;
    private RedisConnection connection;

    ContextTransport(LettuceConnectionFactory factory) {
        this.factory = factory;
    }

    /** The transport, opened once; a failed opening is tried again by the next call. */
    private synchronized CompletableFuture<Transport> transport() {
        if (opened == null || opened.isCompletedExceptionally()) {
            opened = CompletableFuture.supplyAsync(this::open, task -> Schedulers.boundedElastic().schedule(task));
        }
        return opened;
    }

    // Spring Data Redis hands out the native Lettuce commands (of the shared connection, by
    // default) behind its own connection; getStatefulConnection is their way back to the connection
    // (deprecated in Lettuce 6.x, the line Spring Boot 4.0 manages, with no replacement there).
    @SuppressWarnings({ "unchecked", "deprecation" })
    private Transport open() {
        if (factory.isClusterAware()) {
            RedisConnection cluster = factory.getClusterConnection();
            keep(cluster);
            var commands = (RedisAdvancedClusterAsyncCommands<byte[], byte[]>) cluster.getNativeConnection();
            return LettuceRateLimiters.transport(commands.getStatefulConnection());
        }
        RedisConnection single = factory.getConnection();
        keep(single);
        var commands = (RedisAsyncCommands<byte[], byte[]>) single.getNativeConnection();
        return LettuceRateLimiters.transport(commands.getStatefulConnection());
    }

    private synchronized void keep(RedisConnection connection) {
        this.connection = connection;
    }

    @Override
    public CompletionStage<Object> send(int keyPos, List<String> args) {
        return transport().thenCompose(t -> t.send(keyPos, args));
    }

    @Override
    public CompletionStage<Void> eachPrimary(Function<Transport, CompletionStage<Void>> fn) {
        return transport().thenCompose(t -> t.eachPrimary(fn));
    }

    @Override
    public boolean cluster() {
        return factory.isClusterAware();
    }

    /** Closes the connection held (a shared native connection stays the factory's to close). */
    @Override
    public synchronized void destroy() {
        if (connection != null) {
            connection.close();
        }
    }
}

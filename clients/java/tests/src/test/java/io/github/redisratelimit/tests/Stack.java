package io.github.redisratelimit.tests;

import io.github.redisratelimit.AsyncRateLimiter;
import io.github.redisratelimit.Backend;
import io.github.redisratelimit.RateLimiter;
import io.github.redisratelimit.jedis.JedisRateLimiters;
import io.github.redisratelimit.lettuce.LettuceRateLimiters;
import io.github.redisratelimit.lettuce.ReactiveRateLimiter;
import io.github.redisratelimit.spi.Transport;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.codec.ByteArrayCodec;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.UnifiedJedis;

/**
 * What a test runs on: a Redis client (an adapter), a backend, standalone or a cluster. The
 * servers and clients are made once for the test JVM, on first use, and stopped when it exits.
 */
enum Stack {
    LETTUCE_MODULE(Backend.MODULE, false, true),
    LETTUCE_LIBRARY(Backend.LIBRARY, false, true),
    LETTUCE_CLUSTER_MODULE(Backend.MODULE, true, true),
    LETTUCE_CLUSTER_LIBRARY(Backend.LIBRARY, true, true),
    JEDIS_MODULE(Backend.MODULE, false, false),
    JEDIS_LIBRARY(Backend.LIBRARY, false, false),
    JEDIS_CLUSTER_MODULE(Backend.MODULE, true, false),
    JEDIS_CLUSTER_LIBRARY(Backend.LIBRARY, true, false);

    final Backend backend;
    final boolean cluster;
    final boolean lettuce;

    Stack(Backend backend, boolean cluster, boolean lettuce) {
        this.backend = backend;
        this.cluster = cluster;
        this.lettuce = lettuce;
    }

    /** The servers: one standalone server, or a two-node cluster, per backend. */
    private static final Map<Backend, List<Server>> STANDALONE = new EnumMap<>(Backend.class);
    private static final Map<Backend, List<Server>> CLUSTERS = new EnumMap<>(Backend.class);

    static synchronized List<Server> servers(Backend backend, boolean cluster) {
        Map<Backend, List<Server>> made = cluster ? CLUSTERS : STANDALONE;
        return made.computeIfAbsent(backend, b -> {
            List<Server> nodes = new ArrayList<>();
            for (int i = 0; i < (cluster ? 2 : 1); i++) {
                nodes.add(Server.start(b == Backend.MODULE, cluster));
            }
            if (cluster) {
                try {
                    Server.formCluster(nodes);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException(e);
                }
            }
            return nodes;
        });
    }

    List<Server> servers() {
        return servers(backend, cluster);
    }

    private Transport transport;
    private AsyncRateLimiter async;
    private UnifiedJedis raw;

    /** The adapter's transport over this stack's client (made once). */
    synchronized Transport transport() {
        if (transport == null) {
            int port = servers().get(0).port;
            RedisURI uri = RedisURI.create("127.0.0.1", port);
            if (lettuce && cluster) {
                RedisClusterClient client = RedisClusterClient.create(uri);
                closeAtExit(client::shutdown);
                // A connection of another codec than String: the adapter carries its own.
                StatefulRedisClusterConnection<byte[], byte[]> c = client.connect(ByteArrayCodec.INSTANCE);
                transport = LettuceRateLimiters.transport(c);
            } else if (lettuce) {
                RedisClient client = RedisClient.create(uri);
                closeAtExit(client::shutdown);
                StatefulRedisConnection<String, String> c = client.connect();
                transport = LettuceRateLimiters.transport(c);
            } else {
                transport = JedisRateLimiters.transport(jedis());
            }
        }
        return transport;
    }

    /** The asynchronous limiter over this stack's client (made once). */
    synchronized AsyncRateLimiter async() {
        if (async == null) {
            async = new AsyncRateLimiter(transport());
        }
        return async;
    }

    RateLimiter limiter() {
        return new RateLimiter(async());
    }

    /** The reactive limiter. */
    ReactiveRateLimiter reactive() {
        return new ReactiveRateLimiter(async());
    }

    /** A Jedis client of this stack's servers, for the tests' own looks at the keys. */
    synchronized UnifiedJedis raw() {
        if (raw == null) {
            raw = jedis();
        }
        return raw;
    }

    private UnifiedJedis jedis() {
        int port = servers().get(0).port;
        UnifiedJedis jedis = cluster ? new JedisCluster(new HostAndPort("127.0.0.1", port)) : new JedisPooled("127.0.0.1", port);
        closeAtExit(jedis::close);
        return jedis;
    }

    private static void closeAtExit(Runnable close) {
        Runtime.getRuntime().addShutdownHook(new Thread(close));
    }

    static Stream<Stack> all() {
        return Stream.of(values());
    }

    static Stream<Stack> lettuce() {
        return all().filter(s -> s.lettuce);
    }
}

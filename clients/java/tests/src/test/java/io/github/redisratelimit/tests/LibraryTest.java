package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redisratelimit.Backend;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.LibraryNotLoadedException;
import io.github.redisratelimit.RateLimiter;
import io.github.redisratelimit.RateLimiterOptions;
import io.github.redisratelimit.jedis.JedisRateLimiters;
import io.github.redisratelimit.lettuce.LettuceRateLimiters;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPooled;

/** On a server without the module: the library loaded when missing, or expected when told, and loaded again when lost. */
class LibraryTest {
    private interface Made extends AutoCloseable {
        RateLimiter limiter(RateLimiterOptions options);

        @Override
        void close();
    }

    private static Made client(String adapter, int port) {
        if (adapter.equals("lettuce")) {
            RedisClient client = RedisClient.create(RedisURI.create("127.0.0.1", port));
            StatefulRedisConnection<String, String> c = client.connect();
            return new Made() {
                public RateLimiter limiter(RateLimiterOptions options) {
                    return new RateLimiter(LettuceRateLimiters.async(c, options));
                }

                public void close() {
                    client.shutdown();
                }
            };
        }
        JedisPooled jedis = new JedisPooled("127.0.0.1", port);
        return new Made() {
            public RateLimiter limiter(RateLimiterOptions options) {
                return JedisRateLimiters.create(jedis, options);
            }

            public void close() {
                jedis.close();
            }
        };
    }

    @ParameterizedTest
    @ValueSource(strings = {"lettuce", "jedis"})
    void theLibraryIsLoadedWhenMissing(String adapter) {
        try (Server server = Server.start(false, false); Made made = client(adapter, server.port); Jedis j = server.jedis()) {
            RateLimiter expecting = made.limiter(RateLimiterOptions.DEFAULT.withoutLibraryLoad());
            assertThrows(LibraryNotLoadedException.class, () -> expecting.hit("k", Fixed.of(1, Duration.ofMinutes(1))));
            assertThrows(LibraryNotLoadedException.class, expecting::backend, "a failed search is made again, and fails again");
            assertTrue(j.functionList().isEmpty(), "nothing loaded");

            RateLimiter loading = made.limiter(RateLimiterOptions.DEFAULT);
            assertEquals(1, loading.hit("k", Fixed.of(5, Duration.ofMinutes(1))).count());
            assertEquals(Backend.LIBRARY, loading.backend());
            assertEquals(Backend.LIBRARY, expecting.backend(), "found now that it is loaded");
            j.functionFlush();
            assertEquals(2, loading.hit("k", Fixed.of(5, Duration.ofMinutes(1))).count(), "loaded again when lost");
            assertEquals(1, j.functionList().size());
        }
    }
}

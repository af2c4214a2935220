package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redisratelimit.Backend;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.Library;
import io.github.redisratelimit.RateLimiter;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.util.JedisClusterCRC16;

/** In a cluster: every call goes straight to its key's primary, and the library is on every one. */
class ClusterTest {
    static Stream<Stack> clusters() {
        return Stack.all().filter(s -> s.cluster);
    }

    @ParameterizedTest
    @MethodSource("clusters")
    void callsGoStraightToTheKeysPrimary(Stack stack) {
        RateLimiter rl = stack.limiter();
        rl.backend();
        List<Server> nodes = stack.servers();
        for (Server node : nodes) {
            try (Jedis j = node.jedis()) {
                j.configResetStat();
            }
        }
        int[] keysOn = new int[nodes.size()];
        for (int i = 0; i < 60; i++) {
            String key = "java:cluster:" + UUID.randomUUID();
            assertTrue(rl.hit(key, Fixed.of(5, Duration.ofMinutes(1))).allowed());
            // Server.formCluster gives each node an even share of the slots, in order.
            int owner = JedisClusterCRC16.getSlot(key) / (16384 / nodes.size());
            try (Jedis j = nodes.get(owner).jedis()) {
                assertTrue(j.exists(key), "the key on its slot's primary");
                keysOn[owner]++;
            }
        }
        for (int n = 0; n < nodes.size(); n++) {
            assertTrue(keysOn[n] > 0, "keys on every node: " + java.util.Arrays.toString(keysOn));
            try (Jedis j = nodes.get(n).jedis()) {
                String errors = j.info("errorstats");
                assertFalse(errors.contains("errorstat_MOVED") || errors.contains("errorstat_ASK"),
                        "no redirect on node " + n + ": " + errors);
            }
        }
        if (stack.backend == Backend.LIBRARY) {
            for (Server node : nodes) {
                try (Jedis j = node.jedis()) {
                    assertEquals(1, j.functionList(Library.NAME).size(), "the library on every primary");
                }
            }
        }
    }
}

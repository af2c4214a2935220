package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.Rate;
import io.github.redisratelimit.RateLimiter;
import io.github.redisratelimit.lettuce.LettuceRateLimiters;
import io.lettuce.core.ReadFrom;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.masterreplica.MasterReplica;
import io.lettuce.core.masterreplica.StatefulRedisMasterReplicaConnection;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import redis.clients.jedis.Jedis;

/**
 * A primary and its replica, through Lettuce's master/replica connection told to read from the
 * replica: every call still goes to the primary (a replica would refuse the writes), and the
 * replica gets the keys with their expiry, on the module and on the library.
 */
class ReplicaTest {
    @ParameterizedTest
    @ValueSource(booleans = { true, false })
    void callsGoToThePrimaryAndReachTheReplica(boolean module) throws InterruptedException {
        try (Server primary = Server.start(module, false); Server replica = Server.start(module, false)) {
            try (Jedis p = primary.jedis(); Jedis r = replica.jedis()) {
                // The primary's full sync starts at once (by default it waits 5 s for more replicas).
                p.configSet("repl-diskless-sync-delay", "0");
                r.replicaof("127.0.0.1", primary.port);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (!r.info("replication").contains("master_link_status:up")) {
                    assertTrue(System.nanoTime() < deadline, "the replica did not link up");
                    Thread.sleep(20);
                }
            }
            RedisClient client = RedisClient.create();
            try (StatefulRedisMasterReplicaConnection<String, String> connection =
                    MasterReplica.connect(client, StringCodec.UTF8, RedisURI.create("127.0.0.1", primary.port))) {
                connection.setReadFrom(ReadFrom.REPLICA);
                RateLimiter rl = LettuceRateLimiters.create(connection);
                Fixed perMinute = Fixed.of(2, Duration.ofMinutes(1));
                assertTrue(rl.hit("rl:{u}", perMinute).allowed());
                assertTrue(rl.hit("rl:{u}", perMinute).allowed());
                Decision third = rl.hit("rl:{u}", perMinute);
                assertFalse(third.allowed());
                assertEquals(0, rl.peek("rl:{u}", 2, 1).remaining());
                // Refilled at boundaries 100 days apart: the key lives to the next one, whatever the test's pace.
                assertTrue(rl.gcra("rl:{g}", Rate.of(4, 1, Duration.ofDays(100)).aligned()).allowed());
            } finally {
                client.shutdown();
            }
            try (Jedis p = primary.jedis(); Jedis r = replica.jedis()) {
                // Every write so far on the replica (WAIT here would wait for this connection's
                // writes alone: none).
                long written = offset(p.info("replication"), "master_repl_offset");
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (offset(r.info("replication"), "slave_repl_offset") < written) {
                    assertTrue(System.nanoTime() < deadline, "the replica did not catch up");
                    Thread.sleep(10);
                }
                assertEquals("2", r.get("rl:{u}"));
                assertTrue(r.pttl("rl:{u}") > 0 && r.pttl("rl:{u}") <= 60_000, "the expiry reached the replica");
                assertTrue(r.pttl("rl:{g}") > 0);
                String calls = r.info("commandstats");
                assertFalse(calls.contains("cmdstat_ratelimit") || calls.contains("cmdstat_fcall"),
                        "no call reached the replica: " + calls);
            }
        }
    }

    private static long offset(String info, String field) {
        return info.lines().filter(l -> l.startsWith(field + ":")).mapToLong(l -> Long.parseLong(l.split(":")[1].trim()))
                .findFirst().orElse(-1);
    }
}

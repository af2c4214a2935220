package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.NotReplicatedException;
import io.github.redisratelimit.Rate;
import io.github.redisratelimit.RateLimiter;
import io.github.redisratelimit.RateLimiterOptions;
import io.github.redisratelimit.Reservation;
import io.github.redisratelimit.jedis.JedisRateLimiters;
import io.github.redisratelimit.lettuce.LettuceRateLimiters;
import io.lettuce.core.ReadFrom;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.masterreplica.MasterReplica;
import io.lettuce.core.masterreplica.StatefulRedisMasterReplicaConnection;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPooled;

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
            link(primary, replica);
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

    @ParameterizedTest
    @ValueSource(booleans = { true, false })
    void writesWaitForTheReplicas(boolean lettuce) throws InterruptedException {
        try (Server primary = Server.start(true, false); Server replica = Server.start(true, false)) {
            link(primary, replica);
            RedisClient client = RedisClient.create();
            try (StatefulRedisConnection<String, String> connection = client.connect(RedisURI.create("127.0.0.1", primary.port));
                    JedisPooled pooled = new JedisPooled("127.0.0.1", primary.port)) {
                RateLimiterOptions one = RateLimiterOptions.DEFAULT.waitingForReplicas(1, Duration.ofSeconds(5));
                RateLimiter rl = lettuce ? LettuceRateLimiters.create(connection) : JedisRateLimiters.create(pooled);
                RateLimiter waiting = new RateLimiter(lettuce ? LettuceRateLimiters.async(connection, one)
                        : JedisRateLimiters.async(pooled, one));
                Fixed perMinute = Fixed.of(5, Duration.ofMinutes(1));
                assertTrue(waiting.hit("rl:{w}", perMinute).allowed(), "one replica acknowledges");
                Reservation r = waiting.reserveHit("rl:{w}", perMinute.withCost(2));
                assertEquals(-1, waiting.settle(r, 1).applied());
                // Two wanted, one there: the call is made, and its answer comes with the error.
                NotReplicatedException short1 = assertThrows(NotReplicatedException.class,
                        () -> rl.waitingForReplicas(2, Duration.ofMillis(50)).hit("rl:{w}", perMinute));
                assertEquals(List.of(1L, 2), List.of(short1.acknowledged(), short1.wanted()));
                assertEquals(3, ((Decision) short1.answer()).count());
                // PEEK writes nothing, so it waits for nothing.
                assertEquals(3, rl.waitingForReplicas(2, Duration.ofMillis(50)).peek("rl:{w}", 5, 1).count());
            } finally {
                client.shutdown();
            }
        }
    }

    /** Makes {@code replica} the primary's, and waits until both see the link up. */
    private static void link(Server primary, Server replica) throws InterruptedException {
        try (Jedis p = primary.jedis(); Jedis r = replica.jedis()) {
            // The primary's full sync starts at once (by default it waits 5 s for more replicas).
            p.configSet("repl-diskless-sync-delay", "0");
            r.replicaof("127.0.0.1", primary.port);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!p.info("replication").contains("connected_slaves:1")
                    || !r.info("replication").contains("master_link_status:up")) {
                assertTrue(System.nanoTime() < deadline, "the replica did not link up");
                Thread.sleep(20);
            }
        }
    }

    private static long offset(String info, String field) {
        return info.lines().filter(l -> l.startsWith(field + ":")).mapToLong(l -> Long.parseLong(l.split(":")[1].trim()))
                .findFirst().orElse(-1);
    }
}

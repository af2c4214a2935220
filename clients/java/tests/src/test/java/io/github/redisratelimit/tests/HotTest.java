package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.HotLimit;
import io.github.redisratelimit.HotOptions;
import io.github.redisratelimit.InvalidArgumentException;
import io.github.redisratelimit.RateLimiter;
import io.github.redisratelimit.ServerErrorException;
import io.github.redisratelimit.jedis.JedisRateLimiters;
import io.github.redisratelimit.lettuce.LettuceRateLimiters;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPooled;

/**
 * Processes on loopback share one limit through hot limits (each its own client and
 * connections, over Lettuce and Jedis), on the module and on the library. Never over: in no
 * window do the admissions certainly in it pass the limit. Demand at 2x: each whole window where
 * the processes asked 1.2x the limit or more admits 99% of it or more. Demand at 0.5x: every take
 * admitted (only the server's "none left" denies one). The Go, Python and Node clients run the
 * same test.
 */
@Timeout(120) // a take that never returns fails the test, not the build
class HotTest {
    private static final int PROCESSES = 4;
    private static final int TAKERS = 2;
    private static final long LIMIT = 1000;
    private static final long WINDOW_NS = TimeUnit.SECONDS.toNanos(1);

    /**
     * What the processes asked and admitted in each window (ALIGNed windows of the server, whose
     * clock is this machine's): an admission is certain in a window when its take began and
     * returned in it, else it is counted apart, in both (it may belong to either).
     */
    private static final class Run {
        final Map<Long, Long> asked = new TreeMap<>();
        final Map<Long, Long> admitted = new TreeMap<>();
        final Map<Long, Long> straddling = new TreeMap<>();
        long straddled;
        final List<Throwable> errors = new ArrayList<>();

        synchronized void record(long before, long after, boolean ok) {
            long w = before / WINDOW_NS;
            asked.merge(w, 1L, Long::sum);
            if (!ok) {
                return;
            }
            if (w == after / WINDOW_NS) {
                admitted.merge(w, 1L, Long::sum);
            } else {
                straddling.merge(w, 1L, Long::sum);
                straddling.merge(after / WINDOW_NS, 1L, Long::sum);
                straddled++;
            }
        }

        long admitted(long w) {
            return admitted.getOrDefault(w, 0L);
        }

        long straddling(long w) {
            return straddling.getOrDefault(w, 0L);
        }
    }

    /** The wall clock in ns, as the server reads it. */
    private static long wallNanos() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    /**
     * {@link #PROCESSES} limiters (half over Lettuce, half over Jedis) share the limit on key,
     * each take of 1 paced to {@code rate} a second in all, for {@code runFor}; then each process
     * closes its share.
     */
    private static Run run(Server server, String key, double rate, Duration runFor) throws InterruptedException {
        Run run = new Run();
        long stop = System.nanoTime() + runFor.toNanos();
        long interval = (long) (1e9 * PROCESSES * TAKERS / rate);
        List<RedisClient> lettuce = new ArrayList<>();
        List<JedisPooled> jedis = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        List<HotLimit> hots = new ArrayList<>();
        try {
            for (int p = 0; p < PROCESSES; p++) {
                RateLimiter rl;
                if (p % 2 == 0) {
                    RedisClient client = RedisClient.create(RedisURI.create("127.0.0.1", server.port));
                    lettuce.add(client);
                    rl = LettuceRateLimiters.create(client.connect());
                } else {
                    JedisPooled pooled = new JedisPooled("127.0.0.1", server.port);
                    jedis.add(pooled);
                    rl = JedisRateLimiters.create(pooled);
                }
                HotLimit hot = rl.hot(key, Fixed.of(LIMIT, Duration.ofSeconds(1)).aligned());
                hots.add(hot);
                for (int t = 0; t < TAKERS; t++) {
                    Thread taker = new Thread(() -> {
                        try {
                            for (long next = System.nanoTime(); ; next += interval) {
                                LockSupport.parkNanos(next - System.nanoTime());
                                if (System.nanoTime() > stop) {
                                    return;
                                }
                                long before = wallNanos();
                                boolean ok = hot.take();
                                run.record(before, wallNanos(), ok);
                            }
                        } catch (Throwable e) {
                            synchronized (run) {
                                run.errors.add(e);
                            }
                        }
                    });
                    taker.start();
                    threads.add(taker);
                }
            }
            for (Thread t : threads) {
                t.join();
            }
        } finally {
            for (HotLimit hot : hots) {
                hot.close();
            }
            lettuce.forEach(RedisClient::shutdown);
            jedis.forEach(JedisPooled::close);
        }
        assertEquals(List.of(), run.errors);
        return run;
    }

    @ParameterizedTest
    @ValueSource(booleans = { true, false })
    void aFleetNeverGoesOverAndUsesTheLimit(boolean module) throws InterruptedException {
        try (Server server = Server.start(module, false)) {
            Run over = run(server, "hot:over", 2 * LIMIT, Duration.ofMillis(3500));
            List<Long> windows = new ArrayList<>(over.asked.keySet());
            int checked = 0;
            for (long w : windows) {
                assertTrue(over.admitted(w) <= LIMIT, "window " + w + ": " + over.admitted(w) + " admitted");
                boolean whole = w > windows.get(0) && over.asked.containsKey(w - 1) && over.asked.containsKey(w + 1);
                if (whole && over.asked.get(w) >= 1.2 * LIMIT) {
                    checked++;
                    long got = over.admitted(w) + over.straddling(w);
                    assertTrue(got >= 0.99 * LIMIT, "window " + w + ": " + got + " admitted, asked " + over.asked.get(w));
                }
            }
            assertTrue(checked > 0, "no whole window at 2x: " + over.asked);
            System.out.printf("2x the limit: asked %s, admitted %s, straddling %s%n", over.asked, over.admitted,
                    over.straddling);

            Run under = run(server, "hot:under", 0.5 * LIMIT, Duration.ofMillis(2500));
            // Closed, the processes gave back what they held: the running window counts what was
            // admitted in it (read while it still runs).
            long last = ((TreeMap<Long, Long>) under.asked).lastKey();
            try (Jedis j = server.jedis()) {
                String count = j.get("hot:under");
                if (wallNanos() / WINDOW_NS == last) {
                    long n = Long.parseLong(count);
                    assertTrue(n >= under.admitted(last) && n <= under.admitted(last) + under.straddling(last),
                            "the window counts " + n + " after close; admitted in it " + under.admitted(last));
                }
            }
            long asked = under.asked.values().stream().mapToLong(Long::longValue).sum();
            long admitted = under.admitted.values().stream().mapToLong(Long::longValue).sum() + under.straddled;
            assertEquals(asked, admitted, "0.5x the limit: " + admitted + " of " + asked + " admitted");
        }
    }

    @Test
    void withRedisGoneHeldTokensStayUsableThenTheErrorOrFailOpen() throws InterruptedException {
        Server server = Server.start(true, false);
        // Jedis: a refused connection fails the request at once (Lettuce would queue it to
        // reconnect, up to the limiter's background timeout).
        JedisPooled jedis = new JedisPooled("127.0.0.1", server.port);
        try {
            RateLimiter rl = JedisRateLimiters.create(jedis);
            Fixed perMinute = Fixed.of(1000, Duration.ofMinutes(1));
            assertThrows(InvalidArgumentException.class, () -> rl.hot("k", Fixed.of(0, Duration.ofMinutes(1))));
            HotLimit held = rl.hot("hot:d", perMinute);
            HotLimit closed = rl.hot("hot:c", perMinute);
            HotLimit open = rl.hot("hot:o", perMinute, HotOptions.DEFAULT.failingOpen());
            for (int i = 0; i < 20; i++) { // a demand to measure (over 10 ms), then a block ahead of it
                assertTrue(held.take());
                Thread.sleep(2);
            }
            Thread.sleep(100);
            server.close();
            assertTrue(held.take(), "with a block held");
            RuntimeException down = assertThrows(RuntimeException.class, closed::take, "none held, closed");
            assertFalse(down instanceof ServerErrorException || down instanceof IllegalStateException, down.toString());
            assertTrue(open.take(), "none held, FailOpen");
            closed.close();
            assertThrows(IllegalStateException.class, closed::take);
            assertFalse(Thread.currentThread().isInterrupted());
        } finally {
            jedis.close();
            server.close();
        }
    }
}

package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import io.github.redisratelimit.Adaptive;
import io.github.redisratelimit.AdaptiveLimit;
import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Learned;
import io.github.redisratelimit.ProviderAnswer;
import io.github.redisratelimit.RateLimitedException;
import io.github.redisratelimit.RateLimiter;
import io.github.redisratelimit.Report;
import io.github.redisratelimit.Reservation;
import io.github.redisratelimit.Settlement;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.resps.Slowlog;

/** The adaptive limit on a real server (the module and the library), and around real HTTP calls. */
class AdaptiveTest {
    private static final Adaptive TERMS = new Adaptive(6, 60, 600, Duration.ofMinutes(1));

    private static String key(String name) {
        return "java:{" + UUID.randomUUID() + "}:" + name;
    }

    @ParameterizedTest
    @MethodSource("io.github.redisratelimit.tests.Stack#all")
    void theCallersLearnOneLimit(Stack stack) {
        RateLimiter rl = stack.limiter();
        String k = key("llm");
        int admitted = 0;
        for (int i = 0; i < 20; i++) {
            admitted += rl.adapt(k, TERMS, 1).allowed() ? 1 : 0;
        }
        assertEquals(10, admitted, "a sixth of 60 at once");
        Report throttled = Report.throttle().withRetryAfter(Duration.ofSeconds(20));
        Learned first = rl.report(k, throttled).orElseThrow();
        assertEquals(42, first.limit());
        assertTrue(first.decreased());
        assertTrue(first.hold().toMillis() > 19_900 && first.hold().toMillis() <= 20_000, first.hold().toString());
        Learned again = rl.report(k, Report.throttle()).orElseThrow();
        assertFalse(again.decreased(), "one cut per epoch");
        Decision held = rl.adapt(k, TERMS, 1);
        assertFalse(held.allowed());
        assertTrue(held.retryAfter().toMillis() > 19_900);
        assertEquals(30, rl.report(k, Report.ok().withLimit(30)).orElseThrow().limit(), "a stated limit caps it");
        assertEquals(Optional.empty(), rl.report(key("nobody"), Report.throttle()));
    }

    @ParameterizedTest
    @MethodSource("io.github.redisratelimit.tests.Stack#all")
    void anEstimateIsReservedAndSettledWithWhatWasUsed(Stack stack) {
        Adaptive tokens = new Adaptive(600, 6_000, 60_000, Duration.ofMinutes(1));
        AdaptiveLimit limit = new AdaptiveLimit(stack.limiter(), key("tokens"), tokens, true, Duration.ofMinutes(1));
        Reservation r = limit.reserve(1_000);
        assertTrue(r.decision().allowed() && r.token() != null && r.amount() == 1_000);
        assertEquals(0, r.decision().remaining());
        // 300 used: the 700 unused back in the fleet's bucket, once; a retry applies nothing again.
        Settlement s = limit.settle(r, 300);
        assertEquals(List.of(-700L, 6_000L, 60_000L), List.of(s.applied(), s.decision().limit(), s.decision().window().toMillis()));
        assertTrue(s.decision().remaining() >= 700);
        assertEquals(-700, limit.settle(r, 300).applied());
    }

    /** Every command logged from here on (below 0 µs: none), up to 4,096 of them, on each of the stack's servers. */
    private static void slowLogs(Stack stack, String slowerThanMicros) {
        for (Server server : stack.servers()) {
            try (Jedis j = server.jedis()) {
                j.configSet("slowlog-max-len", "4096", "slowlog-log-slower-than", slowerThanMicros);
                j.slowlogReset();
            }
        }
    }

    /** The calls of {@code name} (adapt, report) on {@code key} the stack's servers logged, oldest first. */
    private static List<String> logged(Stack stack, String name, String key) {
        List<String> found = new ArrayList<>();
        for (Server server : stack.servers()) {
            try (Jedis j = server.jedis()) {
                List<Slowlog> entries = new ArrayList<>(j.slowlogGet(4096));
                Collections.reverse(entries);
                for (Slowlog entry : entries) {
                    String command = String.join(" ", entry.getArgs());
                    String lower = command.toLowerCase(Locale.ROOT);
                    if ((lower.startsWith("ratelimit." + name) || lower.startsWith("fcall ratelimit_" + name)) && command.contains(key)) {
                        found.add(command);
                    }
                }
            }
        }
        return found;
    }

    @ParameterizedTest
    @MethodSource("io.github.redisratelimit.tests.Stack#all")
    void theWrapperReportsWhatTheCallAnswered(Stack stack) throws Exception {
        AtomicInteger calls = new AtomicInteger();
        HttpServer provider = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        provider.createContext("/", exchange -> {
            boolean over = calls.incrementAndGet() > 2;
            exchange.getResponseHeaders().add("x-ratelimit-limit-requests", "100");
            if (over) {
                exchange.getResponseHeaders().add("retry-after", "1");
            }
            exchange.sendResponseHeaders(over ? 429 : 200, -1);
            exchange.close();
        });
        provider.start();
        HttpClient http = HttpClient.newHttpClient(); // Java 17's is not AutoCloseable
        try {
            URI uri = URI.create("http://127.0.0.1:" + provider.getAddress().getPort() + "/v1/chat/completions");
            HttpRequest request = HttpRequest.newBuilder(uri).POST(HttpRequest.BodyPublishers.noBody()).build();
            String key = key("wrapped");
            AdaptiveLimit limit = new AdaptiveLimit(stack.limiter(), key, new Adaptive(1, 600, 1000, Duration.ofMinutes(1)));
            List<Integer> statuses = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                statuses.add(limit.call(1, Duration.ofSeconds(5), () -> http.send(request, HttpResponse.BodyHandlers.discarding())).statusCode());
            }
            assertEquals(List.of(200, 200, 429), statuses);
            // The provider stated 100: the limit came down to it, then the 429 cut it to 70 and held the fleet.
            Decision held = limit.decide(1);
            assertEquals(70, held.limit());
            assertFalse(held.allowed());
            assertThrows(RateLimitedException.class, () -> limit.call(1, Duration.ZERO, () -> http.send(request, HttpResponse.BodyHandlers.discarding())));
            // Waited out, then asked again at the turn the denial told: TURN (the servers' slow logs
            // keep every command's words). The core's call: one adapter's stacks, both backends.
            if (!stack.lettuce && !stack.cluster) {
                slowLogs(stack, "0");
                limit.call(1, Duration.ofSeconds(5), () -> http.send(request, HttpResponse.BodyHandlers.discarding()));
                List<String> asked = logged(stack, "adapt", key);
                List<String> reported = logged(stack, "report", key);
                slowLogs(stack, "10000");
                assertTrue(asked.size() >= 2 && !asked.get(0).endsWith(" TURN"), asked.toString());
                assertTrue(asked.subList(1, asked.size()).stream().allMatch(c -> c.endsWith(" TURN")), asked.toString());
                // Its answer reported with the call's age: the ms since it was admitted (AGE).
                assertTrue(reported.size() == 1 && reported.get(0).matches(".* AGE [1-9][0-9]*"), reported.toString());
            }
            assertEquals(Optional.of(Duration.ofSeconds(7)),
                    ProviderAnswer.read(429, Map.of("Retry-After", List.of("7")), Instant.now()).retryAfter());
        } finally {
            provider.stop(0);
        }
    }
}

package io.github.redisratelimit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.github.redisratelimit.command.AdaptiveCommands;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** A provider's answer read as every client reads it (testkit/conformance/provider_answers.json). */
class ProviderAnswerTest {
    static Stream<JsonNode> cases() throws IOException {
        List<JsonNode> all = new ArrayList<>();
        new ObjectMapper().readTree(Path.of("../../../testkit/conformance/provider_answers.json").toFile()).forEach(all::add);
        return all.stream();
    }

    private static Long ms(Optional<Duration> d) {
        return d.map(Duration::toMillis).orElse(null);
    }

    private static Long[] expected(JsonNode figures) {
        Long[] out = new Long[3];
        for (int i = 0; i < 3; i++) {
            out[i] = figures.get(i).isNull() ? null : figures.get(i).asLong();
        }
        return out;
    }

    @ParameterizedTest
    @MethodSource("cases")
    void readsAsEveryClientReadsIt(JsonNode c) {
        Map<String, List<String>> headers = new LinkedHashMap<>();
        c.get("headers").properties().forEach(e -> headers.put(e.getKey(), List.of(e.getValue().asText())));
        Instant now = Instant.parse(c.has("now") ? c.get("now").asText() : "2026-12-01T12:00:00Z");
        int status = c.get("status").isNull() ? 0 : c.get("status").asInt();
        ProviderAnswer a = ProviderAnswer.read(status, headers, now);
        String name = c.get("name").asText();
        assertEquals(c.get("throttled").asBoolean(), a.throttled(), name);
        assertEquals(c.get("retry_after_ms").isNull() ? null : c.get("retry_after_ms").asLong(), ms(a.retryAfter()), name);
        for (String measure : List.of("requests", "tokens")) {
            ProviderAnswer.Stated s = measure.equals("requests") ? a.requests() : a.tokens();
            Long[] got = {s.limit().isPresent() ? s.limit().getAsLong() : null,
                s.remaining().isPresent() ? s.remaining().getAsLong() : null, ms(s.resetAfter())};
            assertArrayEquals(expected(c.get(measure)), got, name + " " + measure);
        }
    }

    @Test
    void goDurations() {
        assertEquals(Optional.of(Duration.ofMillis(3_723_500)), ProviderAnswer.goDuration("1h2m3.5s"));
        assertEquals(Optional.of(Duration.ofNanos(250_000)), ProviderAnswer.goDuration("250us"));
        for (String junk : List.of("", "5", "1d", "-1s", "s", "1s2")) {
            assertEquals(Optional.empty(), ProviderAnswer.goDuration(junk), junk);
        }
    }

    @Test
    void badTermsAreRefusedBeforeARoundTrip() {
        Duration minute = Duration.ofMinutes(1);
        assertEquals("floor <= start <= ceiling must hold",
                assertThrows(InvalidArgumentException.class, () -> new Adaptive(10, 5, 100, minute)).getMessage());
        assertEquals("ceiling * window is too large",
                assertThrows(InvalidArgumentException.class, () -> new Adaptive(1, 1, 1L << 40, minute)).getMessage());
        assertEquals("syntax error: RETRY needs THROTTLED",
                assertThrows(InvalidArgumentException.class, () -> Report.ok().withRetryAfter(Duration.ofSeconds(1))).getMessage());
        assertEquals(List.of("1", "2", "3", "1500", "MS", "COST", "2"),
                AdaptiveCommands.adapt("k", new Adaptive(1, 2, 3, Duration.ofMillis(1500)), 2).args());
        assertEquals(List.of("THROTTLED", "RETRY", "1000", "LIMIT", "5", "REMAINING", "2", "RESET", "3"),
                AdaptiveCommands.report("k", Report.throttle().withRetryAfter(Duration.ofSeconds(1)).withLimit(5)
                        .withRemaining(2, Duration.ofMillis(3))).args());
    }
}

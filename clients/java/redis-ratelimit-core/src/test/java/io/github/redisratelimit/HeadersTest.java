package io.github.redisratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The headers, as the Python and Node packages write them for the same answers. */
class HeadersTest {
    private static final Duration MINUTE = Duration.ofMinutes(1);

    @Test
    void oneLimit() {
        Decision denied = new Decision(false, 5, 0, 5, Duration.ofMillis(30_200), Duration.ofMillis(30_200), MINUTE);
        assertEquals(Map.of("RateLimit-Policy", "\"default\";q=5;w=60", "RateLimit", "\"default\";r=0;t=31",
                "Retry-After", "31"), denied.headers("default"));
        Decision allowed = new Decision(true, 1, 4, 5, Duration.ofSeconds(60), Duration.ZERO, MINUTE);
        assertEquals(Map.of("RateLimit-Policy", "\"api\";q=5;w=60", "RateLimit", "\"api\";r=4;t=60"), allowed.headers("api"));
        // A calendar window names no length; a cost above the limit never admits: no Retry-After.
        Decision never = new Decision(false, 0, 5, 5, Duration.ZERO, Decision.FOREVER, Duration.ZERO);
        assertEquals(Map.of("RateLimit-Policy", "\"m\";q=5", "RateLimit", "\"m\";r=5;t=0"), never.headers("m"));
    }

    @Test
    void severalLimitsNameTheTightestOfThoseThatRefused() {
        Decision perSecond = new Decision(false, 1, 0, 1, Duration.ofMillis(400), Duration.ofMillis(400), Duration.ofSeconds(1));
        Decision perHour = new Decision(true, 10, 0, 10, Duration.ofMinutes(30), Duration.ZERO, Duration.ofHours(1));
        MultiDecision both = new MultiDecision(false, List.of(perSecond, perHour));
        assertEquals(Map.of("RateLimit-Policy", "\"s\";q=1;w=1, \"h\";q=10;w=3600", "RateLimit", "\"s\";r=0;t=1",
                "Retry-After", "1"), both.headers(List.of("s", "h")));
        assertThrows(IllegalArgumentException.class, () -> both.headers(List.of("s")));
    }
}

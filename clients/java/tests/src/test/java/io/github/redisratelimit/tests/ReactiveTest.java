package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.InvalidArgumentException;
import io.github.redisratelimit.lettuce.ReactiveRateLimiter;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import reactor.core.publisher.Mono;

/** The reactive limiter: sent when subscribed, errors as signals, permits released at the end. */
class ReactiveTest {
    @ParameterizedTest
    @MethodSource("io.github.redisratelimit.tests.Stack#lettuce")
    void monosSendWhenSubscribed(Stack stack) {
        ReactiveRateLimiter rl = stack.reactive();
        String key = "java:reactive:{" + UUID.randomUUID() + "}";
        Mono<Decision> hit = rl.hit(key, Fixed.of(2, Duration.ofMinutes(1)));
        assertFalse(stack.raw().exists(key), "nothing sent before a subscriber");
        assertEquals(1, hit.block().count());
        assertEquals(2, hit.block().count(), "each subscription is a call");
        // An invalid limit cannot be made; what the builder refuses is an error signal.
        assertThrows(InvalidArgumentException.class, () -> Fixed.of(0, Duration.ofMinutes(1)));
        Mono<Decision> refused = rl.peek(key, 2, 0);
        assertInstanceOf(InvalidArgumentException.class, assertThrows(RuntimeException.class, refused::block));

        String permits = key + ":permits";
        AtomicInteger ran = new AtomicInteger();
        String answer = rl.withPermit(permits, 1, Duration.ofSeconds(5), permit -> Mono.fromCallable(() -> {
            ran.incrementAndGet();
            return permit.acquisition().id();
        })).block();
        assertEquals(1, ran.get());
        assertTrue(answer != null && !answer.isEmpty());
        assertTrue(rl.acquire(permits, 1, Duration.ofSeconds(5), null).block().acquired(), "released at the end");
    }
}

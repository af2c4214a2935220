package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redisratelimit.Acquisition;
import io.github.redisratelimit.AllOptions;
import io.github.redisratelimit.AsyncRateLimiter;
import io.github.redisratelimit.Backend;
import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.Grant;
import io.github.redisratelimit.InvalidArgumentException;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.MultiDecision;
import io.github.redisratelimit.MultiReservation;
import io.github.redisratelimit.Permit;
import io.github.redisratelimit.PermitLostException;
import io.github.redisratelimit.PermitUnavailableException;
import io.github.redisratelimit.RateLimiter;
import io.github.redisratelimit.Rate;
import io.github.redisratelimit.Reservation;
import io.github.redisratelimit.ServerErrorException;
import io.github.redisratelimit.Settlement;
import io.github.redisratelimit.Sliding;
import io.github.redisratelimit.TopOptions;
import io.github.redisratelimit.spi.Transport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** Every call through every adapter, on the module and on the library, standalone and in a cluster. */
class ClientTest {
    private static final Duration MINUTE = Duration.ofMinutes(1);
    private static final Duration HOUR = Duration.ofHours(1);

    /** A key of this test's own (one hash tag: the test's keys share a slot). */
    private static String key(String name) {
        return "java:{" + UUID.randomUUID() + "}:" + name;
    }

    private static String tagged(String key, String name) {
        return key.substring(0, key.lastIndexOf(':') + 1) + name;
    }

    @ParameterizedTest
    @MethodSource("io.github.redisratelimit.tests.Stack#all")
    void fixedWindowsCountAndExpire(Stack stack) {
        RateLimiter rl = stack.limiter();
        assertEquals(stack.backend, rl.backend());
        String k = key("hit");
        for (int i = 1; i <= 3; i++) {
            Decision d = rl.hit(k, Fixed.of(3, MINUTE));
            assertTrue(d.allowed());
            assertEquals(i, d.count());
            assertEquals(3 - i, d.remaining());
            assertEquals(MINUTE, d.window());
        }
        Decision denied = rl.hit(k, Fixed.of(3, MINUTE));
        assertFalse(denied.allowed());
        assertEquals(3, denied.count(), "a denied hit does not count");
        assertTrue(denied.retryAfter().compareTo(Duration.ZERO) > 0 && denied.retryAfter().compareTo(MINUTE) <= 0);
        long ttl = stack.raw().pttl(k);
        assertTrue(ttl > 0 && ttl <= 60_000, "the counter expires: " + ttl);
        assertEquals("3", stack.raw().get(k));
        assertFalse(rl.peek(k, 3, 1).allowed());
        assertTrue(rl.peek(k, 4, 1).allowed());
        Decision given = rl.hit(k, Fixed.of(3, MINUTE).withCost(-2));
        assertEquals(1, given.count());
        Decision never = rl.hit(key("never"), Fixed.of(2, MINUTE).withCost(3));
        assertEquals(Decision.FOREVER, never.retryAfter());
        Decision monthly = rl.hit(key("month"), Fixed.of(5, io.github.redisratelimit.Calendar.MONTH).inZone("+01:00"));
        assertTrue(monthly.allowed());
        assertTrue(monthly.resetAfter().compareTo(Duration.ofDays(32)) < 0);
        Decision ms = rl.hit(key("ms"), Fixed.of(1, Duration.ofMillis(1500)).aligned());
        assertTrue(ms.resetAfter().compareTo(Duration.ofMillis(1500)) <= 0);
    }

    @ParameterizedTest
    @MethodSource("io.github.redisratelimit.tests.Stack#all")
    void slidingWindowsAndBuckets(Stack stack) {
        RateLimiter rl = stack.limiter();
        String s = key("slide");
        assertTrue(rl.slide(s, Sliding.of(2, MINUTE)).allowed());
        assertTrue(rl.slidePeek(s, Sliding.of(2, MINUTE)).allowed());
        assertEquals(1, rl.slidePeek(s, Sliding.of(2, MINUTE)).count(), "a peek counts nothing");
        assertTrue(rl.slide(s, Sliding.of(2, MINUTE)).allowed());
        Decision full = rl.slide(s, Sliding.of(2, MINUTE));
        assertFalse(full.allowed());
        assertTrue(full.retryAfter().compareTo(Duration.ZERO) > 0);
        String g = key("gcra");
        Rate rate = Rate.of(1, 1, MINUTE);
        assertTrue(rl.gcra(g, rate).allowed());
        Decision second = rl.gcra(g, rate);
        assertTrue(second.allowed());
        assertEquals(2, second.limit());
        assertEquals(0, second.remaining());
        Decision third = rl.gcra(g, rate);
        assertFalse(third.allowed());
        assertTrue(third.retryAfter().compareTo(MINUTE) <= 0 && third.retryAfter().compareTo(Duration.ZERO) > 0);
        Grant grant = rl.gcraUpTo(key("partial"), Rate.of(2, 1, MINUTE).withTokens(5));
        assertTrue(grant.decision().allowed());
        assertEquals(3, grant.granted());
        assertTrue(stack.raw().pttl(g) > 0);
    }

    @ParameterizedTest
    @MethodSource("io.github.redisratelimit.tests.Stack#all")
    void hitAllDecidesAllOrNothing(Stack stack) {
        RateLimiter rl = stack.limiter();
        String a = key("a");
        String b = tagged(a, "b");
        List<Limit> limits = List.of(Limit.of(a, 5, MINUTE), Limit.of(b, 1, Duration.ofMillis(30_500)));
        MultiDecision first = rl.hitAll(limits, AllOptions.DEFAULT);
        assertTrue(first.allowed());
        MultiDecision second = rl.hitAll(limits, AllOptions.DEFAULT);
        assertFalse(second.allowed());
        assertTrue(second.decisions().get(0).allowed(), "the first limit alone would admit it");
        assertFalse(second.decisions().get(1).allowed());
        assertEquals(second.decisions().get(1), second.tightest());
        assertEquals("1", stack.raw().get(a), "a denial counts on no limit");
        MultiDecision sliding = rl.hitAll(List.of(Limit.of(tagged(a, "s"), 2, MINUTE)), AllOptions.DEFAULT.slidingWindows());
        assertTrue(sliding.allowed());
        assertEquals(1, sliding.decisions().get(0).count());
    }

    @ParameterizedTest
    @MethodSource("io.github.redisratelimit.tests.Stack#all")
    void reservationsSettleAtMostOnce(Stack stack) {
        RateLimiter rl = stack.limiter();
        String k = key("tokens");
        Reservation r = rl.reserveHit(k, Fixed.of(100, MINUTE).withCost(10));
        assertTrue(r.decision().allowed());
        assertEquals(10, r.amount());
        Settlement s = rl.settle(r, 4);
        assertEquals(-6, s.applied());
        assertEquals(4, s.decision().count());
        Settlement again = rl.settle(r, 50);
        assertEquals(-6, again.applied(), "a retry answers what the first applied");
        assertEquals(4, again.decision().count(), "and changes nothing");
        Reservation slid = rl.reserveSlide(key("slid"), Sliding.of(100, MINUTE).withCost(10));
        assertEquals(2, rl.settle(slid, 12).applied());
        Reservation bucket = rl.reserveGcra(key("bucket"), Rate.of(99, 100, MINUTE).withTokens(10));
        assertEquals(-10, rl.settle(bucket, 0).applied());
        String block = key("block");
        rl.hit(block, Fixed.of(100, HOUR).withCost(45));
        Reservation upTo = rl.reserveHitUpTo(block, Fixed.of(100, HOUR).withCost(70));
        assertEquals(List.of(true, 55L, 100L), List.of(upTo.decision().allowed(), upTo.amount(), upTo.decision().count()));
        assertEquals(-5, rl.settle(upTo, 50).applied(), "what was granted, not the cost asked");
        Reservation none = rl.reserveHitUpTo(block, Fixed.of(95, HOUR).withCost(70));
        assertEquals(List.of(false, 0L), List.of(none.decision().allowed(), none.amount()));
        assertNull(none.token());
        assertThrows(InvalidArgumentException.class, () -> rl.reserveHitUpTo(block, Fixed.of(95, HOUR).withCost(-1)));
        // A sliding window of 10^12 ms: the previous one weighs nothing, the estimate is the count.
        String sliding = key("slidingBlock");
        Sliding room = Sliding.of(100, Duration.ofMillis(1_000_000_000_000L)).withCost(70);
        Reservation first = rl.reserveSlideUpTo(sliding, room);
        Reservation rest = rl.reserveSlideUpTo(sliding, room);
        assertEquals(List.of(70L, 70L, 30L, 100L),
                List.of(first.amount(), first.decision().count(), rest.amount(), rest.decision().count()));
        assertEquals(-20, rl.settle(rest, 10).applied());
        Reservation noRoom = rl.reserveSlideUpTo(sliding, Sliding.of(80, Duration.ofMillis(1_000_000_000_000L)).withCost(70));
        assertEquals(List.of(false, 0L), List.of(noRoom.decision().allowed(), noRoom.amount()));
        assertThrows(InvalidArgumentException.class, () -> rl.reserveSlideUpTo(sliding, room.withCost(-1)));
        // Every limiter's five calls: decide, decide up to, reserve, reserve up to, give back.
        String fixedUpTo = key("fixedUpTo");
        Grant hitGrant = rl.hitUpTo(fixedUpTo, Fixed.of(10, MINUTE).withCost(12));
        assertEquals(List.of(10L, 10L), List.of(hitGrant.granted(), hitGrant.decision().count()));
        assertEquals(6, rl.refundHit(fixedUpTo, Fixed.of(10, MINUTE), 4).count());
        String slideUpTo = key("slideUpTo");
        Grant slideGrant = rl.slideUpTo(slideUpTo, Sliding.of(10, MINUTE).withCost(12));
        assertEquals(List.of(10L, 10L), List.of(slideGrant.granted(), slideGrant.decision().count()));
        assertEquals(7, rl.refundSlide(slideUpTo, Sliding.of(10, MINUTE), 3).count());
        String gcraUpTo = key("gcraUpTo");
        Rate small = Rate.of(2, 1, MINUTE).withTokens(5);
        Reservation gcraBlock = rl.reserveGcraUpTo(gcraUpTo, small);
        assertEquals(List.of(true, 3L), List.of(gcraBlock.decision().allowed(), gcraBlock.amount()));
        assertEquals(2, rl.refundGcra(gcraUpTo, small, 2).remaining());
        assertThrows(InvalidArgumentException.class, () -> rl.refundGcra(gcraUpTo, small, 0));
        Reservation denied = rl.reserveHit(key("denied"), Fixed.of(1, MINUTE).withCost(5));
        assertFalse(denied.decision().allowed());
        assertNull(denied.token());
        assertThrows(InvalidArgumentException.class, () -> rl.settle(denied, 1));

        String requests = key("requests");
        String tokens = tagged(requests, "tokens");
        List<Limit> limits = List.of(Limit.of(requests, 10, MINUTE), Limit.of(tokens, 1000, MINUTE));
        MultiReservation all = rl.reserveAll(limits, AllOptions.DEFAULT.withTokens(400, 1));
        assertTrue(all.decision().allowed());
        assertEquals(List.of(tokens), all.keys());
        List<Settlement> settled = rl.settleAll(all, 150);
        assertEquals(1, settled.size());
        assertEquals(-250, settled.get(0).applied());
        assertEquals("150", stack.raw().get(tokens));
        assertEquals("1", stack.raw().get(requests));
    }

    @ParameterizedTest
    @MethodSource("io.github.redisratelimit.tests.Stack#all")
    void permitsAreLeasedRenewedAndReleased(Stack stack) throws InterruptedException {
        RateLimiter rl = stack.limiter();
        String k = key("permits");
        Acquisition a = rl.acquire(k, 1, Duration.ofSeconds(10), "first");
        assertTrue(a.acquired());
        assertEquals("first", a.id());
        Acquisition b = rl.acquire(k, 1, Duration.ofSeconds(10), null);
        assertFalse(b.acquired());
        assertNull(b.id());
        assertTrue(rl.acquire(k, 1, Duration.ofSeconds(10), "first").acquired(), "a retry with the same id is counted once");
        assertTrue(rl.renew(k, "first", Duration.ofMillis(1500)).compareTo(Duration.ZERO) > 0);
        assertTrue(rl.release(k, "first"));
        assertFalse(rl.release(k, "first"));
        assertEquals(Duration.ZERO, rl.renew(k, "first", MINUTE), "a lease gone renews to nothing");

        // Held past three of its leases: renewed while the work runs, released when it ends.
        String held = key("held");
        String answer = rl.withPermit(held, 1, Duration.ofMillis(300), permit -> {
            sleep(1000);
            assertFalse(rl.acquire(held, 1, Duration.ofSeconds(1), null).acquired(), "the lease was renewed");
            assertFalse(permit.isLost());
            return "done";
        });
        assertEquals("done", answer);
        assertTrue(rl.acquire(held, 1, Duration.ofSeconds(1), "next").acquired(), "released when the work returned");
        PermitUnavailableException none = assertThrows(PermitUnavailableException.class,
                () -> rl.withPermit(held, 1, Duration.ofSeconds(1), permit -> "never"));
        assertEquals(1, none.inUse());
        assertTrue(rl.release(held, "next"));
        assertThrows(IllegalStateException.class, () -> rl.withPermit(held, 1, Duration.ofSeconds(1), permit -> {
            throw new IllegalStateException("the work failed");
        }));
        assertTrue(rl.acquire(held, 1, Duration.ofSeconds(1), null).acquired(), "released when the work threw");
        String taken = key("taken");
        try (Permit p = rl.hold(taken, 2, Duration.ofMillis(300))) {
            assertTrue(p.acquisition().acquired());
            assertTrue(rl.release(taken, p.acquisition().id()), "released behind the permit's back");
            long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
            while (!p.isLost() && System.nanoTime() < deadline) {
                sleep(20);
            }
            assertTrue(p.isLost(), "a renewal finds the lease gone");
            assertInstanceOf(PermitLostException.class, assertThrows(java.util.concurrent.CompletionException.class,
                    () -> p.lost().join()).getCause());
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    @ParameterizedTest
    @MethodSource("io.github.redisratelimit.tests.Stack#all")
    void errorsComeAsTheirTypes(Stack stack) {
        RateLimiter rl = stack.limiter();
        String k = key("list");
        stack.raw().lpush(k, "x");
        ServerErrorException wrong = assertThrows(ServerErrorException.class, () -> rl.hit(k, Fixed.of(1, MINUTE)));
        assertTrue(wrong.getMessage().startsWith("WRONGTYPE"), wrong.getMessage());
        String untouched = key("untouched");
        assertThrows(InvalidArgumentException.class, () -> rl.hit(untouched, Fixed.of(0, MINUTE)));
        assertThrows(InvalidArgumentException.class, () -> rl.async().hit(untouched, Fixed.of(1, MINUTE).withCost(0)));
        assertFalse(stack.raw().exists(untouched), "a refused call writes nothing");
        if (stack.backend == Backend.MODULE) {
            rl.hit(key("top"), Fixed.of(1, MINUTE));
            assertInstanceOf(List.class, rl.top(new TopOptions(TopOptions.View.ADMITTED, 5, false)));
        } else {
            InvalidArgumentException needs = assertThrows(InvalidArgumentException.class, () -> rl.top(TopOptions.DENIED));
            assertEquals("RATELIMIT.TOP needs the module (the Functions library has no such function)", needs.getMessage());
        }
        if (stack.cluster) {
            List<Limit> spread = List.of(Limit.of("java:a", 1, MINUTE), Limit.of("java:b", 1, MINUTE));
            InvalidArgumentException crossSlot = assertThrows(InvalidArgumentException.class, () -> rl.hitAll(spread, AllOptions.DEFAULT));
            assertTrue(crossSlot.getMessage().startsWith("CROSSSLOT"));
        }
    }

    @ParameterizedTest
    @MethodSource("io.github.redisratelimit.tests.Stack#all")
    void concurrentCallsShareOneSearch(Stack stack) {
        // A new limiter over the same client: a hundred calls at once find the backend together.
        AsyncRateLimiter fresh = new AsyncRateLimiter(spy(stack));
        String k = key("many");
        List<CompletableFuture<Decision>> calls = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            calls.add(fresh.hit(k, Fixed.of(1000, MINUTE)));
        }
        CompletableFuture.allOf(calls.toArray(CompletableFuture[]::new)).join();
        assertEquals("100", stack.raw().get(k));
        assertEquals(stack.backend, fresh.backend().join());
        assertEquals(1, probes.get(), "one search for every caller");
    }

    @org.junit.jupiter.api.Test
    void aSearchThatThrowsIsMadeAgain() throws Exception {
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        RateLimiter rl = new RateLimiter(new Watched(Stack.JEDIS_MODULE.transport(), args -> {
            if (down.getAndSet(false)) {
                throw new IllegalStateException("the client threw instead of failing its future");
            }
        }));
        assertThrows(IllegalStateException.class, rl::backend);
        // Bounded: a search left open would never complete.
        assertEquals(Backend.MODULE, rl.async().backend().get(30, java.util.concurrent.TimeUnit.SECONDS),
                "the next call searches again");
    }

    private final AtomicInteger probes = new AtomicInteger();

    /** The stack's transport, counting the backend's searches (PEEK with no arguments). */
    private Transport spy(Stack stack) {
        return new Watched(stack.transport(), args -> {
            if (args.equals(List.of("RATELIMIT.PEEK"))) {
                probes.incrementAndGet();
            }
        });
    }
}

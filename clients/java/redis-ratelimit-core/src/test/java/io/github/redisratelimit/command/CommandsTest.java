package io.github.redisratelimit.command;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redisratelimit.AllOptions;
import io.github.redisratelimit.Calendar;
import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.InvalidArgumentException;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.MultiDecision;
import io.github.redisratelimit.Rate;
import io.github.redisratelimit.Reservation;
import io.github.redisratelimit.Sliding;
import io.github.redisratelimit.TopEntry;
import io.github.redisratelimit.TopOptions;
import io.github.redisratelimit.UnexpectedReplyException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** The builders: what they refuse before anything is sent, what they send, how replies read. */
class CommandsTest {
    private static final Duration SECOND = Duration.ofSeconds(1);
    private static final Duration MINUTE = Duration.ofMinutes(1);

    private static void refused(String message, Executable call) {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, call, message);
        assertEquals(message, e.getMessage());
    }

    @Test
    void argumentsRefusedBeforeSending() {
        List<Limit> day = List.of(Limit.of("a", 1, Calendar.DAY));
        List<Limit> second = List.of(Limit.of("a", 1, SECOND));
        refused("limit must be an integer >= 1", () -> Fixed.of(0, SECOND));
        refused("window must be a whole number of milliseconds from 1ms to 2^62 ms", () -> Fixed.of(1, (Duration) null));
        refused("window must be a whole number of milliseconds from 1ms to 2^62 ms",
                () -> Sliding.of(1, Duration.ofNanos(1_500_000)));
        refused("window is too large", () -> Fixed.of(1, Duration.ofSeconds(Long.MAX_VALUE)));
        refused("give a window or a calendar, not both", () -> new Fixed(1, SECOND, Calendar.DAY, 1, false, null));
        refused("TZ needs a calendar window (day, week, month or year)", () -> Fixed.of(1, SECOND).inZone("UTC"));
        refused("COST must be a nonzero integer", () -> Fixed.of(1, SECOND).withCost(0));
        refused("HITALL needs at least one limit", () -> AllOptions.DEFAULT.validate(List.of()));
        refused("SLIDE and a calendar window cannot be given together", () -> AllOptions.DEFAULT.slidingWindows().validate(day));
        refused("SLIDE and ALIGN cannot be given together", () -> AllOptions.DEFAULT.slidingWindows().aligned().validate(second));
        refused("COST must be an integer >= 1", () -> AllOptions.DEFAULT.withCost(-1).validate(second));
        refused("TOKENS' key count must be between 1 and numkeys", () -> AllOptions.DEFAULT.withTokens(5, 2).validate(second));
        refused("TOKENS must be an integer >= 1", () -> AllOptions.DEFAULT.withTokens(0, 1).validate(second));
        refused("max_burst must be an integer >= 0", () -> Rate.of(-1, 1, SECOND));
        refused("tokens_per_period must be an integer >= 1", () -> Rate.of(0, 0, SECOND));
        refused("period must be > 0", () -> Rate.of(0, 1, Duration.ZERO));
        refused("COST must be an integer >= 1", () -> WindowCommands.peek("k", 1, -2));
        refused("TOKENS must be an integer >= 1", () -> GcraCommands.gcraUpTo("k", Rate.of(0, 1, SECOND).withTokens(-1)));
        refused("RESERVE needs COST >= 1", () -> WindowCommands.reserveHit("k", Fixed.of(1, SECOND).withCost(-1)));
        refused("RESERVE needs TOKENS >= 1", () -> WindowCommands.reserveAll(second, AllOptions.DEFAULT));
        refused("ALIGN and RESERVE cannot be given together", () -> GcraCommands.reserveGcra("k", Rate.of(0, 1, SECOND).aligned()));
        Reservation made = new Reservation(null, "k", "h:1", 1);
        refused("used must be an integer >= 0", () -> SettleCommands.settle(made, -1));
        refused("a denied call has no reservation to settle", () -> SettleCommands.settle(new Reservation(null, "k", null, 1), 1));
        refused("ID must be 1 to 256 bytes", () -> LeaseCommands.release("k", "x".repeat(257)));
        refused("ID must be 1 to 256 bytes", () -> LeaseCommands.renew("k", "", SECOND));
        refused("lease must be a whole number of milliseconds from 1ms to 2^62 ms", () -> LeaseCommands.acquire("k", 1, Duration.ZERO, null));
        refused("COUNT must be an integer >= 1", () -> TopCommands.top(new TopOptions(TopOptions.View.ADMITTED, -1, false)));
        assertThrows(NullPointerException.class, () -> WindowCommands.hit(null, Fixed.of(1, SECOND)));
    }

    @Test
    void argumentsSent() {
        Command<Decision> hit = WindowCommands.hit("k", Fixed.of(10, MINUTE));
        assertEquals(List.of("RATELIMIT.HIT", "k", "10", "60"), hit.moduleArgs());
        assertEquals(List.of("FCALL", "ratelimit_hit", "1", "k", "10", "60"), hit.libraryArgs());
        assertEquals(1, hit.moduleKeyPosition());
        assertEquals(3, hit.libraryKeyPosition());
        assertEquals(List.of("RATELIMIT.HIT", "k", "10", "1500", "COST", "-3", "MS", "ALIGN"),
                WindowCommands.hit("k", Fixed.of(10, Duration.ofMillis(1500)).withCost(-3).aligned()).moduleArgs());
        assertEquals(List.of("RATELIMIT.HIT", "k", "5", "month", "TZ", "Europe/Paris"),
                WindowCommands.hit("k", Fixed.of(5, Calendar.MONTH).inZone("Europe/Paris")).moduleArgs());
        assertEquals(List.of("RATELIMIT.SLIDE", "k", "5", "2", "COST", "2", "PEEK"),
                WindowCommands.slidePeek("k", Sliding.of(5, Duration.ofSeconds(2)).withCost(2)).moduleArgs());
        Command<Decision> gcra = GcraCommands.gcra("k", Rate.of(0, 3, Duration.ofNanos(1)).withTokens(-2));
        assertEquals(List.of("RATELIMIT.GCRA", "k", "0", "3", "0.000000001", "TOKENS", "-2"), gcra.moduleArgs());
        assertEquals(List.of("RATELIMIT.GCRA", "k", "4", "1", "2.5"),
                GcraCommands.gcra("k", Rate.of(4, 1, Duration.ofMillis(2500))).moduleArgs());
        assertEquals(List.of("RATELIMIT.GCRA", "k", "9", "10", "3600", "TOKENS", "3", "ALIGN"),
                GcraCommands.gcra("k", Rate.of(9, 10, Duration.ofHours(1)).withTokens(3).aligned()).moduleArgs());
        Command<MultiDecision> all = WindowCommands.hitAll(List.of(Limit.of("{u}1", 1, SECOND), Limit.of("{u}2", 2, Duration.ofMillis(1500)),
                Limit.of("{u}3", 3, Calendar.DAY)), AllOptions.DEFAULT.withTokens(40, 1));
        assertEquals(List.of("RATELIMIT.HITALL", "3", "{u}1", "{u}2", "{u}3", "1", "1000", "2", "1500", "3", "day", "MS",
                "TOKENS", "40", "1"), all.moduleArgs());
        assertEquals(2, all.moduleKeyPosition());
        assertEquals(List.of("FCALL", "ratelimit_hitall", "3", "{u}1", "{u}2", "{u}3", "1", "1000", "2", "1500", "3", "day", "MS",
                "TOKENS", "40", "1"), all.libraryArgs());
        assertEquals(List.of("RATELIMIT.TOP", "DENIED"), TopCommands.top(TopOptions.DENIED).moduleArgs());
        assertEquals(-1, TopCommands.top(TopOptions.DENIED).moduleKeyPosition());
        List<String> acquired = LeaseCommands.acquire("k", 2, Duration.ofMillis(1500), null).moduleArgs();
        assertEquals(List.of("RATELIMIT.ACQUIRE", "k", "2", "1500", "MS", "ID"), acquired.subList(0, 6));
        assertTrue(acquired.get(6).matches("[0-9a-f]{32}"), acquired.get(6));
    }

    @Test
    void repliesRead() {
        Command<Decision> hit = WindowCommands.hit("k", Fixed.of(10, MINUTE).withCost(3));
        assertEquals(new Decision(false, 9, 1, 10, Duration.ofSeconds(12), Duration.ofSeconds(12), MINUTE),
                hit.read(List.of(0L, 9L, 1L, 12_000L)));
        Decision never = WindowCommands.hit("k", Fixed.of(2, MINUTE).withCost(3)).read(List.of(0L, 0L, 2L, -1L));
        assertEquals(Decision.FOREVER, never.retryAfter());
        assertEquals(Decision.FOREVER, never.resetAfter());
        Command<Decision> slide = WindowCommands.slide("k", Sliding.of(5, MINUTE));
        assertEquals(new Decision(false, 5, 0, 5, Duration.ofSeconds(30), Duration.ofMillis(700), MINUTE),
                slide.read(List.of(0L, 5L, 0L, 700L, 30_000L)));
        Command<Decision> bucket = GcraCommands.gcra("k", Rate.of(4, 1, SECOND));
        assertEquals(new Decision(true, 1, 4, 5, SECOND, Duration.ZERO, SECOND), bucket.read(List.of(0L, 5L, 4L, -1L, 1_000L)));
        var grant = GcraCommands.gcraUpTo("k", Rate.of(0, 1, SECOND).withTokens(5)).read(List.of(0L, 1L, 0L, -1L, 1_000L, 1L));
        assertEquals(1, grant.granted());
        assertTrue(grant.decision().allowed());
        Reservation r = WindowCommands.reserveHit("k", Fixed.of(10, MINUTE).withCost(4)).read(List.of(1L, 4L, 6L, 60_000L, "h:10:60000:4:1:abc"));
        assertEquals(new Reservation(new Decision(true, 4, 6, 10, MINUTE, Duration.ZERO, MINUTE), "k", "h:10:60000:4:1:abc", 4), r);
        // The reservation is opaque: the reply says what it was of.
        var settled = SettleCommands.settle(new Reservation(null, "k", "opaque", 2), 1)
                .read(List.of(1L, 1L, 4L, 0L, 60_000L, -1L, "sliding", 5L, 60_000L));
        assertEquals(-1, settled.applied());
        assertEquals(5, settled.decision().limit());
        assertEquals(MINUTE, settled.decision().window());
        var acquired = LeaseCommands.acquire("k", 2, SECOND, "id").read(List.of(1L, 1L, 1L, 1_000L, "id"));
        assertEquals(new io.github.redisratelimit.Acquisition(true, 1, 1, SECOND, "id"), acquired);
        Command<List<TopEntry>> top = TopCommands.top(TopOptions.DENIED);
        for (Object reply : List.of(List.of(List.of("key", "a", "count", 3L, "error", 0L)),
                List.of(Map.of("key", "a", "count", 3L, "error", 0L)))) {
            assertEquals(List.of(new TopEntry("a", 3, 0)), top.read(reply));
        }
        Command<MultiDecision> all = WindowCommands.hitAll(List.of(Limit.of("{u}1", 1, MINUTE), Limit.of("{u}2", 5, MINUTE)), AllOptions.DEFAULT);
        MultiDecision m = all.read(List.of(0L, List.of(1L, 0L, 9_000L), List.of(2L, 3L, 50_000L)));
        assertFalse(m.allowed());
        assertFalse(m.decisions().get(0).allowed());
        assertTrue(m.decisions().get(1).allowed());
        assertEquals(Duration.ofSeconds(9), m.retryAfter());
        assertEquals(m.decisions().get(0), m.tightest());
        assertEquals(0, new MultiDecision(true, List.of()).tightest().limit());

        assertThrows(UnexpectedReplyException.class, () -> hit.read(List.of(1L)));
        assertThrows(UnexpectedReplyException.class, () -> slide.read(List.of("1", 1L, 1L, 1L, 1L)));
        assertThrows(UnexpectedReplyException.class, () -> bucket.read(null));
        assertThrows(UnexpectedReplyException.class, () -> all.read(List.of(1L)));
        assertThrows(UnexpectedReplyException.class, () -> LeaseCommands.release("k", "i").read("OK"));
        assertThrows(UnexpectedReplyException.class, () -> top.read("OK"));
    }
}

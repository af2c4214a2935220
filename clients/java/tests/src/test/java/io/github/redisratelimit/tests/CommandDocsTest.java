package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.redisratelimit.Adaptive;
import io.github.redisratelimit.AllOptions;
import io.github.redisratelimit.Backend;
import io.github.redisratelimit.Calendar;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.InvalidArgumentException;
import io.github.redisratelimit.Library;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.Rate;
import io.github.redisratelimit.RateLimiter;
import io.github.redisratelimit.Report;
import io.github.redisratelimit.Reservation;
import io.github.redisratelimit.Sliding;
import io.github.redisratelimit.TopOptions;
import io.github.redisratelimit.spi.Transport;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.util.SafeEncoder;

/**
 * The limiter's calls take every argument COMMAND DOCS lists, under the names below, and send
 * only the tokens it documents: a new option in the module, or a renamed one, fails here.
 */
class CommandDocsTest {
    /** Where each documented argument is taken: a method's parameter, a record's component, or folded into a call. */
    private static final Map<String, Map<String, String>> TAKEN = Map.ofEntries(
            Map.entry("ratelimit.hit", Map.of("key", "param", "limit", "Fixed.limit", "window", "Fixed.window", "cost", "Fixed.cost",
                    "ms", "folded", "partial", "folded", "reserve", "folded", "align", "Fixed.align", "zone", "Fixed.zone")),
            Map.entry("ratelimit.peek", Map.of("key", "param", "limit", "param", "cost", "param")),
            Map.entry("ratelimit.slide", Map.of("key", "param", "limit", "Sliding.limit", "window", "Sliding.window", "cost", "Sliding.cost",
                    "ms", "folded", "partial", "folded", "peek", "folded", "reserve", "folded")),
            Map.entry("ratelimit.hitall", Map.ofEntries(Map.entry("numkeys", "folded"), Map.entry("key", "Limit.key"),
                    Map.entry("limit", "Limit.limit"), Map.entry("window", "Limit.window"), Map.entry("cost", "AllOptions.cost"),
                    Map.entry("ms", "folded"), Map.entry("slide", "AllOptions.sliding"), Map.entry("align", "AllOptions.align"),
                    Map.entry("zone", "AllOptions.zone"), Map.entry("tokens", "AllOptions.tokens"),
                    Map.entry("numtokenkeys", "AllOptions.tokenKeys"), Map.entry("reserve", "folded"))),
            Map.entry("ratelimit.gcra", Map.of("key", "param", "max_burst", "Rate.maxBurst", "tokens_per_period", "Rate.perPeriod",
                    "period", "Rate.period", "count", "Rate.tokens", "partial", "folded", "reserve", "folded", "align", "Rate.align")),
            Map.entry("ratelimit.settle", Map.of("key", "Reservation.key", "reservation", "Reservation.token", "used", "param")),
            Map.entry("ratelimit.acquire", Map.of("key", "param", "limit", "param", "lease", "param", "ms", "folded", "id", "param")),
            Map.entry("ratelimit.release", Map.of("key", "param", "id", "param")),
            Map.entry("ratelimit.renew", Map.of("key", "param", "id", "param", "lease", "param", "ms", "folded")),
            Map.entry("ratelimit.top", Map.of("denied", "TopOptions.view", "admitted", "TopOptions.view", "shadowed", "TopOptions.view",
                    "count", "TopOptions.count", "reset", "TopOptions.reset")),
            Map.entry("ratelimit.adapt", Map.of("key", "param", "floor", "Adaptive.floor", "start", "Adaptive.start",
                    "ceiling", "Adaptive.ceiling", "window", "Adaptive.window", "cost", "param", "ms", "folded", "partial", "folded",
                    "reserve", "folded", "turn", "param")),
            Map.entry("ratelimit.report", Map.of("key", "param", "ok", "Report.throttled", "throttled", "Report.throttled",
                    "retry", "Report.retryAfter", "limit", "Report.limit", "remaining", "Report.remaining", "reset", "Report.resetAfter", "age", "Report.age")));

    private static final Map<String, Class<?>> TYPES = Map.of("Fixed", Fixed.class, "Sliding", Sliding.class, "Limit", Limit.class,
            "AllOptions", AllOptions.class, "Rate", Rate.class, "Reservation", Reservation.class, "TopOptions", TopOptions.class,
            "Adaptive", Adaptive.class, "Report", Report.class);

    /** Each call with every option set, as the limiter sends it to the module (the replies do not matter). */
    private static Map<String, List<List<String>>> everyOption() {
        Map<String, List<List<String>>> sent = new HashMap<>();
        Transport recording = new Watched(Stack.JEDIS_MODULE.transport(), args -> {
            String name = args.get(0).toLowerCase(Locale.ROOT);
            if (args.size() > 1 && name.startsWith("ratelimit.")) {
                sent.computeIfAbsent(name, n -> new ArrayList<>()).add(args);
            }
        });
        RateLimiter rl = new RateLimiter(recording);
        List<Runnable> calls = List.of(
                () -> rl.hit("k", Fixed.of(5, Calendar.MONTH).withCost(2).aligned().inZone("Europe/Paris")),
                () -> rl.reserveHit("k", Fixed.of(5, Duration.ofMillis(1500)).withCost(2)),
                () -> rl.reserveHitUpTo("k", Fixed.of(5, Duration.ofMinutes(1)).withCost(9)),
                () -> rl.peek("k", 5, 2),
                () -> rl.slidePeek("k", Sliding.of(5, Duration.ofMillis(1500)).withCost(2)),
                () -> rl.reserveSlide("k", Sliding.of(5, Duration.ofSeconds(1)).withCost(2)),
                () -> rl.reserveSlideUpTo("k", Sliding.of(5, Duration.ofSeconds(1)).withCost(9)),
                () -> rl.reserveAll(List.of(Limit.of("{a}1", 1, Duration.ofMillis(1500)), Limit.of("{a}2", 2, Calendar.DAY)),
                        AllOptions.DEFAULT.withCost(2).aligned().inZone("+01:00").withTokens(40, 1)),
                () -> rl.hitAll(List.of(Limit.of("{a}1", 1, Duration.ofMillis(1500))), AllOptions.DEFAULT.slidingWindows()),
                () -> rl.gcraUpTo("g", Rate.of(1, 2, Duration.ofMillis(500)).withTokens(2).aligned()),
                () -> rl.reserveGcra("g", Rate.of(1, 2, Duration.ofMillis(500)).withTokens(2)),
                () -> rl.settle(new Reservation(null, "k", "h:1:1:1:1:01234567", 1), 3),
                () -> rl.acquire("l", 2, Duration.ofMillis(1500), "i"),
                () -> rl.release("l", "i"),
                () -> rl.renew("l", "i", Duration.ofMillis(1500)),
                () -> rl.top(new TopOptions(TopOptions.View.ADMITTED, 3, true)),
                () -> rl.adaptUpTo("a", new Adaptive(1, 2, 3, Duration.ofMillis(1500)), 2, true),
                () -> rl.reserveAdapt("a", new Adaptive(1, 2, 3, Duration.ofMinutes(1)), 2),
                () -> rl.reserveAdaptUpTo("a", new Adaptive(1, 2, 3, Duration.ofMinutes(1)), 9),
                () -> rl.report("a", Report.throttle().withRetryAfter(Duration.ofSeconds(1)).withLimit(5)
                        .withRemaining(2, Duration.ofSeconds(1)).withAge(Duration.ofMillis(5))));
        for (Runnable call : calls) {
            try {
                call.run();
            } catch (InvalidArgumentException e) {
                fail(e);
            } catch (RuntimeException serverSaidNo) {
                // A made-up reservation, a window of another key: the words sent are what count.
            }
        }
        return sent;
    }

    private record Argument(String name, String type, String token, List<Argument> children) {
    }

    private static Map<String, Object> fields(Object reply) {
        Map<String, Object> out = new HashMap<>();
        if (reply instanceof List<?> items) {
            for (int i = 0; i + 1 < items.size(); i += 2) {
                out.put(SafeEncoder.encode((byte[]) items.get(i)), items.get(i + 1));
            }
        }
        return out;
    }

    private static String text(Object v) {
        return v instanceof byte[] b ? SafeEncoder.encode(b) : null;
    }

    private static Argument argument(Object reply) {
        Map<String, Object> f = fields(reply);
        List<Argument> children = new ArrayList<>();
        if (f.get("arguments") instanceof List<?> nested) {
            nested.forEach(n -> children.add(argument(n)));
        }
        return new Argument(text(f.get("name")), text(f.get("type")), text(f.get("token")), children);
    }

    private static void walk(List<Argument> args, java.util.function.Consumer<Argument> visit) {
        for (Argument a : args) {
            visit.accept(a);
            walk(a.children(), visit);
        }
    }

    @Test
    void callsMatchCommandDocs() {
        Map<String, List<List<String>>> sent = everyOption();
        assertEquals(Backend.MODULE, Stack.JEDIS_MODULE.limiter().backend());
        List<String> problems = new ArrayList<>();
        try (Jedis j = Stack.JEDIS_MODULE.servers().get(0).jedis()) {
            for (var command : TAKEN.entrySet()) {
                Object reply = j.sendCommand(Protocol.Command.COMMAND, "DOCS", command.getKey());
                List<Argument> documented = new ArrayList<>();
                Object doc = fields(reply).get(command.getKey());
                if (fields(doc).get("arguments") instanceof List<?> args) {
                    args.forEach(a -> documented.add(argument(a)));
                }
                Set<String> names = new HashSet<>();
                Set<String> tokens = new HashSet<>();
                walk(documented, a -> {
                    if (!"block".equals(a.type()) && !"oneof".equals(a.type())) {
                        names.add(a.name());
                    }
                    if (a.token() != null) {
                        tokens.add(a.token().toUpperCase(Locale.ROOT));
                    }
                });
                for (String name : names) {
                    String place = command.getValue().get(name);
                    if (place == null) {
                        problems.add(command.getKey() + ": " + name + " is documented, and taken nowhere");
                    } else if (place.contains(".")) {
                        String[] typeAndComponent = place.split("\\.");
                        boolean has = Arrays.stream(TYPES.get(typeAndComponent[0]).getRecordComponents())
                                .anyMatch(c -> c.getName().equals(typeAndComponent[1]));
                        if (!has) {
                            problems.add(command.getKey() + ": " + typeAndComponent[0] + " has no " + typeAndComponent[1]);
                        }
                    }
                }
                for (String name : command.getValue().keySet()) {
                    if (!names.contains(name)) {
                        problems.add(command.getKey() + ": " + name + " is not in COMMAND DOCS");
                    }
                }
                Set<String> undocumented = new TreeSet<>();
                for (List<String> args : sent.getOrDefault(command.getKey(), List.of())) {
                    for (String word : args.subList(1, args.size())) {
                        if (word.matches("[A-Z]+") && !tokens.contains(word)) {
                            undocumented.add(word);
                        }
                    }
                }
                if (!undocumented.isEmpty() || !sent.containsKey(command.getKey())) {
                    problems.add(command.getKey() + ": sends " + undocumented + ", not in COMMAND DOCS (or no call sends it)");
                }
            }
        }
        assertTrue(problems.isEmpty(), String.join("\n", problems));
    }

    @Test
    void theJarsLibraryIsTheRepositorys() throws java.io.IOException {
        assertEquals(Files.readString(Path.of("../../../functions/ratelimit.lua")), Library.source());
    }
}

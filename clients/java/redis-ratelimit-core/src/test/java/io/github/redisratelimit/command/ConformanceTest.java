package io.github.redisratelimit.command;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.github.redisratelimit.Adaptive;
import io.github.redisratelimit.AllOptions;
import io.github.redisratelimit.Calendar;
import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.Grant;
import io.github.redisratelimit.InvalidArgumentException;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.Rate;
import io.github.redisratelimit.Report;
import io.github.redisratelimit.Sliding;
import io.github.redisratelimit.TopOptions;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The shared argument cases (testkit/conformance/arguments.json, the module's own answers): each
 * case the client can send as a typed call is built here, records and builders, with no server,
 * and the client must refuse exactly what the module refuses. A case with no typed call (an
 * unknown option, a missing value) or with a value the types do not hold (a limit of "x", a cost
 * of 0 where 0 means the default, a calendar unit that is none) is not the client's to send; a
 * refusal by the module's own data ({@code server_data}, its zone database) it may leave to the
 * server.
 */
class ConformanceTest {
    /** The case has a value the client's types do not hold. */
    private static final class NotTyped extends RuntimeException {
        private static final long serialVersionUID = 1L;

        NotTyped(JsonNode v) {
            super(String.valueOf(v));
        }
    }

    private static long integer(JsonNode v) {
        if (v == null || !v.canConvertToLong() || !v.isIntegralNumber()) {
            throw new NotTyped(v);
        }
        return v.asLong();
    }

    private static boolean flag(JsonNode c, String name) {
        return c.path(name).asBoolean(false);
    }

    private static Duration length(JsonNode v, boolean ms) {
        long n = integer(v);
        try {
            return ms ? Duration.ofMillis(n) : Duration.ofSeconds(n);
        } catch (ArithmeticException e) {
            throw new NotTyped(v);
        }
    }

    private static Calendar calendar(JsonNode v, boolean ms) {
        if (!v.isTextual()) {
            return null;
        }
        try {
            if (ms) {
                throw new NotTyped(v);
            }
            return Calendar.valueOf(v.asText().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new NotTyped(v);
        }
    }

    private static Fixed fixed(JsonNode c) {
        boolean ms = flag(c, "MS");
        Calendar unit = calendar(c.get("window"), ms);
        Fixed f = unit != null ? Fixed.of(integer(c.get("limit")), unit) : Fixed.of(integer(c.get("limit")), length(c.get("window"), ms));
        f = c.has("COST") ? f.withCost(integer(c.get("COST"))) : f;
        f = flag(c, "ALIGN") ? f.aligned() : f;
        return c.has("TZ") ? f.inZone(c.get("TZ").asText()) : f;
    }

    private static Sliding sliding(JsonNode c) {
        Sliding s = Sliding.of(integer(c.get("limit")), length(c.get("window"), flag(c, "MS")));
        return c.has("COST") ? s.withCost(integer(c.get("COST"))) : s;
    }

    private static Rate rate(JsonNode c) {
        Duration period;
        try {
            BigDecimal ns = new BigDecimal(c.get("period").asText()).movePointRight(9);
            period = Duration.ofNanos(ns.longValueExact());
        } catch (NumberFormatException | ArithmeticException e) {
            throw new NotTyped(c.get("period"));
        }
        Rate r = Rate.of(integer(c.get("max_burst")), integer(c.get("tokens_per_period")), period);
        r = c.has("TOKENS") ? r.withTokens(integer(c.get("TOKENS"))) : r;
        return flag(c, "ALIGN") ? r.aligned() : r;
    }

    /** The case's call as the client makes it; null where the client has no such call. */
    private static Supplier<Command<?>> call(String command, JsonNode c) {
        String key = c.path("key").asText();
        String flags = flag(c, "PARTIAL") + "," + flag(c, "RESERVE");
        switch (command) {
            case "ratelimit.hit":
                return switch (flags) {
                    case "false,false" -> () -> WindowCommands.hit(key, fixed(c));
                    case "true,false" -> () -> WindowCommands.hitUpTo(key, fixed(c));
                    case "false,true" -> () -> WindowCommands.reserveHit(key, fixed(c));
                    case "true,true" -> () -> WindowCommands.reserveHitUpTo(key, fixed(c));
                    default -> null;
                };
            case "ratelimit.peek":
                return () -> WindowCommands.peek(key, integer(c.get("limit")), c.has("COST") ? integer(c.get("COST")) : 1);
            case "ratelimit.slide":
                return switch (flags + "," + flag(c, "PEEK")) {
                    case "false,false,false" -> () -> WindowCommands.slide(key, sliding(c));
                    case "false,false,true" -> () -> WindowCommands.slidePeek(key, sliding(c));
                    case "true,false,false" -> () -> WindowCommands.slideUpTo(key, sliding(c));
                    case "false,true,false" -> () -> WindowCommands.reserveSlide(key, sliding(c));
                    case "true,true,false" -> () -> WindowCommands.reserveSlideUpTo(key, sliding(c));
                    default -> null;
                };
            case "ratelimit.gcra":
                return switch (flags) {
                    case "false,false" -> () -> GcraCommands.gcra(key, rate(c));
                    case "true,false" -> () -> GcraCommands.gcraUpTo(key, rate(c));
                    case "false,true" -> () -> GcraCommands.reserveGcra(key, rate(c));
                    case "true,true" -> () -> GcraCommands.reserveGcraUpTo(key, rate(c));
                    default -> null;
                };
            case "ratelimit.hitall":
                return () -> {
                    List<Limit> limits = new ArrayList<>();
                    boolean ms = flag(c, "MS");
                    for (int i = 0; i < c.get("limits").size(); i++) {
                        JsonNode pair = c.get("limits").get(i);
                        String k = c.get("keys").get(i).asText();
                        Calendar unit = calendar(pair.get(1), ms);
                        limits.add(unit != null ? Limit.of(k, integer(pair.get(0)), unit)
                                : Limit.of(k, integer(pair.get(0)), length(pair.get(1), ms)));
                    }
                    AllOptions o = AllOptions.DEFAULT;
                    o = c.has("COST") ? o.withCost(integer(c.get("COST"))) : o;
                    o = flag(c, "SLIDE") ? o.slidingWindows() : o;
                    o = flag(c, "ALIGN") ? o.aligned() : o;
                    o = c.has("TZ") ? o.inZone(c.get("TZ").asText()) : o;
                    if (c.has("TOKENS")) {
                        long keys = integer(c.get("TOKENS").get(1));
                        if (keys != (int) keys) {
                            throw new NotTyped(c.get("TOKENS"));
                        }
                        o = o.withTokens(integer(c.get("TOKENS").get(0)), (int) keys);
                    }
                    return flag(c, "RESERVE") ? WindowCommands.reserveAll(limits, o) : WindowCommands.hitAll(limits, o);
                };
            case "ratelimit.acquire":
                return () -> LeaseCommands.acquire(key, integer(c.get("limit")), length(c.get("lease"), flag(c, "MS")),
                        c.has("ID") ? c.get("ID").asText() : null);
            case "ratelimit.release":
                return () -> LeaseCommands.release(key, c.get("id").asText());
            case "ratelimit.renew":
                return () -> LeaseCommands.renew(key, c.get("id").asText(), length(c.get("lease"), flag(c, "MS")));
            case "ratelimit.top":
                List<TopOptions.View> views = new ArrayList<>();
                for (TopOptions.View v : TopOptions.View.values()) {
                    if (flag(c, v.name())) {
                        views.add(v);
                    }
                }
                if (views.size() > 1 || c.has("COUNT") && c.get("COUNT").asLong(1) == 0) {
                    return null; // one view at most; a count of 0 is the default
                }
                TopOptions.View view = views.isEmpty() ? TopOptions.View.DENIED : views.get(0);
                return () -> TopCommands.top(new TopOptions(view, c.has("COUNT") ? integer(c.get("COUNT")) : 0, flag(c, "RESET")));
            case "ratelimit.adapt":
                long cost = c.has("COST") ? integer(c.get("COST")) : 1;
                Supplier<Adaptive> terms = () -> new Adaptive(integer(c.get("floor")), integer(c.get("start")),
                        integer(c.get("ceiling")), length(c.get("window"), flag(c, "MS")));
                boolean turn = flag(c, "TURN");
                return switch (flags) {
                    case "false,false" -> () -> AdaptiveCommands.adapt(key, terms.get(), cost, turn);
                    case "true,false" -> () -> AdaptiveCommands.adaptUpTo(key, terms.get(), cost, turn);
                    case "false,true" -> () -> AdaptiveCommands.reserveAdapt(key, terms.get(), cost, turn);
                    default -> () -> AdaptiveCommands.reserveAdaptUpTo(key, terms.get(), cost, turn);
                };
            case "ratelimit.report":
                if (flag(c, "OK") == flag(c, "THROTTLED") || c.has("REMAINING") != c.has("RESET")) {
                    return null; // a typed report has one outcome, and a remaining with its reset
                }
                return () -> {
                    Report r = flag(c, "OK") ? Report.ok() : Report.throttle();
                    r = c.has("RETRY") ? r.withRetryAfter(Duration.ofMillis(integer(c.get("RETRY")))) : r;
                    r = c.has("LIMIT") ? r.withLimit(integer(c.get("LIMIT"))) : r;
                    if (c.has("REMAINING")) {
                        r = r.withRemaining(integer(c.get("REMAINING")), Duration.ofMillis(integer(c.get("RESET"))));
                    }
                    r = c.has("AGE") ? r.withAge(Duration.ofMillis(integer(c.get("AGE")))) : r;
                    return AdaptiveCommands.report(key, r);
                };
            default:
                throw new AssertionError("a case of " + command + ", which this test does not know");
        }
    }

    @Test
    void theClientRefusesWhatTheModuleRefusesAndNoMore() throws IOException {
        JsonNode cases = new ObjectMapper().readTree(Path.of("../../../testkit/conformance/arguments.json").toFile());
        List<String> disagree = new ArrayList<>();
        int sent = 0;
        for (JsonNode c : cases) {
            if (c.get("call").isNull()) {
                continue;
            }
            Supplier<Command<?>> call = call(c.get("command").asText(), c.get("call"));
            if (call == null) {
                continue;
            }
            String refused = null;
            try {
                call.get();
            } catch (NotTyped e) {
                continue;
            } catch (InvalidArgumentException e) {
                refused = e.getMessage();
            }
            sent++;
            if (c.get("server_data").asBoolean() && refused == null) {
                continue;
            }
            if ((refused == null) != c.get("error").isNull()) {
                disagree.add(c.get("command").asText() + " " + c.get("args") + ": module " + c.get("error") + ", client " + refused);
            }
        }
        assertEquals(List.of(), disagree);
        assertTrue(sent >= 90, sent + " cases sent");
    }

    /** A decision as the shared replies state it: ms, -1 for never, null for none. */
    private static Map<String, Object> stated(Decision d) {
        java.util.function.Function<Duration, Object> ms = t -> t.equals(Decision.FOREVER) ? -1L : t.toMillis();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("allowed", d.allowed());
        out.put("count", d.count());
        out.put("remaining", d.remaining());
        out.put("limit", d.limit());
        out.put("reset_after_ms", ms.apply(d.resetAfter()));
        out.put("retry_after_ms", d.allowed() ? null : ms.apply(d.retryAfter()));
        out.put("window_ms", d.window() == null || d.window().isZero() ? null : ms.apply(d.window()));
        return out;
    }

    @Test
    void theClientReadsEachReplyAsTheModuleMeansIt() throws IOException {
        ObjectMapper json = new ObjectMapper();
        JsonNode cases = json.readTree(Path.of("../../../testkit/conformance/replies.json").toFile());
        assertTrue(cases.size() >= 15, cases.size() + " replies");
        for (JsonNode c : cases) {
            Supplier<Command<?>> call = call(c.get("command").asText(), c.get("call"));
            List<Object> reply = new ArrayList<>();
            c.get("reply").forEach(n -> reply.add(n.asLong()));
            Object answer = call.get().read(reply);
            Map<String, Object> got = answer instanceof Grant g ? stated(g.decision()) : stated((Decision) answer);
            if (answer instanceof Grant g) {
                got.put("granted", g.granted());
            }
            Map<String, Object> meant = json.convertValue(c.get("decision"), new com.fasterxml.jackson.core.type.TypeReference<Map<String, Object>>() { });
            meant.replaceAll((k, v) -> v instanceof Integer i ? (Object) i.longValue() : v);
            assertEquals(new java.util.TreeMap<>(meant), new java.util.TreeMap<>(got), c.get("command") + " " + c.get("args"));
        }
    }
}

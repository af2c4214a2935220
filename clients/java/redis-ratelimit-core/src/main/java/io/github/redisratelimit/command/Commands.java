package io.github.redisratelimit.command;

import static io.github.redisratelimit.command.Checks.invalid;
import static io.github.redisratelimit.command.Checks.positive;
import static io.github.redisratelimit.command.Replies.integer;
import static io.github.redisratelimit.command.Replies.integers;
import static io.github.redisratelimit.command.Replies.list;
import static io.github.redisratelimit.command.Replies.ms;

import io.github.redisratelimit.Acquisition;
import io.github.redisratelimit.AllOptions;
import io.github.redisratelimit.Calendar;
import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.Grant;
import io.github.redisratelimit.InvalidArgumentException;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.MultiDecision;
import io.github.redisratelimit.MultiReservation;
import io.github.redisratelimit.Rate;
import io.github.redisratelimit.Reservation;
import io.github.redisratelimit.Settlement;
import io.github.redisratelimit.Sliding;
import io.github.redisratelimit.TopEntry;
import io.github.redisratelimit.TopOptions;
import io.github.redisratelimit.UnexpectedReplyException;
import java.math.BigDecimal;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * One builder per command: each checks its arguments as the server would (an
 * {@link InvalidArgumentException}, worded as the server words it, before anything is sent) and
 * gives the {@link Command} to send.
 */
public final class Commands {
    private Commands() {
    }

    /** The longest lease id the server takes. */
    private static final int MAX_ID_BYTES = 256;
    private static final SecureRandom RANDOM = new SecureRandom();

    /** A window or lease as sent: whole seconds, or milliseconds with MS. */
    private record Length(long ms, boolean inMs) {
        String text(boolean asMs) {
            return Long.toString(asMs ? ms : ms / 1000);
        }
    }

    private static Length length(Duration d, String name) {
        long ms = Checks.lengthMs(d, name);
        return new Length(ms, ms % 1000 != 0);
    }

    /** A HIT window, checked by its record: a calendar unit (null length) or a length. */
    private static Length fixedWindow(Duration window, Calendar calendar) {
        return calendar != null ? null : length(window, "window");
    }

    private static List<String> laidOnClock(boolean align, String zone) {
        List<String> args = new ArrayList<>();
        if (align) {
            args.add("ALIGN");
        }
        if (zone != null) {
            args.add("TZ");
            args.add(zone);
        }
        return args;
    }

    private static void signedCost(List<String> args, long n, String name) {
        if (n != 1) {
            args.add(name);
            args.add(Long.toString(n));
        }
    }

    private static String key(String key) {
        return Objects.requireNonNull(key, "key");
    }

    private static Function<Object, Decision> readFixed(long limit, Duration window, long cost) {
        return reply -> {
            long[] n = integers(reply, 4, "a fixed window");
            boolean allowed = n[0] == 1;
            Duration reset = ms(n[3]);
            Duration retry = allowed ? Duration.ZERO : cost > limit ? Decision.FOREVER : reset;
            return new Decision(allowed, n[1], n[2], limit, reset, retry, window);
        };
    }

    private static Function<Object, Decision> readSliding(long limit, Duration window) {
        return reply -> {
            long[] n = integers(reply, 5, "a sliding window");
            boolean allowed = n[0] == 1;
            return new Decision(allowed, n[1], n[2], limit, ms(n[4]), allowed ? Duration.ZERO : ms(n[3]), window);
        };
    }

    private static Function<Object, Decision> readBucket(Duration period) {
        return reply -> {
            long[] n = integers(reply, 5, "a GCRA bucket");
            boolean allowed = n[0] == 0;
            return new Decision(allowed, n[1] - n[2], n[2], n[1], ms(n[4]), allowed ? Duration.ZERO : ms(n[3]), period);
        };
    }

    private static Duration orZero(Duration d) {
        return d == null ? Duration.ZERO : d;
    }

    /**
     * {@code RATELIMIT.HIT}: a fixed window counted, its expiry set in the same step.
     *
     * @param key the counter
     * @param f the limit
     * @return the call
     */
    public static Command<Decision> hit(String key, Fixed f) {
        Objects.requireNonNull(f, "limit");
        Length window = fixedWindow(f.window(), f.calendar());
        List<String> args = new ArrayList<>();
        args.add(Long.toString(f.limit()));
        args.add(window == null ? f.calendar().name().toLowerCase(java.util.Locale.ROOT) : window.text(window.inMs()));
        signedCost(args, f.cost(), "COST");
        if (window != null && window.inMs()) {
            args.add("MS");
        }
        args.addAll(laidOnClock(f.align(), f.zone()));
        return new Command<>("RATELIMIT.HIT", "ratelimit_hit", List.of(key(key)), args, false,
                readFixed(f.limit(), orZero(f.window()), f.cost()));
    }

    /**
     * {@code RATELIMIT.PEEK}: whether a HIT of {@code cost} would be admitted, writing nothing.
     *
     * @param key the counter
     * @param limit the limit
     * @param cost the cost, at least 1
     * @return the call
     */
    public static Command<Decision> peek(String key, long limit, long cost) {
        positive(limit, "limit");
        positive(cost, "COST");
        List<String> args = new ArrayList<>(List.of(Long.toString(limit)));
        signedCost(args, cost, "COST");
        return new Command<>("RATELIMIT.PEEK", "ratelimit_peek", List.of(key(key)), args, false,
                readFixed(limit, Duration.ZERO, cost));
    }

    private static List<String> slideArgs(Sliding s) {
        Objects.requireNonNull(s, "limit");
        Length window = length(s.window(), "window");
        List<String> args = new ArrayList<>(List.of(Long.toString(s.limit()), window.text(window.inMs())));
        signedCost(args, s.cost(), "COST");
        if (window.inMs()) {
            args.add("MS");
        }
        return args;
    }

    /**
     * {@code RATELIMIT.SLIDE}: a sliding window (the previous window weighted by its overlap).
     *
     * @param key the counter
     * @param s the limit
     * @return the call
     */
    public static Command<Decision> slide(String key, Sliding s) {
        return new Command<>("RATELIMIT.SLIDE", "ratelimit_slide", List.of(key(key)), slideArgs(s), false,
                readSliding(s.limit(), s.window()));
    }

    /**
     * {@code RATELIMIT.SLIDE} with {@code PEEK}: the decision without counting.
     *
     * @param key the counter
     * @param s the limit
     * @return the call
     */
    public static Command<Decision> slidePeek(String key, Sliding s) {
        List<String> args = slideArgs(s);
        args.add("PEEK");
        return new Command<>("RATELIMIT.SLIDE", "ratelimit_slide", List.of(key(key)), args, false,
                readSliding(s.limit(), s.window()));
    }

    /**
     * {@code RATELIMIT.HITALL}: one call counted against several limits, all or nothing.
     *
     * @param limits the limits, at least one
     * @param o the options
     * @return the call
     */
    public static Command<MultiDecision> hitAll(List<Limit> limits, AllOptions o) {
        Objects.requireNonNull(o, "options");
        o.validate(limits);
        boolean anyMs = false;
        for (Limit l : limits) {
            Length w = fixedWindow(l.window(), l.calendar());
            anyMs |= w != null && w.inMs();
        }
        List<String> keys = new ArrayList<>();
        List<String> args = new ArrayList<>();
        for (Limit l : limits) {
            keys.add(l.key());
            args.add(Long.toString(l.limit()));
            // One unit for all the lengths: ms if any needs them.
            args.add(l.calendar() != null ? l.calendar().name().toLowerCase(java.util.Locale.ROOT)
                    : Long.toString(anyMs ? l.window().toMillis() : l.window().toMillis() / 1000));
        }
        signedCost(args, o.cost(), "COST");
        if (anyMs) {
            args.add("MS");
        }
        if (o.sliding()) {
            args.add("SLIDE");
        }
        args.addAll(laidOnClock(o.align(), o.zone()));
        long[] costs = new long[limits.size()];
        java.util.Arrays.fill(costs, o.cost());
        if (o.tokenKeys() != 0) {
            for (int i = limits.size() - o.tokenKeys(); i < limits.size(); i++) {
                costs[i] = o.tokens();
            }
            args.add("TOKENS");
            args.add(Long.toString(o.tokens()));
            args.add(Integer.toString(o.tokenKeys()));
        }
        List<Limit> given = List.copyOf(limits);
        boolean sliding = o.sliding();
        Function<Object, MultiDecision> reader = reply -> {
            List<?> items = list(reply, "HITALL");
            if (items.size() != given.size() + 1) {
                throw new UnexpectedReplyException("HITALL", reply);
            }
            Long all = integer(items.get(0));
            boolean allowed = all != null && all == 1;
            List<Decision> decisions = new ArrayList<>();
            for (int i = 0; i < given.size(); i++) {
                Limit l = given.get(i);
                Duration window = orZero(l.window());
                if (sliding) {
                    long[] n = integers(items.get(i + 1), 4, "HITALL");
                    decisions.add(readSliding(l.limit(), window).apply(List.of(n[2] < 0 ? 1L : 0L, n[0], n[1], n[2], n[3])));
                } else {
                    long[] n = integers(items.get(i + 1), 3, "HITALL");
                    long fits = allowed || n[0] + costs[i] <= l.limit() ? 1 : 0;
                    decisions.add(readFixed(l.limit(), window, costs[i]).apply(List.of(fits, n[0], n[1], n[2])));
                }
            }
            return new MultiDecision(allowed, decisions);
        };
        return new Command<>("RATELIMIT.HITALL", "ratelimit_hitall", keys, args, true, reader);
    }

    /** A GCRA period in decimal seconds, to the nanosecond. */
    private static String periodText(Duration d) {
        BigDecimal seconds = BigDecimal.valueOf(d.getSeconds()).add(BigDecimal.valueOf(d.getNano(), 9));
        return seconds.stripTrailingZeros().toPlainString();
    }

    /**
     * {@code RATELIMIT.GCRA}: tokens from a GCRA bucket (smooth limiting).
     *
     * @param key the bucket
     * @param r the rate
     * @return the call
     */
    public static Command<Decision> gcra(String key, Rate r) {
        Objects.requireNonNull(r, "rate");
        List<String> args = new ArrayList<>(List.of(Long.toString(r.maxBurst()), Long.toString(r.perPeriod()),
                periodText(r.period())));
        signedCost(args, r.tokens(), "TOKENS");
        if (r.align()) {
            args.add("ALIGN");
        }
        return new Command<>("RATELIMIT.GCRA", "ratelimit_gcra", List.of(key(key)), args, false, readBucket(r.period()));
    }

    /**
     * {@code RATELIMIT.GCRA} with {@code PARTIAL}: as many of the rate's tokens as the bucket has
     * whole, at least one.
     *
     * @param key the bucket
     * @param r the rate, its tokens the most to take
     * @return the call
     */
    public static Command<Grant> gcraUpTo(String key, Rate r) {
        Objects.requireNonNull(r, "rate");
        positive(r.tokens(), "TOKENS");
        Command<Decision> call = gcra(key, r);
        return granting(call, call::read, 5);
    }

    /**
     * {@code RATELIMIT.HIT} with {@code PARTIAL}: as many of the cost as the window has left, at
     * least one; none left, it is denied (until the window ends, whatever the cost).
     *
     * @param key the counter
     * @param f the limit, its cost the most to take
     * @return the call
     */
    public static Command<Grant> hitUpTo(String key, Fixed f) {
        Objects.requireNonNull(f, "limit");
        upTo(f.cost(), "COST");
        return granting(hit(key, f), readFixed(f.limit(), orZero(f.window()), 1), 4);
    }

    /**
     * {@code RATELIMIT.SLIDE} with {@code PARTIAL}: as many of the cost as the sliding window's
     * estimate has room for, at least one (a denial's retry is for one).
     *
     * @param key the counter
     * @param s the limit, its cost the most to take
     * @return the call
     */
    public static Command<Grant> slideUpTo(String key, Sliding s) {
        Objects.requireNonNull(s, "limit");
        upTo(s.cost(), "COST");
        Command<Decision> call = slide(key, s);
        return granting(call, call::read, 5);
    }

    private static void upTo(long amount, String name) {
        if (amount < 1) {
            throw invalid("PARTIAL needs " + name + " >= 1");
        }
    }

    /**
     * {@code call} with {@code PARTIAL}: its decision ({@code decided} reads the reply's first
     * {@code numbers} elements), then the count granted.
     */
    private static Command<Grant> granting(Command<Decision> call, Function<Object, Decision> decided, int numbers) {
        List<String> args = new ArrayList<>(call.args());
        args.add("PARTIAL");
        String name = call.command().substring("RATELIMIT.".length()) + " PARTIAL";
        return new Command<>(call.command(), call.function(), call.keys(), args, false, reply -> {
            List<?> items = list(reply, name);
            Long granted = items.size() == numbers + 1 ? integer(items.get(numbers)) : null;
            if (granted == null) {
                throw new UnexpectedReplyException(name, reply);
            }
            return new Grant(decided.apply(items.subList(0, numbers)), granted);
        });
    }

    private static long backAmount(long amount) {
        positive(amount, "amount");
        return -amount;
    }

    /**
     * {@code RATELIMIT.HIT} with a negative cost: {@code amount} given back to the window running
     * now (never below 0, the window's end kept).
     *
     * @param key the counter
     * @param f the limit (its cost is not read)
     * @param amount what to give back, at least 1
     * @return the call
     */
    public static Command<Decision> refundHit(String key, Fixed f, long amount) {
        Objects.requireNonNull(f, "limit");
        return hit(key, f.withCost(backAmount(amount)));
    }

    /**
     * {@code RATELIMIT.SLIDE} with a negative cost: {@code amount} given back to the current window.
     *
     * @param key the counter
     * @param s the limit (its cost is not read)
     * @param amount what to give back, at least 1
     * @return the call
     */
    public static Command<Decision> refundSlide(String key, Sliding s, long amount) {
        Objects.requireNonNull(s, "limit");
        return slide(key, s.withCost(backAmount(amount)));
    }

    /**
     * {@code RATELIMIT.GCRA} with negative tokens: {@code amount} tokens given back to the bucket
     * (its TAT moves back, never before now).
     *
     * @param key the bucket
     * @param r the rate (its tokens and alignment are not read)
     * @param amount tokens to give back, at least 1
     * @return the call
     */
    public static Command<Decision> refundGcra(String key, Rate r, long amount) {
        Objects.requireNonNull(r, "rate");
        return gcra(key, new Rate(r.maxBurst(), r.perPeriod(), r.period(), backAmount(amount), false));
    }

    private static Command<Reservation> reserving(Command<Decision> call, long amount, String name) {
        if (amount < 1) {
            throw invalid("RESERVE needs " + name + " >= 1");
        }
        List<String> args = new ArrayList<>(call.args());
        args.add("RESERVE");
        String key = call.keys().get(0);
        return new Command<>(call.command(), call.function(), call.keys(), args, false, reply -> {
            List<?> items = list(reply, "a reservation");
            if (items.isEmpty()) {
                throw new UnexpectedReplyException("a reservation", reply);
            }
            Decision d = call.read(items.subList(0, items.size() - 1));
            return new Reservation(d, key, token(items.get(items.size() - 1)), amount);
        });
    }

    private static String token(Object item) {
        return item instanceof String s && !s.isEmpty() ? s : null;
    }

    /**
     * {@code RATELIMIT.HIT} with {@code RESERVE}: the cost (the estimate) counted now, and a
     * reservation to settle with what was used.
     *
     * @param key the counter
     * @param f the limit, its cost the estimate
     * @return the call
     */
    public static Command<Reservation> reserveHit(String key, Fixed f) {
        return reserving(hit(key, f), f.cost(), "COST");
    }

    /**
     * {@code RATELIMIT.HIT} with {@code PARTIAL} and {@code RESERVE}: as many of the cost as the
     * window has left, at least one, counted now, and a reservation of what was granted (its
     * amount; 0, and no token, when none was left): a block of hits to spend locally, whose unused
     * part a settle gives back while the window runs.
     *
     * @param key the counter
     * @param f the limit, its cost the most to take
     * @return the call
     */
    public static Command<Reservation> reserveHitUpTo(String key, Fixed f) {
        Objects.requireNonNull(f, "limit");
        Command<Decision> call = hit(key, f);
        // Denied only with none left: then again when the window ends, whatever the cost.
        return reservingUpTo(call, f.cost(), readFixed(f.limit(), orZero(f.window()), 1), 4);
    }

    /**
     * {@code RATELIMIT.SLIDE} with {@code PARTIAL} and {@code RESERVE}: as many of the cost as the
     * sliding window's estimate has room for, at least one, and a reservation of what was granted
     * (its amount; 0, and no token, when there was no room; a denial's retry is for one).
     *
     * @param key the counter
     * @param s the limit, its cost the most to take
     * @return the call
     */
    public static Command<Reservation> reserveSlideUpTo(String key, Sliding s) {
        Objects.requireNonNull(s, "limit");
        Command<Decision> call = slide(key, s);
        return reservingUpTo(call, s.cost(), call::read, 5);
    }

    /**
     * {@code call} with {@code PARTIAL} and {@code RESERVE}: its decision ({@code decided} reads
     * the reply's first {@code numbers} elements), then the count granted and a reservation of it.
     */
    private static Command<Reservation> reservingUpTo(Command<Decision> call, long cost,
            Function<Object, Decision> decided, int numbers) {
        upTo(cost, call.command().equals("RATELIMIT.GCRA") ? "TOKENS" : "COST");
        List<String> args = new ArrayList<>(call.args());
        args.add("PARTIAL");
        args.add("RESERVE");
        String counter = call.keys().get(0);
        String name = call.command().substring("RATELIMIT.".length()) + " PARTIAL RESERVE";
        return new Command<>(call.command(), call.function(), call.keys(), args, false, reply -> {
            List<?> items = list(reply, name);
            Long granted = items.size() == numbers + 2 ? integer(items.get(numbers)) : null;
            if (granted == null) {
                throw new UnexpectedReplyException(name, reply);
            }
            return new Reservation(decided.apply(items.subList(0, numbers)), counter, token(items.get(numbers + 1)),
                    granted);
        });
    }

    /**
     * {@code RATELIMIT.SLIDE} with {@code RESERVE}.
     *
     * @param key the counter
     * @param s the limit, its cost the estimate
     * @return the call
     */
    public static Command<Reservation> reserveSlide(String key, Sliding s) {
        return reserving(slide(key, s), s.cost(), "COST");
    }

    /**
     * {@code RATELIMIT.GCRA} with {@code RESERVE}.
     *
     * @param key the bucket
     * @param r the rate, its tokens the estimate
     * @return the call
     */
    public static Command<Reservation> reserveGcra(String key, Rate r) {
        if (r != null && r.align()) {
            throw invalid("ALIGN and RESERVE cannot be given together");
        }
        return reserving(gcra(key, r), r.tokens(), "TOKENS");
    }

    /**
     * {@code RATELIMIT.GCRA} with {@code PARTIAL} and {@code RESERVE}: as many of the rate's
     * tokens as the bucket has whole, at least one, and a reservation of what was granted (its
     * amount; 0, and no token, when none was).
     *
     * @param key the bucket
     * @param r the rate, its tokens the most to take (not aligned)
     * @return the call
     */
    public static Command<Reservation> reserveGcraUpTo(String key, Rate r) {
        Objects.requireNonNull(r, "rate");
        if (r.align()) {
            throw invalid("ALIGN and RESERVE cannot be given together");
        }
        Command<Decision> call = gcra(key, r);
        return reservingUpTo(call, r.tokens(), call::read, 5);
    }

    /**
     * {@code RATELIMIT.HITALL} with {@code TOKENS} and {@code RESERVE}: the limits decided together,
     * the estimated tokens counted on the last token keys (1 unless given) and reserved there.
     *
     * @param limits the limits
     * @param o the options, their tokens the estimate
     * @return the call
     */
    public static Command<MultiReservation> reserveAll(List<Limit> limits, AllOptions o) {
        Objects.requireNonNull(o, "options");
        if (o.tokens() < 1) {
            throw invalid("RESERVE needs TOKENS >= 1");
        }
        AllOptions withKeys = o.tokenKeys() == 0 ? o.withTokens(o.tokens(), 1) : o;
        Command<MultiDecision> call = hitAll(limits, withKeys);
        List<String> tokenKeys = call.keys().subList(call.keys().size() - withKeys.tokenKeys(), call.keys().size());
        List<String> args = new ArrayList<>(call.args());
        args.add("RESERVE");
        return new Command<>(call.command(), call.function(), call.keys(), args, true, reply -> {
            List<?> items = list(reply, "a reservation");
            if (items.isEmpty()) {
                throw new UnexpectedReplyException("a reservation", reply);
            }
            MultiDecision m = call.read(items.subList(0, items.size() - 1));
            return new MultiReservation(m, tokenKeys, token(items.get(items.size() - 1)), o.tokens());
        });
    }

    /**
     * One key's SETTLE reply: the reserving command's numbers, what was applied, then what the
     * reservation was of (its limiter, its limit, its window in ms: -1 for none), so that the
     * reservation itself stays opaque.
     */
    private static Settlement readSettled(Object reply) {
        List<?> items = list(reply, "SETTLE");
        int n = items.size();
        Long applied = n >= 5 ? integer(items.get(n - 4)) : null;
        Long limit = n >= 5 ? integer(items.get(n - 2)) : null;
        Long windowMs = n >= 5 ? integer(items.get(n - 1)) : null;
        if (applied == null || limit == null || windowMs == null) {
            throw new UnexpectedReplyException("SETTLE", reply);
        }
        Duration window = windowMs < 0 ? Duration.ZERO : Duration.ofMillis(windowMs);
        Function<Object, Decision> read = switch (String.valueOf(items.get(n - 3))) {
            case "fixed" -> readFixed(limit, window, 1);
            case "sliding" -> readSliding(limit, window);
            default -> readBucket(Duration.ZERO);
        };
        return new Settlement(read.apply(items.subList(0, n - 4)), applied);
    }

    private static List<String> settleArgs(String token, long used) {
        if (used < 0) {
            throw invalid("used must be an integer >= 0");
        }
        if (token == null || token.isEmpty()) {
            throw invalid("a denied call has no reservation to settle");
        }
        return List.of(token, Long.toString(used));
    }

    /**
     * {@code RATELIMIT.SETTLE}: a reservation settled with what was used, at most once (settled
     * again, it changes nothing and answers what the first applied).
     *
     * @param r the reservation
     * @param used what was used
     * @return the call
     */
    public static Command<Settlement> settle(Reservation r, long used) {
        Objects.requireNonNull(r, "reservation");
        List<String> args = settleArgs(r.token(), used);
        return new Command<>("RATELIMIT.SETTLE", "ratelimit_settle", List.of(key(r.key())), args, false,
                Commands::readSettled);
    }

    /**
     * {@code RATELIMIT.SETTLE} of a {@code HITALL} reservation: one settlement per token key.
     *
     * @param r the reservation
     * @param used what was used
     * @return the call
     */
    public static Command<List<Settlement>> settleAll(MultiReservation r, long used) {
        Objects.requireNonNull(r, "reservation");
        List<String> args = settleArgs(r.token(), used);
        int keys = r.keys().size();
        return new Command<>("RATELIMIT.SETTLE", "ratelimit_settle", r.keys(), args, false, reply -> {
            // One key's reply is flat, several keys' one per key.
            if (keys == 1) {
                return List.of(readSettled(reply));
            }
            List<?> items = list(reply, "SETTLE");
            if (items.size() != keys) {
                throw new UnexpectedReplyException("SETTLE", reply);
            }
            List<Settlement> out = new ArrayList<>();
            for (Object item : items) {
                out.add(readSettled(item));
            }
            return out;
        });
    }

    /**
     * A fresh lease id: 128 random bits in hex.
     *
     * @return the id
     */
    public static String newLeaseId() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    private static String leaseId(String id) {
        if (id == null || id.isEmpty() || id.getBytes(java.nio.charset.StandardCharsets.UTF_8).length > MAX_ID_BYTES) {
            throw invalid("ID must be 1 to 256 bytes");
        }
        return id;
    }

    private static List<String> leaseArgs(Duration lease) {
        Length l = length(lease, "lease");
        return l.inMs() ? List.of(l.text(true), "MS") : List.of(l.text(false));
    }

    /**
     * {@code RATELIMIT.ACQUIRE}: one of at most {@code limit} permits in flight, a lease under
     * {@code id} ({@code null}: a new one); a retry with the same id is counted once.
     *
     * @param key the permits' key
     * @param limit the permits there are
     * @param lease how long the permit is held unless renewed
     * @param id the lease's id, or {@code null}
     * @return the call
     */
    public static Command<Acquisition> acquire(String key, long limit, Duration lease, String id) {
        positive(limit, "limit");
        String held = leaseId(id == null ? newLeaseId() : id);
        List<String> args = new ArrayList<>(List.of(Long.toString(limit)));
        args.addAll(leaseArgs(lease));
        args.add("ID");
        args.add(held);
        return new Command<>("RATELIMIT.ACQUIRE", "ratelimit_acquire", List.of(key(key)), args, false, reply -> {
            List<?> items = list(reply, "ACQUIRE");
            if (items.size() != 5) {
                throw new UnexpectedReplyException("ACQUIRE", reply);
            }
            long[] n = integers(items.subList(0, 4), 4, "ACQUIRE");
            return new Acquisition(n[0] == 1, n[1], n[2], ms(n[3]), token(items.get(4)));
        });
    }

    /**
     * {@code RATELIMIT.RELEASE}: the permit under {@code id} given back.
     *
     * @param key the permits' key
     * @param id the lease's id
     * @return the call: false if the permit was not live
     */
    public static Command<Boolean> release(String key, String id) {
        List<String> args = List.of(leaseId(id));
        return new Command<>("RATELIMIT.RELEASE", "ratelimit_release", List.of(key(key)), args, false, reply -> {
            Long n = integer(reply);
            if (n == null) {
                throw new UnexpectedReplyException("RELEASE", reply);
            }
            return n == 1;
        });
    }

    /**
     * {@code RATELIMIT.RENEW}: the live lease under {@code id} extended to {@code lease} from now.
     *
     * @param key the permits' key
     * @param id the lease's id
     * @param lease the lease from now
     * @return the call: the lease it now has, or zero when it was lost
     */
    public static Command<Duration> renew(String key, String id, Duration lease) {
        List<String> args = new ArrayList<>(List.of(leaseId(id)));
        args.addAll(leaseArgs(lease));
        return new Command<>("RATELIMIT.RENEW", "ratelimit_renew", List.of(key(key)), args, false, reply -> {
            Long n = integer(reply);
            if (n == null) {
                throw new UnexpectedReplyException("RENEW", reply);
            }
            return n < 0 ? Duration.ZERO : Duration.ofMillis(n);
        });
    }

    /**
     * {@code RATELIMIT.TOP} (the module only): the keys this node denied most (or admitted the most
     * cost for, or would have denied in shadow mode) lately, each with its error bound.
     *
     * @param o the options
     * @return the call
     */
    public static Command<List<TopEntry>> top(TopOptions o) {
        Objects.requireNonNull(o, "options");
        List<String> args = new ArrayList<>();
        args.add((o.view() == null ? TopOptions.View.DENIED : o.view()).name());
        if (o.count() != 0) {
            positive(o.count(), "COUNT");
            args.add("COUNT");
            args.add(Long.toString(o.count()));
        }
        if (o.reset()) {
            args.add("RESET");
        }
        return new Command<>("RATELIMIT.TOP", null, List.of(), args, false, reply -> {
            List<TopEntry> entries = new ArrayList<>();
            for (Object row : list(reply, "TOP")) {
                Map<String, Object> f = Replies.fields(row);
                Long count = integer(f.get("count"));
                Long error = integer(f.get("error"));
                if (!(f.get("key") instanceof String key) || count == null || error == null) {
                    throw new UnexpectedReplyException("TOP", reply);
                }
                entries.add(new TopEntry(key, count, error));
            }
            return entries;
        });
    }
}

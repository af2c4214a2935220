package io.github.redisratelimit.command;

import static io.github.redisratelimit.command.Checks.invalid;
import static io.github.redisratelimit.command.Checks.positive;
import static io.github.redisratelimit.command.Replies.integer;
import static io.github.redisratelimit.command.Replies.integers;
import static io.github.redisratelimit.command.Replies.list;
import static io.github.redisratelimit.command.Replies.ms;

import io.github.redisratelimit.AllOptions;
import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.Grant;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.MultiDecision;
import io.github.redisratelimit.MultiReservation;
import io.github.redisratelimit.Reservation;
import io.github.redisratelimit.Sliding;
import io.github.redisratelimit.UnexpectedReplyException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Function;

/**
 * The fixed and sliding windows' calls ({@code RATELIMIT.HIT}, {@code PEEK}, {@code SLIDE},
 * {@code HITALL}), each limiter's five: decide, decide up to, reserve, reserve up to, give back. Each
 * builder checks its arguments as the server would (an {@link io.github.redisratelimit.InvalidArgumentException}, worded as
 * the server words it, before anything is sent) and gives the {@link Command} to send.
 */
public final class WindowCommands {
    private WindowCommands() {
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
        CommandParts.Length window = CommandParts.fixedWindow(f.window(), f.calendar());
        List<String> args = new ArrayList<>();
        args.add(Long.toString(f.limit()));
        args.add(window == null ? f.calendar().name().toLowerCase(java.util.Locale.ROOT) : window.text(window.inMs()));
        CommandParts.signedCost(args, f.cost(), "COST");
        if (window != null && window.inMs()) {
            args.add("MS");
        }
        args.addAll(CommandParts.laidOnClock(f.align(), f.zone()));
        return new Command<>("RATELIMIT.HIT", "ratelimit_hit", List.of(CommandParts.key(key)), args, false,
                CommandParts.readFixed(f.limit(), CommandParts.orZero(f.window()), f.cost()));
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
        CommandParts.signedCost(args, cost, "COST");
        return new Command<>("RATELIMIT.PEEK", "ratelimit_peek", List.of(CommandParts.key(key)), args, false,
                CommandParts.readFixed(limit, Duration.ZERO, cost));
    }

    private static List<String> slideArgs(Sliding s) {
        Objects.requireNonNull(s, "limit");
        CommandParts.Length window = CommandParts.length(s.window(), "window");
        List<String> args = new ArrayList<>(List.of(Long.toString(s.limit()), window.text(window.inMs())));
        CommandParts.signedCost(args, s.cost(), "COST");
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
        return new Command<>("RATELIMIT.SLIDE", "ratelimit_slide", List.of(CommandParts.key(key)), slideArgs(s), false,
                CommandParts.readSliding(s.limit(), s.window()));
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
        return new Command<>("RATELIMIT.SLIDE", "ratelimit_slide", List.of(CommandParts.key(key)), args, false,
                CommandParts.readSliding(s.limit(), s.window()));
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
            CommandParts.Length w = CommandParts.fixedWindow(l.window(), l.calendar());
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
        CommandParts.signedCost(args, o.cost(), "COST");
        if (anyMs) {
            args.add("MS");
        }
        if (o.sliding()) {
            args.add("SLIDE");
        }
        args.addAll(CommandParts.laidOnClock(o.align(), o.zone()));
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
                Duration window = CommandParts.orZero(l.window());
                if (sliding) {
                    long[] n = integers(items.get(i + 1), 4, "HITALL");
                    decisions.add(CommandParts.readSliding(l.limit(), window).apply(List.of(n[2] < 0 ? 1L : 0L, n[0], n[1], n[2], n[3])));
                } else {
                    long[] n = integers(items.get(i + 1), 3, "HITALL");
                    long fits = allowed || n[0] + costs[i] <= l.limit() ? 1 : 0;
                    decisions.add(CommandParts.readFixed(l.limit(), window, costs[i]).apply(List.of(fits, n[0], n[1], n[2])));
                }
            }
            return new MultiDecision(allowed, decisions);
        };
        return new Command<>("RATELIMIT.HITALL", "ratelimit_hitall", keys, args, true, reader);
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
        CommandParts.upTo(f.cost(), "COST");
        return CommandParts.granting(hit(key, f), CommandParts.readFixed(f.limit(), CommandParts.orZero(f.window()), 1), 4);
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
        CommandParts.upTo(s.cost(), "COST");
        Command<Decision> call = slide(key, s);
        return CommandParts.granting(call, call::read, 5);
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
        return hit(key, f.withCost(CommandParts.backAmount(amount)));
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
        return slide(key, s.withCost(CommandParts.backAmount(amount)));
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
        return CommandParts.reserving(hit(key, f), f.cost(), "COST");
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
        return CommandParts.reservingUpTo(call, f.cost(), CommandParts.readFixed(f.limit(), CommandParts.orZero(f.window()), 1), 4);
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
        return CommandParts.reservingUpTo(call, s.cost(), call::read, 5);
    }

    /**
     * {@code RATELIMIT.SLIDE} with {@code RESERVE}.
     *
     * @param key the counter
     * @param s the limit, its cost the estimate
     * @return the call
     */
    public static Command<Reservation> reserveSlide(String key, Sliding s) {
        return CommandParts.reserving(slide(key, s), s.cost(), "COST");
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
            return new MultiReservation(m, tokenKeys, CommandParts.token(items.get(items.size() - 1)), o.tokens());
        });
    }
}

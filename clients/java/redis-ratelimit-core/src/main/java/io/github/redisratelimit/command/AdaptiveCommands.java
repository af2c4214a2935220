package io.github.redisratelimit.command;

import static io.github.redisratelimit.command.Replies.integers;
import static io.github.redisratelimit.command.Replies.ms;

import io.github.redisratelimit.Adaptive;
import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Grant;
import io.github.redisratelimit.Learned;
import io.github.redisratelimit.Report;
import io.github.redisratelimit.Reservation;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Function;

/**
 * The adaptive limit's calls ({@code RATELIMIT.ADAPT}, {@code RATELIMIT.REPORT}), each checked as
 * the server would check it before anything is sent.
 */
public final class AdaptiveCommands {
    private static final long MAX_SCALED = 1L << 50;

    private AdaptiveCommands() {
    }

    /**
     * {@code RATELIMIT.ADAPT}: a call of {@code cost} decided against the limit the fleet learns at
     * {@code key}, paced (at most a sixth of a window's limit at once). The decision's limit is
     * the learned one.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost what the call takes, at least 1
     * @return the call
     */
    public static Command<Decision> adapt(String key, Adaptive terms, long cost) {
        return adapt(key, terms, cost, false);
    }

    /**
     * {@code RATELIMIT.ADAPT} as {@link #adapt(String, Adaptive, long)}, asked again at a turn.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost what the call takes, at least 1
     * @param turn whether the caller is back at the {@code retryAfter} a denial told it ({@code TURN}):
     *     it is then admitted on a bucket not in debt, so that no one who was not waiting takes its turn
     * @return the call
     */
    public static Command<Decision> adapt(String key, Adaptive terms, long cost, boolean turn) {
        Objects.requireNonNull(terms, "terms");
        Checks.positive(cost, "COST");
        long windowMs = terms.window().toMillis();
        if (cost > MAX_SCALED / windowMs) {
            throw Checks.invalid("COST * window is too large");
        }
        List<String> args = new ArrayList<>(List.of(Long.toString(terms.floor()), Long.toString(terms.start()),
                Long.toString(terms.ceiling())));
        if (windowMs % 1000 == 0) {
            args.add(Long.toString(windowMs / 1000));
        } else {
            args.add(Long.toString(windowMs));
            args.add("MS");
        }
        CommandParts.signedCost(args, cost, "COST");
        if (turn) {
            args.add("TURN");
        }
        return new Command<>("RATELIMIT.ADAPT", "ratelimit_adapt", List.of(CommandParts.key(key)), args, false,
                readAdaptive(terms.window()));
    }

    /** ADAPT's {@code [allowed, limit, remaining, retry_after_ms, reset_ms]}. */
    static Function<Object, Decision> readAdaptive(Duration window) {
        return reply -> {
            long[] n = integers(reply, 5, "an adaptive limit");
            boolean allowed = n[0] == 1;
            return new Decision(allowed, Math.max(n[1] - n[2], 0), n[2], n[1], ms(n[4]), allowed ? Duration.ZERO : ms(n[3]), window);
        };
    }

    /**
     * {@code RATELIMIT.ADAPT} with {@code RESERVE}: {@code estimate} (an LLM call's tokens before
     * the answer) decided and taken as by {@link #adapt}, and a reservation to settle with what
     * was used: the unused part goes back to the fleet's bucket, and never counts as use that
     * earns growth.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param estimate what the call is expected to take, at least 1
     * @return the call
     */
    public static Command<Reservation> reserveAdapt(String key, Adaptive terms, long estimate) {
        return reserveAdapt(key, terms, estimate, false);
    }

    /**
     * {@link #reserveAdapt(String, Adaptive, long)}, asked again at a turn.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param estimate see {@link #reserveAdapt(String, Adaptive, long)}
     * @param turn whether the caller is back at the {@code retryAfter} a denial told it ({@code TURN}):
     *     it is then admitted on a bucket not in debt, so that no one who was not waiting takes its turn
     * @return the call
     */
    public static Command<Reservation> reserveAdapt(String key, Adaptive terms, long estimate, boolean turn) {
        return CommandParts.reserving(adapt(key, terms, estimate, turn), estimate, "COST");
    }

    /**
     * {@code RATELIMIT.ADAPT} with {@code PARTIAL} and {@code RESERVE}: as many of {@code cost} as
     * the bucket has whole, at least one, and a reservation of what was granted (its amount; 0,
     * and no token, when none was).
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost the most the call takes, at least 1
     * @return the call
     */
    public static Command<Reservation> reserveAdaptUpTo(String key, Adaptive terms, long cost) {
        return reserveAdaptUpTo(key, terms, cost, false);
    }

    /**
     * {@link #reserveAdaptUpTo(String, Adaptive, long)}, asked again at a turn.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost see {@link #reserveAdaptUpTo(String, Adaptive, long)}
     * @param turn whether the caller is back at the {@code retryAfter} a denial told it ({@code TURN}):
     *     it is then admitted on a bucket not in debt, so that no one who was not waiting takes its turn
     * @return the call
     */
    public static Command<Reservation> reserveAdaptUpTo(String key, Adaptive terms, long cost, boolean turn) {
        Command<Decision> call = adapt(key, terms, cost, turn);
        return CommandParts.reservingUpTo(call, cost, call::read, 5);
    }

    /**
     * {@code RATELIMIT.ADAPT} with {@code PARTIAL}: as many of {@code cost} as the bucket has
     * whole, at least one.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost the most the call takes, at least 1
     * @return the call
     */
    public static Command<Grant> adaptUpTo(String key, Adaptive terms, long cost) {
        return adaptUpTo(key, terms, cost, false);
    }

    /**
     * {@link #adaptUpTo(String, Adaptive, long)}, asked again at a turn.
     *
     * @param key the adaptive limit
     * @param terms its bounds and window
     * @param cost see {@link #adaptUpTo(String, Adaptive, long)}
     * @param turn whether the caller is back at the {@code retryAfter} a denial told it ({@code TURN}):
     *     it is then admitted on a bucket not in debt, so that no one who was not waiting takes its turn
     * @return the call
     */
    public static Command<Grant> adaptUpTo(String key, Adaptive terms, long cost, boolean turn) {
        Command<Decision> call = adapt(key, terms, cost, turn);
        return CommandParts.granting(call, call::read, 5);
    }

    /** A provider's wait in whole ms, rounded up, within the module's bound. */
    private static String spanMs(Duration d, String name) {
        if (d.isNegative()) {
            throw Checks.invalid(name + " must be an integer >= 0");
        }
        long ms = d.plusNanos(999_999).toMillis();
        if (ms > Checks.MAX_SPAN_MS) {
            throw Checks.invalid(name + " is too large");
        }
        return Long.toString(ms);
    }

    /**
     * {@code RATELIMIT.REPORT}: how the provider answered a call decided at {@code key}. A
     * throttle cuts the fleet's limit (once per epoch, however many callers report the same
     * burst, and again for a call decided after the cut, as its age tells), and with a Retry-After holds every caller until then; the provider's stated limit
     * caps the learned one, its remaining bounds the fleet until its reset. Empty where no limit is
     * learned at {@code key}.
     *
     * @param key the adaptive limit
     * @param report how the provider answered
     * @return the call
     */
    public static Command<Optional<Learned>> report(String key, Report report) {
        Objects.requireNonNull(report, "report");
        List<String> args = new ArrayList<>(List.of(report.throttled() ? "THROTTLED" : "OK"));
        if (report.retryAfter() != null) {
            args.add("RETRY");
            args.add(spanMs(report.retryAfter(), "RETRY"));
        }
        if (report.limit() > 0) {
            args.add("LIMIT");
            args.add(Long.toString(report.limit()));
        }
        if (report.remaining() >= 0) {
            args.addAll(List.of("REMAINING", Long.toString(report.remaining()), "RESET", spanMs(report.resetAfter(), "RESET")));
        }
        if (report.age() != null) {
            args.add("AGE");
            args.add(spanMs(report.age(), "AGE"));
        }
        return new Command<>("RATELIMIT.REPORT", "ratelimit_report", List.of(CommandParts.key(key)), args, false, reply -> {
            if (reply == null) {
                return Optional.empty();
            }
            long[] n = integers(reply, 3, "a report");
            return Optional.of(new Learned(n[0], n[1] == 1, ms(n[2])));
        });
    }
}

package io.github.redisratelimit.command;

import static io.github.redisratelimit.command.Checks.invalid;
import static io.github.redisratelimit.command.Checks.positive;
import static io.github.redisratelimit.command.Replies.integer;
import static io.github.redisratelimit.command.Replies.integers;
import static io.github.redisratelimit.command.Replies.list;
import static io.github.redisratelimit.command.Replies.ms;

import io.github.redisratelimit.Calendar;
import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Grant;
import io.github.redisratelimit.Reservation;
import io.github.redisratelimit.UnexpectedReplyException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Function;

/**
 * What the families' builders share: the lengths and windows as sent, the options laid on the
 * clock, the costs, and how the limiters' replies read.
 */
final class CommandParts {
    private CommandParts() {
    }

    /** A window or lease as sent: whole seconds, or milliseconds with MS. */
    record Length(long ms, boolean inMs) {
        String text(boolean asMs) {
            return Long.toString(asMs ? ms : ms / 1000);
        }
    }

    static Length length(Duration d, String name) {
        long ms = Checks.lengthMs(d, name);
        return new Length(ms, ms % 1000 != 0);
    }

    /** A HIT window, checked by its record: a calendar unit (null length) or a length. */
    static Length fixedWindow(Duration window, Calendar calendar) {
        return calendar != null ? null : length(window, "window");
    }

    static List<String> laidOnClock(boolean align, String zone) {
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

    static void signedCost(List<String> args, long n, String name) {
        if (n != 1) {
            args.add(name);
            args.add(Long.toString(n));
        }
    }

    static String key(String key) {
        return Objects.requireNonNull(key, "key");
    }

    static Function<Object, Decision> readFixed(long limit, Duration window, long cost) {
        return reply -> {
            long[] n = integers(reply, 4, "a fixed window");
            boolean allowed = n[0] == 1;
            Duration reset = ms(n[3]);
            Duration retry = allowed ? Duration.ZERO : cost > limit ? Decision.FOREVER : reset;
            return new Decision(allowed, n[1], n[2], limit, reset, retry, window);
        };
    }

    static Function<Object, Decision> readSliding(long limit, Duration window) {
        return reply -> {
            long[] n = integers(reply, 5, "a sliding window");
            boolean allowed = n[0] == 1;
            return new Decision(allowed, n[1], n[2], limit, ms(n[4]), allowed ? Duration.ZERO : ms(n[3]), window);
        };
    }

    static Function<Object, Decision> readBucket(Duration period) {
        return reply -> {
            long[] n = integers(reply, 5, "a GCRA bucket");
            boolean allowed = n[0] == 0;
            return new Decision(allowed, n[1] - n[2], n[2], n[1], ms(n[4]), allowed ? Duration.ZERO : ms(n[3]), period);
        };
    }

    static Duration orZero(Duration d) {
        return d == null ? Duration.ZERO : d;
    }

    static void upTo(long amount, String name) {
        if (amount < 1) {
            throw invalid("PARTIAL needs " + name + " >= 1");
        }
    }

    /**
     * {@code call} with {@code PARTIAL}: its decision ({@code decided} reads the reply's first
     * {@code numbers} elements), then the count granted.
     */
    static Command<Grant> granting(Command<Decision> call, Function<Object, Decision> decided, int numbers) {
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

    static long backAmount(long amount) {
        positive(amount, "amount");
        return -amount;
    }

    static Command<Reservation> reserving(Command<Decision> call, long amount, String name) {
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

    static String token(Object item) {
        return item instanceof String s && !s.isEmpty() ? s : null;
    }

    /**
     * {@code call} with {@code PARTIAL} and {@code RESERVE}: its decision ({@code decided} reads
     * the reply's first {@code numbers} elements), then the count granted and a reservation of it.
     */
    static Command<Reservation> reservingUpTo(Command<Decision> call, long cost,
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
}

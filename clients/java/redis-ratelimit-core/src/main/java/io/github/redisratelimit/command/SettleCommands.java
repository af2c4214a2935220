package io.github.redisratelimit.command;

import static io.github.redisratelimit.command.Checks.invalid;
import static io.github.redisratelimit.command.Replies.integer;
import static io.github.redisratelimit.command.Replies.list;
import static io.github.redisratelimit.command.Replies.ms;

import io.github.redisratelimit.Decision;
import io.github.redisratelimit.MultiReservation;
import io.github.redisratelimit.Reservation;
import io.github.redisratelimit.Settlement;
import io.github.redisratelimit.UnexpectedReplyException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Function;

/**
 * {@code RATELIMIT.SETTLE}: a reservation passed through as the server made it, the reply read by
 * the shape that ends it.
 */
public final class SettleCommands {
    private SettleCommands() {
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
            case "fixed" -> CommandParts.readFixed(limit, window, 1);
            case "sliding" -> CommandParts.readSliding(limit, window);
            case "adaptive" -> AdaptiveCommands.readAdaptive(window);
            default -> CommandParts.readBucket(Duration.ZERO);
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
        return new Command<>("RATELIMIT.SETTLE", "ratelimit_settle", List.of(CommandParts.key(r.key())), args, false,
                SettleCommands::readSettled);
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
}

package io.github.redisratelimit.command;

import static io.github.redisratelimit.command.Checks.invalid;
import static io.github.redisratelimit.command.Checks.positive;

import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Grant;
import io.github.redisratelimit.Rate;
import io.github.redisratelimit.Reservation;
import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * GCRA's calls ({@code RATELIMIT.GCRA}): decide, decide up to, reserve, reserve up to, give back,
 * each checked as the server would check it before anything is sent.
 */
public final class GcraCommands {
    private GcraCommands() {
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
        CommandParts.signedCost(args, r.tokens(), "TOKENS");
        if (r.align()) {
            args.add("ALIGN");
        }
        return new Command<>("RATELIMIT.GCRA", "ratelimit_gcra", List.of(CommandParts.key(key)), args, false, CommandParts.readBucket(r.period()));
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
        return CommandParts.granting(call, call::read, 5);
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
        return gcra(key, new Rate(r.maxBurst(), r.perPeriod(), r.period(), CommandParts.backAmount(amount), false));
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
        return CommandParts.reserving(gcra(key, r), r.tokens(), "TOKENS");
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
        return CommandParts.reservingUpTo(call, r.tokens(), call::read, 5);
    }
}

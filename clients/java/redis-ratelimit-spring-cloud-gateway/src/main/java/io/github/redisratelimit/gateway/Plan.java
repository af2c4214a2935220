package io.github.redisratelimit.gateway;

import io.github.redisratelimit.AllOptions;
import io.github.redisratelimit.Calendar;
import io.github.redisratelimit.Decision;
import io.github.redisratelimit.Fixed;
import io.github.redisratelimit.Limit;
import io.github.redisratelimit.MultiDecision;
import io.github.redisratelimit.Rate;
import io.github.redisratelimit.Sliding;
import io.github.redisratelimit.gateway.NativeRedisRateLimiterConfig.Algorithm;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.springframework.boot.convert.DurationStyle;

/**
 * What one request of a route sends: a bucket, one window, or several limits (with their names in
 * the headers); or, where the gateway's script writes nothing, the decision made here.
 *
 * @param key the key of a bucket or of one window
 * @param rate a bucket
 * @param fixed one fixed window
 * @param sliding one sliding window
 * @param limits several limits, each on its own key
 * @param options several limits' options
 * @param names the limits' names in the headers
 * @param decided the answer, with no call
 */
record Plan(String key, Rate rate, Fixed fixed, Sliding sliding, List<Limit> limits, AllOptions options,
        List<String> names, MultiDecision decided) {
    private static final List<String> ONE = List.of("default");

    /**
     * The plan of a route's configuration, on keys that start with {@code prefix}.
     *
     * @throws IllegalArgumentException where the properties make no limiter (what the core refuses too)
     */
    static Plan of(NativeRedisRateLimiterConfig c, String prefix) {
        int tokens = c.getRequestedTokens();
        Algorithm algorithm = c.algorithm();
        if (algorithm == Algorithm.BUCKET || algorithm == Algorithm.GCRA) {
            return bucket(c, prefix, algorithm == Algorithm.BUCKET);
        }
        boolean sliding = algorithm == Algorithm.SLIDING;
        if (!c.getLimits().isEmpty()) {
            if (c.getLimit() != 0 || c.getWindow() != null) {
                throw new IllegalArgumentException("give limit and window, or limits, not both");
            }
            List<Limit> limits = new ArrayList<>();
            List<String> names = new ArrayList<>();
            for (String spec : c.getLimits()) {
                int slash = spec.indexOf('/');
                if (slash < 0) {
                    throw new IllegalArgumentException("a limit is limit/window, such as 100/1m: " + spec);
                }
                long limit = Long.parseLong(spec.substring(0, slash).trim());
                String window = spec.substring(slash + 1).trim();
                Calendar calendar = calendar(window);
                String key = prefix + (sliding ? "sliding." : "fixed.") + window;
                limits.add(calendar != null ? Limit.of(key, limit, calendar) : Limit.of(key, limit, duration(window)));
                names.add(window);
            }
            AllOptions options = AllOptions.DEFAULT.withCost(tokens);
            options = sliding ? options.slidingWindows() : options;
            options = c.isAlign() ? options.aligned() : options;
            options = c.getZone() != null ? options.inZone(c.getZone()) : options;
            options.validate(limits);
            return new Plan(prefix, null, null, null, List.copyOf(limits), options, List.copyOf(names), null);
        }
        if (c.getLimit() < 1 || c.getWindow() == null) {
            throw new IllegalArgumentException("a window needs limit (>= 1) and window");
        }
        String window = c.getWindow().trim();
        Calendar calendar = calendar(window);
        List<String> names = List.of(window);
        if (sliding) {
            if (calendar != null || c.isAlign() || c.getZone() != null) {
                throw new IllegalArgumentException("a sliding window takes a duration, with neither align nor zone");
            }
            Sliding limit = Sliding.of(c.getLimit(), duration(window)).withCost(tokens);
            return new Plan(prefix + "sliding." + window, null, null, limit, List.of(), AllOptions.DEFAULT, names, null);
        }
        Fixed limit = calendar != null ? Fixed.of(c.getLimit(), calendar) : Fixed.of(c.getLimit(), duration(window));
        limit = limit.withCost(tokens);
        limit = c.isAlign() ? limit.aligned() : limit;
        limit = c.getZone() != null ? limit.inZone(c.getZone()) : limit;
        return new Plan(prefix + "fixed." + window, null, limit, null, List.of(), AllOptions.DEFAULT, names, null);
    }

    /**
     * A bucket of {@code burstCapacity} refilled {@code replenishRate} per {@code replenishPeriod}:
     * at the period's boundaries (the gateway's), or smoothly (GCRA).
     */
    private static Plan bucket(NativeRedisRateLimiterConfig c, String prefix, boolean stepped) {
        if (!c.replenishRateGiven()) {
            throw new IllegalArgumentException("a bucket needs replenishRate");
        }
        if (c.getLimit() != 0 || c.getWindow() != null || !c.getLimits().isEmpty() || c.getZone() != null || c.isAlign()) {
            throw new IllegalArgumentException("a bucket takes replenishRate, burstCapacity and replenishPeriod, not windows");
        }
        int rate = c.getReplenishRate();
        long burst = c.getBurstCapacity();
        int tokens = c.getRequestedTokens();
        Duration period = c.getReplenishPeriod();
        if (burst == 0) {
            // The gateway's script denies everything, and says 0 tokens are left.
            return decided(prefix, new Decision(false, 0, 0, 0, Duration.ZERO, Decision.FOREVER, period));
        }
        if (stepped && period.equals(Duration.ofSeconds(1)) && 2 * burst / rate == 0) {
            // Its keys would live floor(2 * burst / rate) = 0 s: the script stores nothing, and every
            // request finds a full bucket.
            boolean fits = tokens <= burst;
            Duration retry = fits ? Duration.ZERO : Decision.FOREVER;
            return decided(prefix, new Decision(fits, fits ? tokens : 0, fits ? burst - tokens : burst, burst,
                    Duration.ZERO, retry, period));
        }
        Rate bucket = Rate.of(burst - 1, rate, period).withTokens(tokens);
        bucket = stepped ? bucket.aligned() : bucket;
        return new Plan(prefix + (stepped ? "bucket" : "gcra"), bucket, null, null, List.of(), AllOptions.DEFAULT, ONE, null);
    }

    private static Plan decided(String prefix, Decision decision) {
        return new Plan(prefix, null, null, null, List.of(), AllOptions.DEFAULT, ONE,
                new MultiDecision(decision.allowed(), List.of(decision)));
    }

    /** A calendar window's unit, or null for a duration. */
    private static Calendar calendar(String window) {
        for (Calendar unit : Calendar.values()) {
            if (unit.name().equalsIgnoreCase(window)) {
                return unit;
            }
        }
        return null;
    }

    /** A duration as Spring Boot reads one: {@code 1m}, {@code 500ms}, {@code PT1H}. */
    private static Duration duration(String window) {
        return DurationStyle.detectAndParse(window);
    }
}

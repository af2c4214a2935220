package io.github.redisratelimit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/** The HTTP headers of decisions, as the Python and Node packages give them. */
final class Headers {
    private Headers() {
    }

    /** A wait as the headers carry it: whole seconds rounded up (a client that waits that long is admitted). */
    static long wholeSeconds(Duration d) {
        if (d.isNegative() || d.isZero()) {
            return 0;
        }
        return d.getSeconds() + (d.getNano() > 0 ? 1 : 0);
    }

    private static String policy(String name, Decision d) {
        String quota = "\"" + name + "\";q=" + d.limit();
        return d.window().isZero() ? quota : quota + ";w=" + Math.max(wholeSeconds(d.window()), 1);
    }

    /**
     * Each limit in {@code RateLimit-Policy}; the tightest in {@code RateLimit} (fewest remaining,
     * then the latest reset; among the limits that refused, when one did); {@code Retry-After} when
     * one refused and will admit again: the longest of their waits.
     */
    static Map<String, String> of(List<String> names, List<Decision> decisions) {
        if (names.size() != decisions.size()) {
            throw new IllegalArgumentException(decisions.size() + " names needed, " + names.size() + " given");
        }
        if (decisions.isEmpty()) {
            return Map.of();
        }
        List<Integer> refusing = new ArrayList<>();
        for (int i = 0; i < decisions.size(); i++) {
            if (!decisions.get(i).allowed()) {
                refusing.add(i);
            }
        }
        List<Integer> candidates = new ArrayList<>(refusing);
        if (candidates.isEmpty()) {
            for (int i = 0; i < decisions.size(); i++) {
                candidates.add(i);
            }
        }
        int current = candidates.get(0);
        for (int i : candidates) {
            if (MultiDecision.tighter(decisions.get(i), decisions.get(current))) {
                current = i;
            }
        }
        Decision tightest = decisions.get(current);
        Map<String, String> headers = new LinkedHashMap<>();
        headers.put("RateLimit-Policy", IntStream.range(0, names.size())
                .mapToObj(i -> policy(names.get(i), decisions.get(i))).collect(Collectors.joining(", ")));
        long reset = Math.min(wholeSeconds(tightest.resetAfter()), 1L << 31);
        headers.put("RateLimit", "\"" + names.get(current) + "\";r=" + tightest.remaining() + ";t=" + reset);
        Duration retry = Duration.ZERO;
        for (int i : refusing) {
            if (decisions.get(i).retryAfter().compareTo(retry) > 0) {
                retry = decisions.get(i).retryAfter();
            }
        }
        if (!refusing.isEmpty() && !retry.equals(Decision.FOREVER)) {
            headers.put("Retry-After", Long.toString(wholeSeconds(retry)));
        }
        return headers;
    }
}

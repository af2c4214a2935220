package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redisratelimit.gateway.NativeRedisRateLimiter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.springframework.cloud.gateway.filter.ratelimit.RateLimiter.Response;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.ReactiveStringRedisTemplate;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.UnifiedJedis;

/**
 * The starter's bean against Spring Cloud Gateway's own {@code RedisRateLimiter} (its Lua script)
 * on one server: the same configurations, the same requests at the same instants, the same
 * decisions and the same headers. A pair of calls that a second's boundary fell between is not
 * compared (the two read the clock on either side of it), and its key is left.
 */
class GatewayDifferentialTest {
    private static final int REQUESTS = 1_000;

    @ParameterizedTest
    @EnumSource(value = Stack.class, names = { "LETTUCE_MODULE", "LETTUCE_LIBRARY" })
    void theSameDecisionsAsTheGatewaysScript(Stack stack) throws InterruptedException {
        int port = stack.servers().get(0).port;
        LettuceConnectionFactory factory = GatewayScript.factory(port);
        try {
            ReactiveStringRedisTemplate template = new ReactiveStringRedisTemplate(factory);
            RedisRateLimiter theirs = new RedisRateLimiter(template, GatewayScript.script(), null);
            NativeRedisRateLimiter ours = new NativeRedisRateLimiter(stack.async(), template, GatewayScript.script(), null);
            compare(stack, theirs, ours);
        } finally {
            factory.destroy();
        }
    }


    private static void compare(Stack stack, RedisRateLimiter theirs, NativeRedisRateLimiter ours) throws InterruptedException {
        long seed = System.nanoTime();
        Random rng = new Random(seed);
        // Rates, capacities (at, above and below the rate: the script's keys then live
        // floor(2 * burst / rate) s, 0 for the smallest) and requests (some above the capacity).
        int routes = 12;
        for (int r = 0; r < routes; r++) {
            int rate = new int[] { 1, 2, 3, 5, 10, 100 }[rng.nextInt(6)];
            long burst = switch (rng.nextInt(6)) {
                case 0 -> 0;
                case 1 -> Math.max(1, rate / 3);
                case 2 -> rate;
                default -> rate + rng.nextInt(3 * rate + 1);
            };
            int requested = switch (rng.nextInt(5)) {
                case 0 -> (int) burst + 1;
                case 1 -> Math.max(1, rate);
                default -> 1 + rng.nextInt(3);
            };
            // Capacity first, as the gateway's binding sets them: a capacity below the rate stays.
            RedisRateLimiter.Config config = new RedisRateLimiter.Config().setBurstCapacity(burst)
                    .setReplenishRate(rate).setRequestedTokens(requested);
            theirs.getConfig().put("route" + r, config);
            ours.getConfig().put("route" + r, config);
        }
        String run = Long.toString(seed, 36);
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < 24; i++) {
            ids.add(run + "-" + i);
        }
        UnifiedJedis raw = stack.raw();
        int compared = 0;
        int across = 0;
        List<String> mismatches = new ArrayList<>();
        for (int i = 0; i < REQUESTS; i++) {
            int slot = rng.nextInt(ids.size());
            String route = "route" + (slot % routes);
            String id = ids.get(slot);
            long before = second(raw);
            Response a = theirs.isAllowed(route, id).block();
            Response b = ours.isAllowed(route, id).block();
            if (second(raw) != before) {
                across++;
                ids.set(slot, id + "+");
                continue;
            }
            compared++;
            for (String header : List.of(RedisRateLimiter.REMAINING_HEADER, RedisRateLimiter.REPLENISH_RATE_HEADER,
                    RedisRateLimiter.BURST_CAPACITY_HEADER, RedisRateLimiter.REQUESTED_TOKENS_HEADER)) {
                if (a.isAllowed() != b.isAllowed() || !a.getHeaders().get(header).equals(b.getHeaders().get(header))) {
                    mismatches.add(route + " " + theirs.getConfig().get(route) + " id " + id + ": gateway " + a + ", ours " + b);
                    break;
                }
            }
            // Now and then a pause, so that seconds pass and the buckets refill.
            if (rng.nextInt(50) == 0) {
                Thread.sleep(rng.nextInt(400));
            }
        }
        System.out.printf("gateway differential (%s, seed %d): %d requests compared, %d left (a second's boundary between the pair), %d mismatches%n",
                stack, seed, compared, across, mismatches.size());
        assertEquals(List.of(), mismatches);
        assertTrue(compared > REQUESTS * 9 / 10, "too few compared: " + compared);
    }

    /** The server's clock, in whole seconds (the gateway's script's unit). */
    @SuppressWarnings("unchecked")
    private static long second(UnifiedJedis raw) {
        List<byte[]> reply = (List<byte[]>) raw.sendCommand(Protocol.Command.TIME);
        return Long.parseLong(new String(reply.get(0), StandardCharsets.US_ASCII));
    }
}

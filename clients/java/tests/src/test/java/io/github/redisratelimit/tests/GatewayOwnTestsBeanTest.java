package io.github.redisratelimit.tests;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import io.github.redisratelimit.gateway.NativeRedisRateLimiter;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiterTests;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The context of Spring Cloud Gateway's own {@code RedisRateLimiterTests} (its configuration and
 * properties, which this module's surefire runs too): the {@code RedisRateLimiter} those tests get
 * is the starter's.
 */
@SpringBootTest(classes = RedisRateLimiterTests.TestConfig.class, webEnvironment = WebEnvironment.RANDOM_PORT,
        properties = "spring.cloud.gateway.server.webflux.function.enabled=false")
@DirtiesContext
class GatewayOwnTestsBeanTest {
    @Autowired
    private RedisRateLimiter rateLimiter;

    @DynamicPropertySource
    static void redis(DynamicPropertyRegistry registry) {
        registry.add("spring.data.redis.host", () -> "127.0.0.1");
        registry.add("spring.data.redis.port", GatewayServer::port);
    }

    @Test
    void theGatewaysOwnTestsGetTheStartersBean() {
        assertInstanceOf(NativeRedisRateLimiter.class, rateLimiter);
    }
}

package io.github.redisratelimit.gateway;

import io.github.redisratelimit.AsyncRateLimiter;
import java.util.List;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.cloud.gateway.filter.ratelimit.RateLimiter;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.cloud.gateway.support.ConfigurationService;
import org.springframework.context.annotation.Bean;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.ReactiveStringRedisTemplate;
import org.springframework.data.redis.core.script.RedisScript;

/**
 * The dependency is the switch: where Spring Cloud Gateway would make its {@link RedisRateLimiter},
 * this makes a {@link NativeRedisRateLimiter} (one), on the context's Lettuce connection. It backs
 * off where the application defines its own {@code RedisRateLimiter} or {@code RateLimiter}, and
 * where {@code redis-ratelimit.gateway.enabled} (or the gateway's
 * {@code spring.cloud.gateway.server.webflux.redis.enabled}) is false.
 */
@AutoConfiguration(afterName = "org.springframework.boot.data.redis.autoconfigure.DataRedisReactiveAutoConfiguration",
        beforeName = { "org.springframework.cloud.gateway.config.GatewayRedisAutoConfiguration",
            "org.springframework.cloud.gateway.config.GatewayAutoConfiguration" })
@ConditionalOnClass(RedisRateLimiter.class)
@ConditionalOnBean({ LettuceConnectionFactory.class, ReactiveStringRedisTemplate.class })
@ConditionalOnProperty(name = { "redis-ratelimit.gateway.enabled", "spring.cloud.gateway.server.webflux.redis.enabled" },
        havingValue = "true", matchIfMissing = true)
public class NativeRateLimiterAutoConfiguration {
    /** Made by Spring. */
    public NativeRateLimiterAutoConfiguration() {
    }

    @Bean
    ContextTransport gatewayRateLimitTransport(LettuceConnectionFactory factory) {
        return new ContextTransport(factory);
    }

    /**
     * The limiter on the context's connection: the module, or the Functions library (loaded when
     * missing). An application can use it too.
     *
     * @param transport the context's connection
     * @return the limiter
     */
    @Bean
    @ConditionalOnMissingBean
    public AsyncRateLimiter gatewayAsyncRateLimiter(ContextTransport transport) {
        return new AsyncRateLimiter(transport);
    }

    /**
     * The gateway's rate limiter, decided by the module.
     *
     * @param limiter where its calls go
     * @param redisTemplate the gateway's template
     * @param script the gateway's script, where the gateway made its bean
     * @param configurationService binds the routes' properties
     * @return the limiter
     */
    @Bean
    @ConditionalOnMissingBean({ RedisRateLimiter.class, RateLimiter.class })
    public NativeRedisRateLimiter redisRateLimiter(AsyncRateLimiter limiter, ReactiveStringRedisTemplate redisTemplate,
            @Qualifier(RedisRateLimiter.REDIS_SCRIPT_NAME) ObjectProvider<RedisScript<List<Long>>> script,
            ConfigurationService configurationService) {
        return new NativeRedisRateLimiter(limiter, redisTemplate, script.getIfAvailable(), configurationService);
    }
}

package org.testcontainers.containers;

import io.github.redisratelimit.tests.GatewayServer;

/**
 * A stand-in for Testcontainers' interface, where the gateway's tests find {@code getHost} and
 * {@code getFirstMappedPort}: the shared server with the module, on loopback.
 */
public interface ContainerState {
    /** @return the server's host */
    default String getHost() {
        return "127.0.0.1";
    }

    /**
     * Testcontainers' older name for {@link #getHost()}.
     *
     * @return the server's host
     */
    default String getContainerIpAddress() {
        return getHost();
    }

    /** @return the server's port */
    default Integer getFirstMappedPort() {
        return GatewayServer.port();
    }
}

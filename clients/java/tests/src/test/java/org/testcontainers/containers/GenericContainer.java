package org.testcontainers.containers;

/**
 * A stand-in for Testcontainers' container (this machine has no Docker) for Spring Cloud Gateway's
 * own tests: whatever image they name, the container is the shared server with the module. Their
 * {@code @Testcontainers} and {@code @Container} are left out: a missing annotation is no error.
 *
 * @param <SELF> the container's own type, as Testcontainers declares it
 */
public class GenericContainer<SELF extends GenericContainer<SELF>> implements ContainerState {
    /**
     * The image is not used.
     *
     * @param image the image a test names
     */
    public GenericContainer(String image) {
    }

    /**
     * The ports are the server's own.
     *
     * @param ports the ports a test exposes
     * @return this
     */
    @SuppressWarnings("unchecked")
    public SELF withExposedPorts(Integer... ports) {
        return (SELF) this;
    }
}

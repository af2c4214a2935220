package io.github.redisratelimit;

/** What answers the limiter's calls. */
public enum Backend {
    /** The redis-ratelimit module ({@code RATELIMIT.*} commands). */
    MODULE,
    /** The Functions library ({@code FCALL ratelimit_*}), for servers that cannot load modules. */
    LIBRARY
}

/* The test servers' wall clock, stood where a test needs it: preloaded into a server
 * (LD_PRELOAD), it makes the wall clock (gettimeofday, time, clock_gettime's REALTIME clocks)
 * read the Unix time in ms written in the file that RATELIMIT_TEST_CLOCK names, frozen there
 * until the test writes another; with no such file the clock is the real one. The monotonic
 * clocks run as usual. So a test stands a server a second before the end of a month, or on the
 * morning a daylight-saving change shortens a day, without waiting for either.
 *
 * Raw system calls only, no dlsym and nothing that allocates: libfaketime's dlsym recurses into
 * jemalloc's clock reads and hangs the Debian builds of Redis and Valkey. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The frozen time in Unix ms, or -1 for the real clock. */
static long long frozen_ms(void) {
    static const char *path;
    static int looked;
    if (!looked) {
        path = getenv("RATELIMIT_TEST_CLOCK");
        looked = 1;
    }
    if (!path) {
        return -1;
    }
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
    if (fd < 0) {
        return -1;
    }
    char text[24];
    long n = syscall(SYS_read, fd, text, sizeof text);
    syscall(SYS_close, fd);
    long long ms = -1;
    for (long i = 0; i < n && text[i] >= '0' && text[i] <= '9'; i++) {
        ms = (ms < 0 ? 0 : ms * 10) + (text[i] - '0');
    }
    return ms;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    long done = syscall(SYS_clock_gettime, clock, ts);
    if (done == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        long long ms = frozen_ms();
        if (ms >= 0) {
            ts->tv_sec = ms / 1000;
            ts->tv_nsec = (ms % 1000) * 1000000;
        }
    }
    return (int)done;
}

int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    int done = clock_gettime(CLOCK_REALTIME, &ts);
    if (done == 0) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return done;
}

time_t time(time_t *t) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t) {
        *t = ts.tv_sec;
    }
    return ts.tv_sec;
}

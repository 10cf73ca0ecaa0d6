/* coil_beside.h — the coil command built with the tests, for tests that run it: the one
 * beside the test program in its build directory, not whatever build/coil holds. */
#ifndef COIL_TEST_COIL_BESIDE_H
#define COIL_TEST_COIL_BESIDE_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Its path into buf; false when it is not there. */
static inline bool coil_beside_test(char *buf, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", buf, n - 8);
    if (len <= 0)
        return false;
    buf[len] = 0;
    char *slash = strrchr(buf, '/');
    snprintf(slash + 1, n - (size_t)(slash + 1 - buf), "coil");
    return access(buf, X_OK) == 0;
}

#endif

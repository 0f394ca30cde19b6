/* Small assertions, markers and look-ups shared by the unit tests.  Include
 * after <cmocka.h>. */
#ifndef DEVLET_TESTS_TEST_UTIL_H
#define DEVLET_TESTS_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A helper in a header shared by several test files, each using some. */
#define TEST_HELPER static __attribute__((unused))

/* Fails unless hay (may be NULL) contains needle. */
#define assert_contains(hay, needle)                                                        \
        do {                                                                                \
                const char *h_ = (hay);                                                     \
                if (!h_ || !strstr(h_, (needle))) {                                         \
                        print_error("\"%s\" does not contain \"%s\"\n", h_ ? h_ : "(null)", \
                                    (needle));                                              \
                        fail();                                                             \
                }                                                                           \
        } while (0)

/* The mock libnvidia-ml.so.1 every NVML test loads: $MOCK_NVML_LIB, or
 * <BUILD>/mock-nvml/ next to this binary (<BUILD>/tests/).  Fills out and
 * returns 0, or -1 when /proc/self/exe cannot be read. */
TEST_HELPER int test_mock_nvml_path(char *out, size_t size)
{
        const char *env = getenv("MOCK_NVML_LIB");
        if (env) {
                snprintf(out, size, "%s", env);
                return 0;
        }
        ssize_t n = readlink("/proc/self/exe", out, size - 1);
        if (n < 0)
                return -1;
        out[n] = '\0';
        *strrchr(out, '/') = '\0';
        strncat(out, "/../mock-nvml/libnvidia-ml.so.1", size - strlen(out) - 1);
        return 0;
}

#endif

/* Small assertions and markers shared by the unit tests.  Include after
 * <cmocka.h>. */
#ifndef DEVLET_TESTS_TEST_UTIL_H
#define DEVLET_TESTS_TEST_UTIL_H

#include <string.h>

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

#endif

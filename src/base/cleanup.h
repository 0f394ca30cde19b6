/* Scope-bound cleanup for heap pointers and file descriptors.
 *
 * Every locally owned pointer or fd in devlet is declared with one of these
 * attributes (string vectors: _cleanup_strv_free_, in xalloc.h; a type with a
 * free function of its own: DEFINE_CLEANUP_FUNC); ownership is handed on with
 * TAKE_PTR / TAKE_FD, which clear the local so the cleanup becomes a no-op.
 * Knows nothing of devlet. */
#ifndef DEVLET_BASE_CLEANUP_H
#define DEVLET_BASE_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void cleanup_freep(void *p) { free(*(void **)p); }
static inline void cleanup_closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
static inline void cleanup_fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}

#define _cleanup_(fn) __attribute__((cleanup(fn)))
#define _cleanup_free_ _cleanup_(cleanup_freep)
#define _cleanup_close_ _cleanup_(cleanup_closep)
#define _cleanup_fclose_ _cleanup_(cleanup_fclosep)

/* Declares NAME##p, a cleanup wrapper calling FN on a non-NULL TYPE *. */
#define DEFINE_CLEANUP_FUNC(type, fn)                                          \
        static inline void fn##p(type **p)                                     \
        {                                                                      \
                if (*p)                                                        \
                        fn(*p);                                                \
        }

#define TAKE_PTR(p)                                                            \
        ({                                                                     \
                __typeof__(p) taken_ = (p);                                    \
                (p) = NULL;                                                    \
                taken_;                                                        \
        })

#define TAKE_FD(fd)                                                            \
        ({                                                                     \
                int taken_fd_ = (fd);                                          \
                (fd) = -1;                                                     \
                taken_fd_;                                                     \
        })

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif

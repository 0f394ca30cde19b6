/* An LD_PRELOAD library for the tests: with DEVLET_TEST_FAIL_THREADS=1,
 * pthread_create fails with EAGAIN for every thread the main program's own
 * code starts (its caller lies in the executable's segments), as when the
 * process is out of threads or memory; the libraries' threads (libuv's
 * pool) start as usual.  Never built into devlet. */
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

/* dl_iterate_phdr's first object is the executable: 1 when *data (an
 * address) lies in one of its loaded segments, 2 when not (either stops
 * the walk). */
static int in_executable(struct dl_phdr_info *info, size_t size, void *data)
{
        uintptr_t a = *(const uintptr_t *)data;
        for (int i = 0; i < info->dlpi_phnum; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                uintptr_t start = info->dlpi_addr + ph->p_vaddr;
                if (ph->p_type == PT_LOAD && a >= start && a < start + ph->p_memsz)
                        return 1;
        }
        return 2;
}

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
        typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
        static create_fn real;
        if (!real)
                real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
        const char *fail = getenv("DEVLET_TEST_FAIL_THREADS");
        uintptr_t caller = (uintptr_t)__builtin_return_address(0);
        if (fail && strcmp(fail, "1") == 0 && dl_iterate_phdr(in_executable, &caller) == 1)
                return EAGAIN;
        return real ? real(thread, attr, fn, arg) : ENOSYS;
}

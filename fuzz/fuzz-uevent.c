/* libFuzzer target for the kernel uevent parser (base/uevent.c): any bytes
 * as one netlink message.  Whatever arrives on the socket after the
 * sender check may still be garbage; the parser must never read past the
 * message, and what it accepts must hold together: every string inside
 * the message, ACTION and DEVPATH agreeing with the header, no key twice.
 * Seeds: fuzz/corpus/fuzz-uevent/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/uevent.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(const char *s, const char *buf, size_t size)
{
        if (!s || s < buf || s >= buf + size || !memchr(s, '\0', (size_t)(buf + size - s)))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* exactly size bytes, so ASan sees any read past them */
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        struct uevent ev;
        if (uevent_parse(buf, size, &ev) == 0) {
                inside(ev.action, buf, size);
                inside(ev.devpath, buf, size);
                if (ev.devpath[0] != '/' || ev.n_vars > UEVENT_VARS_MAX)
                        abort();
                if (ev.subsystem)
                        inside(ev.subsystem, buf, size);
                for (size_t i = 0; i < ev.n_vars; i++) {
                        inside(ev.vars[i].key, buf, size);
                        inside(ev.vars[i].value, buf, size);
                        if (uevent_get(&ev, ev.vars[i].key) != ev.vars[i].value)
                                abort(); /* a key twice */
                }
                if (strcmp(uevent_get(&ev, "ACTION"), ev.action) != 0)
                        abort();
        }
        free(buf);
        return 0;
}

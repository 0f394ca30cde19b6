/* Kernel uevents (NETLINK_KOBJECT_UEVENT): the socket, the sender check
 * and a strict parser of the kernel's message format.  Knows nothing of
 * devlet: what an event means is the caller's business.
 *
 * The kernel's format: "ACTION@DEVPATH\0" then "KEY=VALUE\0" for each
 * variable of the event's environment (ACTION, DEVPATH, SUBSYSTEM, SEQNUM
 * among them).  udevd's re-broadcasts ("libudev\0" and a binary header,
 * on another multicast group) are not this format and are told apart. */
#ifndef DEVLET_BASE_UEVENT_H
#define DEVLET_BASE_UEVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/* The largest message kept: the kernel's own buffer is 2048 bytes
 * (UEVENT_BUFFER_SIZE), so anything longer is not the kernel's. */
#define UEVENT_MSG_MAX 8192
/* The most variables one event may carry (the kernel's UEVENT_NUM_ENVP). */
#define UEVENT_VARS_MAX 64

struct uevent_var {
        const char *key, *value; /* into the parsed buffer */
};

/* One parsed message; every string points into the buffer it came from. */
struct uevent {
        const char *action;    /* "add", "remove", "change", "bind", ... */
        const char *devpath;   /* "/devices/pci0000:00/0000:0c:00.0/drm/card1" */
        const char *subsystem; /* "drm"; NULL when the event names none */
        struct uevent_var vars[UEVENT_VARS_MAX];
        size_t n_vars;
};

/* Parses buf[0..len) in place (each '=' becomes a NUL).  Strict: the
 * message ends with a NUL; the header is a lower-case action, '@' and an
 * absolute path; every entry after it is KEY=VALUE with an upper-case key
 * ([A-Z0-9_]) seen once and a value without control characters; ACTION
 * and DEVPATH are there and agree with the header; at most
 * UEVENT_VARS_MAX entries.  Returns 0 and *out, -EPROTO for a libudev
 * message (not the kernel's format: skip it), -EINVAL for anything else
 * malformed, -EMSGSIZE past UEVENT_MSG_MAX.  *out is untouched on failure
 * (buf may not be). */
int uevent_parse(char *buf, size_t len, struct uevent *out);
/* The value of key, or NULL. */
const char *uevent_get(const struct uevent *ev, const char *key);

/* Whether a message with this source address and these credentials may
 * be believed: the kernel (nl_pid 0) or a process whose credentials say
 * uid 0.  addr_len is what recvmsg returned; cred NULL when the message
 * carried none.  Pure (tested on its own). */
bool uevent_sender_trusted(const void *addr, socklen_t addr_len, const void *cred);

/* A non-blocking NETLINK_KOBJECT_UEVENT socket bound to the kernel's
 * multicast group (1), with SO_PASSCRED, in the caller's network
 * namespace.  Returns the fd (O_CLOEXEC) or -errno (-EPERM, -EACCES
 * without the right; -EPROTONOSUPPORT without the kernel's support). */
int uevent_socket_open(void);
/* Receives one message into buf (size > UEVENT_MSG_MAX) and checks its
 * sender.  Returns the length (buf NUL-terminated after it), -EAGAIN when
 * nothing waits, -EPERM for a sender that is neither the kernel nor root
 * (dropped), -EMSGSIZE for a message longer than UEVENT_MSG_MAX (dropped),
 * -ENOBUFS when the kernel dropped messages because the socket was full
 * (the caller has missed events), other -errno from recvmsg. */
ssize_t uevent_socket_recv(int fd, char *buf, size_t size);

#endif

/* Kernel uevents over netlink: what arrives on the socket is believed only
 * when the kernel (port 0) or root sent it, is bounded in size, and is
 * parsed strictly in place, so a hostile or broken sender costs one
 * rejected message and nothing more.  Never logs; never blocks (the socket
 * is non-blocking: the caller polls it on its loop). */
#include "base/uevent.h"

#include <errno.h>
#include <linux/netlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LIBUDEV_MAGIC "libudev"
#define KERNEL_GROUP 1u
#define RCVBUF_BYTES (1 << 20) /* a burst of hot-plug events: a few hundred */

static bool action_ok(const char *s, size_t n)
{
        if (n == 0 || n > 32)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] < 'a' || s[i] > 'z')
                        return false;
        return true;
}

static bool key_ok(const char *s, size_t n)
{
        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
                        return false;
        return true;
}

/* Printable bytes (UTF-8's included), no control characters. */
static bool value_ok(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return false;
        return true;
}

int uevent_parse(char *buf, size_t len, struct uevent *out)
{
        if (len > UEVENT_MSG_MAX)
                return -EMSGSIZE;
        if (len >= sizeof(LIBUDEV_MAGIC) && memcmp(buf, LIBUDEV_MAGIC, sizeof(LIBUDEV_MAGIC)) == 0)
                return -EPROTO;
        if (len < 2 || buf[len - 1] != '\0')
                return -EINVAL;
        struct uevent ev = { 0 };
        /* the header: ACTION@DEVPATH */
        size_t hlen = strlen(buf);
        char *at = memchr(buf, '@', hlen);
        if (!at || !action_ok(buf, (size_t)(at - buf)) || at[1] != '/' || !value_ok(at + 1))
                return -EINVAL;
        /* the entries: '=' becomes the key's NUL as each is checked (buf may
         * be changed on failure, *out never is) */
        char *p = buf + hlen + 1;
        const char *end = buf + len;
        while (p < end) {
                size_t n = strlen(p);
                char *eq = memchr(p, '=', n);
                if (n == 0 || !eq || !key_ok(p, (size_t)(eq - p)) || !value_ok(eq + 1))
                        return -EINVAL;
                if (ev.n_vars == UEVENT_VARS_MAX)
                        return -EINVAL;
                for (size_t i = 0; i < ev.n_vars; i++)
                        if (strlen(ev.vars[i].key) == (size_t)(eq - p) &&
                            memcmp(ev.vars[i].key, p, (size_t)(eq - p)) == 0)
                                return -EINVAL;
                *eq = '\0';
                ev.vars[ev.n_vars++] = (struct uevent_var){ .key = p, .value = eq + 1 };
                p += n + 1;
        }
        *at = '\0';
        const char *action = uevent_get(&ev, "ACTION"), *devpath = uevent_get(&ev, "DEVPATH");
        bool ok = action && devpath && strcmp(action, buf) == 0 && strcmp(devpath, at + 1) == 0;
        if (!ok)
                return -EINVAL;
        ev.action = action;
        ev.devpath = devpath;
        ev.subsystem = uevent_get(&ev, "SUBSYSTEM");
        *out = ev;
        return 0;
}

const char *uevent_get(const struct uevent *ev, const char *key)
{
        for (size_t i = 0; i < ev->n_vars; i++)
                if (strcmp(ev->vars[i].key, key) == 0)
                        return ev->vars[i].value;
        return NULL;
}

bool uevent_sender_trusted(const void *addr, socklen_t addr_len, const void *cred)
{
        struct sockaddr_nl nl;
        if (!addr || addr_len != sizeof(nl))
                return false;
        memcpy(&nl, addr, sizeof(nl));
        if (nl.nl_family != AF_NETLINK)
                return false;
        if (nl.nl_pid == 0)
                return true; /* only the kernel sends from port 0 */
        if (!cred)
                return false;
        struct ucred uc;
        memcpy(&uc, cred, sizeof(uc));
        return uc.uid == 0;
}

int uevent_socket_open(void)
{
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);
        if (fd < 0)
                return -errno;
        int one = 1, size = RCVBUF_BYTES;
        /* beyond rmem_max only with CAP_NET_ADMIN; the plain one is the fallback */
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
                (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = KERNEL_GROUP };
        if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

ssize_t uevent_socket_recv(int fd, char *buf, size_t size)
{
        if (size <= UEVENT_MSG_MAX)
                return -EINVAL;
        struct sockaddr_nl sa;
        struct iovec iov = { .iov_base = buf, .iov_len = size - 1 };
        union {
                struct cmsghdr align;
                char space[CMSG_SPACE(sizeof(struct ucred))];
        } ctl;
        struct msghdr msg = {
                .msg_name = &sa,
                .msg_namelen = sizeof(sa),
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = &ctl,
                .msg_controllen = sizeof(ctl),
        };
        ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        const void *cred = NULL;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
                    c->cmsg_len == CMSG_LEN(sizeof(struct ucred)))
                        cred = CMSG_DATA(c);
        if (!uevent_sender_trusted(&sa, msg.msg_namelen, cred))
                return -EPERM;
        if ((msg.msg_flags & MSG_TRUNC) || (size_t)n > UEVENT_MSG_MAX)
                return -EMSGSIZE;
        buf[n] = '\0';
        return n;
}

/* Process -> container ID through /proc/<pid>/cgroup.
 *
 * Every line ("hierarchy:controllers:path", cgroup v1 or v2) is searched
 * from its last path component up for a 64-hex container ID, bare
 * (cgroupfs: /kubepods/burstable/pod<uid>/<id>, /docker/<id>, /crio/<id>)
 * or wrapped by a runtime's systemd scope or cgroupfs name
 * (cri-containerd-<id>.scope, crio-<id>.scope, docker-<id>.scope,
 * libpod-<id>.scope, /libpod_parent/libpod-<id>).  Components below the
 * container's (podman's "container" sub-cgroup) are passed over; conmon's
 * scopes (crio-conmon-<id>, libpod-conmon-<id>) belong to no container.
 * Runs on the collector thread; reads one bounded /proc file per process. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "metrics/attrib.h"

#define CGROUP_FILE_MAX (64 * 1024)

static bool is_id(const char *s, size_t n)
{
        if (n != ATTR_ID_LEN)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

static bool has_prefix(const char *s, size_t n, const char *prefix)
{
        size_t p = strlen(prefix);
        return n >= p && memcmp(s, prefix, p) == 0;
}

/* 1 found, 0 not a container component, -1 a conmon component (stop). */
static int component_id(const char *s, size_t n, char id[ATTR_ID_LEN + 1])
{
        static const char *const conmon[] = { "crio-conmon-", "libpod-conmon-" };
        static const char *const prefixes[] = { "cri-containerd-", "crio-", "docker-", "libpod-" };
        for (size_t i = 0; i < ARRAY_SIZE(conmon); i++)
                if (has_prefix(s, n, conmon[i]))
                        return -1;
        if (n > 6 && memcmp(s + n - 6, ".scope", 6) == 0)
                n -= 6;
        for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++) {
                if (has_prefix(s, n, prefixes[i])) {
                        size_t p = strlen(prefixes[i]);
                        s += p;
                        n -= p;
                        break;
                }
        }
        if (!is_id(s, n))
                return 0;
        memcpy(id, s, ATTR_ID_LEN);
        id[ATTR_ID_LEN] = '\0';
        return 1;
}

/* Searches one cgroup path, last component first. */
static int path_id(const char *path, size_t len, char id[ATTR_ID_LEN + 1])
{
        size_t end = len;
        while (end > 0) {
                size_t start = end;
                while (start > 0 && path[start - 1] != '/')
                        start--;
                if (end > start) {
                        int r = component_id(path + start, end - start, id);
                        if (r != 0)
                                return r;
                }
                if (start == 0)
                        break;
                end = start - 1;
        }
        return 0;
}

int attr_cgroup_parse(const char *text, char id[ATTR_ID_LEN + 1])
{
        const char *line = text;
        while (line && *line) {
                const char *nl = strchr(line, '\n');
                size_t n = nl ? (size_t)(nl - line) : strlen(line);
                /* hierarchy-ID:controller-list:cgroup-path; the path may hold ':' */
                const char *c1 = memchr(line, ':', n);
                const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - line)) : NULL;
                if (c2) {
                        const char *path = c2 + 1;
                        int r = path_id(path, n - (size_t)(path - line), id);
                        if (r > 0)
                                return 0;
                        if (r < 0)
                                return -ENOENT; /* conmon: the same on every line */
                }
                line = nl ? nl + 1 : NULL;
        }
        return -ENOENT;
}

int attr_cgroup_container_id(const char *proc_root, unsigned pid, char id[ATTR_ID_LEN + 1])
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%u/cgroup", proc_root, pid);
        _cleanup_free_ char *text = NULL;
        int r = fs_read_file(path, CGROUP_FILE_MAX, &text, NULL);
        if (r < 0)
                return r;
        return attr_cgroup_parse(text, id);
}

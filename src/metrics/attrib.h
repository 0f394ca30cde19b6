/* Attribution: which pod, namespace and container use which GPU.
 *
 * Three sources, merged by the collector:
 *   - the kubelet's pod-resources List (podres.c, on the loop),
 *   - the OCI runtime specs of running containers (ocispec.c),
 *   - the samplers' processes mapped through /proc/<pid>/cgroup (cgroup.c) to a
 *     container ID, then to that container's spec.
 * Device references found in any source (a unit's names such as UUIDs, its
 * family's local names such as indices, "<ref>::<n>", "all", a device
 * node's numbers) resolve against the units the backends' samplers
 * returned (resolve.c); where a family names its devices is told by its
 * struct dev_attr_hints.  Nothing here names a family.
 *
 * Everything here except podres.c is pure or reads files: it runs on the
 * collector thread and in tests, never on the loop. */
#ifndef DEVLET_METRICS_ATTRIB_H
#define DEVLET_METRICS_ATTRIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "base/diag.h"
#include "devices/measure.h"

#define ATTR_ID_LEN 64 /* container IDs are 64 lower-case hex digits */

/* ---- cgroup.c: process -> container ID ---- */

/* Finds the container ID in the text of a /proc/<pid>/cgroup file (cgroup
 * v1 and v2 lines; cgroupfs and systemd drivers; containerd, CRI-O, docker,
 * podman names).  Conmon's own cgroups (crio-conmon-, libpod-conmon-) are
 * not the container's.  Returns 0 with id filled, or -ENOENT. */
int attr_cgroup_parse(const char *text, char id[ATTR_ID_LEN + 1]);

/* Reads <proc_root>/<pid>/cgroup (at most 64 KiB) and parses it.  Returns 0,
 * -ENOENT when no container ID is in it, or -errno from reading. */
int attr_cgroup_container_id(const char *proc_root, unsigned pid, char id[ATTR_ID_LEN + 1]);

/* ---- resolve.c: device references -> units ---- */

/* Appends to out[] (room for max) the indices of the units ref names;
 * returns how many it would name (0: unknown).  A reference is one of a
 * unit's names (case-insensitive), or one of its local names when the
 * source speaks for the unit's family (ctx == the unit's hints), or "all"
 * (every whole unit of ctx's family, only when all_ok); any of these may
 * carry devlet's "::<n>" replica suffix.  Surrounding spaces are ignored. */
size_t attr_resolve(const struct dev_unit *units, size_t n, const struct dev_attr_hints *ctx,
                    const char *ref, bool all_ok, size_t *out, size_t max);
/* The unit whose device node this is, or -1. */
ssize_t attr_resolve_devnum(const struct dev_unit *units, size_t n, struct dev_devnum d);

/* Splits an env var's value into references appended to the strv refs
 * (returned): "", "none" and "void" give none; "all" gives "all"; else the
 * comma-separated entries, trimmed, empty ones skipped. */
char **attr_visible_devices(const char *value, char **refs);

/* A CDI device name "vendor/class=name": appends name to refs when the
 * vendor is vendor (any class), "all" included.  Returns refs. */
char **attr_cdi_device(const char *qualified, const char *vendor, char **refs);

/* The family whose pod-resources resource this is (hints[i] with a
 * matching resource prefix), or NULL. */
const struct dev_attr_hints *attr_hints_for_resource(const struct dev_attr_hints *const *hints,
                                                     size_t n, const char *resource);

/* ---- ocispec.c: container state directories -> specs ---- */

#define ATTR_SPEC_MAX_BYTES (4u * 1024 * 1024)

struct attr_spec {
        char *id;        /* the container's directory name */
        char *pod;       /* NULL without CRI annotations */
        char *namespace;
        char *container;
        bool sandbox;    /* a pod sandbox (pause) container */
        bool privileged; /* CAP_SYS_ADMIN in the bounding set */
        char **refs;     /* device references (strv, NULL when none) */
        const struct dev_attr_hints **ref_hints; /* the family each ref speaks for */
        struct dev_devnum *devnums; /* character devices in linux.devices some family knows */
        size_t n_devnums;
};

/* Parses one config.json.  For each family's hints, sources of refs: CDI
 * annotations under cdi_prefix ("cdi.k8s.io/") naming the family's vendor,
 * the family's env vars in process.env ("all" only for privileged
 * containers: images set it in every container), mounts under its mount
 * dirs; and the character devices in linux.devices within its device
 * number ranges (not for privileged containers, which get every host
 * device).  Returns 0 and *out, or -EINVAL with diag set for JSON that is
 * not an object. */
int attr_spec_parse(const char *json, size_t len, const char *id, const char *cdi_prefix,
                    const struct dev_attr_hints *const *hints, size_t n_hints,
                    struct attr_spec **out, struct diag *diag);
void attr_spec_free(struct attr_spec *s);

struct attr_specs;

/* A cache of the specs under dirs: each dir holds <id>/config.json
 * (containerd) or <id>/userdata/config.json (CRI-O, podman). */
struct attr_specs *attr_specs_new(char *const *dirs, const char *cdi_prefix,
                                  const struct dev_attr_hints *const *hints, size_t n_hints);
void attr_specs_free(struct attr_specs *c);
/* Rescans the directories: a file whose (device, inode, size, mtime) is
 * unchanged is not read again; specs gone from disk are dropped; files
 * over ATTR_SPEC_MAX_BYTES, not regular or not JSON are skipped.  At most
 * 4096 containers per directory.  Returns the number of specs held. */
size_t attr_specs_scan(struct attr_specs *c);
/* Files parsed (not served from the cache) so far. */
uint64_t attr_specs_parsed(const struct attr_specs *c);
/* The files seen by the last scan; attr_specs_at(i) is NULL for one that
 * did not parse. */
size_t attr_specs_count(const struct attr_specs *c);
const struct attr_spec *attr_specs_at(const struct attr_specs *c, size_t i);
const struct attr_spec *attr_specs_find(const struct attr_specs *c, const char *id);

/* ---- podres.c: the kubelet's pod-resources List (loop thread) ---- */

/* One device of one container, as the kubelet reports it. */
struct attr_podres_entry {
        char *resource; /* "<vendor>/<name>"; "" for a DRA CDI device */
        char *device;   /* device ID, or a CDI device name for DRA claims */
        char *pod, *namespace, *container;
};

struct attr_podres {
        struct attr_podres_entry *entries;
        size_t n, cap;
};

void attr_podres_free(struct attr_podres *p);
/* Unpacks a serialized v1.ListPodResourcesResponse.  Returns 0 and *out,
 * or -EBADMSG.  Bounded by the message (at most GRPC_MAX_MESSAGE). */
int attr_podres_unpack(const uint8_t *msg, size_t len, struct attr_podres **out);
struct attr_podres_client;
/* Called on the loop with the result of one List: p (owned by the callee)
 * or NULL with a gRPC status when it failed. */
typedef void (*attr_podres_fn)(struct attr_podres *p, int status, const char *message, void *ud);

/* Starts one asynchronous List on socket_path with a timeout.  Returns 0
 * (fn will be called exactly once) or -errno. */
int attr_podres_list(uv_loop_t *loop, const char *socket_path, uint64_t timeout_ms,
                     attr_podres_fn fn, void *ud, struct attr_podres_client **out);
/* The same, blocking on a private loop (for `devlet metrics`).  Returns 0
 * and *out, or -errno with diag saying why. */
int attr_podres_list_sync(const char *socket_path, uint64_t timeout_ms, struct attr_podres **out,
                          struct diag *diag);
/* Cancels a List in progress: fn runs with CANCELLED, before this returns
 * or on the next loop iteration. */
void attr_podres_cancel(struct attr_podres_client *c);

#endif

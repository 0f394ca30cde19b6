/* The CDI spec model (Container Device Interface, cncf-tags/
 * container-device-interface SPEC.md): a kind, its devices and their
 * container edits, checked against the rules the CDI library applies before
 * it is rendered as YAML or JSON and written where runtimes read specs
 * (cdi/: the renderers and the writer).
 *
 * A spec is built with the adders below (they copy their arguments), then
 * cdi_spec_validate(); the renderers and the writer validate again, so a
 * spec that breaks a rule is never rendered or written.  It sits in
 * devices/ so that a backend can describe its devices as CDI devices (the
 * `cdi_specs` member of struct dev_backend_ops) without including cdi/;
 * it knows nothing of devices or backends itself. */
#ifndef DEVLET_DEVICES_CDI_SPEC_H
#define DEVLET_DEVICES_CDI_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diag.h"

struct cdi_device_node {
        char *path;        /* in the container; absolute */
        char *host_path;   /* NULL: same as path (a host path needs cdiVersion 0.5.0) */
        char type;         /* 'c', 'b', 'u', 'p', or 0 = let the runtime stat the node */
        int64_t major, minor; /* written when type is 'c' or 'b' */
        char *permissions; /* subset of "rwm"; NULL: the runtime's default ("rwm") */
        int64_t file_mode; /* -1: not written */
};

struct cdi_mount {
        char *host_path;      /* absolute */
        char *container_path; /* absolute */
        char *type;           /* NULL: not written (a type needs cdiVersion 0.4.0) */
        char **options;       /* strv, may be NULL */
};

struct cdi_hook {
        char *hook_name; /* createRuntime, createContainer, startContainer, prestart,
                          * poststart, poststop */
        char *path;      /* absolute */
        char **args;     /* strv, may be NULL; args[0] is the program name */
        char **env;      /* strv of KEY=VALUE, may be NULL */
};

struct cdi_edits {
        char **env; /* strv of KEY=VALUE, may be NULL */
        struct cdi_device_node *nodes;
        size_t n_nodes, cap_nodes;
        struct cdi_mount *mounts;
        size_t n_mounts, cap_mounts;
        struct cdi_hook *hooks;
        size_t n_hooks, cap_hooks;
};

struct cdi_device {
        char *name;
        struct cdi_edits edits;
};

struct cdi_spec {
        char *kind; /* "<vendor>/<class>" */
        struct cdi_device *devices;
        size_t n_devices, cap_devices;
        struct cdi_edits edits; /* applied once when any device is requested */
};

/* Name rules, as the CDI library (pkg/parser) checks them.
 * vendor: a letter first, a letter or digit last, [A-Za-z0-9_.-] between,
 *         at most 253 characters; class: the same, at most 63 characters;
 *         both at least 2 characters (the library slices name[1:len-1]).
 * device name: a letter or digit first and last, [A-Za-z0-9_.:-] between. */
bool cdi_valid_vendor(const char *s);
bool cdi_valid_class(const char *s);
bool cdi_valid_kind(const char *s);
bool cdi_valid_device_name(const char *s);

struct cdi_spec *cdi_spec_new(const char *kind);
void cdi_spec_free(struct cdi_spec *s);

/* Appends a device and returns it (its edits start empty). */
struct cdi_device *cdi_spec_add_device(struct cdi_spec *s, const char *name);
struct cdi_device *cdi_spec_find_device(const struct cdi_spec *s, const char *name);

void cdi_edits_add_env(struct cdi_edits *e, const char *key, const char *value);
/* Appends a node with type 0, no numbers, no file mode; the caller fills in
 * the rest of the returned node.  host_path NULL or equal to path is left
 * out; permissions NULL means the runtime's default. */
struct cdi_device_node *cdi_edits_add_node(struct cdi_edits *e, const char *path,
                                           const char *host_path, const char *permissions);
/* options: NULL-terminated, may be NULL; type may be NULL. */
void cdi_edits_add_mount(struct cdi_edits *e, const char *host_path, const char *container_path,
                         const char *type, const char *const *options);
void cdi_edits_add_hook(struct cdi_edits *e, const char *hook_name, const char *path,
                        const char *const *args, const char *const *env);
/* Appends a copy of every edit in src to dst (nodes with the same container
 * path, mounts with the same container path and identical env entries are
 * not repeated). */
void cdi_edits_merge(struct cdi_edits *dst, const struct cdi_edits *src);
bool cdi_edits_empty(const struct cdi_edits *e);
/* Frees what e holds and empties it. */
void cdi_edits_release(struct cdi_edits *e);

/* Checks every rule: a valid kind; at least one device; device names valid
 * and unique; each device with at least one edit; env entries KEY=VALUE with
 * a non-empty key; absolute node, mount and hook paths; node types and
 * permissions as above, non-negative numbers; known hook names.  Returns 0,
 * or -EINVAL with diag naming the first problem. */
int cdi_spec_validate(const struct cdi_spec *s, struct diag *diag);

/* The lowest cdiVersion that holds the spec's content: 0.3.0, or 0.4.0 for
 * a mount type, 0.5.0 for a node host path or a device name that starts
 * with a digit, 0.6.0 for a dot in the class (pkg/cdi/version.go). */
const char *cdi_spec_min_version(const struct cdi_spec *s);

/* A list of specs a backend contributes, each valid, and what it left out. */
struct cdi_spec_list {
        struct cdi_spec **specs;
        size_t n;
        char **warnings; /* strv or NULL: what was left out, and why */
};

/* Appends s (taken) to l. */
void cdi_spec_list_push(struct cdi_spec_list *l, struct cdi_spec *s);
/* Appends msg (taken) to l's warnings. */
void cdi_spec_list_warn(struct cdi_spec_list *l, char *msg);
void cdi_spec_list_release(struct cdi_spec_list *l);

#endif

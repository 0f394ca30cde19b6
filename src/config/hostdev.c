/* The hostDevices section of the config file, and resource-name rules.
 *
 * Walks the node tree of `hostDevices` into struct hostdev_cfg and checks
 * everything that can be checked without touching the host: names, counts,
 * absolute clean paths, permissions, types, USB IDs.  Each error names the
 * offending node by its path (hostDevices.devices[1].groups[0].paths[0].
 * permissions) and its line:column; unknown keys become warnings.  The
 * result reaches the caller only when the whole section is good.
 *
 * Never looks at the filesystem or sysfs (the hostdev backend does), never
 * logs. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "config/sections.h"

#define DEVICES_MAX 1024
#define NAME_MAX_LEN 63

/* ---- names ---- */

bool config_valid_dns_subdomain(const char *s)
{
        size_t len = strlen(s);
        if (len == 0 || len > 253)
                return false;
        for (const char *label = s;;) {
                const char *end = strchrnul(label, '.');
                if (end == label || !isalnum((unsigned char)label[0]) ||
                    !isalnum((unsigned char)end[-1]))
                        return false;
                for (const char *p = label; p < end; p++)
                        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-'))
                                return false;
                if (!*end)
                        return true;
                label = end + 1;
        }
}

/* Kubernetes' qualified-name part: at most 63 characters of [A-Za-z0-9-_.],
 * starting and ending alphanumeric. */
static bool valid_name_part(const char *s)
{
        size_t len = strlen(s);
        if (len == 0 || len > NAME_MAX_LEN || !isalnum((unsigned char)s[0]) ||
            !isalnum((unsigned char)s[len - 1]))
                return false;
        for (const char *p = s; *p; p++)
                if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '_' || *p == '.'))
                        return false;
        return true;
}

bool config_valid_resource_name(const char *s)
{
        if (!s)
                return false;
        const char *slash = strchr(s, '/');
        if (!slash || strchr(slash + 1, '/'))
                return false;
        _cleanup_free_ char *domain = xstrndup(s, (size_t)(slash - s));
        /* the kubelet treats kubernetes.io names as native resources */
        size_t dl = strlen(domain);
        if (strcmp(domain, "kubernetes.io") == 0 ||
            (dl > 14 && strcmp(domain + dl - 14, ".kubernetes.io") == 0))
                return false;
        return config_valid_dns_subdomain(domain) && valid_name_part(slash + 1);
}

/* ---- walking ---- */

static int fail(struct config_walk *w, const struct config_node *n, const char *path,
                const char *what)
{
        return config_node_error(w->diag, w->file, n, path, "%s", what);
}

/* Absolute, no empty, "." or ".." components, no trailing slash. */
static bool clean_abs_path(const char *p)
{
        if (p[0] != '/')
                return false;
        if (!p[1])
                return true;
        for (const char *c = p + 1;;) {
                const char *end = strchrnul(c, '/');
                size_t len = (size_t)(end - c);
                if (len == 0 || (len == 1 && c[0] == '.') ||
                    (len == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                if (!*end)
                        return true;
                c = end + 1;
        }
}

static int parse_path(struct config_walk *w, const struct config_node *n, const char *path,
                      struct hostdev_path_cfg *out)
{
        static const char *const known[] = { "path",     "mountPath", "permissions", "type",
                                             "readOnly", "optional",  NULL };
        const struct config_node *node, *ro_node;
        const char *s;
        char sub[CONFIG_PATH_MAX];
        int r = config_walk_map(w, n, path, known);
        if (r < 0)
                return r;

        if ((r = config_walk_required(w, n, "path", path, &s, &node)) < 0)
                return r;
        config_subpath(sub, sizeof(sub), path, ".path");
        if (!clean_abs_path(s))
                return config_node_error(w->diag, w->file, node, sub,
                                         "\"%.100s\" is not a clean absolute path "
                                         "(no \"..\", \".\" or \"//\")",
                                         s);
        out->path = xstrdup(s);

        if ((r = config_walk_string(w, n, "mountPath", path, &s, &node)) < 0)
                return r;
        if (s) {
                config_subpath(sub, sizeof(sub), path, ".mountPath");
                if (!clean_abs_path(s))
                        return config_node_error(w->diag, w->file, node, sub,
                                                 "\"%.100s\" is not a clean absolute path "
                                                 "(no \"..\", \".\" or \"//\")",
                                                 s);
                out->mount_path = xstrdup(s);
        }

        strcpy(out->permissions, "rw");
        if ((r = config_walk_string(w, n, "permissions", path, &s, &node)) < 0)
                return r;
        if (s) {
                config_subpath(sub, sizeof(sub), path, ".permissions");
                bool seen[3] = { false, false, false };
                if (!s[0])
                        return fail(w, node, sub, "must not be empty (a subset of \"rwm\")");
                for (const char *p = s; *p; p++) {
                        const char *at = strchr("rwm", *p);
                        if (!at)
                                return config_node_error(w->diag, w->file, node, sub,
                                                         "\"%.100s\" is not a subset of \"rwm\"",
                                                         s);
                        if (seen[at - "rwm"])
                                return config_node_error(w->diag, w->file, node, sub,
                                                         "\"%.100s\" repeats '%c'", s, *p);
                        seen[at - "rwm"] = true;
                }
                /* canonical order, so equal permissions compare equal */
                size_t k = 0;
                for (size_t i = 0; i < 3; i++)
                        if (seen[i])
                                out->permissions[k++] = "rwm"[i];
                out->permissions[k] = '\0';
        }

        out->type = HOSTDEV_PATH_DEVICE;
        if ((r = config_walk_string(w, n, "type", path, &s, &node)) < 0)
                return r;
        if (s) {
                config_subpath(sub, sizeof(sub), path, ".type");
                if (strcmp(s, "Mount") == 0 || strcmp(s, "mount") == 0)
                        out->type = HOSTDEV_PATH_MOUNT;
                else if (strcmp(s, "Device") != 0 && strcmp(s, "device") != 0)
                        return config_node_error(w->diag, w->file, node, sub,
                                                 "\"%.100s\" is not one of Device, Mount", s);
        }

        if ((r = config_walk_bool(w, n, "readOnly", path, &out->read_only, &ro_node)) < 0)
                return r;
        if (out->read_only && out->type != HOSTDEV_PATH_MOUNT) {
                config_subpath(sub, sizeof(sub), path, ".readOnly");
                return fail(w, ro_node, sub, "only applies to type Mount");
        }
        return config_walk_bool(w, n, "optional", path, &out->optional, &node);
}

/* "046d" or "0x046d" -> "046d". */
static int parse_usb_id(struct config_walk *w, const struct config_node *map, const char *key,
                        const char *path, char **out)
{
        const struct config_node *node;
        const char *s;
        char sub[CONFIG_PATH_MAX];
        int r = config_walk_required(w, map, key, path, &s, &node);
        if (r < 0)
                return r;
        const char *hex = s;
        if (hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X'))
                hex += 2;
        if (strlen(hex) != 4 || strspn(hex, "0123456789abcdefABCDEF") != 4) {
                config_subpath(sub, sizeof(sub), path, ".%s", key);
                return config_node_error(w->diag, w->file, node, sub,
                                         "\"%.100s\" is not a 4-digit hex ID (like \"046d\")", s);
        }
        *out = xstrdup(hex);
        for (char *p = *out; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        return 0;
}

static int parse_usb(struct config_walk *w, const struct config_node *n, const char *path,
                     struct hostdev_usb_cfg *out)
{
        static const char *const known[] = { "vendor", "product", "serial", NULL };
        const struct config_node *node;
        const char *s;
        int r = config_walk_map(w, n, path, known);
        if (r < 0)
                return r;
        if ((r = parse_usb_id(w, n, "vendor", path, &out->vendor)) < 0)
                return r;
        if ((r = parse_usb_id(w, n, "product", path, &out->product)) < 0)
                return r;
        if ((r = config_walk_string(w, n, "serial", path, &s, &node)) < 0)
                return r;
        if (s) {
                if (!s[0]) {
                        char sub[CONFIG_PATH_MAX];
                        config_subpath(sub, sizeof(sub), path, ".serial");
                        return fail(w, node, sub, "must not be empty (leave it out to match any)");
                }
                out->serial = xstrdup(s);
        }
        return 0;
}

static int parse_group(struct config_walk *w, const struct config_node *n, const char *path,
                       struct hostdev_group_cfg *out)
{
        static const char *const known[] = { "count", "paths", "usb", NULL };
        const struct config_node *paths, *usb;
        char sub[CONFIG_PATH_MAX];
        int r = config_walk_map(w, n, path, known);
        if (r < 0)
                return r;

        out->count = 1;
        if ((r = config_walk_uint(w, n, "count", path, 1, HOSTDEV_COUNT_MAX, &out->count, NULL)) < 0)
                return r;

        if ((r = config_walk_list(w, n, "paths", path, &paths)) < 0)
                return r;
        if ((r = config_walk_list(w, n, "usb", path, &usb)) < 0)
                return r;
        if ((!paths || !paths->n_items) && (!usb || !usb->n_items))
                return fail(w, n, path, "needs at least one entry in \"paths\" or \"usb\"");

        if (paths && paths->n_items) {
                out->paths = xcalloc(paths->n_items, sizeof(*out->paths));
                for (size_t i = 0; i < paths->n_items; i++) {
                        config_subpath(sub, sizeof(sub), path, ".paths[%zu]", i);
                        out->n_paths++;
                        if ((r = parse_path(w, paths->items[i], sub, &out->paths[i])) < 0)
                                return r;
                }
        }
        if (usb && usb->n_items) {
                out->usb = xcalloc(usb->n_items, sizeof(*out->usb));
                for (size_t i = 0; i < usb->n_items; i++) {
                        config_subpath(sub, sizeof(sub), path, ".usb[%zu]", i);
                        out->n_usb++;
                        if ((r = parse_usb(w, usb->items[i], sub, &out->usb[i])) < 0)
                                return r;
                }
        }
        return 0;
}

static int parse_device(struct config_walk *w, const struct config_node *n, const char *path,
                        const char *domain, const struct hostdev_cfg *done,
                        struct hostdev_device_cfg *out)
{
        static const char *const known[] = { "name", "groups", NULL };
        const struct config_node *node, *groups;
        const char *name;
        char sub[CONFIG_PATH_MAX];
        int r = config_walk_map(w, n, path, known);
        if (r < 0)
                return r;

        if ((r = config_walk_required(w, n, "name", path, &name, &node)) < 0)
                return r;
        config_subpath(sub, sizeof(sub), path, ".name");
        _cleanup_free_ char *resource = xasprintf("%s/%s", domain, name);
        bool lower = true;
        for (const char *p = name; *p; p++)
                lower = lower && !isupper((unsigned char)*p);
        if (!lower || !config_valid_resource_name(resource))
                return config_node_error(w->diag, w->file, node, sub,
                                         "\"%.100s\" is not a valid name (at most %d lowercase "
                                         "letters, digits, '-', '.' or '_', starting and ending "
                                         "with a letter or digit)",
                                         name, NAME_MAX_LEN);
        for (size_t i = 0; i < done->n_devices; i++)
                if (strcmp(done->devices[i].name, name) == 0)
                        return config_node_error(w->diag, w->file, node, sub,
                                                 "\"%.100s\" is already used by "
                                                 "hostDevices.devices[%zu]",
                                                 name, i);
        out->name = xstrdup(name);

        if ((r = config_walk_list(w, n, "groups", path, &groups)) < 0)
                return r;
        config_subpath(sub, sizeof(sub), path, ".groups");
        if (!groups)
                return config_node_error(w->diag, w->file, n, path, "\"groups\" is required");
        if (!groups->n_items)
                return fail(w, groups, sub, "needs at least one group");
        out->groups = xcalloc(groups->n_items, sizeof(*out->groups));
        for (size_t i = 0; i < groups->n_items; i++) {
                config_subpath(sub, sizeof(sub), path, ".groups[%zu]", i);
                out->n_groups++;
                if ((r = parse_group(w, groups->items[i], sub, &out->groups[i])) < 0)
                        return r;
        }
        return 0;
}

int config_hostdev_parse(const struct config_node *node, const char *file, struct hostdev_cfg *out,
                         char ***warnings, struct diag *diag)
{
        static const char *const known[] = { "domain", "devices", NULL };
        struct config_walk w = { .file = file, .diag = diag, .warnings = warnings };
        const char *path = "hostDevices";
        const struct config_node *dnode, *devices = NULL;
        const char *domain = NULL;
        int r;

        if (!config_node_is_null(node)) {
                if ((r = config_walk_map(&w, node, path, known)) < 0)
                        return r;
                if ((r = config_walk_string(&w, node, "domain", path, &domain, &dnode)) < 0)
                        return r;
                if (domain && !config_valid_dns_subdomain(domain))
                        return config_node_error(diag, file, dnode, "hostDevices.domain",
                                                 "\"%.100s\" is not a valid DNS subdomain "
                                                 "(lowercase letters, digits, '-' and '.')",
                                                 domain);
                if (domain) {
                        _cleanup_free_ char *probe = xasprintf("%s/x", domain);
                        if (!config_valid_resource_name(probe))
                                return config_node_error(diag, file, dnode, "hostDevices.domain",
                                                         "\"%.100s\" is reserved for "
                                                         "Kubernetes' own resources",
                                                         domain);
                }
                if ((r = config_walk_list(&w, node, "devices", path, &devices)) < 0)
                        return r;
                if (devices && devices->n_items > DEVICES_MAX)
                        return config_node_error(diag, file, devices, "hostDevices.devices",
                                                 "more than %d devices", DEVICES_MAX);
        }

        struct hostdev_cfg h = { .domain = xstrdup(domain ? domain : "devlet.io") };
        if (devices && devices->n_items) {
                h.devices = xcalloc(devices->n_items, sizeof(*h.devices));
                for (size_t i = 0; i < devices->n_items; i++) {
                        char sub[64];
                        snprintf(sub, sizeof(sub), "hostDevices.devices[%zu]", i);
                        struct hostdev_device_cfg dev = { 0 };
                        r = parse_device(&w, devices->items[i], sub, h.domain, &h, &dev);
                        h.devices[h.n_devices++] = dev;
                        if (r < 0) {
                                config_hostdev_clear(&h);
                                return r;
                        }
                }
        }
        *out = h;
        return 0;
}

void config_hostdev_clear(struct hostdev_cfg *h)
{
        for (size_t i = 0; i < h->n_devices; i++) {
                struct hostdev_device_cfg *d = &h->devices[i];
                for (size_t j = 0; j < d->n_groups; j++) {
                        struct hostdev_group_cfg *g = &d->groups[j];
                        for (size_t k = 0; k < g->n_paths; k++) {
                                free(g->paths[k].path);
                                free(g->paths[k].mount_path);
                        }
                        for (size_t k = 0; k < g->n_usb; k++) {
                                free(g->usb[k].vendor);
                                free(g->usb[k].product);
                                free(g->usb[k].serial);
                        }
                        free(g->paths);
                        free(g->usb);
                }
                free(d->groups);
                free(d->name);
        }
        free(h->devices);
        free(h->domain);
        *h = (struct hostdev_cfg){ 0 };
}

static bool path_equal(const struct hostdev_path_cfg *a, const struct hostdev_path_cfg *b)
{
        return streq_ptr(a->path, b->path) && streq_ptr(a->mount_path, b->mount_path) &&
               strcmp(a->permissions, b->permissions) == 0 && a->type == b->type &&
               a->read_only == b->read_only && a->optional == b->optional;
}

static bool usb_equal(const struct hostdev_usb_cfg *a, const struct hostdev_usb_cfg *b)
{
        return streq_ptr(a->vendor, b->vendor) && streq_ptr(a->product, b->product) &&
               streq_ptr(a->serial, b->serial);
}

static bool group_equal(const struct hostdev_group_cfg *a, const struct hostdev_group_cfg *b)
{
        if (a->count != b->count || a->n_paths != b->n_paths || a->n_usb != b->n_usb)
                return false;
        for (size_t i = 0; i < a->n_paths; i++)
                if (!path_equal(&a->paths[i], &b->paths[i]))
                        return false;
        for (size_t i = 0; i < a->n_usb; i++)
                if (!usb_equal(&a->usb[i], &b->usb[i]))
                        return false;
        return true;
}

bool config_hostdev_equal(const struct hostdev_cfg *a, const struct hostdev_cfg *b)
{
        if (!streq_ptr(a->domain, b->domain) || a->n_devices != b->n_devices)
                return false;
        for (size_t i = 0; i < a->n_devices; i++) {
                const struct hostdev_device_cfg *da = &a->devices[i], *db = &b->devices[i];
                if (!streq_ptr(da->name, db->name) || da->n_groups != db->n_groups)
                        return false;
                for (size_t j = 0; j < da->n_groups; j++)
                        if (!group_equal(&da->groups[j], &db->groups[j]))
                                return false;
        }
        return true;
}

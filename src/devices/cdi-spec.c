/* The CDI spec model: building a spec, checking it against the CDI rules and
 * finding the lowest cdiVersion its content needs.
 *
 * The rules are those of the CDI library that runtimes (podman, containerd,
 * CRI-O) use to load specs: pkg/parser for names, the default validator for
 * edits, pkg/cdi/version.go for version gating.  Where the library is looser
 * than the specification text (paths must be absolute there) we follow the
 * specification, so what passes here loads everywhere.
 *
 * Pure data: never touches the filesystem, never logs. */
#include "devices/cdi-spec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"

#define CDI_VENDOR_MAX 253
#define CDI_CLASS_MAX 63

/* ---- names ---- */

static bool is_letter(char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool is_alnum(char c)
{
        return is_letter(c) || (c >= '0' && c <= '9');
}

static bool vendor_or_class_ok(const char *s, size_t len, size_t max)
{
        if (len < 2 || len > max || !is_letter(s[0]) || !is_alnum(s[len - 1]))
                return false;
        for (size_t i = 1; i + 1 < len; i++)
                if (!is_alnum(s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.')
                        return false;
        return true;
}

bool cdi_valid_vendor(const char *s)
{
        return s && vendor_or_class_ok(s, strlen(s), CDI_VENDOR_MAX);
}

bool cdi_valid_class(const char *s)
{
        return s && vendor_or_class_ok(s, strlen(s), CDI_CLASS_MAX);
}

bool cdi_valid_kind(const char *s)
{
        const char *slash = s ? strchr(s, '/') : NULL;
        if (!slash)
                return false;
        return vendor_or_class_ok(s, (size_t)(slash - s), CDI_VENDOR_MAX) &&
               cdi_valid_class(slash + 1);
}

bool cdi_valid_device_name(const char *s)
{
        size_t len = s ? strlen(s) : 0;
        if (len == 0 || !is_alnum(s[0]) || !is_alnum(s[len - 1]))
                return false;
        for (size_t i = 1; i + 1 < len; i++)
                if (!is_alnum(s[i]) && !strchr("_-.:", s[i]))
                        return false;
        return true;
}

/* ---- building ---- */

struct cdi_spec *cdi_spec_new(const char *kind)
{
        struct cdi_spec *s = xcalloc(1, sizeof(*s));
        s->kind = xstrdup(kind);
        return s;
}

void cdi_edits_release(struct cdi_edits *e)
{
        strv_free(e->env);
        for (size_t i = 0; i < e->n_nodes; i++) {
                free(e->nodes[i].path);
                free(e->nodes[i].host_path);
                free(e->nodes[i].permissions);
        }
        free(e->nodes);
        for (size_t i = 0; i < e->n_mounts; i++) {
                free(e->mounts[i].host_path);
                free(e->mounts[i].container_path);
                free(e->mounts[i].type);
                strv_free(e->mounts[i].options);
        }
        free(e->mounts);
        for (size_t i = 0; i < e->n_hooks; i++) {
                free(e->hooks[i].hook_name);
                free(e->hooks[i].path);
                strv_free(e->hooks[i].args);
                strv_free(e->hooks[i].env);
        }
        free(e->hooks);
        memset(e, 0, sizeof(*e));
}

void cdi_spec_free(struct cdi_spec *s)
{
        if (!s)
                return;
        for (size_t i = 0; i < s->n_devices; i++) {
                free(s->devices[i].name);
                cdi_edits_release(&s->devices[i].edits);
        }
        free(s->devices);
        cdi_edits_release(&s->edits);
        free(s->kind);
        free(s);
}

struct cdi_device *cdi_spec_add_device(struct cdi_spec *s, const char *name)
{
        xgrow((void **)&s->devices, &s->cap_devices, s->n_devices + 1, sizeof(*s->devices));
        struct cdi_device *d = &s->devices[s->n_devices++];
        memset(d, 0, sizeof(*d));
        d->name = xstrdup(name);
        return d;
}

struct cdi_device *cdi_spec_find_device(const struct cdi_spec *s, const char *name)
{
        for (size_t i = 0; i < s->n_devices; i++)
                if (strcmp(s->devices[i].name, name) == 0)
                        return &s->devices[i];
        return NULL;
}

void cdi_edits_add_env(struct cdi_edits *e, const char *key, const char *value)
{
        _cleanup_free_ char *kv = xasprintf("%s=%s", key, value);
        if (!e->env)
                e->env = xcalloc(1, sizeof(*e->env));
        if (!strv_contains(e->env, kv))
                e->env = strv_push(e->env, kv);
}

struct cdi_device_node *cdi_edits_add_node(struct cdi_edits *e, const char *path,
                                           const char *host_path, const char *permissions)
{
        xgrow((void **)&e->nodes, &e->cap_nodes, e->n_nodes + 1, sizeof(*e->nodes));
        struct cdi_device_node *n = &e->nodes[e->n_nodes++];
        memset(n, 0, sizeof(*n));
        n->path = xstrdup(path);
        if (host_path && strcmp(host_path, path) != 0)
                n->host_path = xstrdup(host_path);
        if (permissions)
                n->permissions = xstrdup(permissions);
        n->file_mode = -1;
        return n;
}

void cdi_edits_add_mount(struct cdi_edits *e, const char *host_path, const char *container_path,
                         const char *type, const char *const *options)
{
        xgrow((void **)&e->mounts, &e->cap_mounts, e->n_mounts + 1, sizeof(*e->mounts));
        struct cdi_mount *m = &e->mounts[e->n_mounts++];
        m->host_path = xstrdup(host_path);
        m->container_path = xstrdup(container_path);
        m->type = type ? xstrdup(type) : NULL;
        m->options = strv_copy(options);
}

void cdi_edits_add_hook(struct cdi_edits *e, const char *hook_name, const char *path,
                        const char *const *args, const char *const *env)
{
        xgrow((void **)&e->hooks, &e->cap_hooks, e->n_hooks + 1, sizeof(*e->hooks));
        struct cdi_hook *h = &e->hooks[e->n_hooks++];
        h->hook_name = xstrdup(hook_name);
        h->path = xstrdup(path);
        h->args = strv_copy(args);
        h->env = strv_copy(env);
}

static bool has_node(const struct cdi_edits *e, const char *path)
{
        for (size_t i = 0; i < e->n_nodes; i++)
                if (strcmp(e->nodes[i].path, path) == 0)
                        return true;
        return false;
}

static bool has_mount(const struct cdi_edits *e, const char *container_path)
{
        for (size_t i = 0; i < e->n_mounts; i++)
                if (strcmp(e->mounts[i].container_path, container_path) == 0)
                        return true;
        return false;
}

void cdi_edits_merge(struct cdi_edits *dst, const struct cdi_edits *src)
{
        for (size_t i = 0; src->env && src->env[i]; i++) {
                if (!dst->env)
                        dst->env = xcalloc(1, sizeof(*dst->env));
                if (!strv_contains(dst->env, src->env[i]))
                        dst->env = strv_push(dst->env, src->env[i]);
        }
        for (size_t i = 0; i < src->n_nodes; i++) {
                const struct cdi_device_node *n = &src->nodes[i];
                if (has_node(dst, n->path))
                        continue;
                struct cdi_device_node *c =
                        cdi_edits_add_node(dst, n->path, n->host_path, n->permissions);
                c->type = n->type;
                c->major = n->major;
                c->minor = n->minor;
                c->file_mode = n->file_mode;
        }
        for (size_t i = 0; i < src->n_mounts; i++) {
                const struct cdi_mount *m = &src->mounts[i];
                if (!has_mount(dst, m->container_path))
                        cdi_edits_add_mount(dst, m->host_path, m->container_path, m->type,
                                            (const char *const *)m->options);
        }
        for (size_t i = 0; i < src->n_hooks; i++) {
                const struct cdi_hook *h = &src->hooks[i];
                cdi_edits_add_hook(dst, h->hook_name, h->path, (const char *const *)h->args,
                                   (const char *const *)h->env);
        }
}

bool cdi_edits_empty(const struct cdi_edits *e)
{
        return (!e->env || !e->env[0]) && e->n_nodes == 0 && e->n_mounts == 0 && e->n_hooks == 0;
}

/* ---- validation ---- */

static bool env_ok(const char *kv)
{
        const char *eq = strchr(kv, '=');
        return eq && eq != kv;
}

static bool abs_path(const char *p)
{
        return p && p[0] == '/';
}

static const char *const hook_names[] = { "prestart",       "createRuntime", "createContainer",
                                          "startContainer", "poststart",     "poststop" };

static int edits_validate(const struct cdi_edits *e, const char *where, struct diag *diag)
{
        for (size_t i = 0; e->env && e->env[i]; i++)
                if (!env_ok(e->env[i]))
                        return diag_set(diag, -EINVAL, "%s: env entry \"%s\" is not KEY=VALUE",
                                        where, e->env[i]);
        for (size_t i = 0; i < e->n_nodes; i++) {
                const struct cdi_device_node *n = &e->nodes[i];
                if (!abs_path(n->path))
                        return diag_set(diag, -EINVAL,
                                        "%s: device node path \"%s\" is not absolute", where,
                                        n->path ? n->path : "");
                if (n->host_path && !abs_path(n->host_path))
                        return diag_set(diag, -EINVAL,
                                        "%s: device node %s: host path \"%s\" is not absolute",
                                        where, n->path, n->host_path);
                if (n->type && !strchr("cbup", n->type))
                        return diag_set(diag, -EINVAL, "%s: device node %s: invalid type '%c'",
                                        where, n->path, n->type);
                if (n->major < 0 || n->minor < 0)
                        return diag_set(diag, -EINVAL, "%s: device node %s: negative device number",
                                        where, n->path);
                if (n->permissions &&
                    (!n->permissions[0] || n->permissions[strspn(n->permissions, "rwm")]))
                        return diag_set(diag, -EINVAL,
                                        "%s: device node %s: invalid permissions \"%s\"", where,
                                        n->path, n->permissions);
                if (n->file_mode < -1 || n->file_mode > 07777)
                        return diag_set(diag, -EINVAL, "%s: device node %s: invalid file mode",
                                        where, n->path);
        }
        for (size_t i = 0; i < e->n_mounts; i++) {
                const struct cdi_mount *m = &e->mounts[i];
                if (!abs_path(m->host_path) || !abs_path(m->container_path))
                        return diag_set(diag, -EINVAL,
                                        "%s: mount \"%s\" -> \"%s\": paths must be absolute", where,
                                        m->host_path ? m->host_path : "",
                                        m->container_path ? m->container_path : "");
                if (m->type && !m->type[0])
                        return diag_set(diag, -EINVAL, "%s: mount %s: empty type", where,
                                        m->container_path);
                for (size_t k = 0; m->options && m->options[k]; k++)
                        if (!m->options[k][0])
                                return diag_set(diag, -EINVAL, "%s: mount %s: empty option", where,
                                                m->container_path);
        }
        for (size_t i = 0; i < e->n_hooks; i++) {
                const struct cdi_hook *h = &e->hooks[i];
                bool known = false;
                for (size_t k = 0; k < ARRAY_SIZE(hook_names) && !known; k++)
                        known = h->hook_name && strcmp(h->hook_name, hook_names[k]) == 0;
                if (!known)
                        return diag_set(diag, -EINVAL, "%s: invalid hook name \"%s\"", where,
                                        h->hook_name ? h->hook_name : "");
                if (!abs_path(h->path))
                        return diag_set(diag, -EINVAL, "%s: hook %s: path \"%s\" is not absolute",
                                        where, h->hook_name, h->path ? h->path : "");
                for (size_t k = 0; h->env && h->env[k]; k++)
                        if (!env_ok(h->env[k]))
                                return diag_set(diag, -EINVAL,
                                                "%s: hook %s: env entry \"%s\" is not KEY=VALUE",
                                                where, h->hook_name, h->env[k]);
        }
        return 0;
}

int cdi_spec_validate(const struct cdi_spec *s, struct diag *diag)
{
        if (!cdi_valid_kind(s->kind))
                return diag_set(diag, -EINVAL,
                                "invalid kind \"%s\": want <vendor>/<class>, each starting with a "
                                "letter, ending with a letter or digit, with letters, digits, "
                                "'_', '-' and '.' between", s->kind ? s->kind : "");
        if (s->n_devices == 0)
                return diag_set(diag, -EINVAL, "kind %s: a spec needs at least one device",
                                s->kind);
        int r = edits_validate(&s->edits, "spec", diag);
        if (r < 0)
                return r;
        for (size_t i = 0; i < s->n_devices; i++) {
                const struct cdi_device *d = &s->devices[i];
                if (!cdi_valid_device_name(d->name))
                        return diag_set(diag, -EINVAL,
                                        "invalid device name \"%s\": letters, digits, '_', '-', "
                                        "'.' and ':', starting and ending with a letter or digit",
                                        d->name ? d->name : "");
                for (size_t j = 0; j < i; j++)
                        if (strcmp(s->devices[j].name, d->name) == 0)
                                return diag_set(diag, -EINVAL, "device \"%s\" appears twice",
                                                d->name);
                if (cdi_edits_empty(&d->edits))
                        return diag_set(diag, -EINVAL, "device \"%s\" has no container edits",
                                        d->name);
                _cleanup_free_ char *where = xasprintf("device \"%s\"", d->name);
                r = edits_validate(&d->edits, where, diag);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- version ---- */

static bool edits_have_mount_type(const struct cdi_edits *e)
{
        for (size_t i = 0; i < e->n_mounts; i++)
                if (e->mounts[i].type)
                        return true;
        return false;
}

static bool edits_have_host_path(const struct cdi_edits *e)
{
        for (size_t i = 0; i < e->n_nodes; i++)
                if (e->nodes[i].host_path)
                        return true;
        return false;
}

const char *cdi_spec_min_version(const struct cdi_spec *s)
{
        const char *slash = s->kind ? strchr(s->kind, '/') : NULL;
        if (slash && strchr(slash + 1, '.'))
                return "0.6.0";
        bool v050 = edits_have_host_path(&s->edits), v040 = edits_have_mount_type(&s->edits);
        for (size_t i = 0; i < s->n_devices; i++) {
                const struct cdi_device *d = &s->devices[i];
                if (!is_letter(d->name[0]) || edits_have_host_path(&d->edits))
                        v050 = true;
                if (edits_have_mount_type(&d->edits))
                        v040 = true;
        }
        return v050 ? "0.5.0" : v040 ? "0.4.0" : "0.3.0";
}

/* ---- lists ---- */

void cdi_spec_list_push(struct cdi_spec_list *l, struct cdi_spec *s)
{
        l->specs = xrealloc(l->specs, (l->n + 1) * sizeof(*l->specs));
        l->specs[l->n++] = s;
}

void cdi_spec_list_warn(struct cdi_spec_list *l, char *msg)
{
        l->warnings = strv_push(l->warnings ? l->warnings : xcalloc(1, sizeof(char *)), msg);
        free(msg);
}

void cdi_spec_list_release(struct cdi_spec_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                cdi_spec_free(l->specs[i]);
        free(l->specs);
        strv_free(l->warnings);
        memset(l, 0, sizeof(*l));
}

/* OCI runtime specs of running containers: their names and their devices.
 *
 * attr_spec_parse() reads one config.json through kapi's JSON filter, so that
 * jansson parses only what attribution needs (see attrib.h), within a budget
 * of values: a container's spec is its owner's to write.  The cache walks each
 * configured state directory (<dir>/<id>/config.json for containerd's task
 * directories, <dir>/<id>/userdata/config.json for CRI-O and podman), stats
 * every spec, and parses a file again only when its (device, inode, size,
 * mtime) changed.  Files are opened non-blocking, must be regular and at most
 * ATTR_SPEC_MAX_BYTES; anything malformed is skipped.  Runs on the collector
 * thread; never logs above debug. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "kapi/json-filter.h"
#include "metrics/attrib.h"

#define SPECS_PER_DIR_MAX 4096
#define DEVNUMS_MAX 1024
/* What is read of a config.json: the rest is skipped unparsed. */
#define OCI_KEPT "{process{capabilities{bounding},env},annotations,mounts[{destination}]," \
                 "linux{devices[{type,major,minor}]}}"
/* env and annotations may be long; a tree of this many values is ~13 MiB at worst */
#define OCI_VALUES_MAX 65536u

/* The families' hints, for one parse. */
struct hint_set {
        const struct dev_attr_hints *const *v;
        size_t n;
};

void attr_spec_free(struct attr_spec *s)
{
        if (!s)
                return;
        free(s->id);
        free(s->pod);
        free(s->namespace);
        free(s->container);
        strv_free(s->refs);
        free(s->ref_hints);
        free(s->devnums);
        free(s);
}

DEFINE_CLEANUP_FUNC(struct attr_spec, attr_spec_free)

static const char *get_str(json_t *obj, const char *key)
{
        json_t *v = json_object_get(obj, key);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

static char *dup_or_null(const char *s)
{
        return s && *s ? xstrdup(s) : NULL;
}

static void add_ref(struct attr_spec *s, const char *ref, const struct dev_attr_hints *h)
{
        size_t n = 0;
        while (s->refs && s->refs[n])
                n++;
        s->refs = strv_push(s->refs, ref);
        s->ref_hints = xrealloc(s->ref_hints, (n + 1) * sizeof(*s->ref_hints));
        s->ref_hints[n] = h;
}

static void add_refs(struct attr_spec *s, char **refs, const struct dev_attr_hints *h)
{
        for (size_t k = 0; refs && refs[k]; k++)
                add_ref(s, refs[k], h);
        strv_free(refs);
}

static void parse_annotations(struct attr_spec *s, json_t *ann, const char *cdi_prefix,
                              const struct hint_set *hs)
{
        if (!json_is_object(ann))
                return;
        /* containerd's CRI names first, then CRI-O's */
        const char *pod = get_str(ann, "io.kubernetes.cri.sandbox-name");
        const char *ns = get_str(ann, "io.kubernetes.cri.sandbox-namespace");
        const char *ctr = get_str(ann, "io.kubernetes.cri.container-name");
        const char *type = get_str(ann, "io.kubernetes.cri.container-type");
        if (!pod)
                pod = get_str(ann, "io.kubernetes.pod.name");
        if (!ns)
                ns = get_str(ann, "io.kubernetes.pod.namespace");
        if (!ctr)
                ctr = get_str(ann, "io.kubernetes.container.name");
        if (!type)
                type = get_str(ann, "io.kubernetes.cri-o.ContainerType");
        s->pod = dup_or_null(pod);
        s->namespace = dup_or_null(ns);
        s->container = dup_or_null(ctr);
        s->sandbox = type && strcmp(type, "sandbox") == 0;

        size_t plen = cdi_prefix ? strlen(cdi_prefix) : 0;
        const char *key;
        json_t *value;
        json_object_foreach(ann, key, value) {
                if (plen == 0 || strncmp(key, cdi_prefix, plen) != 0 || !json_is_string(value))
                        continue;
                _cleanup_free_ char *list = xstrdup(json_string_value(value));
                char *save = NULL;
                for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
                        for (size_t h = 0; h < hs->n; h++)
                                add_refs(s, attr_cdi_device(t, hs->v[h]->cdi_vendor, NULL), hs->v[h]);
        }
}

static bool is_privileged(json_t *process)
{
        json_t *bounding = json_object_get(json_object_get(process, "capabilities"), "bounding");
        size_t i;
        json_t *cap;
        json_array_foreach(bounding, i, cap) {
                if (json_is_string(cap) && strcmp(json_string_value(cap), "CAP_SYS_ADMIN") == 0)
                        return true;
        }
        return false;
}

static void parse_env(struct attr_spec *s, json_t *process, const struct dev_attr_hints *h)
{
        for (size_t v = 0; h->env_vars && h->env_vars[v]; v++) {
                size_t klen = strlen(h->env_vars[v]);
                const char *value = NULL;
                size_t i;
                json_t *e;
                json_array_foreach(json_object_get(process, "env"), i, e) {
                        /* the last definition wins, as in execve's environment lookup */
                        const char *kv = json_is_string(e) ? json_string_value(e) : NULL;
                        if (kv && strncmp(kv, h->env_vars[v], klen) == 0 && kv[klen] == '=')
                                value = kv + klen + 1;
                }
                if (!value)
                        continue;
                _cleanup_strv_free_ char **refs = attr_visible_devices(value, NULL);
                for (size_t k = 0; refs && refs[k]; k++) {
                        if (strcmp(refs[k], "all") == 0 && !s->privileged)
                                continue;
                        add_ref(s, refs[k], h);
                }
        }
}

static void parse_mounts(struct attr_spec *s, json_t *mounts, const struct dev_attr_hints *h)
{
        size_t i;
        json_t *m;
        json_array_foreach(mounts, i, m) {
                const char *dst = get_str(m, "destination");
                if (!dst)
                        continue;
                for (size_t k = 0; h->mount_dirs && h->mount_dirs[k]; k++) {
                        size_t n = strlen(h->mount_dirs[k]);
                        if (strncmp(dst, h->mount_dirs[k], n) == 0 && dst[n] && !strchr(dst + n, '/')) {
                                add_ref(s, dst + n, h);
                                break;
                        }
                }
        }
}

static bool devnum_known(const struct hint_set *hs, json_int_t major, json_int_t minor)
{
        for (size_t h = 0; h < hs->n; h++)
                for (size_t k = 0; k < hs->v[h]->n_devnums; k++) {
                        const struct dev_devnum_range *r = &hs->v[h]->devnums[k];
                        if (major == r->major && minor >= r->minor_first && minor <= r->minor_last)
                                return true;
                }
        return false;
}

static void parse_devices(struct attr_spec *s, json_t *linux_, const struct hint_set *hs)
{
        size_t i;
        json_t *d;
        json_array_foreach(json_object_get(linux_, "devices"), i, d) {
                const char *type = get_str(d, "type");
                json_t *major = json_object_get(d, "major"), *minor = json_object_get(d, "minor");
                if (!type || strcmp(type, "c") != 0 || !json_is_integer(major) ||
                    !json_is_integer(minor) || s->n_devnums >= DEVNUMS_MAX ||
                    !devnum_known(hs, json_integer_value(major), json_integer_value(minor)))
                        continue;
                s->devnums = xrealloc(s->devnums, (s->n_devnums + 1) * sizeof(*s->devnums));
                s->devnums[s->n_devnums++] = (struct dev_devnum){
                        (unsigned)json_integer_value(major), (unsigned)json_integer_value(minor)
                };
        }
}

int attr_spec_parse(const char *json, size_t len, const char *id, const char *cdi_prefix,
                    const struct dev_attr_hints *const *hints, size_t n_hints,
                    struct attr_spec **out, struct diag *diag)
{
        const struct hint_set hs = { hints, n_hints };
        struct kapi_json_spec *spec = NULL;
        int r = kapi_json_spec_new(OCI_KEPT, &spec);
        json_auto_t *root = NULL;
        if (r == 0)
                r = kapi_json_load(json, len, spec,
                                   &(struct kapi_json_budget){ .max_values = OCI_VALUES_MAX,
                                                               .max_bytes = ATTR_SPEC_MAX_BYTES },
                                   0, &root, diag);
        kapi_json_spec_free(spec);
        if (r < 0)
                return -EINVAL; /* diag says why */
        if (!json_is_object(root))
                return diag_set(diag, -EINVAL, "not a JSON object");
        _cleanup_(attr_spec_freep) struct attr_spec *s = xcalloc(1, sizeof(*s));
        s->id = xstrdup(id);
        json_t *process = json_object_get(root, "process");
        s->privileged = is_privileged(process);
        parse_annotations(s, json_object_get(root, "annotations"), cdi_prefix, &hs);
        for (size_t h = 0; h < n_hints; h++)
                parse_env(s, process, hints[h]);
        for (size_t h = 0; h < n_hints; h++)
                parse_mounts(s, json_object_get(root, "mounts"), hints[h]);
        if (!s->privileged)
                parse_devices(s, json_object_get(root, "linux"), &hs);
        *out = TAKE_PTR(s);
        return 0;
}

/* ---- the cache ---- */

struct spec_entry {
        char *path;
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
        uint64_t seen; /* scan generation */
        struct attr_spec *spec; /* NULL: the file did not parse */
};

struct attr_specs {
        char **dirs;
        char *cdi_prefix;
        const struct dev_attr_hints **hints;
        size_t n_hints;
        struct spec_entry *entries;
        size_t n, cap;
        uint64_t generation;
        uint64_t parsed;
};

struct attr_specs *attr_specs_new(char *const *dirs, const char *cdi_prefix,
                                  const struct dev_attr_hints *const *hints, size_t n_hints)
{
        struct attr_specs *c = xcalloc(1, sizeof(*c));
        c->hints = xcalloc(n_hints + 1, sizeof(*c->hints));
        if (n_hints)
                memcpy(c->hints, hints, n_hints * sizeof(*hints));
        c->n_hints = n_hints;
        for (size_t i = 0; dirs && dirs[i]; i++)
                if (*dirs[i])
                        c->dirs = strv_push(c->dirs, dirs[i]);
        c->cdi_prefix = xstrdup(cdi_prefix && *cdi_prefix ? cdi_prefix : "cdi.k8s.io/");
        return c;
}

void attr_specs_free(struct attr_specs *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n; i++) {
                free(c->entries[i].path);
                attr_spec_free(c->entries[i].spec);
        }
        free(c->entries);
        strv_free(c->dirs);
        free(c->cdi_prefix);
        free(c->hints);
        free(c);
}

static struct spec_entry *entry_find(struct attr_specs *c, const char *path)
{
        for (size_t i = 0; i < c->n; i++)
                if (strcmp(c->entries[i].path, path) == 0)
                        return &c->entries[i];
        return NULL;
}

/* Returns false when there is no regular file at path. */
static bool visit(struct attr_specs *c, const char *path, const char *id)
{
        struct stat st;
        if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
                return false;
        struct spec_entry *e = entry_find(c, path);
        if (e && e->dev == st.st_dev && e->ino == st.st_ino && e->size == st.st_size &&
            e->mtime.tv_sec == st.st_mtim.tv_sec && e->mtime.tv_nsec == st.st_mtim.tv_nsec) {
                e->seen = c->generation;
                return true;
        }
        if (!e) {
                xgrow((void **)&c->entries, &c->cap, c->n + 1, sizeof(*c->entries));
                e = &c->entries[c->n++];
                *e = (struct spec_entry){ .path = xstrdup(path) };
        }
        e->dev = st.st_dev;
        e->ino = st.st_ino;
        e->size = st.st_size;
        e->mtime = st.st_mtim;
        e->seen = c->generation;
        attr_spec_free(TAKE_PTR(e->spec));
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = fs_read_file(path, ATTR_SPEC_MAX_BYTES, &data, &len);
        c->parsed++;
        if (r < 0) {
                log_debug("metrics", "OCI spec skipped path=%s error=\"%s\"", path, fs_strerror(r));
                return true;
        }
        struct diag diag = { 0 };
        if (attr_spec_parse(data, len, id, c->cdi_prefix,
                            (const struct dev_attr_hints *const *)c->hints, c->n_hints, &e->spec, &diag) < 0)
                log_debug("metrics", "OCI spec skipped path=%s error=\"%s\"", path, diag.message);
        return true;
}

static void scan_dir(struct attr_specs *c, const char *dir)
{
        DIR *d = opendir(dir);
        if (!d)
                return;
        size_t count = 0;
        struct dirent *de;
        while ((de = readdir(d)) && count < SPECS_PER_DIR_MAX) {
                if (de->d_name[0] == '.' || strlen(de->d_name) > 128)
                        continue;
                if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
                        continue;
                count++;
                char path[4096];
                snprintf(path, sizeof(path), "%s/%s/config.json", dir, de->d_name);
                if (visit(c, path, de->d_name))
                        continue;
                snprintf(path, sizeof(path), "%s/%s/userdata/config.json", dir, de->d_name);
                visit(c, path, de->d_name);
        }
        closedir(d);
}

size_t attr_specs_scan(struct attr_specs *c)
{
        c->generation++;
        for (size_t i = 0; c->dirs && c->dirs[i]; i++)
                scan_dir(c, c->dirs[i]);
        /* drop what was not seen this time, keeping the order of the rest */
        size_t w = 0;
        for (size_t i = 0; i < c->n; i++) {
                if (c->entries[i].seen == c->generation) {
                        c->entries[w++] = c->entries[i];
                        continue;
                }
                free(c->entries[i].path);
                attr_spec_free(c->entries[i].spec);
        }
        c->n = w;
        size_t good = 0;
        for (size_t i = 0; i < c->n; i++)
                good += c->entries[i].spec != NULL;
        return good;
}

uint64_t attr_specs_parsed(const struct attr_specs *c)
{
        return c->parsed;
}

size_t attr_specs_count(const struct attr_specs *c)
{
        return c->n;
}

const struct attr_spec *attr_specs_at(const struct attr_specs *c, size_t i)
{
        return i < c->n ? c->entries[i].spec : NULL;
}

const struct attr_spec *attr_specs_find(const struct attr_specs *c, const char *id)
{
        for (size_t k = 0; k < c->n; k++)
                if (c->entries[k].spec && strcmp(c->entries[k].spec->id, id) == 0)
                        return c->entries[k].spec;
        return NULL;
}

/* Rendering a CDI spec as JSON or YAML and writing it where runtimes look.
 *
 * The spec becomes one jansson tree, in the field order of the CDI
 * specification; JSON is jansson's dump of it and YAML is the same tree fed
 * to libyaml's emitter, so both formats always say the same thing.  A YAML
 * string that a YAML 1.1 or 1.2 reader could take for a number, a boolean or
 * null ("0", "1:0", "on", "null") is double-quoted; the CDI library reads
 * YAML through a JSON conversion, where a device name read as a number
 * would fail the whole spec.
 *
 * Every render validates first: an invalid spec is never rendered, and so
 * never written.  Writing is fs_write_atomic's (a new file under a random
 * name, renamed into place; never through a planted link), mode 0644. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <yaml.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "cdi/spec.h"

/* ---- the tree ---- */

static json_t *strv_json(char *const *v)
{
        json_t *a = json_array();
        for (size_t i = 0; v && v[i]; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

static json_t *edits_json(const struct cdi_edits *e)
{
        json_t *o = json_object();
        if (e->env && e->env[0])
                json_object_set_new(o, "env", strv_json(e->env));
        if (e->n_nodes > 0) {
                json_t *a = json_array();
                for (size_t i = 0; i < e->n_nodes; i++) {
                        const struct cdi_device_node *n = &e->nodes[i];
                        json_t *j = json_object();
                        json_object_set_new(j, "path", json_string(n->path));
                        if (n->host_path)
                                json_object_set_new(j, "hostPath", json_string(n->host_path));
                        if (n->type) {
                                char t[2] = { n->type, '\0' };
                                json_object_set_new(j, "type", json_string(t));
                        }
                        if (n->type == 'c' || n->type == 'b') {
                                json_object_set_new(j, "major", json_integer(n->major));
                                json_object_set_new(j, "minor", json_integer(n->minor));
                        }
                        if (n->file_mode >= 0)
                                json_object_set_new(j, "fileMode", json_integer(n->file_mode));
                        if (n->permissions)
                                json_object_set_new(j, "permissions", json_string(n->permissions));
                        json_array_append_new(a, j);
                }
                json_object_set_new(o, "deviceNodes", a);
        }
        if (e->n_mounts > 0) {
                json_t *a = json_array();
                for (size_t i = 0; i < e->n_mounts; i++) {
                        const struct cdi_mount *m = &e->mounts[i];
                        json_t *j = json_object();
                        json_object_set_new(j, "hostPath", json_string(m->host_path));
                        json_object_set_new(j, "containerPath", json_string(m->container_path));
                        if (m->type)
                                json_object_set_new(j, "type", json_string(m->type));
                        if (m->options && m->options[0])
                                json_object_set_new(j, "options", strv_json(m->options));
                        json_array_append_new(a, j);
                }
                json_object_set_new(o, "mounts", a);
        }
        if (e->n_hooks > 0) {
                json_t *a = json_array();
                for (size_t i = 0; i < e->n_hooks; i++) {
                        const struct cdi_hook *h = &e->hooks[i];
                        json_t *j = json_object();
                        json_object_set_new(j, "hookName", json_string(h->hook_name));
                        json_object_set_new(j, "path", json_string(h->path));
                        if (h->args && h->args[0])
                                json_object_set_new(j, "args", strv_json(h->args));
                        if (h->env && h->env[0])
                                json_object_set_new(j, "env", strv_json(h->env));
                        json_array_append_new(a, j);
                }
                json_object_set_new(o, "hooks", a);
        }
        return o;
}

static json_t *spec_json(const struct cdi_spec *s)
{
        json_t *root = json_object();
        json_object_set_new(root, "cdiVersion", json_string(cdi_spec_min_version(s)));
        json_object_set_new(root, "kind", json_string(s->kind));
        json_t *devs = json_array();
        for (size_t i = 0; i < s->n_devices; i++)
                json_array_append_new(devs, json_pack("{s:s, s:o}", "name", s->devices[i].name,
                                                      "containerEdits",
                                                      edits_json(&s->devices[i].edits)));
        json_object_set_new(root, "devices", devs);
        if (!cdi_edits_empty(&s->edits))
                json_object_set_new(root, "containerEdits", edits_json(&s->edits));
        return root;
}

/* ---- YAML ---- */

/* Whether s reads back as the same string when written plain. */
static bool yaml_plain_safe(const char *s)
{
        static const char *const words[] = { "y",    "n",   "yes",   "no",   "on",
                                             "off",  "true", "false", "null", "nan",
                                             "inf" };
        if (!s[0] || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '/'))
                return false;
        for (const char *p = s; *p; p++)
                if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                            "/_.=,+-",
                            *p))
                        return false;
        for (size_t i = 0; i < ARRAY_SIZE(words); i++)
                if (strcasecmp(s, words[i]) == 0)
                        return false;
        return true;
}

static int yaml_out(void *data, unsigned char *buf, size_t size)
{
        FILE *f = data;
        return fwrite(buf, 1, size, f) == size;
}

static int emit(yaml_emitter_t *em, yaml_event_t *ev)
{
        return yaml_emitter_emit(em, ev) ? 0 : -EIO;
}

static int emit_scalar(yaml_emitter_t *em, const char *text, bool quote)
{
        yaml_event_t ev;
        yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)(uintptr_t)text,
                                     (int)strlen(text), !quote, quote,
                                     quote ? YAML_DOUBLE_QUOTED_SCALAR_STYLE
                                           : YAML_PLAIN_SCALAR_STYLE);
        return emit(em, &ev);
}

static int emit_json(yaml_emitter_t *em, json_t *j)
{
        yaml_event_t ev;
        int r;
        switch (json_typeof(j)) {
        case JSON_OBJECT: {
                yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
                if ((r = emit(em, &ev)) < 0)
                        return r;
                const char *key;
                json_t *v;
                json_object_foreach(j, key, v)
                {
                        if ((r = emit_scalar(em, key, false)) < 0 || (r = emit_json(em, v)) < 0)
                                return r;
                }
                yaml_mapping_end_event_initialize(&ev);
                return emit(em, &ev);
        }
        case JSON_ARRAY: {
                yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
                if ((r = emit(em, &ev)) < 0)
                        return r;
                size_t i;
                json_t *v;
                json_array_foreach(j, i, v)
                {
                        if ((r = emit_json(em, v)) < 0)
                                return r;
                }
                yaml_sequence_end_event_initialize(&ev);
                return emit(em, &ev);
        }
        case JSON_STRING: {
                const char *s = json_string_value(j);
                return emit_scalar(em, s, !yaml_plain_safe(s));
        }
        case JSON_INTEGER: {
                char buf[32];
                snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(j));
                return emit_scalar(em, buf, false);
        }
        default:
                return -EINVAL; /* the spec tree holds nothing else */
        }
}

static int render_yaml(json_t *root, char **out, size_t *len)
{
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        if (!f)
                abort(); /* only fails for lack of memory, like xmalloc */
        yaml_emitter_t em;
        yaml_emitter_initialize(&em);
        yaml_emitter_set_output(&em, yaml_out, f);
        yaml_emitter_set_unicode(&em, 1);
        yaml_emitter_set_width(&em, -1);
        yaml_event_t ev;
        yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
        int r = emit(&em, &ev);
        if (r == 0) {
                yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 0);
                r = emit(&em, &ev);
        }
        if (r == 0)
                r = emit_json(&em, root);
        if (r == 0) {
                yaml_document_end_event_initialize(&ev, 1);
                r = emit(&em, &ev);
        }
        if (r == 0) {
                yaml_stream_end_event_initialize(&ev);
                r = emit(&em, &ev);
        }
        if (r == 0 && !yaml_emitter_flush(&em))
                r = -EIO;
        yaml_emitter_delete(&em);
        fclose(f);
        if (r < 0)
                return r;
        *out = TAKE_PTR(buf);
        *len = size;
        return 0;
}

/* ---- public ---- */

int cdi_spec_render(const struct cdi_spec *s, enum cdi_format format, char **out, size_t *len,
                    struct diag *diag)
{
        int r = cdi_spec_validate(s, diag);
        if (r < 0)
                return r;
        json_auto_t *root = spec_json(s);
        if (format == CDI_FORMAT_JSON) {
                _cleanup_free_ char *text = json_dumps(root, JSON_INDENT(2));
                if (!text)
                        abort(); /* jansson fails only for lack of memory here */
                size_t n = strlen(text);
                char *buf = xmalloc(n + 2);
                memcpy(buf, text, n);
                buf[n] = '\n';
                buf[n + 1] = '\0';
                *out = buf;
                *len = n + 1;
                return 0;
        }
        r = render_yaml(root, out, len);
        if (r < 0)
                return diag_set(diag, r, "kind %s: the YAML emitter failed", s->kind);
        return 0;
}

char *cdi_spec_file_name(const struct cdi_spec *s, enum cdi_format format)
{
        const char *slash = strchr(s->kind, '/');
        return xasprintf("%.*s-%s.%s", (int)(slash - s->kind), s->kind, slash + 1,
                         format == CDI_FORMAT_JSON ? "json" : "yaml");
}

int cdi_spec_write(const struct cdi_spec *s, const char *dir, enum cdi_format format, char **path,
                   struct diag *diag)
{
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = cdi_spec_render(s, format, &data, &len, diag);
        if (r < 0)
                return r;
        _cleanup_free_ char *name = cdi_spec_file_name(s, format);
        _cleanup_free_ char *file = xasprintf("%s/%s", dir, name);
        r = fs_write_atomic_at(AT_FDCWD, file, data, len, 0644, FS_CREATE, diag);
        if (r < 0)
                return diag_prefix(diag, r, "cannot write %s", file);
        if (path)
                *path = TAKE_PTR(file);
        return 0;
}

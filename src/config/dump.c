/* The effective configuration as one JSON object, for the start-up log line
 * (NVIDIA's plugin prints its "Running with config" the same way): every
 * option of the table, the families' included, under its flag name, then the sections' shape
 * (sharing strategy and resources, host devices, and each family section's
 * own dump: NVIDIA's resource patterns); and the tables themselves with
 * what a change of each row needs (config_table_json).
 * Pure: no logging, no I/O. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "config/config.h"
#include "config/options.h"
#include "config/sections.h"

static json_t *strv_json(char *const *v)
{
        json_t *a = json_array();
        for (size_t i = 0; v && v[i]; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

static json_t *option_json(const struct devlet_config *cfg, const struct config_option *o)
{
        const void *field = config_option_value(cfg, o);
        switch (o->type) {
        case CONFIG_STRING:
                return json_string(*(char *const *)field);
        case CONFIG_LIST:
                return strv_json(*(char **const *)field);
        case CONFIG_BOOL:
                return json_boolean(*(const bool *)field);
        case CONFIG_INT:
                return json_integer(*(const long *)field);
        case CONFIG_DURATION: {
                int64_t ms = *(const int64_t *)field;
                return ms < 0 ? json_string("infinite") : json_integer(ms);
        }
        }
        return json_null();
}

static json_t *sharing_json(const struct sharing_cfg *s)
{
        static const char *const names[] = { "none", "time-slicing", "mps" };
        json_t *o = json_object();
        json_object_set_new(o, "strategy", json_string(names[s->strategy]));
        json_t *res = json_array();
        for (size_t i = 0; s->strategy != SHARING_NONE && i < s->n_resources; i++) {
                const struct sharing_resource_cfg *r = &s->resources[i];
                json_t *e = json_object();
                json_object_set_new(e, "name", json_string(r->name));
                json_object_set_new(e, "servedAs", json_string(config_sharing_served_name(r)));
                json_object_set_new(e, "replicas", json_integer(r->replicas));
                json_array_append_new(res, e);
        }
        json_object_set_new(o, "resources", res);
        return o;
}

char *config_to_json(const struct devlet_config *cfg)
{
        json_t *root = json_object();
        json_t *flags = json_object();
        const struct config_option *o;
        for (size_t i = 0; (o = config_option_at(cfg->families, i)); i++) {
                json_object_set_new(flags, o->flag, option_json(cfg, o));
        }
        json_object_set_new(flags, "kubeletRegistration", json_boolean(!cfg->kubelet_disabled));
        json_object_set_new(root, "flags", flags);
        json_object_set_new(root, "sharing", sharing_json(&cfg->sharing));
        for (size_t j = 0; j < CONFIG_FAMILIES_MAX && cfg->families->v[j]; j++) {
                const struct config_section *s = cfg->families->v[j]->section;
                if (s && s->dump)
                        json_object_set_new(root, s->key, s->dump(cfg->backend_sections[j]));
        }
        json_t *hd = json_array();
        for (size_t i = 0; i < cfg->hostdev.n_devices; i++)
                json_array_append_new(hd, json_sprintf("%s/%s", cfg->hostdev.domain,
                                                       cfg->hostdev.devices[i].name));
        json_object_set_new(root, "hostDevices", hd);
        char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(root);
        return s ? s : xstrdup("{}");
}

static json_t *apply_json(unsigned apply)
{
        char buf[128];
        json_t *a = json_array();
        config_apply_text(apply, buf, sizeof(buf));
        for (char *save = NULL, *t = strtok_r(apply ? buf : NULL, ",", &save); t;
             t = strtok_r(NULL, ",", &save))
                json_array_append_new(a, json_string(t));
        return a;
}

static json_t *section_row_json(const struct config_section *s)
{
        return json_pack("{s:s, s:o}", "key", s->key, "apply", apply_json(s->apply));
}

char *config_table_json(const struct config_families *f)
{
        static const char *const types[] = { "string", "bool", "int", "list", "duration" };
        json_t *rows = json_array();
        const struct config_option *o;
        for (size_t i = 0; (o = config_option_at(f, i)); i++) {
                json_t *choices = json_array();
                for (size_t k = 0; o->choices && o->choices[k]; k++)
                        json_array_append_new(choices, json_string(o->choices[k]));
                char short_flag[2] = { o->short_flag, '\0' };
                json_array_append_new(
                        rows, json_pack("{s:s, s:s?, s:s?, s:s?, s:s?, s:s, s:s, s:o, s:o}",
                                        "flag", o->flag, "alias", o->alias, "short",
                                        o->short_flag ? short_flag : NULL, "key", o->key,
                                        "key_alias", o->key_alias, "type", types[o->type],
                                        "default", o->default_value, "choices", choices, "apply",
                                        apply_json(o->apply)));
        }
        json_t *sections = json_array();
        for (const struct config_section *s = config_sections; s->key; s++)
                json_array_append_new(sections, section_row_json(s));
        for (size_t j = 0; j < CONFIG_FAMILIES_MAX && f->v[j]; j++)
                if (f->v[j]->section)
                        json_array_append_new(sections, section_row_json(f->v[j]->section));
        json_t *root = json_pack("{s:o, s:o}", "options", rows, "sections", sections);
        char *s = json_dumps(root, JSON_COMPACT);
        json_decref(root);
        return s ? s : xstrdup("{}");
}

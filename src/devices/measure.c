/* The family-neutral half of measurements (see measure.h): samples and
 * their units, the sampler's reference count, and the attribution hints of
 * every backend in the table.  Pure memory handling; no I/O, no logging. */
#include "devices/measure.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/xalloc.h"
#include "devices/device.h"

struct dev_unit *dev_sample_add(struct dev_sample *s, const struct dev_measure_family *families,
                                size_t n_families, const struct dev_attr_hints *hints)
{
        xgrow((void **)&s->units, &s->cap_units, s->n_units + 1, sizeof(*s->units));
        struct dev_unit *u = &s->units[s->n_units++];
        *u = (struct dev_unit){
                .families = families,
                .n_families = n_families,
                .hints = hints,
                .values = xcalloc(n_families + 1, sizeof(*u->values)),
        };
        return u;
}

void dev_unit_pod_label(struct dev_unit *u, const char *name, const char *key)
{
        u->pod_labels = strv_push(u->pod_labels, name);
        u->pod_labels = strv_push(u->pod_labels, key);
}

void dev_unit_label(struct dev_unit *u, const char *name, const char *value)
{
        u->labels = xrealloc(u->labels, (u->n_labels + 1) * sizeof(*u->labels));
        u->labels[u->n_labels++] = (struct dev_label){ .name = name, .value = xstrdup(value ? value : "") };
}

void dev_unit_field_label(struct dev_unit *u, const char *name, const char *value)
{
        if (!value || !*value)
                return;
        dev_unit_label(u, name, value);
        u->labels[u->n_labels - 1].field = true;
}

void dev_unit_add_series(struct dev_unit *u, size_t family, double v, char **labels)
{
        if (family >= u->n_families) {
                strv_free(labels);
                return;
        }
        struct dev_value *val = &u->values[family];
        if (!val->has) {
                val->has = true;
                val->v = v;
                strv_free(val->labels);
                val->labels = labels;
                return;
        }
        val->more = xrealloc(val->more, (val->n_more + 1) * sizeof(*val->more));
        val->more[val->n_more++] = (struct dev_series){ v, labels };
}

void dev_unit_set(struct dev_unit *u, size_t family, double v)
{
        if (family >= u->n_families)
                return;
        u->values[family].has = true;
        u->values[family].v = v;
}

bool dev_sample_wants(const struct dev_sample *s, const char *name, bool opt_in)
{
        if (!s->fields)
                return !opt_in;
        for (size_t i = 0; s->fields[i]; i++)
                if (strcasecmp(s->fields[i], name) == 0)
                        return true;
        return false;
}

void dev_unit_add(struct dev_unit *u, size_t family, double v, const char *const *labels)
{
        dev_unit_add_series(u, family, v, strv_copy(labels));
}

void dev_sample_release(struct dev_sample *s)
{
        char *const *fields = s->fields;
        for (size_t i = 0; i < s->n_units; i++) {
                struct dev_unit *u = &s->units[i];
                free(u->key);
                for (size_t k = 0; k < u->n_labels; k++)
                        free(u->labels[k].value);
                free(u->labels);
                strv_free(u->names);
                strv_free(u->local_names);
                strv_free(u->pod_labels);
                free(u->devnums);
                for (size_t k = 0; k < u->n_families; k++) {
                        strv_free(u->values[k].labels);
                        for (size_t m = 0; m < u->values[k].n_more; m++)
                                strv_free(u->values[k].more[m].labels);
                        free(u->values[k].more);
                }
                free(u->values);
                free(u->procs);
        }
        free(s->units);
        strv_free(s->notes);
        *s = (struct dev_sample){ .fields = fields };
}

void dev_sampler_init(struct dev_sampler *s, const struct dev_sampler_ops *ops)
{
        s->ops = ops;
        atomic_init(&s->refs, 1);
}

struct dev_sampler *dev_sampler_ref(struct dev_sampler *s)
{
        if (s)
                atomic_fetch_add(&s->refs, 1);
        return s;
}

void dev_sampler_unref(struct dev_sampler *s)
{
        if (s && atomic_fetch_sub(&s->refs, 1) == 1)
                s->ops->free(s);
}

size_t dev_attr_hints_all(const struct dev_attr_hints **out, size_t max)
{
        size_t n = 0;
        for (size_t i = 0; dev_backends[i]; i++) {
                if (!dev_backends[i]->attr_hints)
                        continue;
                if (n < max)
                        out[n] = dev_backends[i]->attr_hints;
                n++;
        }
        return n;
}

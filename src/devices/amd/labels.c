/* AMD's node labeller's labels, computed from the inventory (pure).
 *
 * For each property counted over the node's devices (every GPU and every
 * partition, as AMD's labeller counts them): beta.amd.com/gpu.<p>.<value> =
 * count for each value; with a single value also beta.amd.com/gpu.<p> and
 * amd.com/gpu.<p> = value, with several amd.com/gpu.<p>.<value> = count.
 * Properties: family (from KFD's gfx_target_version: devlet links no
 * libdrm), device-id, product-name (parentheses dropped, other characters
 * outside [A-Za-z0-9._-] as '_', at most 46 characters, alphanumeric at both
 * ends), vram (memory bank 0 rounded to GiB, "192G"), simd-count and
 * cu-count.  Single values: amd.com/gpu.driver-version and
 * .driver-src-version, .compute-memory-partition (a homogeneous node's
 * style, "cpx_nps4"), .compute-partitioning-supported and
 * .memory-partitioning-supported ("true"/"false", from the first GPU as
 * AMD's), and amd.com/gpu.count, the number of physical GPUs.  Firmware
 * (firmware.c): beta.amd.com/gpu.firmware.<block>.fw.<version> = count. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"

#define PRODUCT_NAME_MAX (63 - 17) /* 63 - strlen("gpu.product-name.") */
#define LABEL_VALUE_MAX 63

const char *amd_family_of(unsigned v)
{
        unsigned major = v / 10000, minor = v / 100 % 100, step = v % 100;
        switch (major) {
        case 7:
                return minor == 0 && step == 0 ? "KV" : "CI";
        case 8:
                return minor == 0 && step == 1 ? "CZ" : minor == 1 ? "CZ" : "VI";
        case 9:
                return minor == 0 && (step == 2 || step == 12) ? "RV" : "AI";
        case 10:
                if (minor == 3 && step == 3)
                        return "VGH";
                if (minor == 3 && step == 5)
                        return "YC";
                if (minor == 3 && step == 6)
                        return "GC_10_3_6";
                if (minor == 3 && step == 7)
                        return "GC_10_3_7";
                return "NV";
        case 11:
                if (minor == 5)
                        return "GC_11_5_0";
                if (minor == 0 && step == 3)
                        return "GC_11_0_1";
                return "GC_11_0_0";
        case 12:
                return "GC_12_0_0";
        default:
                return NULL;
        }
}

static char *sanitize(const char *s, size_t max)
{
        while (isspace((unsigned char)*s))
                s++;
        size_t n = strlen(s);
        while (n > 0 && isspace((unsigned char)s[n - 1]))
                n--;
        char *o = xmalloc(n + 1);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c == '(' || c == ')')
                        continue;
                o[k++] = c < 0x80 && (isalnum(c) || c == '.' || c == '_' || c == '-') ? (char)c : '_';
        }
        o[k] = '\0';
        if (k > max)
                o[k = max] = '\0';
        size_t a = 0;
        while (a < k && !isalnum((unsigned char)o[a]))
                a++;
        while (k > a && !isalnum((unsigned char)o[k - 1]))
                o[--k] = '\0';
        memmove(o, o + a, k - a + 1);
        return o;
}

struct counts {
        char **values;
        size_t *n;
        size_t len;
};

static void count(struct counts *c, const char *v)
{
        if (!v || !v[0])
                return;
        for (size_t i = 0; i < c->len; i++)
                if (strcmp(c->values[i], v) == 0) {
                        c->n[i]++;
                        return;
                }
        c->values = xrealloc(c->values, (c->len + 1) * sizeof(char *));
        c->n = xrealloc(c->n, (c->len + 1) * sizeof(size_t));
        c->values[c->len] = xstrdup(v);
        c->n[c->len++] = 1;
}

struct kvs {
        struct dev_kv *kv;
        size_t n;
};

static void put(struct kvs *k, char *key, char *value)
{
        for (size_t i = 0; i < k->n; i++)
                if (strcmp(k->kv[i].key, key) == 0) {
                        free(key);
                        free(k->kv[i].value);
                        k->kv[i].value = value;
                        return;
                }
        k->kv = xrealloc(k->kv, (k->n + 1) * sizeof(*k->kv));
        k->kv[k->n++] = (struct dev_kv){ key, value };
}

static void emit(struct kvs *k, const char *prop, struct counts *c)
{
        for (size_t i = 0; i < c->len; i++) {
                put(k, xasprintf("beta.amd.com/gpu.%s.%s", prop, c->values[i]),
                    xasprintf("%zu", c->n[i]));
                if (c->len == 1) {
                        put(k, xasprintf("beta.amd.com/gpu.%s", prop), xstrdup(c->values[i]));
                        put(k, xasprintf("amd.com/gpu.%s", prop), xstrdup(c->values[i]));
                } else {
                        put(k, xasprintf("amd.com/gpu.%s.%s", prop, c->values[i]),
                            xasprintf("%zu", c->n[i]));
                }
                free(c->values[i]);
        }
        free(c->values);
        free(c->n);
        *c = (struct counts){ 0 };
}

static bool label_value_ok(const char *v)
{
        size_t n = strlen(v);
        if (n > LABEL_VALUE_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)v[i]) && !strchr("._-", v[i]))
                        return false;
        return n == 0 || (isalnum((unsigned char)v[0]) && isalnum((unsigned char)v[n - 1]));
}

static void put_single(struct kvs *k, const char *prop, const char *value)
{
        if (value && value[0] && label_value_ok(value))
                put(k, xasprintf("amd.com/gpu.%s", prop), xstrdup(value));
}

static int kv_cmp(const void *a, const void *b)
{
        return strcmp(((const struct dev_kv *)a)->key, ((const struct dev_kv *)b)->key);
}

/* beta.amd.com/gpu.firmware.<block>.fw.<version> = how many devices (GPUs
 * and partitions, as the other counts) run it: AMD's labeller's keys, the
 * version in decimal. */
static void firmware(struct kvs *k, const struct amd_inventory *inv)
{
        for (size_t b = 0; b < AMD_FW_BLOCKS; b++) {
                struct counts c = { 0 };
                char v[16];
                for (size_t i = 0; i < inv->n_gpus; i++) {
                        const struct amd_gpu *g = &inv->gpus[i];
                        if (!g->fw[b].known)
                                continue;
                        snprintf(v, sizeof(v), "%" PRIu32, g->fw[b].version);
                        for (size_t p = 0; p < g->n_parts; p++)
                                count(&c, v);
                }
                for (size_t i = 0; i < c.len; i++) {
                        put(k, xasprintf("beta.amd.com/gpu.firmware.%s.fw.%s", amd_fw_blocks[b].label,
                                         c.values[i]),
                            xasprintf("%zu", c.n[i]));
                        free(c.values[i]);
                }
                free(c.values);
                free(c.n);
        }
}

struct dev_kv *amd_labels(const struct amd_inventory *inv, size_t *n)
{
        struct kvs k = { 0 };
        struct counts family = { 0 }, devid = { 0 }, product = { 0 }, vram = { 0 }, simd = { 0 },
                      cu = { 0 };
        char buf[64];
        char first_type[16] = "";
        bool heterogeneous = false;
        for (size_t i = 0; i < inv->n_gpus; i++) {
                const struct amd_gpu *g = &inv->gpus[i];
                char t[16];
                amd_gpu_partition_type(g, t, sizeof(t));
                if (t[0] && !first_type[0])
                        snprintf(first_type, sizeof(first_type), "%s", t);
                else if (t[0] && strcmp(t, first_type) != 0)
                        heterogeneous = true;
                _cleanup_free_ char *pn = sanitize(g->product_name, PRODUCT_NAME_MAX);
                _cleanup_free_ char *dv = sanitize(g->device_id, 16);
                for (size_t p = 0; p < g->n_parts; p++) {
                        const struct amd_part *pt = &g->parts[p];
                        count(&family, amd_family_of(g->gfx_target_version));
                        count(&devid, dv);
                        count(&product, pn);
                        if (pt->kfd_node < 0)
                                continue; /* AMD reads these from the topology node */
                        if (pt->vram) {
                                snprintf(buf, sizeof(buf), "%.0fG",
                                         round((double)pt->vram / (1024.0 * 1024.0 * 1024.0)));
                                count(&vram, buf);
                        }
                        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)pt->simd_count);
                        count(&simd, buf);
                        if (pt->simd_per_cu) {
                                snprintf(buf, sizeof(buf), "%llu",
                                         (unsigned long long)(pt->simd_count / pt->simd_per_cu));
                                count(&cu, buf);
                        }
                }
        }
        firmware(&k, inv);
        emit(&k, "family", &family);
        emit(&k, "device-id", &devid);
        emit(&k, "product-name", &product);
        emit(&k, "vram", &vram);
        emit(&k, "simd-count", &simd);
        emit(&k, "cu-count", &cu);
        if (inv->n_gpus) {
                _cleanup_free_ char *dv = sanitize(inv->driver_version, LABEL_VALUE_MAX);
                _cleanup_free_ char *ds = sanitize(inv->driver_srcversion, LABEL_VALUE_MAX);
                put_single(&k, "driver-version", dv);
                put_single(&k, "driver-src-version", ds);
                if (first_type[0] && !heterogeneous)
                        put_single(&k, "compute-memory-partition", first_type);
                put(&k, xstrdup("amd.com/gpu.compute-partitioning-supported"),
                    xstrdup(inv->gpus[0].compute_partitioning ? "true" : "false"));
                put(&k, xstrdup("amd.com/gpu.memory-partitioning-supported"),
                    xstrdup(inv->gpus[0].memory_partitioning ? "true" : "false"));
                put(&k, xstrdup("amd.com/gpu.count"), xasprintf("%zu", inv->n_gpus));
        }
        /* a value that came out invalid (a product name of only punctuation...) is dropped */
        size_t w = 0;
        for (size_t i = 0; i < k.n; i++) {
                if (label_value_ok(k.kv[i].value) && k.kv[i].value[0]) {
                        k.kv[w++] = k.kv[i];
                        continue;
                }
                free(k.kv[i].key);
                free(k.kv[i].value);
        }
        k.n = w;
        if (k.n)
                qsort(k.kv, k.n, sizeof(*k.kv), kv_cmp);
        *n = k.n;
        return k.kv;
}

void amd_labels_free(struct dev_kv *kv, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(kv[i].key);
                free(kv[i].value);
        }
        free(kv);
}

/* `devlet list`: the resources and devices devlet would serve, as a table or
 * JSON (where each device also shows what its family's DRA driver would
 * publish for it).  Backends are created without a loop: one scan, no
 * watching. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "cmd.h"
#include "config/config.h"
#include "devices/device.h"

static const char *health_name(enum dev_health h)
{
        return h == DEV_HEALTHY ? "Healthy" : "Unhealthy";
}

/* dra_driver: the family's DRA driver (NULL: none).  "dra" is what the
 * driver publishes for d, in a ResourceSlice device's shape. */
static json_t *device_json(const struct dev_device *d, const char *dra_driver)
{
        json_t *specs = json_array(), *mounts = json_array();
        for (size_t i = 0; i < d->n_nodes; i++)
                json_array_append_new(specs, json_pack("{s:s, s:s, s:s}", "container_path",
                                                       d->nodes[i].container_path, "host_path",
                                                       d->nodes[i].host_path, "permissions",
                                                       d->nodes[i].permissions));
        for (size_t i = 0; i < d->n_mounts; i++)
                json_array_append_new(mounts, json_pack("{s:s, s:s, s:b}", "container_path",
                                                        d->mounts[i].container_path, "host_path",
                                                        d->mounts[i].host_path, "read_only",
                                                        d->mounts[i].read_only));
        json_t *j = json_pack("{s:s, s:s, s:o, s:o, s:o}", "id", d->id, "health",
                              health_name(d->health), "numa",
                              d->numa_node >= 0 ? json_integer(d->numa_node) : json_null(),
                              "devices", specs, "mounts", mounts);
        if (dra_driver && d->model) {
                json_t *dra = json_pack("{s:s}", "driver", dra_driver);
                json_t *model = dev_model_json(d->model);
                json_object_update(dra, model);
                json_decref(model);
                json_object_set_new(j, "dra", dra);
        }
        return j;
}

static void print_table(struct dev_resource *const *res, size_t n, int header)
{
        if (header)
                printf("%-32s %-24s %-10s %-5s %s\n", "RESOURCE", "DEVICE", "HEALTH", "NUMA",
                       "CONTAINER GETS");
        for (size_t i = 0; i < n; i++) {
                const struct dev_resource *r = res[i];
                if (r->n_devices == 0)
                        printf("%-32s %-24s\n", r->name, "(no devices)");
                for (size_t j = 0; j < r->n_devices; j++) {
                        const struct dev_device *d = &r->devices[j];
                        char numa[16] = "-";
                        if (d->numa_node >= 0)
                                snprintf(numa, sizeof(numa), "%d", d->numa_node);
                        printf("%-32s %-24s %-10s %-5s", r->name, d->id, health_name(d->health), numa);
                        for (size_t k = 0; k < d->n_nodes; k++)
                                printf(" %s=%s(%s)", d->nodes[k].container_path, d->nodes[k].host_path,
                                       d->nodes[k].permissions);
                        for (size_t k = 0; k < d->n_mounts; k++)
                                printf(" %s=%s(mount%s)", d->mounts[k].container_path,
                                       d->mounts[k].host_path, d->mounts[k].read_only ? ",ro" : "");
                        putchar('\n');
                }
        }
}

struct list_out {
        int json;
        int header; /* the table header is still to print */
        json_t *jres, *jbackends;
};

static void list_backend(const struct dev_backend_ops *ops, struct dev_backend *b, void *ud)
{
        struct list_out *out = ud;
        size_t n;
        struct dev_resource **res = ops->resources(b, &n);
        if (out->json) {
                for (size_t j = 0; j < n; j++) {
                        json_t *devs = json_array();
                        for (size_t k = 0; k < res[j]->n_devices; k++)
                                json_array_append_new(
                                        devs, device_json(&res[j]->devices[k], ops->dra_driver));
                        json_array_append_new(out->jres, json_pack("{s:s, s:s, s:o}", "name",
                                                                   res[j]->name, "backend",
                                                                   ops->name, "devices", devs));
                }
                if (ops->describe_json)
                        json_object_set_new(out->jbackends, ops->name, ops->describe_json(b));
        } else {
                print_table(res, n, out->header);
                out->header = 0;
                if (ops->describe)
                        ops->describe(b, stdout);
        }
}

int cmd_list(int argc, char **argv)
{
        const char *format = "table";
        /* -o/--output is list's own flag; everything else is configuration. */
        _cleanup_free_ char **rest = xcalloc((size_t)argc + 1, sizeof(*rest));
        int n_rest = 0;
        for (int i = 0; i < argc; i++) {
                if (i > 0 && (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0)) {
                        if (i + 1 >= argc) {
                                fprintf(stderr, "devlet list: %s needs a value (table or json)\n", argv[i]);
                                return EXIT_USAGE;
                        }
                        format = argv[++i];
                } else if (i > 0 && strncmp(argv[i], "--output=", 9) == 0) {
                        format = argv[i] + 9;
                } else if (i > 0 && strncmp(argv[i], "-o=", 3) == 0) {
                        format = argv[i] + 3;
                } else {
                        rest[n_rest++] = argv[i];
                }
        }
        if (strcmp(format, "table") != 0 && strcmp(format, "json") != 0) {
                fprintf(stderr, "devlet list: unknown output format \"%s\" (table or json)\n", format);
                return EXIT_USAGE;
        }

        struct devlet_config *cfg = NULL;
        int r = cmd_load_config(n_rest, rest, &cfg, NULL);
        if (r)
                return r;

        struct list_out out = { .json = strcmp(format, "json") == 0, .header = 1,
                                .jres = json_array(), .jbackends = json_object() };
        int rc = cmd_each_backend("list", cfg, list_backend, &out);
        json_t *jres = out.jres, *jbackends = out.jbackends;
        int header = out.header;
        if (strcmp(format, "json") == 0) {
                json_t *root = json_pack("{s:o, s:o}", "resources", jres, "backends", jbackends);
                json_dumpf(root, stdout, JSON_INDENT(2));
                putchar('\n');
                json_decref(root);
        } else {
                if (header)
                        printf("no resources configured\n");
                json_decref(jres);
                json_decref(jbackends);
        }
        config_free(cfg);
        return rc;
}

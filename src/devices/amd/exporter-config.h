/* AMD's device metrics exporter's config.json (/etc/metrics/config.json,
 * --amd-metrics-config): what devlet's AMD sampler makes of it.  Parsed
 * into config/'s YAML tree (JSON is its flow style), so every error names
 * file:line:column; pure apart from amd_exporter_config_load's one read,
 * never logs (warnings are returned). */
#ifndef DEVLET_DEVICES_AMD_EXPORTER_CONFIG_H
#define DEVLET_DEVICES_AMD_EXPORTER_CONFIG_H

#include <stddef.h>

#include "base/diag.h"

/* AMD's limit on GPUConfig.CustomLabels. */
#define AMD_EXPORTER_CUSTOM_LABELS_MAX 10
/* devlet's on GPUConfig.ExtraPodLabels (AMD's exporter documents none):
 * metrics keeps at most 64 labels of a pod (PODLABELS_MAX_LABELS), so a
 * 65th could never be valued, and each one is on every series of a unit. */
#define AMD_EXPORTER_POD_LABELS_MAX 64

struct amd_exporter_config {
        unsigned server_port; /* ServerPort; 0: not given */
        /* GPUConfig.Fields as devlet's AMD families' fields (upper case:
         * "GPU_GFX_ACTIVITY"), those devlet cannot produce left out; NULL:
         * not given or empty, every family */
        char **fields;
        /* GPUConfig.Labels: the optional labels devlet gives, lower case
         * ("gpu_uuid", "driver_version", "vbios_version"); the mandatory
         * ones are always there */
        char **labels;
        /* GPUConfig.CustomLabels: name, value, name, value... (names lower
         * case), at most AMD_EXPORTER_CUSTOM_LABELS_MAX pairs */
        char **custom;
        /* GPUConfig.ExtraPodLabels: metric label (lower case), pod label
         * key, ..., at most AMD_EXPORTER_POD_LABELS_MAX pairs */
        char **pod_labels;
        char *prefix; /* CommonConfig.MetricsFieldPrefix; "" none */
};

/* The file's bytes (len of them, file naming it in messages) into *out.
 * Unknown keys, fields and labels, the ones devlet cannot give and the
 * keys it does not read go to *warnings (strv; may be NULL: dropped),
 * each with its place; many of one kind are one warning (config_tally),
 * so their number does not grow with the file's.  Returns 0, or -EINVAL with diag at the place: not
 * JSON (or YAML), a value of the wrong kind, a custom label name
 * Prometheus refuses. */
int amd_exporter_config_parse(const char *file, const char *data, size_t len,
                              struct amd_exporter_config **out, char ***warnings,
                              struct diag *diag);
/* Reads path (at most 1 MiB, a regular file) and parses it; *text gets
 * what was read (heap).  A file that is not there is AMD's defaults: 0,
 * *out with nothing set, *text NULL.  Other errors as the parser, or
 * -errno with diag when it cannot be read. */
int amd_exporter_config_load(const char *path, char **text, struct amd_exporter_config **out,
                             char ***warnings, struct diag *diag);
void amd_exporter_config_free(struct amd_exporter_config *c);

#endif

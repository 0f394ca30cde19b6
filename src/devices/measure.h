/* What a backend tells metrics about its devices, in terms no consumer has
 * to translate: measurements, event counters and attribution hints.
 *
 *   - A sampler (struct dev_sampler) measures the family's devices.  It is
 *     reference-counted and thread-safe: the backend creates it, metrics
 *     holds references and calls sample() on its collector thread, off the
 *     loop, while the backend may be reloaded or destroyed on the loop.  A
 *     sample is a list of units (a GPU, a MIG device, a partition), each
 *     with the labels that identify it, one value per family of the
 *     sampler's table (absent where the device cannot tell), the names and
 *     device numbers containers may use for it, and its processes.
 *   - Event counters (struct dev_event_count, the ops' events()) are read on
 *     the loop: XIDs by GPU and code today.
 *   - Attribution hints (struct dev_attr_hints, static per family) say
 *     which pod-resources resources, container env vars, mounts, CDI
 *     vendors and device numbers point at the family's devices.
 *
 * This header names no family; devices/<family>/ fills these types. */
#ifndef DEVLET_DEVICES_MEASURE_H
#define DEVLET_DEVICES_MEASURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum dev_measure_type { DEV_MEASURE_GAUGE, DEV_MEASURE_COUNTER };

/* How a family's device value splits between the processes using the
 * device: the per-container figures and per-pod series are built from the
 * process field named here. */
enum dev_share {
        DEV_SHARE_NONE = 0,
        DEV_SHARE_MEMORY, /* dev_proc.mem_bytes; the family counts share_unit bytes per unit */
        DEV_SHARE_UTIL,   /* dev_proc.util, percent */
        DEV_SHARE_ENC,    /* dev_proc.enc, percent */
        DEV_SHARE_DEC,    /* dev_proc.dec, percent */
};

struct dev_measure_family {
        const char *name; /* Prometheus family name: "DCGM_FI_DEV_GPU_TEMP" */
        enum dev_measure_type type;
        const char *help; /* HELP text, unit included: "GPU temperature (in C)." */
        enum dev_share share;
        double share_unit; /* DEV_SHARE_MEMORY: bytes per unit of the value (MiB: 1048576) */
        /* names of labels a value carries beyond the unit's (NULL-terminated,
         * NULL when none): the XID gauge's error code and message */
        const char *const *value_labels;
        /* the field a --collectors file names it by, compared without case
         * (AMD's GPU_GFX_ACTIVITY for amd_gpu_gfx_activity, its name with
         * a prefix); NULL: its name */
        const char *field;
        /* left out by the family's own exporter configuration (AMD's
         * GPUConfig.Fields): never exported */
        bool off;
};

struct dev_label {
        const char *name; /* static */
        char *value;
        /* a label field (dcgm-exporter's "label" rows: DCGM_FI_DEV_SERIAL...):
         * on the series only when a --collectors file names it */
        bool field;
};

struct dev_devnum {
        unsigned major, minor;
};

struct dev_proc {
        unsigned pid;
        uint64_t mem_bytes;
        int util, enc, dec; /* percent since the previous sample; -1 unknown */
};

struct dev_series {
        double v;
        char **labels; /* values of the family's value_labels (strv), or NULL */
};

struct dev_value {
        bool has;
        double v;
        char **labels; /* values of the family's value_labels (strv), or NULL */
        /* more series of the family on this unit, each with its own value
         * labels (a counter per XID code) */
        struct dev_series *more;
        size_t n_more;
};

struct dev_attr_hints;

/* One measured device, as a sampler found it this time. */
struct dev_unit {
        const struct dev_measure_family *families; /* the sampler's table */
        size_t n_families;
        const struct dev_attr_hints *hints; /* its family's: where local_names count */
        char *key; /* unique and stable (a UUID); event counters name it */
        /* identity labels in exposition order; a consumer adds its host
         * label before labels[host_at] */
        struct dev_label *labels;
        size_t n_labels, host_at;
        char **names;       /* references any source may use (UUIDs), strv */
        char **local_names; /* references only the family's own sources use (indices), strv */
        bool whole;         /* a whole device: "all" names it */
        struct dev_devnum *devnums; /* device nodes that are this device */
        size_t n_devnums;
        struct dev_value *values; /* n_families */
        /* the table's last n_opt_in families are exported only when a
         * --collectors file names them (fields dcgm-exporter's default file
         * leaves out) */
        size_t n_opt_in;
        bool procs_known; /* the device listed its processes (maybe none) */
        struct dev_proc *procs;
        size_t n_procs;
        /* labels from the pod holding the unit (AMD's
         * GPUConfig.ExtraPodLabels): metric label name, pod label key, ...
         * (strv, dev_unit_pod_label).  The consumer adds each one when
         * exactly one pod holds the unit, valued with that pod's label (""
         * when the pod lacks it), and starts its pod-label source when a
         * unit asks for one (Kubernetes only). */
        char **pod_labels;
};

struct dev_sample {
        struct dev_unit *units;
        size_t n_units, cap_units;
        /* set by the consumer before sample(): the fields a --collectors file
         * names (strv, borrowed), NULL: the default set.  A sampler may skip
         * reading what is not asked for (dev_sample_wants). */
        char *const *fields;
        /* what the consumer logs as warnings, once each time a sampler adds
         * them (a sampler's own configuration file refused or partly
         * ignored): strv, freed by dev_sample_release */
        char **notes;
};

/* Appends a unit for a sampler with the given table, every value absent;
 * pointers into the sample move with later adds. */
struct dev_unit *dev_sample_add(struct dev_sample *s, const struct dev_measure_family *families,
                                size_t n_families, const struct dev_attr_hints *hints);
void dev_unit_label(struct dev_unit *u, const char *name, const char *value);
/* A label field (struct dev_label.field); NULL or empty values are skipped. */
void dev_unit_field_label(struct dev_unit *u, const char *name, const char *value);
void dev_unit_set(struct dev_unit *u, size_t family, double v);
/* Asks for the label name valued with the holding pod's label key
 * (struct dev_unit.pod_labels); both copied. */
void dev_unit_pod_label(struct dev_unit *u, const char *name, const char *key);
/* One series of the family with value labels (strv, taken): the first
 * fills the value, later ones go to its more[]. */
void dev_unit_add_series(struct dev_unit *u, size_t family, double v, char **labels);
/* The same with labels copied (NULL-terminated values of the family's
 * value_labels). */
void dev_unit_add(struct dev_unit *u, size_t family, double v, const char *const *labels);
/* Whether s's consumer exports the family or label field name: named by
 * its --collectors file (without case), or, without one, any but an
 * opt-in family. */
bool dev_sample_wants(const struct dev_sample *s, const char *name, bool opt_in);
/* Frees the units and notes; fields stays as it was. */
void dev_sample_release(struct dev_sample *s);

struct dev_sampler;

struct dev_sampler_ops {
        const char *name; /* the family: "nvidia" */
        const struct dev_measure_family *families;
        size_t n_families;
        /* Appends the family's units to out.  Any thread, one call at a time
         * per sampler.  Returns 0, or -errno (out may hold some units). */
        int (*sample)(struct dev_sampler *s, struct dev_sample *out);
        /* Frees s once the last reference is gone. */
        void (*free)(struct dev_sampler *s);
        /* label fields the units may carry (struct dev_label.field), NULL-terminated */
        const char *const *label_fields;
        /* why the family cannot give a field it has no family for (a static
         * sentence), or NULL: it simply does not know it; may be NULL */
        const char *(*why_absent)(const char *field);
};

/* Embedded first in a family's sampler. */
struct dev_sampler {
        const struct dev_sampler_ops *ops;
        atomic_uint refs;
};

void dev_sampler_init(struct dev_sampler *s, const struct dev_sampler_ops *ops);
struct dev_sampler *dev_sampler_ref(struct dev_sampler *s);
/* Any thread; NULL is fine. */
void dev_sampler_unref(struct dev_sampler *s);

/* An event counter of one device (loop thread).  Metrics exports it as
 * devlet_<kind>_events_total{<device_label>=<device>, <kind>=<code>}. */
struct dev_event_count {
        const char *kind;         /* "xid" */
        const char *help;         /* the counter's HELP text */
        const char *device_label; /* "UUID" */
        const char *device;       /* the unit's key */
        unsigned long long code;
        uint64_t count;
};

/* A range of device numbers that may name the family's devices. */
struct dev_devnum_range {
        unsigned major, minor_first, minor_last;
};

struct dev_attr_hints {
        /* pod-resources resources whose device IDs may be local names
         * (prefixes: "nvidia.com/"); IDs of other resources count only
         * through names */
        const char *const *resource_prefixes;
        /* container env vars that list references, comma-separated
         * ("NVIDIA_VISIBLE_DEVICES"); "all" counts only for privileged
         * containers (images set it everywhere) */
        const char *const *env_vars;
        /* a mount at <dir><reference> names a device */
        const char *const *mount_dirs;
        /* CDI devices "<vendor>/<class>=<reference>" of this vendor */
        const char *cdi_vendor;
        /* character devices in a container's spec that may be a unit's
         * (not counted for privileged containers, which get every node) */
        const struct dev_devnum_range *devnums;
        size_t n_devnums;
        /* the host label's name this family's exporter uses ("Hostname" for
         * dcgm-exporter's, "hostname" for AMD's): --hostname-label auto */
        const char *host_label;
};

/* The hints of every known family (from the backend table): fills at most
 * max and returns how many there are. */
size_t dev_attr_hints_all(const struct dev_attr_hints **out, size_t max);

#endif

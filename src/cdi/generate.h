/* The CDI specs of running backends: which builder serves which backend. */
#ifndef DEVLET_CDI_GENERATE_H
#define DEVLET_CDI_GENERATE_H

#include "cdi/cdi.h"

struct cdi_spec_list {
        struct cdi_spec **specs; /* each valid */
        size_t n;
        char **warnings; /* strv or NULL: what was left out, and why */
};

struct cdi_generate_opts {
        const struct devlet_config *cfg;
        const char *nvidia_kind; /* kind of the NVIDIA spec: "k8s.device-plugin.nvidia.com/gpu"
                                  * for the plugin's own annotations, "nvidia.com/gpu" for
                                  * `cdi generate` */
};

/* Appends the specs of backend b (created by ops) to out, and a warning for
 * each resource or device left out. */
void cdi_specs_for_backend(const struct dev_backend_ops *ops, struct dev_backend *b,
                           const struct cdi_generate_opts *opts, struct cdi_spec_list *out);
void cdi_spec_list_release(struct cdi_spec_list *l);

#endif

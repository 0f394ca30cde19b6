/* Rendering and writing CDI specs.  The model (kinds, devices, container
 * edits, the name rules and validation) is devices/cdi-spec.h, which the
 * backends fill; this header turns a valid spec into bytes and files. */
#ifndef DEVLET_CDI_SPEC_H
#define DEVLET_CDI_SPEC_H

#include "base/diag.h"
#include "devices/cdi-spec.h"

enum cdi_format { CDI_FORMAT_YAML, CDI_FORMAT_JSON };

/* Renders a valid spec: a heap buffer in *out (NUL-terminated, length in
 * *len).  Returns 0, or -EINVAL with diag set for an invalid spec. */
int cdi_spec_render(const struct cdi_spec *s, enum cdi_format format, char **out, size_t *len,
                    struct diag *diag);

/* "<vendor>-<class>.yaml" or ".json", the name the CDI library gives a
 * vendor's spec file (GenerateSpecName).  The kind must be valid. */
char *cdi_spec_file_name(const struct cdi_spec *s, enum cdi_format format);

/* Renders a valid spec and writes it to dir/<cdi_spec_file_name> atomically
 * (fs_write_atomic: never through a planted link), mode 0644, creating dir.
 * The path written goes to *path (heap) when path is not NULL.  Returns 0,
 * -EINVAL with diag set for an invalid spec (nothing is written), or -errno
 * with diag set. */
int cdi_spec_write(const struct cdi_spec *s, const char *dir, enum cdi_format format, char **path,
                   struct diag *diag);

#endif

/* The vendors' command names (persona.c): devlet's one binary answers as
 * NVIDIA's nvidia-device-plugin, gpu-feature-discovery, dcgm-exporter,
 * config-manager and mps-control-daemon, and as AMD's k8s-device-plugin,
 * k8s-node-labeller and amd-metrics-exporter, chosen by argv[0]'s base name
 * (links in the image), each with its tool's flags, env vars and defaults.
 *
 * A persona turns the vendor's argument list into a devlet command line:
 * flags devlet shares keep their spelling, vendor-only flags become
 * devlet's (dcgm-exporter's -a is --metrics-address), flags that mean
 * nothing here are accepted with one note each, and the few devlet cannot
 * honour are refused with the reason (exit 2).  The tool's defaults go in
 * below the env vars and the config file (config_set_defaults), so an
 * operator's setting always wins. */
#ifndef DEVLET_PERSONA_H
#define DEVLET_PERSONA_H

#include <stddef.h>

#include "base/diag.h"

struct persona_run {
        const char *persona;   /* the vendor name matched */
        char **argv;           /* devlet's argv: argv[0] is the devlet command ("run",
                                * "labels", ...), NULL-terminated, owned (strv) */
        int argc;
        const char *const *defaults; /* for config_set_defaults (static) */
        char **notes;          /* one line each, for the log (owned strv) */
};

/* The persona argv[0] names ("/usr/bin/dcgm-exporter", "./k8s-device-plugin"),
 * or NULL when it is devlet's own name or unknown. */
const char *persona_of(const char *argv0);

/* Translates a persona's command line.  Returns 0 with *out filled;
 * -EINVAL with diag set (an unknown or refused flag, a missing value);
 * 1 when the command line asked only for help or the version, which were
 * printed. */
int persona_translate(const char *persona, int argc, char **argv, struct persona_run *out,
                      struct diag *diag);
void persona_run_clear(struct persona_run *r);

/* Every persona's name, NULL-terminated (the image's links, the tests). */
extern const char *const persona_names[];

#endif

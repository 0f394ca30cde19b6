/* Large AMD exporter config.json texts, each under the parser's 1 MiB cap:
 * what test-amd-exporter-config.c and bench/bench-amd.c both parse to show
 * that the cost and the warnings do not grow with the count of entries.
 * Each returns heap text (n at most 99999). */
#ifndef DEVLET_TESTS_AMD_EXPORTER_CONFIG_GEN_H
#define DEVLET_TESTS_AMD_EXPORTER_CONFIG_GEN_H

#include <stdio.h>
#include <stdlib.h>

#define AMD_CONFIG_GEN_HELPER static __attribute__((unused))

/* head, then n entries comma-separated, each before, its number (five
 * digits) and after, then tail. */
AMD_CONFIG_GEN_HELPER char *amd_config_gen(const char *head, const char *before, const char *after,
                                           const char *tail, size_t n)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                abort();
        fputs(head, f);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s%s%05zu%s", i ? "," : "", before, i, after);
        fputs(tail, f);
        if (fclose(f) != 0)
                abort();
        return text;
}

/* GPUConfig.ExtraPodLabels with n labels, l00000 on, each to pod label
 * key v. */
AMD_CONFIG_GEN_HELPER char *amd_config_gen_pod_labels(size_t n)
{
        return amd_config_gen("{\"GPUConfig\": {\"ExtraPodLabels\": {\n", "\"l", "\":\"v\"", "}}}\n", n);
}

/* n keys GPUConfig does not know, k00000 on. */
AMD_CONFIG_GEN_HELPER char *amd_config_gen_unknown_keys(size_t n)
{
        return amd_config_gen("{\"GPUConfig\": {\n", "\"k", "\":0", "}}\n", n);
}

/* GPUConfig.Fields with n fields AMD's exporter does not have, F00000 on. */
AMD_CONFIG_GEN_HELPER char *amd_config_gen_unknown_fields(size_t n)
{
        return amd_config_gen("{\"GPUConfig\": {\"Fields\": [\n", "\"F", "\"", "]}}\n", n);
}

#endif

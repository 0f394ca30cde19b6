/* Reads the mock's YAML configuration into a struct mock_config.
 *
 * libyaml loads the whole document; the walkers below accept only the keys
 * the format defines (a typo is an error, not a silently ignored setting),
 * bound every number and string to what NVML's buffers can carry, and then
 * check what spans devices: unique UUIDs, bus IDs and minors, NVLink counts
 * that agree in both directions, processes and events that name existing
 * MIG instances.  Every error names file, line and column.  Nothing here
 * touches the global state. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "mock.h"
#include "yaml-walk.h"

static const struct name_value return_names[] = {
    {"NVML_ERROR_UNINITIALIZED", NVML_ERROR_UNINITIALIZED},
    {"NVML_ERROR_INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT},
    {"NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
    {"NVML_ERROR_NO_PERMISSION", NVML_ERROR_NO_PERMISSION},
    {"NVML_ERROR_NOT_FOUND", NVML_ERROR_NOT_FOUND},
    {"NVML_ERROR_INSUFFICIENT_POWER", NVML_ERROR_INSUFFICIENT_POWER},
    {"NVML_ERROR_DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED},
    {"NVML_ERROR_IRQ_ISSUE", NVML_ERROR_IRQ_ISSUE},
    {"NVML_ERROR_LIBRARY_NOT_FOUND", NVML_ERROR_LIBRARY_NOT_FOUND},
    {"NVML_ERROR_GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
    {"NVML_ERROR_RESET_REQUIRED", NVML_ERROR_RESET_REQUIRED},
    {"NVML_ERROR_OPERATING_SYSTEM", NVML_ERROR_OPERATING_SYSTEM},
    {"NVML_ERROR_LIB_RM_VERSION_MISMATCH", NVML_ERROR_LIB_RM_VERSION_MISMATCH},
    {"NVML_ERROR_UNKNOWN", NVML_ERROR_UNKNOWN},
    {NULL, 0},
};

static const struct name_value event_names[] = {
    {"xid", nvmlEventTypeXidCriticalError},
    {"singleBitEcc", nvmlEventTypeSingleBitEccError},
    {"doubleBitEcc", nvmlEventTypeDoubleBitEccError},
    {"pstate", nvmlEventTypePState},
    {"clock", nvmlEventTypeClock},
    {"powerSource", nvmlEventTypePowerSourceChange},
    {"migConfigChange", nvmlEventMigConfigChange},
    {NULL, 0},
};

static const struct name_value arch_names[] = {
    {"kepler", NVML_DEVICE_ARCH_KEPLER},
    {"maxwell", NVML_DEVICE_ARCH_MAXWELL},
    {"pascal", NVML_DEVICE_ARCH_PASCAL},
    {"volta", NVML_DEVICE_ARCH_VOLTA},
    {"turing", NVML_DEVICE_ARCH_TURING},
    {"ampere", NVML_DEVICE_ARCH_AMPERE},
    {"ada", NVML_DEVICE_ARCH_ADA},
    {"hopper", NVML_DEVICE_ARCH_HOPPER},
    {"blackwell", NVML_DEVICE_ARCH_BLACKWELL},
    {NULL, 0},
};

static const struct name_value brand_names[] = {
    {"unknown", NVML_BRAND_UNKNOWN}, {"quadro", NVML_BRAND_QUADRO},
    {"tesla", NVML_BRAND_TESLA},     {"nvs", NVML_BRAND_NVS},
    {"grid", NVML_BRAND_GRID},       {"geforce", NVML_BRAND_GEFORCE},
    {"titan", NVML_BRAND_TITAN},     {"nvidia_rtx", NVML_BRAND_NVIDIA_RTX},
    {"nvidia", NVML_BRAND_NVIDIA},   {NULL, 0},
};

static const struct name_value fabric_state_names[] = {
    {"not_supported", NVML_GPU_FABRIC_STATE_NOT_SUPPORTED},
    {"not_started", NVML_GPU_FABRIC_STATE_NOT_STARTED},
    {"in_progress", NVML_GPU_FABRIC_STATE_IN_PROGRESS},
    {"completed", NVML_GPU_FABRIC_STATE_COMPLETED},
    {NULL, 0},
};

static const struct name_value addressing_mode_names[] = {
    {"none", NVML_DEVICE_ADDRESSING_MODE_NONE},
    {"hmm", NVML_DEVICE_ADDRESSING_MODE_HMM},
    {"ats", NVML_DEVICE_ADDRESSING_MODE_ATS},
    {NULL, 0},
};

static const struct name_value compute_mode_names[] = {
    {"default", NVML_COMPUTEMODE_DEFAULT},
    {"exclusive_thread", NVML_COMPUTEMODE_EXCLUSIVE_THREAD},
    {"prohibited", NVML_COMPUTEMODE_PROHIBITED},
    {"exclusive_process", NVML_COMPUTEMODE_EXCLUSIVE_PROCESS},
    {NULL, 0},
};

static nvmlDeviceArchitecture_t arch_of_cc(int major, int minor)
{
        switch (major) {
        case 3:
                return NVML_DEVICE_ARCH_KEPLER;
        case 5:
                return NVML_DEVICE_ARCH_MAXWELL;
        case 6:
                return NVML_DEVICE_ARCH_PASCAL;
        case 7:
                return minor < 5 ? NVML_DEVICE_ARCH_VOLTA : NVML_DEVICE_ARCH_TURING;
        case 8:
                return minor == 9 ? NVML_DEVICE_ARCH_ADA : NVML_DEVICE_ARCH_AMPERE;
        case 9:
                return NVML_DEVICE_ARCH_HOPPER;
        case 10:
        case 12:
                return NVML_DEVICE_ARCH_BLACKWELL;
        default:
                return NVML_DEVICE_ARCH_UNKNOWN;
        }
}

/* NVLink ports per GPU of each generation (P100 4, V100 6, A100 12, H100 18). */
static unsigned default_link_ports(nvmlDeviceArchitecture_t arch)
{
        switch (arch) {
        case NVML_DEVICE_ARCH_PASCAL:
                return 4;
        case NVML_DEVICE_ARCH_VOLTA:
                return 6;
        case NVML_DEVICE_ARCH_AMPERE:
                return 12;
        case NVML_DEVICE_ARCH_HOPPER:
        case NVML_DEVICE_ARCH_BLACKWELL:
                return 18;
        default:
                return 0;
        }
}

static nvmlBrandType_t brand_of_name(const char *name)
{
        if (!strncmp(name, "Tesla", 5))
                return NVML_BRAND_TESLA;
        if (!strncmp(name, "Quadro", 6))
                return NVML_BRAND_QUADRO;
        if (strstr(name, "GeForce"))
                return NVML_BRAND_GEFORCE;
        return NVML_BRAND_NVIDIA;
}

static int parse_cpus(struct parser *p, yaml_node_t *n, const char *ctx, struct mock_gpu *g)
{
        const char *s = yw_scalar_of(n);
        if (!s)
                return yw_fail(p, n, "%s.cpuAffinity: expected a CPU list such as \"0-51,104-155\"",
                               ctx);
        const char *c = s;
        while (*c) {
                char *end;
                unsigned long lo = strtoul(c, &end, 10), hi = lo;
                if (end == c)
                        goto bad;
                if (*end == '-') {
                        c = end + 1;
                        hi = strtoul(c, &end, 10);
                        if (end == c)
                                goto bad;
                }
                if (lo > hi || hi >= MOCK_MAX_CPUS)
                        goto bad;
                for (unsigned long i = lo; i <= hi; i++)
                        g->cpus[i / (8 * sizeof(unsigned long))] |=
                            1UL << (i % (8 * sizeof(unsigned long)));
                if (*end == ',')
                        end++;
                else if (*end)
                        goto bad;
                c = end;
        }
        g->has_cpus = true;
        return 0;
bad:
        return yw_fail(p, n, "%s.cpuAffinity: bad CPU list '%s' (CPUs below %d)", ctx, s,
                       MOCK_MAX_CPUS);
}

static int parse_nvlink(struct parser *p, yaml_node_t *n, const char *ctx, struct mock_gpu *g,
                        unsigned self, size_t n_gpus, size_t n_switches)
{
        char what[96];
        yw_name(what, sizeof(what), "%s.nvlink", ctx);
        if (yw_check_map(p, n, what, NULL) < 0)
                return -1;
        unsigned next = 0, sw_next = 0;
        for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top;
             pr++) {
                yaml_node_t *kn = yw_node_at(p, pr->key), *vn = yw_node_at(p, pr->value);
                const char *k = yw_scalar_of(kn);
                unsigned long long links, peer = 0;
                bool to_switch = !strcmp(k, "switch");
                if (!to_switch && yw_parse_u64(p, kn, what, MOCK_MAX_GPUS, &peer) < 0)
                        return -1;
                if (yw_parse_u64(p, vn, what, NVML_NVLINK_MAX_LINKS, &links) < 0)
                        return -1;
                if (to_switch && !n_switches)
                        return yw_fail(
                            p, kn, "%s: links to 'switch' need a top-level nvswitches list", what);
                if (!to_switch && (peer >= n_gpus || peer == self))
                        return yw_fail(p, kn, "%s: peer %llu is not another device", what, peer);
                if (next + links > NVML_NVLINK_MAX_LINKS)
                        return yw_fail(p, vn, "%s: more than %d links", what,
                                       NVML_NVLINK_MAX_LINKS);
                /* Links to the NVSwitch fabric are spread over the switches in turn. */
                for (unsigned i = 0; i < links; i++, next++) {
                        g->links[next].kind = to_switch ? MOCK_LINK_SWITCH : MOCK_LINK_GPU;
                        g->links[next].target =
                            to_switch ? (unsigned)(sw_next++ % n_switches) : (unsigned)peer;
                }
        }
        return (int)next;
}

static int parse_procs(struct parser *p, yaml_node_t *n, const char *ctx, struct mock_gpu *g)
{
        static const char *const keys[] = {"pid",     "usedMemoryMiB", "name",    "type", "smUtil",
                                           "memUtil", "encUtil",       "decUtil", "gi",   "ci",
                                           NULL};
        if (n->type != YAML_SEQUENCE_NODE)
                return yw_fail(p, n, "%s.processes: expected a list", ctx);
        if (yw_seq_len(n) > MOCK_MAX_PROCS)
                return yw_fail(p, n, "%s.processes: more than %d", ctx, MOCK_MAX_PROCS);
        g->n_procs = yw_seq_len(n);
        g->procs = mock_alloc(g->n_procs * sizeof(*g->procs) + 1);
        for (size_t i = 0; i < g->n_procs; i++) {
                yaml_node_t *m = yw_seq_at(p, n, i);
                struct mock_proc *pr = &g->procs[i];
                char pc[96];
                yw_name(pc, sizeof(pc), "%s.processes[%zu]", ctx, i);
                unsigned long long v;
                struct mock_opt gi, ci;
                char *type = NULL;
                if (yw_check_map(p, m, pc, keys) < 0)
                        return -1;
                if (!yw_get(p, m, "pid"))
                        return yw_fail(p, m, "%s: missing 'pid'", pc);
                if (yw_uint_or(p, m, pc, "pid", 0x7fffffff, 0, &v) < 0)
                        return -1;
                pr->pid = (unsigned)v;
                if (yw_uint_or(p, m, pc, "usedMemoryMiB", 1ULL << 30, 0, &pr->used_mib) < 0 ||
                    yw_opt_str(p, m, pc, "name", 255, &pr->name) < 0 ||
                    yw_opt_str(p, m, pc, "type", 16, &type) < 0 ||
                    yw_opt_u64(p, m, pc, "smUtil", 100, &pr->sm_util) < 0 ||
                    yw_opt_u64(p, m, pc, "memUtil", 100, &pr->mem_util) < 0 ||
                    yw_opt_u64(p, m, pc, "encUtil", 100, &pr->enc_util) < 0 ||
                    yw_opt_u64(p, m, pc, "decUtil", 100, &pr->dec_util) < 0 ||
                    yw_opt_u64(p, m, pc, "gi", 0xfffe, &gi) < 0 ||
                    yw_opt_u64(p, m, pc, "ci", 0xfffe, &ci) < 0) {
                        free(type);
                        return -1;
                }
                pr->graphics = type && !strcmp(type, "graphics");
                bool bad_type = type && !pr->graphics && strcmp(type, "compute");
                free(type);
                if (bad_type)
                        return yw_fail(p, m, "%s.type: expected compute or graphics", pc);
                if (gi.set != ci.set)
                        return yw_fail(p, m, "%s: give both gi and ci, or neither", pc);
                pr->gi = gi.set ? (unsigned)gi.v : MOCK_NO_ID;
                pr->ci = ci.set ? (unsigned)ci.v : MOCK_NO_ID;
        }
        return 0;
}

static int parse_mig(struct parser *p, yaml_node_t *n, const char *ctx, struct mock_gpu *g)
{
        static const char *const keys[] = {
            "gi",          "ci",       "profile",  "uuid",  "memoryMiB", "multiprocessors",
            "copyEngines", "decoders", "encoders", "jpegs", "ofas",      "placement",
            NULL};
        if (n->type != YAML_SEQUENCE_NODE)
                return yw_fail(p, n, "%s.mig: expected a list", ctx);
        if (yw_seq_len(n) > MOCK_MAX_MIG)
                return yw_fail(p, n, "%s.mig: more than %d MIG devices", ctx, MOCK_MAX_MIG);
        g->n_mig = yw_seq_len(n);
        g->mig = mock_alloc(g->n_mig * sizeof(*g->mig) + 1);
        for (size_t i = 0; i < g->n_mig; i++) {
                yaml_node_t *m = yw_seq_at(p, n, i);
                struct mock_mig *mg = &g->mig[i];
                char mc[96];
                yw_name(mc, sizeof(mc), "%s.mig[%zu]", ctx, i);
                struct mock_opt gi, ci, mem, sms, ce, dec, enc, jpeg, ofa, start;
                if (yw_check_map(p, m, mc, keys) < 0 ||
                    yw_opt_u64(p, m, mc, "gi", 0xfffe, &gi) < 0 ||
                    yw_opt_u64(p, m, mc, "ci", 0xfffe, &ci) < 0 ||
                    yw_req_str(p, m, mc, "profile", 31, &mg->profile) < 0 ||
                    yw_req_str(p, m, mc, "uuid", NVML_DEVICE_UUID_V2_BUFFER_SIZE - 1, &mg->uuid) <
                        0 ||
                    yw_opt_u64(p, m, mc, "memoryMiB", 1ULL << 24, &mem) < 0 ||
                    yw_opt_u64(p, m, mc, "multiprocessors", 1024, &sms) < 0 ||
                    yw_opt_u64(p, m, mc, "copyEngines", 64, &ce) < 0 ||
                    yw_opt_u64(p, m, mc, "decoders", 64, &dec) < 0 ||
                    yw_opt_u64(p, m, mc, "encoders", 64, &enc) < 0 ||
                    yw_opt_u64(p, m, mc, "jpegs", 64, &jpeg) < 0 ||
                    yw_opt_u64(p, m, mc, "ofas", 64, &ofa) < 0 ||
                    yw_opt_u64(p, m, mc, "placement", MOCK_MEM_SLICES - 1, &start) < 0)
                        return -1;
                if (!gi.set || !ci.set)
                        return yw_fail(p, m, "%s: needs both 'gi' and 'ci'", mc);
                if (strncmp(mg->uuid, "MIG-", 4))
                        return yw_fail(p, m, "%s.uuid: a MIG device UUID starts with 'MIG-'", mc);
                mg->gi = (unsigned)gi.v;
                mg->ci = (unsigned)ci.v;
                /* Values left at 0 / UINT_MAX are filled from the profile table. */
                mg->memory_mib = mem.set ? mem.v : 0;
                mg->sms = sms.set ? (unsigned)sms.v : 0;
                mg->ce = ce.set ? (unsigned)ce.v : ~0U;
                mg->dec = dec.set ? (unsigned)dec.v : ~0U;
                mg->enc = enc.set ? (unsigned)enc.v : ~0U;
                mg->jpeg = jpeg.set ? (unsigned)jpeg.v : ~0U;
                mg->ofa = ofa.set ? (unsigned)ofa.v : ~0U;
                mg->gi_start = start.set ? (unsigned)start.v : ~0U;
        }
        return 0;
}

static int parse_submap(struct parser *p, yaml_node_t *map, const char *ctx, const char *key,
                        const char *const *keys, yaml_node_t **out)
{
        char what[96];
        yw_name(what, sizeof(what), "%s.%s", ctx, key);
        *out = yw_get(p, map, key);
        return *out ? yw_check_map(p, *out, what, keys) : 0;
}

/* "8-4-4-4-12" hex digits into 16 bytes; false if malformed. */
static bool parse_uuid16(const char *s, unsigned char out[16])
{
        size_t k = 0;
        for (size_t i = 0; s[i]; i++) {
                if (i == 8 || i == 13 || i == 18 || i == 23) {
                        if (s[i] != '-')
                                return false;
                        continue;
                }
                unsigned v;
                if (k == 16 || !isxdigit((unsigned char)s[i]) || !isxdigit((unsigned char)s[i + 1]) ||
                    sscanf(s + i, "%2x", &v) != 1)
                        return false;
                out[k++] = (unsigned char)v;
                i++;
        }
        return k == 16 && strlen(s) == 36;
}

/* fabric: {clusterUuid, cliqueId, state (default completed), status (an
 * nvmlReturn_t, default 0)} */
static int parse_fabric(struct parser *p, yaml_node_t *n, const char *ctx, struct mock_gpu *g)
{
        static const char *const keys[] = {"clusterUuid", "cliqueId", "state", "status", NULL};
        char what[64];
        yw_name(what, sizeof(what), "%s.fabric", ctx);
        if (yw_check_map(p, n, what, keys) < 0)
                return -1;
        char *uuid = NULL;
        unsigned long long v;
        int r = -1;
        g->has_fabric = true;
        memset(&g->fabric, 0, sizeof(g->fabric));
        if (yw_opt_str(p, n, what, "clusterUuid", 36, &uuid) < 0)
                goto out;
        if (uuid && !parse_uuid16(uuid, g->fabric.clusterUuid)) {
                yw_fail(p, yw_get(p, n, "clusterUuid"), "%s.clusterUuid: '%s' is not a UUID",
                        what, uuid);
                goto out;
        }
        if (yw_uint_or(p, n, what, "cliqueId", 0xffffffffULL, 0, &v) < 0)
                goto out;
        g->fabric.cliqueId = (unsigned)v;
        g->fabric.state = NVML_GPU_FABRIC_STATE_COMPLETED;
        yaml_node_t *s = yw_get(p, n, "state");
        if (s) {
                if (yw_named(p, s, "fabric.state", fabric_state_names, 3, &v) < 0)
                        goto out;
                g->fabric.state = (nvmlGpuFabricState_t)v;
        }
        if (yw_uint_or(p, n, what, "status", 999, 0, &v) < 0)
                goto out;
        g->fabric.status = (nvmlReturn_t)v;
        r = 0;
out:
        free(uuid);
        return r;
}

static int parse_gpu(struct parser *p, yaml_node_t *m, size_t idx, size_t n_gpus, size_t n_switches,
                     struct mock_gpu *g)
{
        static const char *const keys[] = {
            "uuid",
            "name",
            "brand",
            "memoryMiB",
            "memoryReservedMiB",
            "memoryUsedMiB",
            "pciBusId",
            "pciDeviceId",
            "pciSubSystemId",
            "minor",
            "computeCapability",
            "architecture",
            "numaNode",
            "gpuNumaNode",
            "cpuAffinity",
            "pcieSwitch",
            "hostBridge",
            "serial",
            "boardPartNumber",
            "vbios",
            "nvlink",
            "nvlinkLinks",
            "nvlinkCounters",
            "fabric",
            "addressingMode",
            "c2c",
            "lost",
            "migCapable",
            "migMaxDevices",
            "mig",
            "utilization",
            "pcieThroughputKBps",
            "gpm",
            "temperatureC",
            "temperatureStallMs",
            "memoryTemperatureC",
            "powerMilliwatts",
            "powerLimitMilliwatts",
            "enforcedPowerLimitMilliwatts",
            "energyMillijoules",
            "clocksMHz",
            "maxClocksMHz",
            "pcieReplayCounter",
            "remappedRows",
            "eccErrors",
            "retiredPages",
            "violationsNs",
            "fanSpeedPercent",
            "nvlinkErrors",
            "vgpuLicensed",
            "persistenceMode",
            "computeMode",
            "eccEnabled",
            "performanceState",
            "clocksEventReasons",
            "supportedEvents",
            "processes",
            NULL,
        };
        static const char *const util_keys[] = {"gpu", "memory", "encoder", "decoder", NULL};
        static const char *const clock_keys[] = {"graphics", "sm", "mem", "video", NULL};
        static const char *const remap_keys[] = {"correctable", "uncorrectable", "pending",
                                                 "failure", NULL};
        static const char *const nvl_keys[] = {"dataTxKiB", "dataRxKiB", "rawTxKiB", "rawRxKiB",
                                               NULL};
        char ctx[32];
        yw_name(ctx, sizeof(ctx), "devices[%zu]", idx);
        if (yw_check_map(p, m, ctx, keys) < 0)
                return -1;

        char *pci = NULL, *cc = NULL;
        unsigned long long v;
        struct mock_opt o;
        int r = -1;
        if (yw_req_str(p, m, ctx, "uuid", NVML_DEVICE_UUID_BUFFER_SIZE - 1, &g->uuid) < 0 ||
            yw_req_str(p, m, ctx, "name", NVML_DEVICE_NAME_V2_BUFFER_SIZE - 1, &g->name) < 0 ||
            yw_req_str(p, m, ctx, "pciBusId", 31, &pci) < 0 ||
            yw_req_str(p, m, ctx, "computeCapability", 7, &cc) < 0)
                goto out;
        if (strncmp(g->uuid, "GPU-", 4)) {
                yw_fail(p, yw_get(p, m, "uuid"), "%s.uuid: a GPU UUID starts with 'GPU-'", ctx);
                goto out;
        }
        if (!mock_parse_pci(pci, &g->pci)) {
                yw_fail(p, yw_get(p, m, "pciBusId"), "%s.pciBusId: '%s' is not DDDDDDDD:BB:DD.0",
                        ctx, pci);
                goto out;
        }
        char *dot;
        long major = strtol(cc, &dot, 10), minor = -1;
        if (*dot == '.')
                minor = strtol(dot + 1, &dot, 10);
        if (*dot || major < 1 || major > 99 || minor < 0 || minor > 9) {
                yw_fail(p, yw_get(p, m, "computeCapability"),
                        "%s.computeCapability: '%s' is not MAJOR.MINOR", ctx, cc);
                goto out;
        }
        g->cc_major = (int)major;
        g->cc_minor = (int)minor;
        g->arch = arch_of_cc(g->cc_major, g->cc_minor);
        yaml_node_t *n;
        if ((n = yw_get(p, m, "architecture"))) {
                if (yw_named(p, n, "architecture", arch_names, 0xffffffffULL, &v) < 0)
                        goto out;
                g->arch = (nvmlDeviceArchitecture_t)v;
        }
        g->brand = brand_of_name(g->name);
        if ((n = yw_get(p, m, "brand"))) {
                if (yw_named(p, n, "brand", brand_names, NVML_BRAND_COUNT - 1, &v) < 0)
                        goto out;
                g->brand = (nvmlBrandType_t)v;
        }
        if (yw_uint_or(p, m, ctx, "memoryMiB", 1ULL << 24, 0, &g->memory_mib) < 0 ||
            yw_uint_or(p, m, ctx, "memoryReservedMiB", 1ULL << 20, 0, &g->reserved_mib) < 0 ||
            yw_opt_u64(p, m, ctx, "memoryUsedMiB", 1ULL << 24, &g->used_mib) < 0)
                goto out;
        if (!g->memory_mib) {
                yw_fail(p, m, "%s: missing or zero 'memoryMiB'", ctx);
                goto out;
        }
        if (yw_uint_or(p, m, ctx, "pciDeviceId", 0xffffffffULL, 0, &v) < 0)
                goto out;
        g->pci.device_id = (unsigned)v;
        if (yw_uint_or(p, m, ctx, "pciSubSystemId", 0xffffffffULL, 0, &v) < 0)
                goto out;
        g->pci.subsystem_id = (unsigned)v;
        if (yw_uint_or(p, m, ctx, "minor", 255, idx, &v) < 0)
                goto out;
        g->minor = (unsigned)v;
        g->numa_node = -1;
        if (yw_opt_u64(p, m, ctx, "numaNode", 1023, &o) < 0 ||
            yw_opt_u64(p, m, ctx, "gpuNumaNode", 1023, &g->gpu_numa_node) < 0)
                goto out;
        if (o.set)
                g->numa_node = (long)o.v;
        if ((n = yw_get(p, m, "cpuAffinity")) && parse_cpus(p, n, ctx, g) < 0)
                goto out;
        if (yw_opt_str(p, m, ctx, "pcieSwitch", 63, &g->pcie_switch) < 0 ||
            yw_opt_str(p, m, ctx, "hostBridge", 63, &g->host_bridge) < 0 ||
            yw_opt_str(p, m, ctx, "serial", NVML_DEVICE_SERIAL_BUFFER_SIZE - 1, &g->serial) < 0 ||
            yw_opt_str(p, m, ctx, "boardPartNumber", NVML_DEVICE_PART_NUMBER_BUFFER_SIZE - 1,
                       &g->board_part) < 0 ||
            yw_opt_str(p, m, ctx, "vbios", NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE - 1, &g->vbios) <
                0 ||
            yw_opt_bool(p, m, ctx, "lost", false, &g->lost) < 0)
                goto out;

        int active = 0;
        if ((n = yw_get(p, m, "nvlink")) &&
            (active = parse_nvlink(p, n, ctx, g, (unsigned)idx, n_gpus, n_switches)) < 0)
                goto out;
        if (yw_uint_or(p, m, ctx, "nvlinkLinks", NVML_NVLINK_MAX_LINKS,
                       n ? default_link_ports(g->arch) : 0, &v) < 0)
                goto out;
        g->link_ports = (unsigned)v;
        if ((unsigned)active > g->link_ports) {
                yw_fail(p, m, "%s: %d active NVLinks but only %u ports (set nvlinkLinks)", ctx,
                        active, g->link_ports);
                goto out;
        }
        if ((n = yw_get(p, m, "fabric")) && parse_fabric(p, n, ctx, g) < 0)
                goto out;
        /* Grace (GH200, GB200): addressingMode ats|hmm|none and c2c (the
         * NVLink-C2C link to the CPU) true|false; absent: NOT_SUPPORTED */
        g->addressing_mode = g->c2c = -1;
        if ((n = yw_get(p, m, "addressingMode"))) {
                if (yw_named(p, n, "addressingMode", addressing_mode_names, 2, &v) < 0)
                        goto out;
                g->addressing_mode = (int)v;
        }
        if (yw_get(p, m, "c2c")) {
                bool c2c;
                if (yw_opt_bool(p, m, ctx, "c2c", false, &c2c) < 0)
                        goto out;
                g->c2c = c2c;
        }
        if (parse_submap(p, m, ctx, "nvlinkCounters", nvl_keys, &n) < 0 ||
            (n && (yw_opt_u64(p, n, ctx, "dataTxKiB", ~0ULL, &g->nvl_data_tx) < 0 ||
                   yw_opt_u64(p, n, ctx, "dataRxKiB", ~0ULL, &g->nvl_data_rx) < 0 ||
                   yw_opt_u64(p, n, ctx, "rawTxKiB", ~0ULL, &g->nvl_raw_tx) < 0 ||
                   yw_opt_u64(p, n, ctx, "rawRxKiB", ~0ULL, &g->nvl_raw_rx) < 0)))
                goto out;

        bool capable_default =
            (g->cc_major == 8 && g->cc_minor == 0) || g->cc_major == 9 || g->cc_major == 10;
        if (yw_opt_bool(p, m, ctx, "migCapable", capable_default, &g->mig_capable) < 0 ||
            yw_uint_or(p, m, ctx, "migMaxDevices", MOCK_MAX_MIG, 7, &v) < 0)
                goto out;
        g->mig_max = (unsigned)v;
        if ((n = yw_get(p, m, "mig"))) {
                if (!g->mig_capable) {
                        yw_fail(p, n, "%s.mig: device is not MIG capable", ctx);
                        goto out;
                }
                if (parse_mig(p, n, ctx, g) < 0)
                        goto out;
                g->mig_enabled = true;
                if (g->n_mig > g->mig_max) {
                        yw_fail(p, n, "%s.mig: more than migMaxDevices (%u)", ctx, g->mig_max);
                        goto out;
                }
        }

        if (parse_submap(p, m, ctx, "utilization", util_keys, &n) < 0 ||
            (n && (yw_opt_u64(p, n, ctx, "gpu", 100, &g->util_gpu) < 0 ||
                   yw_opt_u64(p, n, ctx, "memory", 100, &g->util_mem) < 0 ||
                   yw_opt_u64(p, n, ctx, "encoder", 100, &g->util_enc) < 0 ||
                   yw_opt_u64(p, n, ctx, "decoder", 100, &g->util_dec) < 0)))
                goto out;
        static const char *const pcie_keys[] = {"tx", "rx", NULL};
        if (parse_submap(p, m, ctx, "pcieThroughputKBps", pcie_keys, &n) < 0 ||
            (n && (yw_opt_u64(p, n, ctx, "tx", 0xffffffffULL, &g->pcie_tx_kbps) < 0 ||
                   yw_opt_u64(p, n, ctx, "rx", 0xffffffffULL, &g->pcie_rx_kbps) < 0)))
                goto out;
        if (parse_submap(p, m, ctx, "gpm", mock_gpm_keys, &n) < 0 ||
            (n && yw_opt_bool(p, n, ctx, "supported", g->arch >= NVML_DEVICE_ARCH_HOPPER,
                              &g->gpm_supported) < 0))
                goto out;
        if (!n)
                g->gpm_supported = g->arch >= NVML_DEVICE_ARCH_HOPPER;
        for (int i = 0; n && i < MOCK_GPM_N; i++)
                if (yw_opt_u64(p, n, ctx, mock_gpm_keys[i], i < MOCK_GPM_PCIE_TX ? 100 : ~0ULL,
                               &g->gpm[i]) < 0)
                        goto out;
        if (yw_opt_u64(p, m, ctx, "temperatureC", 200, &g->temp) < 0 ||
            yw_opt_u64(p, m, ctx, "memoryTemperatureC", 200, &g->mem_temp) < 0 ||
            yw_opt_u64(p, m, ctx, "powerMilliwatts", 10000000, &g->power) < 0 ||
            yw_opt_u64(p, m, ctx, "powerLimitMilliwatts", 10000000, &g->power_limit) < 0 ||
            yw_opt_u64(p, m, ctx, "enforcedPowerLimitMilliwatts", 10000000, &g->enforced_limit) <
                0 ||
            yw_opt_u64(p, m, ctx, "energyMillijoules", ~0ULL, &g->energy) < 0 ||
            yw_uint_or(p, m, ctx, "pcieReplayCounter", 0xffffffffULL, 0, &g->replay) < 0 ||
            yw_uint_or(p, m, ctx, "temperatureStallMs", 3600000, 0, &g->temperature_stall_ms) < 0)
                goto out;
        if (!g->enforced_limit.set)
                g->enforced_limit = g->power_limit;
        static const char *const clock_names[MOCK_CLK_N] = {"graphics", "sm", "mem", "video"};
        yaml_node_t *mx;
        if (parse_submap(p, m, ctx, "clocksMHz", clock_keys, &n) < 0 ||
            parse_submap(p, m, ctx, "maxClocksMHz", clock_keys, &mx) < 0)
                goto out;
        for (int i = 0; i < MOCK_CLK_N; i++) {
                if ((n && yw_opt_u64(p, n, ctx, clock_names[i], 100000, &g->clocks[i]) < 0) ||
                    (mx && yw_opt_u64(p, mx, ctx, clock_names[i], 100000, &g->max_clocks[i]) < 0))
                        goto out;
        }
        if (!g->clocks[MOCK_CLK_GRAPHICS].set)
                g->clocks[MOCK_CLK_GRAPHICS] = g->clocks[MOCK_CLK_SM];
        for (int i = 0; i < MOCK_CLK_N; i++)
                if (!g->max_clocks[i].set)
                        g->max_clocks[i] = g->clocks[i];

        if (parse_submap(p, m, ctx, "remappedRows", remap_keys, &n) < 0)
                goto out;
        g->has_remap = n != NULL || g->arch == NVML_DEVICE_ARCH_AMPERE ||
                       g->arch == NVML_DEVICE_ARCH_HOPPER || g->arch == NVML_DEVICE_ARCH_BLACKWELL;
        if (n) {
                if (yw_uint_or(p, n, ctx, "correctable", 0xffffffffULL, 0, &v) < 0)
                        goto out;
                g->remap_cor = (unsigned)v;
                if (yw_uint_or(p, n, ctx, "uncorrectable", 0xffffffffULL, 0, &v) < 0)
                        goto out;
                g->remap_unc = (unsigned)v;
                if (yw_opt_bool(p, n, ctx, "pending", false, &g->remap_pending) < 0 ||
                    yw_opt_bool(p, n, ctx, "failure", false, &g->remap_failure) < 0)
                        goto out;
        }
        static const char *const ecc_keys[] = {"sbeVolatile", "dbeVolatile", "sbeAggregate",
                                               "dbeAggregate", NULL};
        if (parse_submap(p, m, ctx, "eccErrors", ecc_keys, &n) < 0)
                goto out;
        for (int i = 0; n && i < 4; i++)
                if (yw_uint_or(p, n, ctx, ecc_keys[i], ~0ULL, 0, &g->ecc_counts[i % 2][i / 2]) < 0)
                        goto out;
        static const char *const retired_keys[] = {"sbe", "dbe", "pending", NULL};
        if (parse_submap(p, m, ctx, "retiredPages", retired_keys, &n) < 0)
                goto out;
        g->has_retired = n != NULL || !g->has_remap;
        if (n) {
                if (yw_uint_or(p, n, ctx, "sbe", 0xffffffffULL, 0, &v) < 0)
                        goto out;
                g->retired_sbe = (unsigned)v;
                if (yw_uint_or(p, n, ctx, "dbe", 0xffffffffULL, 0, &v) < 0)
                        goto out;
                g->retired_dbe = (unsigned)v;
                if (yw_opt_bool(p, n, ctx, "pending", false, &g->retired_pending) < 0)
                        goto out;
        }
        static const char *const viol_keys[] = {"power", "thermal", "syncBoost", "boardLimit",
                                                "lowUtilization", "reliability", NULL};
        if (parse_submap(p, m, ctx, "violationsNs", viol_keys, &n) < 0)
                goto out;
        for (int i = 0; n && i < 6; i++)
                if (yw_uint_or(p, n, ctx, viol_keys[i], ~0ULL, 0, &g->violation_ns[i]) < 0)
                        goto out;
        static const char *const nvle_keys[] = {"replay", "recovery", "crcFlit", "crcData", NULL};
        if (parse_submap(p, m, ctx, "nvlinkErrors", nvle_keys, &n) < 0)
                goto out;
        for (int i = 0; n && i < 4; i++)
                if (yw_uint_or(p, n, ctx, nvle_keys[i], ~0ULL, 0, &g->nvl_errors[i]) < 0)
                        goto out;
        if (yw_opt_u64(p, m, ctx, "fanSpeedPercent", 100, &g->fan_percent) < 0 ||
            yw_opt_bool(p, m, ctx, "vgpuLicensed", false, &g->vgpu_licensed) < 0)
                goto out;
        if (yw_opt_bool(p, m, ctx, "persistenceMode", true, &g->persistence) < 0 ||
            yw_opt_bool(p, m, ctx, "eccEnabled", true, &g->ecc) < 0 ||
            yw_uint_or(p, m, ctx, "performanceState", 15, 0, &v) < 0)
                goto out;
        g->pstate = (unsigned)v;
        g->compute_mode = NVML_COMPUTEMODE_DEFAULT;
        if ((n = yw_get(p, m, "computeMode"))) {
                if (yw_named(p, n, "computeMode", compute_mode_names, 3, &v) < 0)
                        goto out;
                g->compute_mode = (nvmlComputeMode_t)v;
        }
        unsigned long long dflt_events =
            nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypePState |
            nvmlEventTypeXidCriticalError | (g->mig_capable ? nvmlEventMigConfigChange : 0);
        if (yw_uint_or(p, m, ctx, "clocksEventReasons", ~0ULL, 0, &g->clock_reasons) < 0 ||
            yw_uint_or(p, m, ctx, "supportedEvents", nvmlEventTypeAll, dflt_events,
                       &g->supported_events) < 0)
                goto out;
        if ((n = yw_get(p, m, "processes")) && parse_procs(p, n, ctx, g) < 0)
                goto out;
        r = 0;
out:
        free(pci);
        free(cc);
        return r;
}

static int parse_switches(struct parser *p, yaml_node_t *n, struct mock_config *c)
{
        static const char *const keys[] = {"pciBusId", "pciDeviceId", NULL};
        if (n->type != YAML_SEQUENCE_NODE)
                return yw_fail(p, n, "nvswitches: expected a list");
        if (yw_seq_len(n) > MOCK_MAX_SWITCHES)
                return yw_fail(p, n, "nvswitches: more than %d", MOCK_MAX_SWITCHES);
        c->n_switches = yw_seq_len(n);
        c->switches = mock_alloc(c->n_switches * sizeof(*c->switches) + 1);
        for (size_t i = 0; i < c->n_switches; i++) {
                yaml_node_t *e = yw_seq_at(p, n, i), *bus = e;
                unsigned long long id = 0;
                if (e->type == YAML_MAPPING_NODE) {
                        if (yw_check_map(p, e, "nvswitches[]", keys) < 0 ||
                            yw_uint_or(p, e, "nvswitches[]", "pciDeviceId", 0xffffffffULL, 0, &id) <
                                0)
                                return -1;
                        bus = yw_get(p, e, "pciBusId");
                }
                if (!mock_parse_pci(yw_scalar_of(bus), &c->switches[i]))
                        return yw_fail(p, e, "nvswitches[%zu]: expected a PCI bus ID", i);
                c->switches[i].device_id = (unsigned)id;
        }
        return 0;
}

static int parse_events(struct parser *p, yaml_node_t *n, struct mock_config *c)
{
        static const char *const keys[] = {"device", "type", "xid", "data", "gi", "ci", NULL};
        if (n->type != YAML_SEQUENCE_NODE)
                return yw_fail(p, n, "events: expected a list");
        if (yw_seq_len(n) > MOCK_MAX_EVENTS)
                return yw_fail(p, n, "events: more than %d", MOCK_MAX_EVENTS);
        c->n_events = yw_seq_len(n);
        c->events = mock_alloc(c->n_events * sizeof(*c->events) + 1);
        for (size_t i = 0; i < c->n_events; i++) {
                yaml_node_t *e = yw_seq_at(p, n, i), *dn, *tn;
                struct mock_event_cfg *ev = &c->events[i];
                char ctx[32];
                yw_name(ctx, sizeof(ctx), "events[%zu]", i);
                struct mock_opt xid, data, gi, ci;
                if (yw_check_map(p, e, ctx, keys) < 0)
                        return -1;
                if (!(dn = yw_get(p, e, "device")) || !(tn = yw_get(p, e, "type")))
                        return yw_fail(p, e, "%s: needs 'device' and 'type'", ctx);
                const char *ds = yw_scalar_of(dn);
                bool found = false;
                for (size_t j = 0; ds && j < c->n_gpus && !found; j++)
                        if (!strcmp(ds, c->gpus[j].uuid)) {
                                ev->gpu = (unsigned)j;
                                found = true;
                        }
                unsigned long long v;
                if (!found) {
                        if (yw_parse_u64(p, dn, "events[].device", MOCK_MAX_GPUS, &v) < 0)
                                return -1;
                        if (v >= c->n_gpus)
                                return yw_fail(p, dn, "%s.device: no device %llu", ctx, v);
                        ev->gpu = (unsigned)v;
                }
                if (yw_named(p, tn, "events[].type", event_names, nvmlEventTypeAll, &ev->type) <
                        0 ||
                    yw_opt_u64(p, e, ctx, "xid", 0xffffffffULL, &xid) < 0 ||
                    yw_opt_u64(p, e, ctx, "data", ~0ULL, &data) < 0 ||
                    yw_opt_u64(p, e, ctx, "gi", 0xfffe, &gi) < 0 ||
                    yw_opt_u64(p, e, ctx, "ci", 0xfffe, &ci) < 0)
                        return -1;
                if (xid.set && ev->type != nvmlEventTypeXidCriticalError)
                        return yw_fail(p, e, "%s: 'xid' goes with type xid", ctx);
                ev->data = xid.set ? xid.v : data.v;
                ev->gi = gi.set ? (unsigned)gi.v : MOCK_NO_ID;
                ev->ci = ci.set ? (unsigned)ci.v : MOCK_NO_ID;
                if (gi.set || ci.set) {
                        const struct mock_gpu *g = &c->gpus[ev->gpu];
                        bool ok = false;
                        for (size_t k = 0; k < g->n_mig; k++)
                                ok |= g->mig[k].gi == ev->gi && (!ci.set || g->mig[k].ci == ev->ci);
                        if (!ok)
                                return yw_fail(p, e, "%s: device %u has no such MIG instance", ctx,
                                               ev->gpu);
                }
        }
        return 0;
}

/* What spans devices. */
static int cross_check(struct parser *p, yaml_node_t *devs, struct mock_config *c)
{
        for (size_t i = 0; i < c->n_gpus; i++) {
                struct mock_gpu *g = &c->gpus[i];
                yaml_node_t *at = yw_seq_at(p, devs, i);
                for (size_t j = 0; j < i; j++) {
                        const struct mock_gpu *h = &c->gpus[j];
                        if (!strcmp(g->uuid, h->uuid))
                                return yw_fail(
                                    p, at, "devices[%zu]: UUID also used by devices[%zu]", i, j);
                        if (g->pci.domain == h->pci.domain && g->pci.bus == h->pci.bus &&
                            g->pci.device == h->pci.device)
                                return yw_fail(p, at,
                                               "devices[%zu]: PCI bus ID also used by devices[%zu]",
                                               i, j);
                        if (g->minor == h->minor)
                                return yw_fail(
                                    p, at, "devices[%zu]: minor also used by devices[%zu]", i, j);
                        for (size_t a = 0; a < g->n_mig; a++)
                                for (size_t b = 0; b < h->n_mig; b++)
                                        if (!strcmp(g->mig[a].uuid, h->mig[b].uuid))
                                                return yw_fail(p, at,
                                                               "devices[%zu].mig[%zu]: UUID reused",
                                                               i, a);
                }
                for (size_t a = 0; a < g->n_mig; a++)
                        for (size_t b = 0; b < a; b++)
                                if (!strcmp(g->mig[a].uuid, g->mig[b].uuid))
                                        return yw_fail(p, at, "devices[%zu].mig[%zu]: UUID reused",
                                                       i, a);
                /* NVLink: as many links from i to j as from j to i. */
                for (size_t j = 0; j < c->n_gpus; j++) {
                        unsigned ij = 0, ji = 0;
                        for (int l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
                                ij += g->links[l].kind == MOCK_LINK_GPU && g->links[l].target == j;
                                ji += c->gpus[j].links[l].kind == MOCK_LINK_GPU &&
                                      c->gpus[j].links[l].target == i;
                        }
                        if (ij != ji)
                                return yw_fail(p, at,
                                               "devices[%zu].nvlink: %u links to device %zu, which "
                                               "has %u back",
                                               i, ij, j, ji);
                }
                char err[256];
                if (mock_profiles_build(g, (unsigned)i, err, sizeof(err)) < 0)
                        return yw_fail(p, at, "%s", err);
                for (size_t k = 0; k < g->n_procs; k++) {
                        const struct mock_proc *pr = &g->procs[k];
                        bool ok = pr->gi == MOCK_NO_ID && !g->mig_enabled;
                        for (size_t a = 0; a < g->n_mig; a++)
                                ok |= g->mig[a].gi == pr->gi && g->mig[a].ci == pr->ci;
                        if (!ok)
                                return yw_fail(
                                    p, at,
                                    g->mig_enabled
                                        ? "devices[%zu].processes[%zu]: needs the gi and ci of one "
                                          "of its MIG devices"
                                        : "devices[%zu].processes[%zu]: gi/ci given but MIG is off",
                                    i, k);
                }
        }
        return 0;
}

static int parse_root(struct parser *p, struct mock_config *c)
{
        static const char *const keys[] = {
            "driverVersion", "cudaDriverVersion", "nvmlVersion", "initError",
            "nvswitches",    "devices",           "events",      NULL};
        yaml_node_t *root = yaml_document_get_root_node(&p->doc), *n;
        if (!root)
                return yw_fail(p, NULL, "empty configuration");
        if (yw_check_map(p, root, "configuration", keys) < 0)
                return -1;
        unsigned long long v;
        if (yw_opt_str(p, root, "configuration", "driverVersion",
                       NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE - 1, &c->driver_version) < 0 ||
            yw_opt_str(p, root, "configuration", "nvmlVersion",
                       NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE - 1, &c->nvml_version) < 0 ||
            yw_uint_or(p, root, "configuration", "cudaDriverVersion", 999999, 12040, &v) < 0)
                return -1;
        c->cuda_version = (int)v;
        if (!c->driver_version)
                c->driver_version = mock_strdup("550.54.15");
        if (!c->nvml_version) {
                char buf[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
                snprintf(buf, sizeof(buf), "%d.%s", c->cuda_version / 1000, c->driver_version);
                c->nvml_version = mock_strdup(buf);
        }
        c->init_error = NVML_SUCCESS;
        if ((n = yw_get(p, root, "initError"))) {
                if (yw_named(p, n, "initError", return_names, NVML_ERROR_UNKNOWN, &v) < 0)
                        return -1;
                c->init_error = (nvmlReturn_t)v;
        }
        if ((n = yw_get(p, root, "nvswitches")) && parse_switches(p, n, c) < 0)
                return -1;
        yaml_node_t *devs = yw_get(p, root, "devices");
        if (devs) {
                if (devs->type != YAML_SEQUENCE_NODE)
                        return yw_fail(p, devs, "devices: expected a list");
                if (yw_seq_len(devs) > MOCK_MAX_GPUS)
                        return yw_fail(p, devs, "devices: more than %d", MOCK_MAX_GPUS);
                c->n_gpus = yw_seq_len(devs);
                c->gpus = mock_alloc(c->n_gpus * sizeof(*c->gpus) + 1);
                for (size_t i = 0; i < c->n_gpus; i++)
                        if (parse_gpu(p, yw_seq_at(p, devs, i), i, c->n_gpus, c->n_switches,
                                      &c->gpus[i]) < 0)
                                return -1;
                if (cross_check(p, devs, c) < 0)
                        return -1;
        }
        if ((n = yw_get(p, root, "events")) && parse_events(p, n, c) < 0)
                return -1;
        return 0;
}

struct mock_config *mock_config_load(const char *path, char *err, size_t errlen)
{
        FILE *f = fopen(path, "re");
        if (!f) {
                snprintf(err, errlen, "%s: %s", path, strerror(errno));
                return NULL;
        }
        yaml_parser_t yp;
        struct parser p = {.path = path, .err = err, .errlen = errlen};
        err[0] = 0;
        yaml_parser_initialize(&yp);
        yaml_parser_set_input_file(&yp, f);
        int loaded = yaml_parser_load(&yp, &p.doc);
        if (!loaded)
                snprintf(err, errlen, "%s:%zu:%zu: %s", path, yp.problem_mark.line + 1,
                         yp.problem_mark.column + 1, yp.problem ? yp.problem : "YAML error");
        yaml_parser_delete(&yp);
        fclose(f);
        if (!loaded)
                return NULL;
        struct mock_config *c = mock_alloc(sizeof(*c));
        int r = parse_root(&p, c);
        yaml_document_delete(&p.doc);
        if (r < 0) {
                mock_config_free(c);
                return NULL;
        }
        return c;
}

void mock_config_free(struct mock_config *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n_gpus; i++) {
                struct mock_gpu *g = &c->gpus[i];
                free(g->uuid);
                free(g->name);
                free(g->serial);
                free(g->board_part);
                free(g->vbios);
                free(g->pcie_switch);
                free(g->host_bridge);
                for (size_t k = 0; k < g->n_mig; k++) {
                        free(g->mig[k].uuid);
                        free(g->mig[k].profile);
                }
                free(g->mig);
                for (size_t k = 0; k < g->n_procs; k++)
                        free(g->procs[k].name);
                free(g->procs);
        }
        free(c->gpus);
        free(c->switches);
        free(c->events);
        free(c->driver_version);
        free(c->nvml_version);
        free(c);
}

bool mock_event_cfg_equal(const struct mock_event_cfg *a, const struct mock_event_cfg *b)
{
        return a->gpu == b->gpu && a->type == b->type && a->data == b->data && a->gi == b->gi &&
               a->ci == b->ci;
}

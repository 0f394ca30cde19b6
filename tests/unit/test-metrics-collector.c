/* Unit tests for metrics/collector.c and the NVIDIA sampler (devices/nvidia/sample.c) against the mock
 * NVML (<BUILD>/mock-nvml/libnvidia-ml.so.1, or $MOCK_NVML_LIB): DCGM
 * families and labels, the three attribution sources merged, per-owner
 * memory and utilisation shares, MIG devices, and the mailbox.  A fake
 * /proc and container state directory live in a temporary directory. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "devices/nvidia/inventory.h"
#include "devices/nvidia/nvml-lib.h"
#include "devices/nvidia/sample.h"
#include "metrics/collector.h"
#include "metrics/metrics.h"
#include "metrics/store.h"

#include "test-util.h"

#define G0 "GPU-00000000-0000-0000-0000-00000000aaaa"
#define G1 "GPU-11111111-1111-1111-1111-11111111aaaa"
#define G2 "GPU-22222222-2222-2222-2222-22222222aaaa"
#define M30 "MIG-33333333-0000-0000-0000-00000000aaaa"
#define M31 "MIG-33333333-0000-0000-0000-00000001aaaa"
#define ID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define ID_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
#define ID_D "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"

static char dir[64];

static const char *nvml_yaml =
        "driverVersion: \"550.54.15\"\n"
        "devices:\n"
        "  - {uuid: " G0 ", name: NVIDIA H100 80GB HBM3, memoryMiB: 81559, memoryReservedMiB: 530,\n"
        "     pciBusId: \"00000000:18:00.0\", computeCapability: \"9.0\", minor: 0,\n"
        "     utilization: {gpu: 90, memory: 40, encoder: 1, decoder: 2}, temperatureC: 41,\n"
        "     memoryTemperatureC: 35, powerMilliwatts: 312500, energyMillijoules: 123456789,\n"
        "     clocksMHz: {sm: 1980, mem: 2619}, pcieReplayCounter: 3,\n"
        "     remappedRows: {correctable: 1, uncorrectable: 2, pending: false, failure: true},\n"
        "     processes: [{pid: 101, usedMemoryMiB: 1000, smUtil: 30},\n"
        "                 {pid: 102, usedMemoryMiB: 3000, smUtil: 50},\n"
        "                 {pid: 103, usedMemoryMiB: 500, smUtil: 10},\n"
        "                 {pid: 104, usedMemoryMiB: 7, smUtil: 1}]}\n"
        "  - {uuid: " G1 ", name: NVIDIA H100 80GB HBM3, memoryMiB: 81559,\n"
        "     pciBusId: \"00000000:2a:00.0\", computeCapability: \"9.0\", minor: 1,\n"
        "     utilization: {gpu: 5, memory: 1}}\n"
        "  - {uuid: " G2 ", name: NVIDIA H100 80GB HBM3, memoryMiB: 81559,\n"
        "     pciBusId: \"00000000:3a:00.0\", computeCapability: \"9.0\", minor: 2}\n"
        "  - {uuid: GPU-33333333-3333-3333-3333-33333333aaaa, name: NVIDIA A100-SXM4-80GB,\n"
        "     memoryMiB: 81920, pciBusId: \"00000000:47:00.0\", computeCapability: \"8.0\", minor: 3,\n"
        "     mig: [{gi: 1, ci: 0, profile: 3g.40gb, uuid: " M30 "},\n"
        "           {gi: 2, ci: 0, profile: 1g.10gb, uuid: " M31 "}],\n"
        "     processes: [{pid: 201, usedMemoryMiB: 2048, gi: 2, ci: 0}]}\n";

static void put(const char *rel, const char *text)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, rel);
        _cleanup_free_ char *d = xstrdup(path);
        *strrchr(d, '/') = '\0';
        assert_int_equal(fs_mkdir_p(d, 0755), 0);
        assert_int_equal(fs_write_atomic(path, text, strlen(text), 0644), 0);
}

static void put_proc(unsigned pid, const char *id)
{
        char rel[64];
        snprintf(rel, sizeof(rel), "proc/%u/cgroup", pid);
        _cleanup_free_ char *text = xasprintf("0::/kubepods/besteffort/podx/%s\n", id);
        put(rel, text);
}

static void put_spec(const char *id, const char *pod, const char *ctr, const char *extra)
{
        _cleanup_free_ char *rel = xasprintf("state/%s/config.json", id);
        _cleanup_free_ char *text = xasprintf(
                "{\"process\":{\"capabilities\":{\"bounding\":[\"CAP_SYS_ADMIN\"]}%s},"
                "\"annotations\":{\"io.kubernetes.cri.sandbox-name\":\"%s\","
                "\"io.kubernetes.cri.sandbox-namespace\":\"ns\",\"io.kubernetes.cri.container-name\":\"%s\"}}",
                extra, pod, ctr);
        put(rel, text);
}

static int setup(void **state)
{
        char path[PATH_MAX];
        if (test_mock_nvml_path(path, sizeof(path)) < 0)
                return -1;
        strcpy(dir, "/tmp/devlet-collector-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        put("nvml.yaml", nvml_yaml);
        _cleanup_free_ char *cfg = xasprintf("%s/nvml.yaml", dir);
        setenv("MOCK_NVML_CONFIG", cfg, 1);
        setenv(NVML_LIB_ENV, path, 1);
        /* processes 101 and 102 are one container, 103 another, 104 a host process */
        put_proc(101, ID_A);
        put_proc(102, ID_A);
        put_proc(103, ID_B);
        put("proc/104/cgroup", "0::/system.slice/sshd.service\n");
        put_proc(201, ID_C);
        put_spec(ID_A, "trainer", "main", "");
        put_spec(ID_B, "sidecar-pod", "helper", "");
        put_spec(ID_C, "mig-pod", "worker", "");
        /* a privileged container asking for GPU 2 by UUID */
        put_spec(ID_D, "privileged-pod", "tool", ",\"env\":[\"NVIDIA_VISIBLE_DEVICES=" G2 "\"]");
        return 0;
}

static int teardown(void **state)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf %s", dir);
        return system(cmd) == 0 ? 0 : -1;
}

/* The NVIDIA backend's sampler, built as the backend builds it. */
static struct dev_sampler *sampler_open(void)
{
        struct nvml_lib *lib = NULL;
        struct diag err = { 0 };
        assert_int_equal(nvml_lib_open("/", &lib, &err), 0);
        assert_int_equal(lib->init(), NVML_SUCCESS);
        _cleanup_free_ char *root = xasprintf("%s/proc", dir);
        struct nvml_inventory_env env = { .sysfs_root = dir, .proc_root = root };
        struct nvml_inventory *inv = NULL;
        assert_int_equal(nvml_inventory_load(lib, &env, &inv, &err), 0);
        struct dev_sampler *s = NULL;
        assert_int_equal(nvidia_sampler_new(lib, inv, &s, &err), 0);
        nvml_inventory_free(inv);
        lib->shutdown();
        nvml_lib_close(lib); /* the sampler holds its own references */
        return s;
}

static struct collector *make_with(const struct collector_opts *base, struct metrics_store *store,
                                   struct dev_sampler *s)
{
        struct collector_opts o = *base;
        const struct dev_attr_hints *hints[] = { &nvidia_attr_hints };
        o.hints = hints;
        o.n_hints = 1;
        struct collector *c = collector_new(&o, store);
        if (s) {
                collector_put_samplers(c, &s, 1);
                dev_sampler_unref(s);
        }
        return c;
}

static struct collector *make(struct metrics_store *store, bool with_nvml)
{
        _cleanup_free_ char *proc = xasprintf("%s/proc", dir);
        _cleanup_free_ char *st = xasprintf("%s/state", dir);
        char *dirs[] = { st, NULL };
        struct collector_opts o = {
                .interval_ms = 100,
                .hostname_label = "Hostname",
                .hostname = "node-1",
                .proc_root = proc,
                .state_dirs = dirs,
                .cdi_prefix = "cdi.k8s.io/",
        };
        return make_with(&o, store, with_nvml ? sampler_open() : NULL);
}

#define BASE0 "gpu=\"0\",UUID=\"" G0 "\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\"," \
              "modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\""
#define BASE1 "gpu=\"1\",UUID=\"" G1 "\",pci_bus_id=\"00000000:2A:00.0\",device=\"nvidia1\"," \
              "modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\""
/* devlet's own families: the snake_case labels only (no modelName) */
#define OWN0 "gpu=\"0\",UUID=\"" G0 "\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\"," \
             "Hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\""
#define OWN1 "gpu=\"1\",UUID=\"" G1 "\",pci_bus_id=\"00000000:2A:00.0\",device=\"nvidia1\"," \
             "Hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\""
#define BASE2 "gpu=\"2\",UUID=\"" G2 "\",pci_bus_id=\"00000000:3A:00.0\",device=\"nvidia2\"," \
              "modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\""

static void expect_line(const char *text, const char *line)
{
        _cleanup_free_ char *needle = xasprintf("\n%s\n", line);
        if (!strstr(text, needle))
                fail_msg("missing line:\n%s\nin:\n%s", line, text);
}

static void expect_no(const char *text, const char *part)
{
        if (strstr(text, part))
                fail_msg("unexpected \"%s\" in:\n%s", part, text);
}

static size_t count(const char *text, const char *part)
{
        size_t n = 0;
        for (const char *p = strstr(text, part); p; p = strstr(p + 1, part))
                n++;
        return n;
}

static void add_podres(struct attr_podres *p, const char *res, const char *dev, const char *pod,
                       const char *ctr)
{
        xgrow((void **)&p->entries, &p->cap, p->n + 1, sizeof(*p->entries));
        p->entries[p->n++] = (struct attr_podres_entry){
                .resource = xstrdup(res), .device = xstrdup(dev), .pod = xstrdup(pod),
                .namespace = xstrdup("ns"), .container = xstrdup(ctr),
        };
}

static void test_families_and_attribution(void **state)
{
        struct metrics_store *store = metrics_store_new();
        struct collector *c = make(store, true);
        /* pod-resources: two pods share GPU 1 through replicas */
        struct attr_podres *p = xcalloc(1, sizeof(*p));
        add_podres(p, "nvidia.com/gpu.shared", G1 "::0", "share-a", "a");
        add_podres(p, "nvidia.com/gpu.shared", G1 "::1", "share-b", "b");
        add_podres(p, "example.com/thing", "1", "not-a-gpu", "x"); /* an index of another resource */
        collector_put_podres(c, p);
        /* what the backend notes when GPU 0 reports XID 79 */
        struct dev_sampler *s = sampler_open();
        nvidia_sampler_note_xid(s, 0, 79);
        collector_put_samplers(c, &s, 1);
        dev_sampler_unref(s);

        collector_run_once(c);
        _cleanup_free_ char *t = metrics_store_render(store, NULL);

        /* One series per device and family (issue 13): GPU 0 is used by two
         * containers, so its series carry the device's values and no pod. */
        expect_line(t, "DCGM_FI_DEV_FB_USED{" BASE0 "} 4507");
        expect_line(t, "DCGM_FI_DEV_GPU_UTIL{" BASE0 "} 90");
        expect_line(t, "DCGM_FI_DEV_SM_CLOCK{" BASE0 "} 1980");
        expect_line(t, "DCGM_FI_DEV_POWER_USAGE{" BASE0 "} 312.5");
        expect_line(t, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{" BASE0 "} 123456789");
        expect_line(t, "DCGM_FI_DEV_FB_RESERVED{" BASE0 "} 530");
        expect_line(t, "DCGM_FI_DEV_MEMORY_TEMP{" BASE0 "} 35");
        expect_line(t, "DCGM_FI_DEV_XID_ERRORS{" BASE0 ",err_code=\"79\",err_msg=\"GPU has fallen off the bus\"} 79");
        expect_line(t, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{" BASE0 "} 2");
        expect_line(t, "DCGM_FI_DEV_ROW_REMAP_FAILURE{" BASE0 "} 1");
        expect_line(t, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER{" BASE0 "} 3");
        assert_int_equal(count(t, "DCGM_FI_DEV_SM_CLOCK{" BASE0), 1);
        /* devlet's per-container families: each container's processes, the
         * host process (104) unattributed */
        expect_line(t, "devlet_container_memory_used_bytes{" OWN0 ",container=\"main\",namespace=\"ns\",pod=\"trainer\"} 4194304000");
        expect_line(t, "devlet_container_memory_used_bytes{" OWN0 ",container=\"helper\",namespace=\"ns\",pod=\"sidecar-pod\"} 524288000");
        expect_line(t, "devlet_unattributed_memory_used_bytes{" OWN0 "} 7340032");
        expect_line(t, "devlet_container_utilization_percent{" OWN0 ",container=\"main\",namespace=\"ns\",pod=\"trainer\"} 80");
        expect_line(t, "devlet_container_utilization_percent{" OWN0 ",container=\"helper\",namespace=\"ns\",pod=\"sidecar-pod\"} 10");
        expect_line(t, "devlet_unattributed_utilization_percent{" OWN0 "} 0");

        /* GPU 1: two pods share it through replicas; without process figures
         * nothing of its use can be split, so it stays unattributed */
        expect_line(t, "DCGM_FI_DEV_GPU_UTIL{" BASE1 "} 5");
        expect_line(t, "DCGM_FI_DEV_XID_ERRORS{" BASE1 ",err_code=\"0\",err_msg=\"No Error\"} 0");
        expect_line(t, "devlet_container_utilization_percent{" OWN1 ",container=\"a\",namespace=\"ns\",pod=\"share-a\"} 0");
        expect_line(t, "devlet_container_utilization_percent{" OWN1 ",container=\"b\",namespace=\"ns\",pod=\"share-b\"} 0");
        expect_line(t, "devlet_unattributed_utilization_percent{" OWN1 "} 5");
        expect_no(t, "vgpu=");
        expect_no(t, "not-a-gpu");

        /* GPU 2: the privileged container that asked for it in its spec holds
         * it alone: pod labels on every series, and all of its use */
        expect_line(t, "DCGM_FI_DEV_FB_FREE{" BASE2 ",container=\"tool\",namespace=\"ns\",pod=\"privileged-pod\"} 81559");
        expect_no(t, "DCGM_FI_DEV_FB_FREE{" BASE2 "}");

        /* GPU 3 in MIG mode: the GPU's own series, and per GPU instance */
        expect_line(t, "DCGM_FI_DEV_FB_USED{gpu=\"3\",UUID=\"GPU-33333333-3333-3333-3333-33333333aaaa\","
                       "pci_bus_id=\"00000000:47:00.0\",device=\"nvidia3\",modelName=\"NVIDIA A100-SXM4-80GB\","
                       "GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"2\",Hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\","
                       "container=\"worker\",namespace=\"ns\",pod=\"mig-pod\"} 2048");
        expect_line(t, "DCGM_FI_DEV_FB_USED{gpu=\"3\",UUID=\"GPU-33333333-3333-3333-3333-33333333aaaa\","
                       "pci_bus_id=\"00000000:47:00.0\",device=\"nvidia3\",modelName=\"NVIDIA A100-SXM4-80GB\","
                       "GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\",Hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 0");
        /* one HELP per family, families contiguous */
        assert_int_equal(count(t, "# HELP DCGM_FI_DEV_FB_USED "), 1);
        assert_int_equal(count(t, "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"), 1);
        const char *first = strstr(t, "\nDCGM_FI_DEV_XID_ERRORS{");
        const char *next = strstr(t, "# HELP DCGM_FI_DEV_FB_FREE");
        const char *last = strstr(t, "DCGM_FI_DEV_XID_ERRORS{gpu=\"3\"");
        assert_true(first && next && last && first < last && last < next);

        /* the pod-resources source goes away: its attribution with it */
        collector_put_podres(c, NULL);
        collector_run_once(c);
        _cleanup_free_ char *t2 = metrics_store_render(store, NULL);
        expect_no(t2, "share-a");
        expect_line(t2, "DCGM_FI_DEV_GPU_UTIL{" BASE1 "} 5");
        assert_int_equal(collector_collections(c), 2);

        collector_free(c);
        metrics_store_free(store);
}

static void test_hostname_label_and_no_nvml(void **state)
{
        struct metrics_store *store = metrics_store_new();
        _cleanup_free_ char *proc = xasprintf("%s/proc", dir);
        struct collector_opts o = { .interval_ms = 50, .hostname_label = "hostname", .hostname = "n",
                                    .proc_root = proc };
        struct collector *c = make_with(&o, store, sampler_open());
        collector_run_once(c);
        _cleanup_free_ char *t = metrics_store_render(store, NULL);
        assert_non_null(strstr(t, ",hostname=\"n\","));
        expect_no(t, "Hostname=");
        collector_free(c);

        /* without NVML: an empty GPU slot, no crash */
        c = make_with(&o, store, NULL);
        collector_run_once(c);
        _cleanup_free_ char *t2 = metrics_store_render(store, NULL);
        assert_string_equal(t2, "");
        collector_free(c);
        metrics_store_free(store);
}

static void test_virtual_gpus_and_selection(void **state)
{
        struct metrics_store *store = metrics_store_new();
        _cleanup_free_ char *proc = xasprintf("%s/proc", dir);
        _cleanup_free_ char *st = xasprintf("%s/state", dir);
        char *dirs[] = { st, NULL };
        char f1[] = "DCGM_FI_DEV_GPU_UTIL", f2[] = "DCGM_FI_DEV_FB_USED";
        char *families[] = { f1, f2, NULL };
        struct collector_opts o = { .interval_ms = 100, .hostname_label = "Hostname",
                                    .hostname = "node-1", .proc_root = proc, .state_dirs = dirs,
                                    .virtual_gpus = true, .families = families };
        struct collector *c = make_with(&o, store, sampler_open());
        struct attr_podres *p = xcalloc(1, sizeof(*p));
        add_podres(p, "nvidia.com/gpu.shared", G1 "::0", "share-a", "a");
        add_podres(p, "nvidia.com/gpu.shared", G1 "::1", "share-b", "b");
        collector_put_podres(c, p);
        collector_run_once(c);
        _cleanup_free_ char *t = metrics_store_render(store, NULL);
        /* the device's series, and one per pod sharing it (its replica in vgpu) */
        expect_line(t, "DCGM_FI_DEV_GPU_UTIL{" BASE1 "} 5");
        expect_line(t, "DCGM_FI_DEV_GPU_UTIL{" BASE1 ",container=\"a\",namespace=\"ns\",pod=\"share-a\",vgpu=\"0\"} 5");
        expect_line(t, "DCGM_FI_DEV_GPU_UTIL{" BASE1 ",container=\"b\",namespace=\"ns\",pod=\"share-b\",vgpu=\"1\"} 5");
        /* where processes were mapped, each pod's own share */
        expect_line(t, "DCGM_FI_DEV_FB_USED{" BASE0 ",container=\"main\",namespace=\"ns\",pod=\"trainer\"} 4000");
        expect_line(t, "DCGM_FI_DEV_FB_USED{" BASE0 ",container=\"helper\",namespace=\"ns\",pod=\"sidecar-pod\"} 500");
        expect_line(t, "DCGM_FI_DEV_FB_USED{" BASE0 "} 4507");
        /* --collectors: only the families named; devlet's own stay */
        expect_no(t, "DCGM_FI_DEV_SM_CLOCK");
        expect_no(t, "DCGM_FI_DEV_XID_ERRORS");
        assert_non_null(strstr(t, "devlet_container_memory_used_bytes{"));
        collector_free(c);
        metrics_store_free(store);
}

/* Label rows, opt-in families and the XID window counter: on the series
 * only when a counters file names them. */
static void test_label_fields_and_opt_in(void **state)
{
        struct metrics_store *store = metrics_store_new();
        _cleanup_free_ char *proc = xasprintf("%s/proc", dir);
        _cleanup_free_ char *st = xasprintf("%s/state", dir);
        char *dirs[] = { st, NULL };
        char f1[] = "DCGM_FI_DEV_GPU_TEMP", f2[] = "DCGM_EXP_XID_ERRORS_COUNT",
             f3[] = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", f4[] = "DCGM_FI_DEV_MINOR_NUMBER";
        char *families[] = { f1, f2, f3, f4, NULL };
        struct collector_opts o = { .interval_ms = 100, .hostname_label = "Hostname",
                                    .hostname = "node-1", .proc_root = proc, .state_dirs = dirs,
                                    .families = families };
        struct dev_sampler *s = sampler_open();
        nvidia_sampler_note_xid(s, 0, 79);
        nvidia_sampler_note_xid(s, 0, 43);
        nvidia_sampler_note_xid(s, 0, 79);
        struct collector *c = make_with(&o, store, dev_sampler_ref(s));
        collector_run_once(c);
        _cleanup_free_ char *t = metrics_store_render(store, NULL);
        expect_line(t, "DCGM_FI_DEV_GPU_TEMP{" BASE0 ",DCGM_FI_DEV_MINOR_NUMBER=\"0\"} 41");
        expect_line(t, "DCGM_EXP_XID_ERRORS_COUNT{" BASE0
                       ",DCGM_FI_DEV_MINOR_NUMBER=\"0\",window_size_in_ms=\"300000\",xid=\"79\"} 2");
        expect_line(t, "DCGM_EXP_XID_ERRORS_COUNT{" BASE0
                       ",DCGM_FI_DEV_MINOR_NUMBER=\"0\",window_size_in_ms=\"300000\",xid=\"43\"} 1");
        /* no XID: one zero series without the label */
        expect_line(t, "DCGM_EXP_XID_ERRORS_COUNT{" BASE1 ",DCGM_FI_DEV_MINOR_NUMBER=\"1\",window_size_in_ms=\"300000\"} 0");
        expect_line(t, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{" BASE1 ",DCGM_FI_DEV_MINOR_NUMBER=\"1\"} 0");
        assert_int_equal(count(t, "# TYPE DCGM_EXP_XID_ERRORS_COUNT gauge\n"), 1);
        expect_no(t, "DCGM_FI_DEV_NAME=");
        expect_no(t, "DCGM_FI_DEV_SM_CLOCK");
        /* devlet's own families never get label fields */
        expect_no(t, "devlet_container_memory_used_bytes{gpu=\"0\",UUID=\"" G0 "\",pci_bus_id=\"00000000:18:00.0\","
                     "device=\"nvidia0\",Hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\",DCGM_FI_DEV_MINOR");
        collector_free(c);

        /* without a counters file: the default families only */
        c = make_with(&(struct collector_opts){ .interval_ms = 100, .hostname_label = "Hostname",
                                                .hostname = "node-1", .proc_root = proc, .state_dirs = dirs },
                      store, s);
        collector_run_once(c);
        _cleanup_free_ char *t2 = metrics_store_render(store, NULL);
        expect_line(t2, "DCGM_FI_DEV_GPU_TEMP{" BASE0 "} 41");
        expect_no(t2, "DCGM_EXP_");
        expect_no(t2, "DCGM_FI_DEV_ECC_");
        expect_no(t2, "DCGM_FI_DEV_MINOR_NUMBER");
        collector_free(c);
        metrics_store_free(store);
}

static void test_counters_csv(void **state)
{
        char **names = NULL;
        struct diag diag = { 0 };
        assert_int_equal(config_counters_parse("# Format\n# DCGM FIELD, type, help\n\n"
                                               "DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).\n"
                                               "DCGM_FI_DEV_DEC_UTIL ,     gauge, Decoder utilization (in %).\n"
                                               "DCGM_FI_DRIVER_VERSION,        label, Driver Version\n"
                                               "DCGM_FI_PROF_PCIE_TX_BYTES, gauge, The rate, with commas, of data.\n",
                                               "c.csv", &names, &diag),
                         0);
        assert_string_equal(names[0], "DCGM_FI_DEV_SM_CLOCK");
        assert_string_equal(names[1], "DCGM_FI_DEV_DEC_UTIL");
        assert_string_equal(names[2], "DCGM_FI_DRIVER_VERSION"); /* a label row */
        assert_string_equal(names[3], "DCGM_FI_PROF_PCIE_TX_BYTES");
        assert_null(names[4]);
        strv_free(names);
        char buf[600];
        assert_int_equal(config_counters_parse("DCGM_FI_DEV_SM_CLOCK, gauge\n", "c.csv", &names, &diag), -EINVAL);
        assert_string_equal(diag_format(&diag, buf, sizeof(buf)), "c.csv:1:1: want \"field, type, help\"");
        assert_int_equal(config_counters_parse("\nX, summary, h\n", "c.csv", &names, &diag), -EINVAL);
        assert_string_equal(diag_format(&diag, buf, sizeof(buf)),
                            "c.csv:2:1: unknown type \"summary\" (gauge, counter, histogram or label)");
}

static void test_thread_publishes(void **state)
{
        struct metrics_store *store = metrics_store_new();
        struct collector *c = make(store, true);
        assert_int_equal(collector_start(c), 0);
        /* wait (with a deadline) for two collections */
        for (int i = 0; i < 500 && metrics_store_generation(store, METRICS_SLOT_GPU) < 2; i++)
                usleep(10000);
        assert_true(metrics_store_generation(store, METRICS_SLOT_GPU) >= 2);
        assert_true(collector_last_duration_us(c) > 0);
        collector_free(c); /* stops and joins */
        metrics_store_free(store);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_families_and_attribution),
                cmocka_unit_test(test_hostname_label_and_no_nvml),
                cmocka_unit_test(test_virtual_gpus_and_selection),
                cmocka_unit_test(test_label_fields_and_opt_in),
                cmocka_unit_test(test_counters_csv),
                cmocka_unit_test(test_thread_publishes),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}

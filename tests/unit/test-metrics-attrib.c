/* Unit tests for metrics attribution: cgroup paths of every runtime and
 * driver (cgroup.c), device references and NVIDIA_VISIBLE_DEVICES forms
 * (resolve.c), OCI spec parsing and the spec cache (ocispec.c), and the
 * pod-resources reply (podres.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "devices/nvidia/sample.h"
#include "base/xalloc.h"
#include "metrics/attrib.h"
#include "podresources.pb-c.h"

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID2 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define POD "pod0b1c2d3e-aaaa-bbbb-cccc-1234567890ab"
#define POD_ "pod0b1c2d3e_aaaa_bbbb_cccc_1234567890ab"


/* ---- cgroup.c ---- */

static void expect_id(const char *text, const char *want)
{
        char id[ATTR_ID_LEN + 1] = "";
        int r = attr_cgroup_parse(text, id);
        if (!want) {
                if (r != -ENOENT)
                        fail_msg("expected no ID in:\n%s\ngot %s", text, id);
                return;
        }
        if (r != 0)
                fail_msg("expected %s in:\n%s", want, text);
        assert_string_equal(id, want);
}

static void test_cgroup_runtimes(void **state)
{
        /* containerd, cgroupfs driver (v2 and v1) */
        expect_id("0::/kubepods/burstable/" POD "/" ID "\n", ID);
        expect_id("12:memory:/kubepods/besteffort/" POD "/" ID "\n"
                  "1:name=systemd:/kubepods/besteffort/" POD "/" ID "\n", ID);
        /* containerd, systemd driver */
        expect_id("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-" POD_
                  ".slice/cri-containerd-" ID ".scope\n", ID);
        expect_id("0::/kubepods.slice/kubepods-" POD_ ".slice/cri-containerd-" ID ".scope\n", ID);
        /* CRI-O, systemd and cgroupfs; conmon is not the container */
        expect_id("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-" POD_
                  ".slice/crio-" ID ".scope\n", ID);
        expect_id("0::/kubepods/burstable/" POD "/crio-" ID "\n", ID);
        expect_id("0::/crio/" ID "\n", ID);
        expect_id("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-" POD_
                  ".slice/crio-conmon-" ID ".scope\n", NULL);
        /* docker, systemd and cgroupfs */
        expect_id("0::/system.slice/docker-" ID ".scope\n", ID);
        expect_id("11:devices:/docker/" ID "\n", ID);
        /* podman: systemd scope (and its "container" sub-cgroup), cgroupfs, machine.slice */
        expect_id("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID
                  ".scope/container\n", ID);
        expect_id("0::/machine.slice/libpod-" ID ".scope\n", ID);
        expect_id("9:name=systemd:/libpod_parent/libpod-" ID "\n0::/libpod_parent/libpod-" ID "\n", ID);
        expect_id("0::/machine.slice/libpod-conmon-" ID ".scope\n", NULL);
        /* a cgroup namespace shows paths relative to its root */
        expect_id("0::/../../kubepods-besteffort-" POD_ ".slice/cri-containerd-" ID ".scope\n", ID);
        /* hybrid: an empty v2 line first, the v1 lines name it */
        expect_id("0::/\n4:memory:/docker/" ID "\n", ID);
        /* the innermost container wins (docker in docker) */
        expect_id("0::/docker/" ID2 "/docker/" ID "\n", ID);
}

static void test_cgroup_not_containers(void **state)
{
        expect_id("0::/\n", NULL);
        expect_id("0::/init.scope\n", NULL);
        expect_id("0::/system.slice/containerd.service\n", NULL);
        expect_id("0::/user.slice/user-0.slice/session-1.scope\n", NULL);
        expect_id("0::/kubepods/burstable/" POD "\n", NULL); /* the pod, not a container */
        expect_id("0::/docker/" "0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF\n", NULL);
        expect_id("0::/docker/" "0123456789abcdef\n", NULL);         /* short */
        expect_id("0::/docker/" ID "0\n", NULL);                     /* 65 digits */
        expect_id("garbage without colons\n", NULL);
        expect_id("", NULL);
        expect_id("1:cpu\n", NULL);
        expect_id("1:cpu:", NULL);
}

static void test_cgroup_proc_root(void **state)
{
        char root[] = "/tmp/devlet-proc-XXXXXX";
        assert_non_null(mkdtemp(root));
        _cleanup_free_ char *dir = xasprintf("%s/4242", root);
        assert_int_equal(fs_mkdir_p(dir, 0755), 0);
        _cleanup_free_ char *file = xasprintf("%s/cgroup", dir);
        const char *text = "0::/kubepods/burstable/" POD "/" ID "\n";
        assert_int_equal(fs_write_atomic(file, text, strlen(text), 0644), 0);
        char id[ATTR_ID_LEN + 1];
        assert_int_equal(attr_cgroup_container_id(root, 4242, id), 0);
        assert_string_equal(id, ID);
        assert_int_equal(attr_cgroup_container_id(root, 4243, id), -ENOENT);
        unlink(file);
        rmdir(dir);
        rmdir(root);
}

/* ---- resolve.c ---- */

#define G0 "GPU-00000000-0000-0000-0000-000000000000"
#define G1 "GPU-11111111-1111-1111-1111-111111111111"
#define G2 "GPU-22222222-2222-2222-2222-222222222222"
#define M10 "MIG-aaaaaaaa-1111-0000-0000-000000000000"
#define M11 "MIG-bbbbbbbb-1111-0000-0000-000000000001"

/* GPU 0 and 2 plain, GPU 1 in MIG mode with two MIG devices */
static const struct {
        const char *uuid, *parent_uuid;
        unsigned gpu;
        int mig, minor;
        unsigned gi, ci;
} unit_defs[] = {
        { G0, G0, 0, -1, 0, 0, 0 },  { G1, G1, 1, -1, 1, 0, 0 },  { M10, G1, 1, 0, 1, 1, 0 },
        { M11, G1, 1, 1, 1, 2, 0 },  { G2, G2, 2, -1, 5, 0, 0 },
};
#define N_UNITS (sizeof(unit_defs) / sizeof(unit_defs[0]))
static struct dev_unit units[N_UNITS];
static const struct dev_attr_hints *nv = &nvidia_attr_hints;

/* The units as the NVIDIA sampler names them. */
static int units_setup(void **state)
{
        for (size_t i = 0; i < N_UNITS; i++) {
                struct dev_unit *u = &units[i];
                char ref[128];
                u->hints = nv;
                u->names = strv_push(u->names, unit_defs[i].uuid);
                if (unit_defs[i].mig < 0) {
                        u->whole = true;
                        snprintf(ref, sizeof(ref), "%u", unit_defs[i].gpu);
                        u->devnums = xcalloc(1, sizeof(*u->devnums));
                        u->devnums[0] = (struct dev_devnum){ 195, (unsigned)unit_defs[i].minor };
                        u->n_devnums = 1;
                } else {
                        snprintf(ref, sizeof(ref), "MIG-%s/%u/%u", unit_defs[i].parent_uuid,
                                 unit_defs[i].gi, unit_defs[i].ci);
                        u->names = strv_push(u->names, ref);
                        snprintf(ref, sizeof(ref), "%u:%d", unit_defs[i].gpu, unit_defs[i].mig);
                }
                u->local_names = strv_push(u->local_names, ref);
        }
        return 0;
}

static int units_teardown(void **state)
{
        struct dev_sample smp = { .units = xcalloc(N_UNITS, sizeof(struct dev_unit)), .n_units = N_UNITS };
        memcpy(smp.units, units, sizeof(units));
        dev_sample_release(&smp);
        return 0;
}

/* Resolves ref and returns the units as "i,j" text. */
static char *resolved(const char *ref, bool all_ok)
{
        size_t out[8];
        size_t n = attr_resolve(units, N_UNITS, nv, ref, all_ok, out, 8);
        char *s = xstrdup("");
        for (size_t i = 0; i < n && i < 8; i++) {
                char *t = xasprintf("%s%s%zu", s, i ? "," : "", out[i]);
                free(s);
                s = t;
        }
        return s;
}

static void expect_resolve(const char *ref, bool all_ok, const char *want)
{
        _cleanup_free_ char *got = resolved(ref, all_ok);
        if (strcmp(got, want) != 0)
                fail_msg("ref \"%s\": want \"%s\", got \"%s\"", ref, want, got);
}

static void test_resolve_forms(void **state)
{
        expect_resolve(G2, false, "4");
        expect_resolve("gpu-22222222-2222-2222-2222-222222222222", false, "4"); /* case */
        expect_resolve(" " G0 " ", false, "0");
        expect_resolve(M11, false, "3");
        expect_resolve("MIG-" G1 "/2/0", false, "3"); /* the pre-R470 MIG form */
        expect_resolve("MIG-" G1 "/9/0", false, "");
        expect_resolve("0", false, "0");
        expect_resolve("2", false, "4");
        expect_resolve("1", false, "1");
        expect_resolve("7", false, "");
        expect_resolve("1:0", false, "2");
        expect_resolve("1:1", false, "3");
        expect_resolve("0:0", false, "");
        /* replicas of time-shared devices */
        expect_resolve(G2 "::0", false, "4");
        expect_resolve(G2 "::17", false, "4");
        expect_resolve("1:1::3", false, "3");
        expect_resolve("2::1", false, "4");
        expect_resolve(G2 "::x", false, "");
        /* all: only where the caller allows it; whole GPUs only */
        expect_resolve("all", true, "0,1,4");
        expect_resolve("all", false, "");
        /* garbage */
        expect_resolve("", false, "");
        expect_resolve("GPU-", false, "");
        expect_resolve("GPU-ffff", false, "");
        expect_resolve("-1", false, "");
        expect_resolve("1:", false, "");
        expect_resolve(":1", false, "");
        expect_resolve("99999999999", false, "");
        expect_resolve("nvidia0", false, "");

        assert_int_equal(attr_resolve_devnum(units, N_UNITS, (struct dev_devnum){ 195, 5 }), 4);
        assert_int_equal(attr_resolve_devnum(units, N_UNITS, (struct dev_devnum){ 195, 1 }), 1); /* the GPU, not its MIG devices */
        assert_int_equal(attr_resolve_devnum(units, N_UNITS, (struct dev_devnum){ 195, 7 }), -1);

        /* out[] too small: the count still says how many */
        size_t one[1];
        assert_int_equal(attr_resolve(units, N_UNITS, nv, "all", true, one, 1), 3);
        assert_int_equal(one[0], 0);
}

static char *joined(char **v)
{
        char *s = xstrdup("");
        for (size_t i = 0; v && v[i]; i++) {
                char *t = xasprintf("%s%s%s", s, i ? "|" : "", v[i]);
                free(s);
                s = t;
        }
        return s;
}

static void expect_nvd(const char *value, const char *want)
{
        _cleanup_strv_free_ char **refs = attr_visible_devices(value, NULL);
        _cleanup_free_ char *got = joined(refs);
        if (strcmp(got, want) != 0)
                fail_msg("NVIDIA_VISIBLE_DEVICES=\"%s\": want \"%s\", got \"%s\"", value, want, got);
}

static void test_visible_devices_forms(void **state)
{
        expect_nvd("", "");
        expect_nvd("   ", "");
        expect_nvd("none", "");
        expect_nvd("void", "");
        expect_nvd("all", "all");
        expect_nvd(" all ", "all");
        expect_nvd(G0, G0);
        expect_nvd("0", "0");
        expect_nvd("0,2", "0|2");
        expect_nvd(G0 "," G2, G0 "|" G2);
        expect_nvd(" 0 , " G2 " ,, ", "0|" G2);
        expect_nvd(M10, M10);
        expect_nvd("1:0,1:1", "1:0|1:1");
        expect_nvd("MIG-" G1 "/1/0", "MIG-" G1 "/1/0");
        expect_nvd(G2 "::3", G2 "::3");
        /* and each resolves */
        _cleanup_strv_free_ char **refs = attr_visible_devices("0, 1:1 ," M10 ",MIG-" G1 "/1/0," G2 "::1", NULL);
        const char *want[] = { "0", "3", "2", "2", "4" };
        for (size_t i = 0; i < 5; i++) {
                _cleanup_free_ char *got = resolved(refs[i], false);
                assert_string_equal(got, want[i]);
        }
}

static char **attr_cdi_device_nv(const char *qualified, char **refs)
{
        return attr_cdi_device(qualified, nv->cdi_vendor, refs);
}

static void test_cdi_names(void **state)
{
        char **refs = NULL;
        refs = attr_cdi_device_nv("nvidia.com/gpu=0", refs);
        refs = attr_cdi_device_nv("nvidia.com/gpu=" G2, refs);
        refs = attr_cdi_device_nv("nvidia.com/mig=1:1", refs);
        refs = attr_cdi_device_nv("nvidia.com/gpu=all", refs);
        refs = attr_cdi_device_nv("vendor.com/fpga=0", refs);
        refs = attr_cdi_device_nv("nvidia.com/gpu=", refs);
        refs = attr_cdi_device_nv("nvidia.com/gpu", refs);
        refs = attr_cdi_device_nv("nvidia.com=0", refs);
        refs = attr_cdi_device_nv("management.nvidia.com/gpu=all", refs);
        _cleanup_free_ char *got = joined(refs);
        assert_string_equal(got, "0|" G2 "|1:1|all");
        strv_free(refs);
}

/* ---- ocispec.c ---- */

static struct attr_spec *parse(const char *json)
{
        struct attr_spec *s = NULL;
        struct diag diag = { 0 };
        int r = attr_spec_parse(json, strlen(json), ID, "cdi.k8s.io/", &nv, 1, &s, &diag);
        if (r < 0)
                fail_msg("parse failed: %s", diag.message);
        return s;
}

DEFINE_CLEANUP_FUNC(struct attr_spec, attr_spec_free)
#define _cleanup_spec_ _cleanup_(attr_spec_freep)

#define PRIV_CAPS "\"capabilities\":{\"bounding\":[\"CAP_CHOWN\",\"CAP_SYS_ADMIN\"]}"
#define PLAIN_CAPS "\"capabilities\":{\"bounding\":[\"CAP_CHOWN\",\"CAP_KILL\"]}"

static void test_spec_containerd_names_and_env(void **state)
{
        _cleanup_spec_ struct attr_spec *s = parse(
                "{\"ociVersion\":\"1.1.0\",\"process\":{\"env\":[\"PATH=/bin\","
                "\"NVIDIA_VISIBLE_DEVICES=all\",\"NVIDIA_VISIBLE_DEVICES=" G2 ",1:0\"]," PLAIN_CAPS "},"
                "\"annotations\":{\"io.kubernetes.cri.sandbox-name\":\"trainer-0\","
                "\"io.kubernetes.cri.sandbox-namespace\":\"ml\",\"io.kubernetes.cri.container-name\":\"main\","
                "\"io.kubernetes.cri.container-type\":\"container\"}}");
        assert_string_equal(s->id, ID);
        assert_string_equal(s->pod, "trainer-0");
        assert_string_equal(s->namespace, "ml");
        assert_string_equal(s->container, "main");
        assert_false(s->sandbox);
        assert_false(s->privileged);
        _cleanup_free_ char *refs = joined(s->refs);
        assert_string_equal(refs, G2 "|1:0"); /* the last definition wins */
}

static void test_spec_crio_names(void **state)
{
        _cleanup_spec_ struct attr_spec *s = parse(
                "{\"annotations\":{\"io.kubernetes.pod.name\":\"web\",\"io.kubernetes.pod.namespace\":\"prod\","
                "\"io.kubernetes.container.name\":\"nginx\",\"io.kubernetes.cri-o.ContainerType\":\"container\"}}");
        assert_string_equal(s->pod, "web");
        assert_string_equal(s->namespace, "prod");
        assert_string_equal(s->container, "nginx");
        assert_null(s->refs);
        _cleanup_spec_ struct attr_spec *sb = parse(
                "{\"annotations\":{\"io.kubernetes.pod.name\":\"web\",\"io.kubernetes.cri-o.ContainerType\":\"sandbox\"}}");
        assert_true(sb->sandbox);
        _cleanup_spec_ struct attr_spec *sb2 = parse(
                "{\"annotations\":{\"io.kubernetes.cri.container-type\":\"sandbox\"}}");
        assert_true(sb2->sandbox);
        assert_null(sb2->pod);
}

static void test_spec_all_needs_privilege(void **state)
{
        _cleanup_spec_ struct attr_spec *plain = parse(
                "{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=all\"]," PLAIN_CAPS "}}");
        assert_null(plain->refs);
        _cleanup_spec_ struct attr_spec *priv = parse(
                "{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=all\"]," PRIV_CAPS "}}");
        assert_true(priv->privileged);
        _cleanup_free_ char *refs = joined(priv->refs);
        assert_string_equal(refs, "all");
        _cleanup_spec_ struct attr_spec *none = parse(
                "{\"process\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=void\"]," PRIV_CAPS "}}");
        assert_null(none->refs);
}

static void test_spec_mounts_cdi_devices(void **state)
{
        _cleanup_spec_ struct attr_spec *s = parse(
                "{\"process\":{" PLAIN_CAPS "},"
                "\"mounts\":[{\"destination\":\"/proc\",\"source\":\"proc\"},"
                "{\"destination\":\"/var/run/nvidia-container-devices/" G0 "\",\"source\":\"/dev/null\"},"
                "{\"destination\":\"/var/run/nvidia-container-devices/1:1\",\"source\":\"/dev/null\"},"
                "{\"destination\":\"/var/run/nvidia-container-devices/a/b\",\"source\":\"/dev/null\"},"
                "{\"destination\":\"/var/run/nvidia-container-devices/\",\"source\":\"/dev/null\"}],"
                "\"annotations\":{\"cdi.k8s.io/devlet_gpu\":\"nvidia.com/gpu=2,nvidia.com/gpu=" M10 "\","
                "\"other.io/x\":\"nvidia.com/gpu=0\",\"cdi.k8s.io/fpga\":\"acme.com/fpga=1\","
                "\"cdi.k8s.io/bad\":7},"
                "\"linux\":{\"devices\":[{\"path\":\"/dev/nvidia1\",\"type\":\"c\",\"major\":195,\"minor\":1},"
                "{\"path\":\"/dev/nvidiactl\",\"type\":\"c\",\"major\":195,\"minor\":255},"
                "{\"path\":\"/dev/nvidia-modeset\",\"type\":\"c\",\"major\":195,\"minor\":254},"
                "{\"path\":\"/dev/nvidia-uvm\",\"type\":\"c\",\"major\":510,\"minor\":0},"
                "{\"path\":\"/dev/nvidia5\",\"type\":\"c\",\"major\":195,\"minor\":5},"
                "{\"path\":\"/dev/sda\",\"type\":\"b\",\"major\":195,\"minor\":2},"
                "{\"path\":\"/dev/odd\",\"type\":\"c\",\"major\":\"195\",\"minor\":3}]}}");
        _cleanup_free_ char *refs = joined(s->refs);
        assert_string_equal(refs, "2|" M10 "|" G0 "|1:1");
        assert_int_equal(s->n_devnums, 2);
        assert_int_equal(s->devnums[0].minor, 1);
        assert_int_equal(s->devnums[1].minor, 5);
        assert_null(s->pod);
}

static void test_spec_privileged_ignores_devices(void **state)
{
        /* a privileged container gets every host device node */
        _cleanup_spec_ struct attr_spec *s = parse(
                "{\"process\":{" PRIV_CAPS "},\"linux\":{\"devices\":["
                "{\"path\":\"/dev/nvidia0\",\"type\":\"c\",\"major\":195,\"minor\":0}]}}");
        assert_int_equal(s->n_devnums, 0);
}

static void test_spec_malformed(void **state)
{
        const char *bad[] = { "", "[]", "\"x\"", "{", "{\"process\":", "null", NULL };
        for (size_t i = 0; bad[i]; i++) {
                struct attr_spec *s = NULL;
                struct diag diag = { 0 };
                assert_int_equal(attr_spec_parse(bad[i], strlen(bad[i]), ID, "cdi.k8s.io/", &nv, 1, &s, &diag), -EINVAL);
                assert_null(s);
                assert_true(diag.message[0] != '\0');
        }
        /* wrong types everywhere are ignored, not fatal */
        _cleanup_spec_ struct attr_spec *s = parse(
                "{\"process\":{\"env\":\"NVIDIA_VISIBLE_DEVICES=0\",\"capabilities\":[1]},"
                "\"mounts\":{},\"annotations\":[],\"linux\":{\"devices\":[1,null,{}]}}");
        assert_null(s->refs);
        _cleanup_spec_ struct attr_spec *s2 = parse(
                "{\"process\":{\"env\":[1,null,\"NVIDIA_VISIBLE_DEVICES=0\"]},"
                "\"annotations\":{\"io.kubernetes.cri.sandbox-name\":5}}");
        _cleanup_free_ char *refs = joined(s2->refs);
        assert_string_equal(refs, "0");
        assert_null(s2->pod);
}

static char tmpdir[64];

static void write_file(const char *rel, const char *text)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", tmpdir, rel);
        _cleanup_free_ char *dir = xstrdup(path);
        *strrchr(dir, '/') = '\0';
        assert_int_equal(fs_mkdir_p(dir, 0755), 0);
        assert_int_equal(fs_write_atomic(path, text, strlen(text), 0644), 0);
}

static void test_spec_cache(void **state)
{
        strcpy(tmpdir, "/tmp/devlet-specs-XXXXXX");
        assert_non_null(mkdtemp(tmpdir));
        _cleanup_free_ char *d1 = xasprintf("%s/containerd", tmpdir);
        _cleanup_free_ char *d2 = xasprintf("%s/crio", tmpdir);
        char missing[] = "/nonexistent/dir";
        char *dirs[] = { d1, d2, missing, NULL };
        struct attr_specs *c = attr_specs_new(dirs, NULL, &nv, 1);

        write_file("containerd/" ID "/config.json",
                   "{\"annotations\":{\"io.kubernetes.cri.sandbox-name\":\"a\"}}");
        write_file("crio/" ID2 "/userdata/config.json",
                   "{\"annotations\":{\"io.kubernetes.pod.name\":\"b\"}}");
        write_file("crio/broken/userdata/config.json", "{not json");
        write_file("crio/.hidden/userdata/config.json", "{}");
        write_file("containerd/empty-dir/.keep", "");
        assert_int_equal(attr_specs_scan(c), 2);
        assert_int_equal(attr_specs_parsed(c), 3);
        assert_string_equal(attr_specs_find(c, ID)->pod, "a");
        assert_string_equal(attr_specs_find(c, ID2)->pod, "b");
        assert_null(attr_specs_find(c, "broken"));
        assert_int_equal(attr_specs_count(c), 3);

        /* unchanged files are not read again */
        assert_int_equal(attr_specs_scan(c), 2);
        assert_int_equal(attr_specs_parsed(c), 3);

        /* a rewrite (new inode through rename) is read again */
        write_file("containerd/" ID "/config.json",
                   "{\"annotations\":{\"io.kubernetes.cri.sandbox-name\":\"a2\"}}");
        assert_int_equal(attr_specs_scan(c), 2);
        assert_int_equal(attr_specs_parsed(c), 4);
        assert_string_equal(attr_specs_find(c, ID)->pod, "a2");

        /* a spec over the size limit is skipped */
        _cleanup_free_ char *big = xmalloc(ATTR_SPEC_MAX_BYTES + 16);
        memset(big, ' ', ATTR_SPEC_MAX_BYTES + 15);
        big[0] = '{';
        big[ATTR_SPEC_MAX_BYTES + 14] = '}';
        big[ATTR_SPEC_MAX_BYTES + 15] = '\0';
        write_file("crio/" ID2 "/userdata/config.json", big);
        assert_int_equal(attr_specs_scan(c), 1);
        assert_null(attr_specs_find(c, ID2));

        /* a FIFO does not block the scan */
        _cleanup_free_ char *fifo_dir = xasprintf("%s/containerd/fifo", tmpdir);
        _cleanup_free_ char *fifo = xasprintf("%s/config.json", fifo_dir);
        assert_int_equal(fs_mkdir_p(fifo_dir, 0755), 0);
        assert_int_equal(mkfifo(fifo, 0600), 0);
        assert_int_equal(attr_specs_scan(c), 1);

        /* a container gone from disk is dropped */
        _cleanup_free_ char *gone = xasprintf("%s/containerd/" ID "/config.json", tmpdir);
        unlink(gone);
        assert_int_equal(attr_specs_scan(c), 0);
        assert_null(attr_specs_find(c, ID));
        attr_specs_free(c);

        _cleanup_free_ char *cmd = xasprintf("rm -rf %s", tmpdir);
        assert_int_equal(system(cmd), 0);
}

/* ---- podres.c ---- */

static void test_podres_unpack(void **state)
{
        char id_r0[] = G2 "::0", id_1[] = "1", id_r1[] = G2 "::1", shared[] = "nvidia.com/gpu.shared";
        char cdi_name[] = "nvidia.com/gpu=0", name_a[] = "a", name_b[] = "b";
        char pod_a[] = "pod-a", pod_b[] = "pod-b", ns[] = "ns";
        char *ids1[] = { id_r0, id_1 };
        char *ids2[] = { id_r1 };
        V1__ContainerDevices d1, d2;
        v1__container_devices__init(&d1);
        v1__container_devices__init(&d2);
        d1.resource_name = shared;
        d1.n_device_ids = 2;
        d1.device_ids = ids1;
        d2.resource_name = shared;
        d2.n_device_ids = 1;
        d2.device_ids = ids2;
        V1__ContainerDevices *devs1[] = { &d1 }, *devs2[] = { &d2 };
        V1__CDIDevice cdi;
        v1__cdidevice__init(&cdi);
        cdi.name = cdi_name;
        V1__CDIDevice *cdis[] = { &cdi };
        V1__ClaimResource claim;
        v1__claim_resource__init(&claim);
        claim.n_cdi_devices = 1;
        claim.cdi_devices = cdis;
        V1__ClaimResource *claims[] = { &claim };
        V1__DynamicResource dyn;
        v1__dynamic_resource__init(&dyn);
        dyn.n_claim_resources = 1;
        dyn.claim_resources = claims;
        V1__DynamicResource *dyns[] = { &dyn };
        V1__ContainerResources c1, c2;
        v1__container_resources__init(&c1);
        v1__container_resources__init(&c2);
        c1.name = name_a;
        c1.n_devices = 1;
        c1.devices = devs1;
        c2.name = name_b;
        c2.n_devices = 1;
        c2.devices = devs2;
        c2.n_dynamic_resources = 1;
        c2.dynamic_resources = dyns;
        V1__ContainerResources *cs1[] = { &c1 }, *cs2[] = { &c2 };
        V1__PodResources p1, p2;
        v1__pod_resources__init(&p1);
        v1__pod_resources__init(&p2);
        p1.name = pod_a;
        p1.namespace_ = ns;
        p1.n_containers = 1;
        p1.containers = cs1;
        p2.name = pod_b;
        p2.namespace_ = ns;
        p2.n_containers = 1;
        p2.containers = cs2;
        V1__PodResources *pods[] = { &p1, &p2 };
        V1__ListPodResourcesResponse resp;
        v1__list_pod_resources_response__init(&resp);
        resp.n_pod_resources = 2;
        resp.pod_resources = pods;
        size_t len = v1__list_pod_resources_response__get_packed_size(&resp);
        _cleanup_free_ uint8_t *buf = xmalloc(len);
        v1__list_pod_resources_response__pack(&resp, buf);

        struct attr_podres *p = NULL;
        assert_int_equal(attr_podres_unpack(buf, len, &p), 0);
        assert_int_equal(p->n, 4);
        assert_string_equal(p->entries[0].device, G2 "::0");
        assert_string_equal(p->entries[0].pod, "pod-a");
        assert_string_equal(p->entries[0].container, "a");
        assert_string_equal(p->entries[1].device, "1");
        assert_string_equal(p->entries[2].device, G2 "::1");
        assert_string_equal(p->entries[2].pod, "pod-b");
        assert_string_equal(p->entries[3].resource, "");
        assert_string_equal(p->entries[3].device, "nvidia.com/gpu=0");
        attr_podres_free(p);

        /* garbage is refused */
        const uint8_t junk[] = { 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f };
        p = NULL;
        assert_int_equal(attr_podres_unpack(junk, sizeof(junk), &p), -EBADMSG);
        assert_null(p);
        /* an empty message is an empty table */
        assert_int_equal(attr_podres_unpack(NULL, 0, &p), 0);
        assert_int_equal(p->n, 0);
        attr_podres_free(p);

        assert_true(attr_hints_for_resource(&nv, 1, "nvidia.com/gpu") == nv);
        assert_true(attr_hints_for_resource(&nv, 1, "nvidia.com/mig-1g.10gb") == nv);
        assert_false(attr_hints_for_resource(&nv, 1, "example.com/gpu"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cgroup_runtimes),
                cmocka_unit_test(test_cgroup_not_containers),
                cmocka_unit_test(test_cgroup_proc_root),
                cmocka_unit_test(test_resolve_forms),
                cmocka_unit_test(test_visible_devices_forms),
                cmocka_unit_test(test_cdi_names),
                cmocka_unit_test(test_spec_containerd_names_and_env),
                cmocka_unit_test(test_spec_crio_names),
                cmocka_unit_test(test_spec_all_needs_privilege),
                cmocka_unit_test(test_spec_mounts_cdi_devices),
                cmocka_unit_test(test_spec_privileged_ignores_devices),
                cmocka_unit_test(test_spec_malformed),
                cmocka_unit_test(test_spec_cache),
                cmocka_unit_test(test_podres_unpack),
        };
        return cmocka_run_group_tests(tests, units_setup, units_teardown);
}

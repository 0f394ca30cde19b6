/* Unit tests for cdi/: the name rules, spec validation (a malformed spec is
 * never rendered nor written), the minimum cdiVersion, YAML/JSON rendering
 * (read back with libyaml and jansson) and specs built from the device
 * model. */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <yaml.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/xalloc.h"
#include "cdi/cdi.h"
#include "cdi/generate.h"
#include "devices/nvidia/cdi.h"
#include "cdi/spec.h"

DEFINE_CLEANUP_FUNC(struct cdi_spec, cdi_spec_free)
#define _cleanup_spec_ _cleanup_(cdi_spec_freep)

/* A spec that passes every rule; tests break one thing at a time. */
static struct cdi_spec *good_spec(void)
{
        struct cdi_spec *s = cdi_spec_new("vendor.com/gpu");
        struct cdi_device *d = cdi_spec_add_device(s, "gpu0");
        struct cdi_device_node *n = cdi_edits_add_node(&d->edits, "/dev/gpu0", NULL, "rw");
        n->type = 'c';
        n->major = 195;
        n->minor = 0;
        cdi_edits_add_env(&s->edits, "VENDOR_VISIBLE", "all");
        static const char *const opts[] = { "ro", "nosuid", "nodev", "bind", NULL };
        cdi_edits_add_mount(&s->edits, "/usr/lib/libfoo.so.1", "/usr/lib/libfoo.so.1", NULL, opts);
        static const char *const args[] = { "hook", "update-ldcache", "--folder", "/usr/lib", NULL };
        cdi_edits_add_hook(&s->edits, "createContainer", "/usr/bin/hook", args, NULL);
        return s;
}

static void assert_invalid(struct cdi_spec *s, const char *needle)
{
        struct diag err = { 0 };
        assert_int_equal(cdi_spec_validate(s, &err), -EINVAL);
        assert_true(err.message[0] != '\0');
        if (!strstr(err.message, needle))
                fail_msg("error \"%s\" does not mention \"%s\"", err.message, needle);
        _cleanup_free_ char *out = NULL;
        struct diag diag = { 0 };
        size_t len = 0;
        assert_int_equal(cdi_spec_render(s, CDI_FORMAT_YAML, &out, &len, &diag), -EINVAL);
        assert_null(out);
}

/* ---- names ---- */

static void test_kind_names(void **state)
{
        static const char *const good[] = { "vendor.com/foo", "foo.bar.baz/foo-bar123.B_az",
                                            "nvidia.com/gpu", "k8s.device-plugin.nvidia.com/gpu",
                                            "devlet.io/fuse", "ab/cd", "Vendor_x/Class-9" };
        static const char *const bad[] = { "foo",          "vendor.com/foo/", "vendor.com/foo/bar",
                                           "/foo",         "vendor.com/",     "",
                                           "1vendor.com/foo", "vendor.com/1foo", "vendor.com-/foo",
                                           "vendor.com/foo-", "vendor com/foo", "vendor.com/fo o",
                                           "a/foo",        "vendor.com/b",    "vendor.com/f=o",
                                           "vendör.com/foo" };
        for (size_t i = 0; i < ARRAY_SIZE(good); i++)
                if (!cdi_valid_kind(good[i]))
                        fail_msg("kind \"%s\" refused", good[i]);
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (cdi_valid_kind(bad[i]))
                        fail_msg("kind \"%s\" accepted", bad[i]);
        assert_false(cdi_valid_kind(NULL));

        /* class at most 63 characters, vendor at most 253 */
        char klass[80], vendor[300], kind[400];
        memset(klass, 'c', 63);
        klass[63] = '\0';
        snprintf(kind, sizeof(kind), "v.com/%s", klass);
        assert_true(cdi_valid_kind(kind));
        klass[63] = 'c';
        klass[64] = '\0';
        snprintf(kind, sizeof(kind), "v.com/%s", klass);
        assert_false(cdi_valid_kind(kind));
        memset(vendor, 'v', 253);
        vendor[253] = '\0';
        snprintf(kind, sizeof(kind), "%s/gpu", vendor);
        assert_true(cdi_valid_kind(kind));
        vendor[253] = 'v';
        vendor[254] = '\0';
        snprintf(kind, sizeof(kind), "%s/gpu", vendor);
        assert_false(cdi_valid_kind(kind));

        assert_true(cdi_valid_vendor("nvidia.com"));
        assert_false(cdi_valid_vendor("nvidia.com/"));
        assert_true(cdi_valid_class("gpu"));
        assert_false(cdi_valid_class("g/pu"));
}

static void test_device_names(void **state)
{
        static const char *const good[] = { "0", "7", "0:1", "12:3", "all", "gpu0",
                                            "GPU-8f6b3c2e-1d1c-4a63-9f5e-0123456789ab",
                                            "MIG-1f2e3d4c-5b6a-7988-0a1b-2c3d4e5f6a7b",
                                            "fuse-0", "a_b.c:d-e", "usb-046d-0825-ABC123" };
        static const char *const bad[] = { "", "-a", "a-", ":0", "0:", "a b", "a/b", "a=b",
                                           "_x", "x_", ".x", "x.", "caf\xc3\xa9", "a\nb" };
        for (size_t i = 0; i < ARRAY_SIZE(good); i++)
                if (!cdi_valid_device_name(good[i]))
                        fail_msg("device name \"%s\" refused", good[i]);
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (cdi_valid_device_name(bad[i]))
                        fail_msg("device name \"%s\" accepted", bad[i]);
        assert_false(cdi_valid_device_name(NULL));
}

/* ---- validation ---- */

static void test_good_spec(void **state)
{
        _cleanup_spec_ struct cdi_spec *s = good_spec();
        struct diag err = { 0 };
        assert_int_equal(cdi_spec_validate(s, &err), 0);
        assert_string_equal(err.message, "");
        assert_ptr_equal(cdi_spec_find_device(s, "gpu0"), &s->devices[0]);
        assert_null(cdi_spec_find_device(s, "gpu1"));
}

static void test_invalid_kind(void **state)
{
        _cleanup_spec_ struct cdi_spec *s = good_spec();
        free(s->kind);
        s->kind = xstrdup("vendor.com/gpu/x");
        assert_invalid(s, "invalid kind");
}

static void test_no_devices(void **state)
{
        _cleanup_spec_ struct cdi_spec *s = cdi_spec_new("vendor.com/gpu");
        cdi_edits_add_env(&s->edits, "A", "1");
        assert_invalid(s, "at least one device");
}

static void test_bad_device_name(void **state)
{
        _cleanup_spec_ struct cdi_spec *s = good_spec();
        struct cdi_device *d = cdi_spec_add_device(s, "bad name");
        cdi_edits_add_env(&d->edits, "A", "1");
        assert_invalid(s, "invalid device name \"bad name\"");
}

static void test_duplicate_device(void **state)
{
        _cleanup_spec_ struct cdi_spec *s = good_spec();
        struct cdi_device *d = cdi_spec_add_device(s, "gpu0");
        cdi_edits_add_env(&d->edits, "A", "1");
        assert_invalid(s, "appears twice");
}

static void test_empty_device_edits(void **state)
{
        _cleanup_spec_ struct cdi_spec *s = good_spec();
        cdi_spec_add_device(s, "gpu1");
        assert_invalid(s, "no container edits");
}

static void test_bad_env(void **state)
{
        _cleanup_spec_ struct cdi_spec *s = good_spec();
        s->devices[0].edits.env = strv_push(xcalloc(1, sizeof(char *)), "NOEQUALS");
        assert_invalid(s, "NOEQUALS");
        strv_free(s->devices[0].edits.env);
        s->devices[0].edits.env = strv_push(xcalloc(1, sizeof(char *)), "=value");
        assert_invalid(s, "not KEY=VALUE");
}

static void test_bad_nodes(void **state)
{
        {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                cdi_edits_add_node(&s->devices[0].edits, "dev/gpu1", NULL, NULL);
                assert_invalid(s, "not absolute");
        }
        {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                cdi_edits_add_node(&s->devices[0].edits, "/dev/gpu1", "relative/gpu1", NULL);
                assert_invalid(s, "host path \"relative/gpu1\"");
        }
        {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                cdi_edits_add_node(&s->devices[0].edits, "/dev/gpu1", NULL, NULL)->type = 'x';
                assert_invalid(s, "invalid type 'x'");
        }
        {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                struct cdi_device_node *n = cdi_edits_add_node(&s->edits, "/dev/gpu1", NULL, NULL);
                n->type = 'c';
                n->minor = -1;
                assert_invalid(s, "negative");
        }
        static const char *const perms[] = { "rwx", "", "r w", "none" };
        for (size_t i = 0; i < ARRAY_SIZE(perms); i++) {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                cdi_edits_add_node(&s->devices[0].edits, "/dev/gpu1", NULL, perms[i]);
                assert_invalid(s, "invalid permissions");
        }
        {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                cdi_edits_add_node(&s->devices[0].edits, "/dev/gpu1", NULL, NULL)->file_mode = 010000;
                assert_invalid(s, "file mode");
        }
}

static void test_bad_mounts(void **state)
{
        {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                cdi_edits_add_mount(&s->devices[0].edits, "lib/x", "/lib/x", NULL, NULL);
                assert_invalid(s, "paths must be absolute");
        }
        {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                cdi_edits_add_mount(&s->devices[0].edits, "/lib/x", "", NULL, NULL);
                assert_invalid(s, "paths must be absolute");
        }
        {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                static const char *const opts[] = { "ro", "", NULL };
                cdi_edits_add_mount(&s->edits, "/lib/x", "/lib/x", NULL, opts);
                assert_invalid(s, "empty option");
        }
        {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                cdi_edits_add_mount(&s->edits, "/lib/x", "/lib/x", "", NULL);
                assert_invalid(s, "empty type");
        }
}

static void test_bad_hooks(void **state)
{
        {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                cdi_edits_add_hook(&s->edits, "beforeStart", "/usr/bin/hook", NULL, NULL);
                assert_invalid(s, "invalid hook name \"beforeStart\"");
        }
        {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                cdi_edits_add_hook(&s->edits, "createContainer", "hook", NULL, NULL);
                assert_invalid(s, "is not absolute");
        }
        {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                static const char *const env[] = { "PATH", NULL };
                cdi_edits_add_hook(&s->devices[0].edits, "poststop", "/bin/true", NULL, env);
                assert_invalid(s, "env entry \"PATH\"");
        }
        static const char *const names[] = { "prestart",       "createRuntime", "createContainer",
                                             "startContainer", "poststart",     "poststop" };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                _cleanup_spec_ struct cdi_spec *s = good_spec();
                cdi_edits_add_hook(&s->edits, names[i], "/bin/true", NULL, NULL);
                struct diag err = { 0 };
                assert_int_equal(cdi_spec_validate(s, &err), 0);
        }
}

/* ---- version ---- */

static void test_min_version(void **state)
{
        _cleanup_spec_ struct cdi_spec *s = good_spec();
        assert_string_equal(cdi_spec_min_version(s), "0.3.0");

        /* a mount type: 0.4.0 */
        cdi_edits_add_mount(&s->devices[0].edits, "/a", "/b", "bind", NULL);
        assert_string_equal(cdi_spec_min_version(s), "0.4.0");

        /* a digit-first device name: 0.5.0 */
        struct cdi_device *d = cdi_spec_add_device(s, "0");
        cdi_edits_add_env(&d->edits, "A", "1");
        assert_string_equal(cdi_spec_min_version(s), "0.5.0");

        /* a host path, in the spec-wide edits: 0.5.0 */
        _cleanup_spec_ struct cdi_spec *h = good_spec();
        cdi_edits_add_node(&h->edits, "/dev/x", "/host/dev/x", NULL);
        assert_string_equal(cdi_spec_min_version(h), "0.5.0");
        /* a host path equal to the path is left out */
        _cleanup_spec_ struct cdi_spec *same = good_spec();
        assert_null(cdi_edits_add_node(&same->edits, "/dev/x", "/dev/x", NULL)->host_path);
        assert_string_equal(cdi_spec_min_version(same), "0.3.0");

        /* a dot in the class: 0.6.0 (dots in the vendor are older than that) */
        _cleanup_spec_ struct cdi_spec *c = good_spec();
        free(c->kind);
        c->kind = xstrdup("vendor.com/gpu.shared");
        assert_string_equal(cdi_spec_min_version(c), "0.6.0");
}

/* ---- rendering ---- */

/* Reads YAML back with libyaml and returns the scalar events as
 * "value|tag-implicit" lines, to check what a reader resolves. */
static char *yaml_scalars(const char *text, size_t len)
{
        yaml_parser_t p;
        yaml_parser_initialize(&p);
        yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        for (;;) {
                yaml_event_t ev;
                assert_true(yaml_parser_parse(&p, &ev));
                if (ev.type == YAML_SCALAR_EVENT)
                        fprintf(f, "%s|%s\n", (const char *)ev.data.scalar.value,
                                ev.data.scalar.plain_implicit ? "plain" : "quoted");
                bool end = ev.type == YAML_STREAM_END_EVENT;
                yaml_event_delete(&ev);
                if (end)
                        break;
        }
        yaml_parser_delete(&p);
        fclose(f);
        return buf;
}

static void test_render_yaml(void **state)
{
        _cleanup_spec_ struct cdi_spec *s = good_spec();
        static const char *const names[] = { "0", "1:0", "on", "null", "Yes", "GPU-abc" };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                struct cdi_device *d = cdi_spec_add_device(s, names[i]);
                cdi_edits_add_env(&d->edits, "N", names[i]);
        }
        _cleanup_free_ char *out = NULL;
        size_t len = 0;
        assert_int_equal(cdi_spec_render(s, CDI_FORMAT_YAML, &out, &len, NULL), 0);
        assert_int_equal(strlen(out), len);
        static const char head[] = "---\ncdiVersion: \"0.5.0\"\nkind: vendor.com/gpu\ndevices:\n";
        assert_memory_equal(out, head, strlen(head));
        /* strings a reader could take for numbers or booleans are quoted; the
         * device numbers are plain integers */
        _cleanup_free_ char *scalars = yaml_scalars(out, len);
        static const char *const want[] = { "0|quoted\n",    "1:0|quoted\n", "on|quoted\n",
                                            "null|quoted\n", "Yes|quoted\n", "GPU-abc|plain\n",
                                            "major|plain\n195|plain\n", "minor|plain\n0|plain\n",
                                            "N=0|plain\n",   "hookName|plain\ncreateContainer|plain\n",
                                            "--folder|quoted\n" };
        for (size_t i = 0; i < ARRAY_SIZE(want); i++)
                if (!strstr(scalars, want[i]))
                        fail_msg("missing \"%s\" in:\n%s", want[i], scalars);
}

static void test_render_json(void **state)
{
        _cleanup_spec_ struct cdi_spec *s = good_spec();
        _cleanup_free_ char *out = NULL;
        size_t len = 0;
        assert_int_equal(cdi_spec_render(s, CDI_FORMAT_JSON, &out, &len, NULL), 0);
        json_error_t jerr;
        json_auto_t *root = json_loads(out, 0, &jerr);
        assert_non_null(root);
        assert_string_equal(json_string_value(json_object_get(root, "cdiVersion")), "0.3.0");
        assert_string_equal(json_string_value(json_object_get(root, "kind")), "vendor.com/gpu");
        json_t *dev = json_array_get(json_object_get(root, "devices"), 0);
        assert_string_equal(json_string_value(json_object_get(dev, "name")), "gpu0");
        json_t *node = json_array_get(
                json_object_get(json_object_get(dev, "containerEdits"), "deviceNodes"), 0);
        assert_string_equal(json_string_value(json_object_get(node, "path")), "/dev/gpu0");
        assert_null(json_object_get(node, "hostPath"));
        assert_string_equal(json_string_value(json_object_get(node, "type")), "c");
        assert_int_equal(json_integer_value(json_object_get(node, "major")), 195);
        assert_int_equal(json_integer_value(json_object_get(node, "minor")), 0);
        assert_null(json_object_get(node, "fileMode"));
        json_t *edits = json_object_get(root, "containerEdits");
        assert_string_equal(json_string_value(json_array_get(json_object_get(edits, "env"), 0)),
                            "VENDOR_VISIBLE=all");
        json_t *mount = json_array_get(json_object_get(edits, "mounts"), 0);
        assert_null(json_object_get(mount, "type"));
        assert_int_equal(json_array_size(json_object_get(mount, "options")), 4);
        json_t *hook = json_array_get(json_object_get(edits, "hooks"), 0);
        assert_string_equal(json_string_value(json_object_get(hook, "hookName")), "createContainer");
        assert_int_equal(json_array_size(json_object_get(hook, "args")), 4);
        assert_null(json_object_get(hook, "env"));
}

/* ---- writing ---- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(path);
}

static char *tmpdir(void)
{
        char *d = xstrdup("/tmp/devlet-test-cdi-XXXXXX");
        assert_non_null(mkdtemp(d));
        return d;
}

static size_t dir_entries(const char *dir)
{
        DIR *d = opendir(dir);
        if (!d)
                return 0;
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d));)
                if (e->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

static void test_write(void **state)
{
        _cleanup_free_ char *tmp = tmpdir();
        _cleanup_free_ char *dir = xasprintf("%s/run/cdi", tmp);
        mode_t old = umask(077); /* the file is 0644 whatever the umask */

        _cleanup_spec_ struct cdi_spec *bad = good_spec();
        cdi_spec_add_device(bad, "empty");
        _cleanup_free_ char *path = NULL;
        struct diag diag = { 0 };
        assert_int_equal(cdi_spec_write(bad, dir, CDI_FORMAT_YAML, &path, &diag), -EINVAL);
        assert_null(path);
        assert_int_equal(dir_entries(dir), 0);

        _cleanup_spec_ struct cdi_spec *s = good_spec();
        assert_int_equal(cdi_spec_write(s, dir, CDI_FORMAT_JSON, &path, &diag), 0);
        _cleanup_free_ char *want = xasprintf("%s/vendor.com-gpu.json", dir);
        assert_string_equal(path, want);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        assert_int_equal(dir_entries(dir), 1); /* no temporary file left */
        _cleanup_free_ char *data = NULL;
        assert_int_equal(fs_read_file(path, 1 << 20, &data, NULL), 0);
        assert_non_null(strstr(data, "\"kind\": \"vendor.com/gpu\""));

        _cleanup_free_ char *name = cdi_spec_file_name(s, CDI_FORMAT_YAML);
        assert_string_equal(name, "vendor.com-gpu.yaml");

        umask(old);
        nftw(tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* ---- from the device model ---- */

static void test_from_resource(void **state)
{
        _cleanup_free_ char *tmp = tmpdir();
        _cleanup_free_ char *file = xasprintf("%s/plain-file", tmp);
        assert_int_equal(fs_write_atomic(file, "x", 1, 0644), 0);
        _cleanup_free_ char *missing = xasprintf("%s/missing", tmp);

        struct dev_resource *r = dev_resource_new("example.com/thing");
        struct dev_device *d = dev_resource_add(r, "thing-0");
        dev_device_add_node(d, "/dev/null", "/dev/thing", "rw");   /* a real char device */
        dev_device_add_node(d, missing, "/dev/gone", "r");         /* not there now */
        dev_device_add_node(d, file, "/dev/fake", "r");            /* a file standing in */
        dev_device_add_mount(d, "/etc/hostname", "/etc/thing-host", true);
        d = dev_resource_add(r, "-bad-id");
        dev_device_add_node(d, "/dev/null", "/dev/thing", "rw");
        dev_resource_add(r, "nothing"); /* no nodes, no mounts */

        struct cdi_spec *s = NULL;
        char **skipped = NULL;
        struct diag diag = { 0 };
        assert_int_equal(cdi_spec_from_resource(r, &s, &skipped, &diag), 0);
        assert_string_equal(s->kind, "example.com/thing");
        assert_int_equal(s->n_devices, 1);
        assert_int_equal(strv_len(skipped), 2);
        assert_string_equal(skipped[0], "-bad-id");
        assert_string_equal(skipped[1], "nothing");

        const struct cdi_edits *e = &s->devices[0].edits;
        assert_int_equal(e->n_nodes, 2);
        assert_string_equal(e->nodes[0].path, "/dev/thing");
        assert_string_equal(e->nodes[0].host_path, "/dev/null");
        assert_int_equal(e->nodes[0].type, 'c');
        assert_int_equal(e->nodes[0].major, 1);
        assert_int_equal(e->nodes[0].minor, 3);
        assert_string_equal(e->nodes[0].permissions, "rw");
        assert_string_equal(e->nodes[1].path, "/dev/gone");
        assert_int_equal(e->nodes[1].type, 0);
        assert_string_equal(e->nodes[1].permissions, "r");
        assert_int_equal(e->n_mounts, 2);
        assert_string_equal(e->mounts[0].host_path, file);
        assert_string_equal(e->mounts[0].container_path, "/dev/fake");
        assert_string_equal(e->mounts[0].options[0], "rbind");
        assert_string_equal(e->mounts[0].options[1], "ro");
        assert_string_equal(e->mounts[1].container_path, "/etc/thing-host");
        assert_string_equal(e->mounts[1].options[1], "ro");
        assert_string_equal(cdi_spec_min_version(s), "0.5.0");
        cdi_spec_free(s);
        strv_free(skipped);

        /* a resource name CDI cannot take as a kind */
        struct dev_resource *bad = dev_resource_new("example.com/3d");
        dev_device_add_node(dev_resource_add(bad, "a"), "/dev/null", "/dev/null", "rw");
        s = NULL;
        assert_int_equal(cdi_spec_from_resource(bad, &s, NULL, &diag), -EINVAL);
        assert_null(s);
        assert_non_null(strstr(diag.message, "not a valid CDI kind"));

        /* nothing left: no spec */
        struct dev_resource *empty = dev_resource_new("example.com/empty");
        dev_resource_add(empty, "x");
        assert_int_equal(cdi_spec_from_resource(empty, &s, NULL, &diag), -EINVAL);
        assert_null(s);

        dev_resource_free(r);
        dev_resource_free(bad);
        dev_resource_free(empty);
        nftw(tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static void test_merge(void **state)
{
        _cleanup_spec_ struct cdi_spec *a = good_spec();
        _cleanup_spec_ struct cdi_spec *b = good_spec();
        cdi_edits_add_node(&b->edits, "/dev/extra", NULL, NULL);
        cdi_edits_merge(&a->devices[0].edits, &b->devices[0].edits); /* same node: not repeated */
        assert_int_equal(a->devices[0].edits.n_nodes, 1);
        cdi_edits_merge(&a->edits, &b->edits);
        assert_int_equal(strv_len(a->edits.env), 1);
        assert_int_equal(a->edits.n_mounts, 1);
        assert_int_equal(a->edits.n_nodes, 1);
        assert_int_equal(a->edits.n_hooks, 2); /* hooks are kept as given */
        struct diag err = { 0 };
        assert_int_equal(cdi_spec_validate(a, &err), 0);
}


/* ---- NVIDIA ---- */

static void mkfile(const char *root, const char *rel)
{
        _cleanup_free_ char *path = xasprintf("%s%s", root, rel);
        _cleanup_free_ char *dir = xstrdup(path);
        *strrchr(dir, '/') = '\0';
        assert_int_equal(fs_mkdir_p(dir, 0755), 0);
        assert_int_equal(fs_write_atomic(path, "x", 1, 0755), 0);
}

static void mklink(const char *root, const char *rel, const char *target)
{
        _cleanup_free_ char *path = xasprintf("%s%s", root, rel);
        _cleanup_free_ char *dir = xstrdup(path);
        *strrchr(dir, '/') = '\0';
        assert_int_equal(fs_mkdir_p(dir, 0755), 0);
        assert_int_equal(symlink(target, path), 0);
}

static const struct cdi_mount *mount_or_null(const struct cdi_edits *e, const char *ctr)
{
        for (size_t i = 0; i < e->n_mounts; i++)
                if (strcmp(e->mounts[i].container_path, ctr) == 0)
                        return &e->mounts[i];
        return NULL;
}

/* The mount at ctr; the test fails when there is none. */
static const struct cdi_mount *find_mount(const struct cdi_edits *e, const char *ctr)
{
        const struct cdi_mount *m = mount_or_null(e, ctr);
        if (!m)
                fail_msg("no mount at %s", ctr);
        return m ? m : &e->mounts[0];
}

static const struct cdi_device_node *node_or_null(const struct cdi_edits *e, const char *path)
{
        for (size_t i = 0; i < e->n_nodes; i++)
                if (strcmp(e->nodes[i].path, path) == 0)
                        return &e->nodes[i];
        return NULL;
}

static const struct cdi_device_node *find_node(const struct cdi_edits *e, const char *path)
{
        const struct cdi_device_node *n = node_or_null(e, path);
        if (!n)
                fail_msg("no device node %s", path);
        return n ? n : &e->nodes[0];
}

/* A dev root whose nodes are symlinks to /dev/null and /dev/zero (real
 * character devices, no mknod needed) and a driver root with libraries of
 * two driver versions. */
static void test_nvidia_spec(void **state)
{
        _cleanup_free_ char *tmp = tmpdir();
        _cleanup_free_ char *dev = xasprintf("%s/devroot", tmp);
        _cleanup_free_ char *drv = xasprintf("%s/driver", tmp);
        mklink(dev, "/dev/nvidia0", "/dev/null");
        mklink(dev, "/dev/nvidia1", "/dev/zero");
        mklink(dev, "/dev/nvidiactl", "/dev/null");
        mklink(dev, "/dev/nvidia-uvm", "/dev/zero");
        mklink(dev, "/dev/nvidia-caps/nvidia-cap21", "/dev/null");
        mklink(dev, "/dev/nvidia-caps/nvidia-cap22", "/dev/zero");
        const char *lib = "/usr/lib/x86_64-linux-gnu";
        _cleanup_free_ char *cuda = xasprintf("%s/libcuda.so.550.54.15", lib);
        _cleanup_free_ char *cuda1 = xasprintf("%s/libcuda.so.1", lib);
        _cleanup_free_ char *cudadev = xasprintf("%s/libcuda.so", lib);
        _cleanup_free_ char *ml = xasprintf("%s/libnvidia-ml.so.550.54.15", lib);
        _cleanup_free_ char *ml1 = xasprintf("%s/libnvidia-ml.so.1", lib);
        _cleanup_free_ char *oldml = xasprintf("%s/libnvidia-ml.so.535.104.05", lib);
        _cleanup_free_ char *nvvm = xasprintf("%s/libnvidia-nvvm.so.550.54.15", lib);
        _cleanup_free_ char *nvvm4 = xasprintf("%s/libnvidia-nvvm.so.4", lib);
        mkfile(drv, cuda);
        mklink(drv, cuda1, "libcuda.so.550.54.15");
        mklink(drv, cudadev, "libcuda.so.1");
        mkfile(drv, ml);
        mklink(drv, ml1, "libnvidia-ml.so.550.54.15");
        mkfile(drv, oldml);
        mkfile(drv, nvvm);
        mklink(drv, nvvm4, "libnvidia-nvvm.so.550.54.15");
        mkfile(drv, "/usr/bin/nvidia-smi");
        mklink(drv, "/bin", "usr/bin"); /* merged /usr: found once */
        _cleanup_free_ char *hook = xasprintf("%s/nvidia-cdi-hook", tmp);
        mkfile(tmp, "/nvidia-cdi-hook");

        const struct nvidia_cdi_mig migs[] = {
                { .index = 0, .uuid = "MIG-aaaa", .gi_cap = 21, .ci_cap = 22 },
                { .index = 1, .uuid = "MIG-bbbb", .gi_cap = 30, .ci_cap = -1 }, /* caps missing */
        };
        const struct nvidia_cdi_gpu gpus[] = {
                { .uuid = "GPU-1111", .minor = 0 },
                { .uuid = "GPU-2222", .minor = 1, .mig_enabled = true, .migs = migs, .n_migs = 2 },
                { .uuid = "GPU-3333", .minor = 7 }, /* no node */
        };
        const struct nvidia_cdi_node node = { "550.54.15", gpus, 3 };
        const struct nvidia_cdi_opts opts = { NVIDIA_CDI_PLUGIN_KIND, "/run/nvidia/driver", drv,
                                              dev, hook };
        struct cdi_spec *s = NULL;
        char **warnings = NULL;
        struct diag err = { 0 };
        assert_int_equal(nvidia_cdi_spec(&node, &opts, &s, &warnings, &err), 0);
        assert_string_equal(s->kind, "k8s.device-plugin.nvidia.com/gpu");

        /* names: GPU index and UUID, MIG <gpu>:<mig> and UUID, all */
        static const char *const names[] = { "0", "GPU-1111", "1", "GPU-2222", "1:0", "MIG-aaaa",
                                             "1:1", "MIG-bbbb", "all" };
        assert_int_equal(s->n_devices, ARRAY_SIZE(names));
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                assert_string_equal(s->devices[i].name, names[i]);
        assert_string_equal(cdi_spec_min_version(s), "0.5.0");

        const struct cdi_edits *g0 = &cdi_spec_find_device(s, "GPU-1111")->edits;
        assert_int_equal(g0->n_nodes, 1);
        const struct cdi_device_node *n = find_node(g0, "/dev/nvidia0");
        _cleanup_free_ char *host0 = xasprintf("%s/dev/nvidia0", dev);
        assert_string_equal(n->host_path, host0);
        assert_int_equal(n->type, 'c');
        assert_int_equal(n->major, 1);
        assert_int_equal(n->minor, 3);

        const struct cdi_edits *m0 = &cdi_spec_find_device(s, "1:0")->edits;
        assert_int_equal(m0->n_nodes, 3);
        assert_int_equal(find_node(m0, "/dev/nvidia1")->minor, 5);
        assert_non_null(node_or_null(m0, "/dev/nvidia-caps/nvidia-cap21"));
        assert_int_equal(find_node(m0, "/dev/nvidia-caps/nvidia-cap22")->minor, 5);
        assert_int_equal(cdi_spec_find_device(s, "MIG-bbbb")->edits.n_nodes, 1);

        const struct cdi_edits *all = &cdi_spec_find_device(s, "all")->edits;
        assert_int_equal(all->n_nodes, 4); /* nvidia0, nvidia1, cap21, cap22 */

        /* spec-wide: env, control nodes present, libraries of this version */
        assert_string_equal(s->edits.env[0], "NVIDIA_VISIBLE_DEVICES=void");
        assert_int_equal(s->edits.n_nodes, 2);
        assert_non_null(node_or_null(&s->edits, "/dev/nvidiactl"));
        assert_non_null(node_or_null(&s->edits, "/dev/nvidia-uvm"));
        const struct cdi_mount *m = find_mount(&s->edits, cuda);
        _cleanup_free_ char *hostcuda = xasprintf("/run/nvidia/driver%s", cuda);
        assert_string_equal(m->host_path, hostcuda);
        assert_string_equal(m->options[0], "ro");
        assert_string_equal(m->options[1], "nosuid");
        assert_string_equal(m->options[2], "nodev");
        assert_string_equal(m->options[3], "bind");
        assert_null(m->options[4]);
        assert_non_null(mount_or_null(&s->edits, cuda1));
        assert_non_null(mount_or_null(&s->edits, ml));
        assert_non_null(mount_or_null(&s->edits, ml1));
        assert_non_null(mount_or_null(&s->edits, nvvm4));
        assert_null(mount_or_null(&s->edits, cudadev));
        assert_null(mount_or_null(&s->edits, oldml));
        assert_non_null(mount_or_null(&s->edits, "/usr/bin/nvidia-smi"));
        assert_null(mount_or_null(&s->edits, "/bin/nvidia-smi"));
        assert_int_equal(s->edits.n_mounts, 7);

        assert_int_equal(s->edits.n_hooks, 1);
        const struct cdi_hook *h = &s->edits.hooks[0];
        assert_string_equal(h->hook_name, "createContainer");
        assert_string_equal(h->path, hook);
        static const char *const args[] = { "nvidia-cdi-hook", "update-ldcache", "--folder",
                                            "/usr/lib/x86_64-linux-gnu", NULL };
        for (size_t i = 0; i < ARRAY_SIZE(args); i++)
                assert_string_equal(h->args[i] ? h->args[i] : "(null)", args[i] ? args[i] : "(null)");

        /* warnings: GPU 2's node, MIG 1:1's capability */
        assert_int_equal(strv_len(warnings), 2);
        assert_non_null(strstr(warnings[0], "nvidia-cap30"));
        assert_non_null(strstr(warnings[1], "nvidia7"));
        strv_free(warnings);
        cdi_spec_free(s);

        /* nvidia-ctk takes "hook" first; a missing hook program: no hook */
        _cleanup_free_ char *ctk = xasprintf("%s/bin/nvidia-ctk", tmp);
        mkfile(tmp, "/bin/nvidia-ctk");
        struct nvidia_cdi_opts o2 = opts;
        o2.hook_path = ctk;
        assert_int_equal(nvidia_cdi_spec(&node, &o2, &s, NULL, &err), 0);
        assert_string_equal(s->edits.hooks[0].args[1], "hook");
        assert_string_equal(s->edits.hooks[0].args[2], "update-ldcache");
        cdi_spec_free(s);
        o2.hook_path = "/nonexistent/nvidia-cdi-hook";
        o2.kind = NVIDIA_CDI_DEFAULT_KIND;
        assert_int_equal(nvidia_cdi_spec(&node, &o2, &s, NULL, &err), 0);
        assert_int_equal(s->edits.n_hooks, 0);
        assert_string_equal(s->kind, "nvidia.com/gpu");
        cdi_spec_free(s);

        /* no device node at all: no spec */
        o2.dev_root = tmp;
        s = NULL;
        assert_int_equal(nvidia_cdi_spec(&node, &o2, &s, NULL, &err), -EINVAL);
        assert_null(s);
        assert_non_null(strstr(err.message, "no GPU device nodes"));
        err = (struct diag){ 0 };
        o2.kind = "bad kind";
        assert_int_equal(nvidia_cdi_spec(&node, &o2, &s, NULL, &err), -EINVAL);

        nftw(tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* ---- the writer of devlet run ---- */

static struct dev_resource *writer_res[1];
static int writer_backend_token;

static int writer_create(uv_loop_t *loop, const struct devlet_config *cfg,
                         struct dev_backend **out, struct diag *diag)
{
        return 0;
}

static void writer_destroy(struct dev_backend *b)
{
}

static struct dev_resource **writer_resources(struct dev_backend *b, size_t *n)
{
        *n = 1;
        return writer_res;
}

static const struct dev_backend_ops writer_ops = { .name = "hostdev",
                                                   .create = writer_create,
                                                   .destroy = writer_destroy,
                                                   .resources = writer_resources };

static ino_t inode_of(const char *path)
{
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        return st.st_ino;
}

static void test_writer(void **state)
{
        _cleanup_free_ char *tmp = tmpdir();
        struct devlet_config *cfg = config_new_defaults(dev_config_families());
        assert_false(cdi_strategy_enabled(cfg)); /* envvar by default */
        strv_free(cfg->device_list_strategy);
        cfg->device_list_strategy = strv_push(strv_push(xcalloc(1, sizeof(char *)), "envvar"),
                                              "cdi-cri");
        assert_true(cdi_strategy_enabled(cfg));
        free(cfg->cdi_spec_dir);
        cfg->cdi_spec_dir = xasprintf("%s/var/run/cdi", tmp);

        writer_res[0] = dev_resource_new("example.com/fuse");
        dev_device_add_node(dev_resource_add(writer_res[0], "fuse-0"), "/dev/null", "/dev/fuse",
                            "rw");
        struct cdi_backend b = { &writer_ops, (struct dev_backend *)&writer_backend_token };
        struct cdi_writer *w = cdi_writer_new(cfg, &b, 1);
        assert_int_equal(dir_entries(cfg->cdi_spec_dir), 0); /* nothing before the first write */
        assert_int_equal(cdi_writer_write(w), 0);
        _cleanup_free_ char *path = xasprintf("%s/example.com-fuse.yaml", cfg->cdi_spec_dir);
        ino_t first = inode_of(path);

        /* unchanged devices: the file is left alone */
        assert_int_equal(cdi_writer_write(w), 0);
        assert_true(inode_of(path) == first);

        /* a new device: rewritten, with it */
        dev_device_add_node(dev_resource_add(writer_res[0], "fuse-1"), "/dev/null", "/dev/fuse",
                            "rw");
        assert_int_equal(cdi_writer_write(w), 0);
        assert_true(inode_of(path) != first);
        _cleanup_free_ char *data = NULL;
        assert_int_equal(fs_read_file(path, 1 << 20, &data, NULL), 0);
        assert_non_null(strstr(data, "name: fuse-1"));
        assert_int_equal(dir_entries(cfg->cdi_spec_dir), 1);

        /* an unwritable directory: an error, and the next write tries again */
        free(cfg->cdi_spec_dir);
        cfg->cdi_spec_dir = xasprintf("%s/example.com-fuse.yaml/sub", path);
        assert_true(cdi_writer_write(w) < 0);

        cdi_writer_free(w);
        dev_resource_free(writer_res[0]);
        config_free(cfg);
        nftw(tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kind_names),     cmocka_unit_test(test_device_names),
                cmocka_unit_test(test_good_spec),      cmocka_unit_test(test_invalid_kind),
                cmocka_unit_test(test_no_devices),     cmocka_unit_test(test_bad_device_name),
                cmocka_unit_test(test_duplicate_device), cmocka_unit_test(test_empty_device_edits),
                cmocka_unit_test(test_bad_env),        cmocka_unit_test(test_bad_nodes),
                cmocka_unit_test(test_bad_mounts),     cmocka_unit_test(test_bad_hooks),
                cmocka_unit_test(test_min_version),    cmocka_unit_test(test_render_yaml),
                cmocka_unit_test(test_render_json),    cmocka_unit_test(test_write),
                cmocka_unit_test(test_from_resource),  cmocka_unit_test(test_merge),
                cmocka_unit_test(test_nvidia_spec),    cmocka_unit_test(test_writer),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

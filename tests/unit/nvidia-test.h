/* Helpers shared by the NVIDIA backend's unit tests (test-nvidia.c,
 * test-nvidia-health.c): the mock libnvidia-ml.so.1 found next to the test
 * binary (<BUILD>/mock-nvml/, or $MOCK_NVML_LIB) and handed to the loader
 * through DEVLET_NVML_LIBRARY, a temporary tree (sysfs, dev root, proc
 * root, the mock's YAML), configs parsed from YAML, and small queries on
 * resources and Allocate answers.  Include after <cmocka.h>. */
#ifndef DEVLET_TESTS_NVIDIA_TEST_H
#define DEVLET_TESTS_NVIDIA_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "config/config.h"
#include "devices/device.h"
#include "devices/nvidia/nvidia.h"

#include "test-util.h"

static char mock_lib[PATH_MAX];
static char tmp_dir[PATH_MAX];
static char nvml_yaml[PATH_MAX + 32];
static const char *const profiles_dir = "tests/mock-nvml/profiles";

TEST_HELPER void tmp_path(char *buf, size_t size, const char *rel)
{
        snprintf(buf, size, "%s/%s", tmp_dir, rel);
}

/* mkdir -p of a path below the temporary tree. */
TEST_HELPER void tmp_mkdir(const char *rel)
{
        char p[PATH_MAX + 64];
        tmp_path(p, sizeof(p), rel);
        for (char *s = p + strlen(tmp_dir) + 1; *s; s++)
                if (*s == '/') {
                        *s = '\0';
                        mkdir(p, 0755);
                        *s = '/';
                }
        mkdir(p, 0755);
}

TEST_HELPER void tmp_write(const char *rel, const char *content)
{
        char p[PATH_MAX + 64], tmp[PATH_MAX + 80];
        tmp_path(p, sizeof(p), rel);
        snprintf(tmp, sizeof(tmp), "%s.tmp", p);
        FILE *f = fopen(tmp, "we");
        assert_non_null(f);
        fputs(content, f);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(rename(tmp, p), 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)flag;
        (void)ftw;
        return remove(path);
}

TEST_HELPER int nvidia_group_setup(void **state)
{
        if (test_mock_nvml_path(mock_lib, sizeof(mock_lib)) < 0)
                return -1;
        if (access(mock_lib, R_OK) != 0) {
                fprintf(stderr, "no mock NVML at %s (build it with make)\n", mock_lib);
                return -1;
        }
        setenv("DEVLET_NVML_LIBRARY", mock_lib, 1);
        snprintf(tmp_dir, sizeof(tmp_dir), "%s/devlet-nvidia-XXXXXX",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(tmp_dir))
                return -1;
        snprintf(nvml_yaml, sizeof(nvml_yaml), "%s/nvml.yaml", tmp_dir);
        tmp_mkdir("sys/bus/pci/devices");
        tmp_mkdir("root/dev");
        tmp_mkdir("proc/driver/nvidia-caps");
        char proc[PATH_MAX + 16];
        tmp_path(proc, sizeof(proc), "proc");
        setenv("DEVLET_PROC_ROOT", proc, 1);
        unsetenv("DP_DISABLE_HEALTHCHECKS");
        unsetenv("DP_ENABLE_HEALTHCHECKS");
        (void)state;
        return 0;
}

TEST_HELPER int nvidia_group_teardown(void **state)
{
        (void)state;
        nftw(tmp_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        return 0;
}

/* Points the mock at YAML written to the temporary tree (atomically). */
TEST_HELPER void nvml_write(const char *yaml)
{
        tmp_write("nvml.yaml", yaml);
        setenv("MOCK_NVML_CONFIG", nvml_yaml, 1);
}

TEST_HELPER void nvml_profile(const char *name)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s.yaml", profiles_dir, name);
        assert_int_equal(access(p, R_OK), 0);
        setenv("MOCK_NVML_CONFIG", p, 1);
}

/* A config from devlet's YAML (NULL: defaults), with the sysfs and dev
 * roots in the temporary tree. */
TEST_HELPER struct devlet_config *cfg_yaml(const char *yaml)
{
        struct devlet_config *c = config_new_defaults(dev_config_families());
        char p[PATH_MAX + 16];
        free(c->sysfs_root);
        tmp_path(p, sizeof(p), "sys");
        c->sysfs_root = xstrdup(p);
        free(c->dev_root);
        tmp_path(p, sizeof(p), "root");
        c->dev_root = xstrdup(p);
        if (yaml) {
                struct diag d;
                int r = config_parse_yaml("test.yaml", yaml, strlen(yaml), c, &d);
                if (r != 0) {
                        char buf[1024];
                        print_error("config: %s\n", diag_format(&d, buf, sizeof(buf)));
                        fail();
                }
        }
        return c;
}

/* create() that must succeed with a backend. */
TEST_HELPER struct dev_backend *backend_new(uv_loop_t *loop, const struct devlet_config *cfg)
{
        struct dev_backend *b = NULL;
        struct diag why = { 0 };
        int r = nvidia_backend_ops.create(loop, cfg, &b, &why);
        if (r != 0) {
                print_error("create: %s\n", why.message[0] ? why.message : strerror(-r));
                fail();
        }
        assert_non_null(b);
        return b;
}

/* create() that must fail; returns its message (heap). */
TEST_HELPER char *backend_fails(const struct devlet_config *cfg)
{
        struct dev_backend *b = NULL;
        struct diag why = { 0 };
        int r = nvidia_backend_ops.create(NULL, cfg, &b, &why);
        assert_true(r < 0);
        assert_null(b);
        assert_true(why.message[0] != '\0');
        return xstrdup(why.message);
}

TEST_HELPER struct dev_resource *res_find(struct dev_backend *b, const char *name)
{
        size_t n;
        struct dev_resource **res = nvidia_backend_ops.resources(b, &n);
        for (size_t i = 0; i < n; i++)
                if (strcmp(res[i]->name, name) == 0)
                        return res[i];
        return NULL;
}

TEST_HELPER size_t res_count(struct dev_backend *b)
{
        size_t n;
        nvidia_backend_ops.resources(b, &n);
        return n;
}

TEST_HELPER const char *env_of(const struct dev_alloc *a, const char *key)
{
        for (size_t i = 0; i < a->n_envs; i++)
                if (strcmp(a->envs[i].key, key) == 0)
                        return a->envs[i].value;
        return NULL;
}

TEST_HELPER const struct dev_node *node_of(const struct dev_alloc *a, const char *ctr)
{
        for (size_t i = 0; i < a->n_nodes; i++)
                if (strcmp(a->nodes[i].container_path, ctr) == 0)
                        return &a->nodes[i];
        return NULL;
}

TEST_HELPER const char *node_host(const struct dev_alloc *a, const char *ctr)
{
        const struct dev_node *n = node_of(a, ctr);
        return n ? n->host_path : "(none)";
}

#endif

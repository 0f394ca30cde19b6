/* Helpers shared by the config module's unit tests (test-config.c,
 * test-config-sharing.c): parse a YAML string or load argv into a config
 * and assert success or the exact error, temporary config files, clean
 * environment.  Include after <cmocka.h>; every helper is static and may go
 * unused in one of the files. */
#ifndef DEVLET_TESTS_CONFIG_TEST_H
#define DEVLET_TESTS_CONFIG_TEST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "config/config.h"
#include "devices/device.h"

#include "test-util.h"

/* The families the helpers load with: devices/' table, unless the file
 * defines its own before including this one. */
#ifndef TEST_FAMILIES
#define TEST_FAMILIES dev_config_families()
#endif

/* Every option, devlet's own and the backends', in --help order. */
TEST_HELPER size_t config_options_all(const struct config_option **o, size_t max)
{
        size_t n = 0;
        while (n < max && (o[n] = config_option_at(TEST_FAMILIES, n)))
                n++;
        assert_int_equal(n, config_option_count(TEST_FAMILIES));
        return n;
}

/* `devlet help flags`' text (free() it). */
TEST_HELPER char *help_text(void)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        assert_non_null(f);
        config_print_help(TEST_FAMILIES, f);
        fclose(f);
        return buf;
}

/* ---- environment and temporary files ---- */

static char tmp_paths[4][64];
static size_t n_tmp;

TEST_HELPER void clear_env(void)
{
        const struct config_option *o[256];
        size_t n = config_options_all(o, ARRAY_SIZE(o));
        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < ARRAY_SIZE(o[i]->envs) && o[i]->envs[j]; j++)
                        unsetenv(o[i]->envs[j]);
}

TEST_HELPER int setup(void **state)
{
        clear_env();
        n_tmp = 0;
        return 0;
}

TEST_HELPER int teardown(void **state)
{
        clear_env();
        for (size_t i = 0; i < n_tmp; i++)
                unlink(tmp_paths[i]);
        return 0;
}

TEST_HELPER const char *write_tmp(const char *content, size_t len)
{
        assert_true(n_tmp < ARRAY_SIZE(tmp_paths));
        char *path = tmp_paths[n_tmp++];
        snprintf(path, 64, "/tmp/test-config-XXXXXX");
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, len), (ssize_t)len);
        close(fd);
        return path;
}

TEST_HELPER struct devlet_config *parse_ok(const char *yaml)
{
        struct devlet_config *cfg = config_new_defaults(TEST_FAMILIES);
        struct diag d;
        int r = config_parse_yaml("t.yaml", yaml, strlen(yaml), cfg, &d);
        if (r != 0) {
                char buf[1024];
                print_error("unexpected error: %s\n", diag_format(&d, buf, sizeof(buf)));
                fail();
        }
        return cfg;
}

TEST_HELPER struct diag parse_err(const char *yaml)
{
        struct devlet_config *cfg = config_new_defaults(TEST_FAMILIES);
        struct diag d;
        int r = config_parse_yaml("t.yaml", yaml, strlen(yaml), cfg, &d);
        assert_int_equal(r, -EINVAL);
        assert_string_equal(d.file, "t.yaml");
        config_free(cfg);
        return d;
}

/* config_load takes char **: give it a heap copy of literal arguments. */
TEST_HELPER int load_args(size_t argc, const char *const *args, struct devlet_config **cfg,
                          struct diag *d, int *argi)
{
        char **argv = xcalloc(argc + 1, sizeof(*argv));
        for (size_t i = 0; i < argc; i++)
                argv[i] = xstrdup(args[i]);
        int r = config_load(TEST_FAMILIES, (int)argc, argv, cfg, d, argi);
        strv_free(argv);
        return r;
}

#define LOAD(cfgp, diagp, argip, ...)                                                   \
        ({                                                                              \
                const char *const args_[] = { "run", __VA_ARGS__ };                     \
                load_args(ARRAY_SIZE(args_), args_, (cfgp), (diagp), (argip));          \
        })

TEST_HELPER struct devlet_config *load_ok(size_t argc, const char *const *args)
{
        struct devlet_config *cfg = NULL;
        struct diag d;
        int r = load_args(argc, args, &cfg, &d, NULL);
        if (r != 0) {
                char buf[1024];
                print_error("unexpected error %d: %s\n", r,
                            diag_format(&d, buf, sizeof(buf)));
                fail();
        }
        assert_non_null(cfg);
        return cfg;
}

#define LOAD_OK(...)                                                                    \
        ({                                                                              \
                const char *const args_[] = { "run", __VA_ARGS__ };                     \
                load_ok(ARRAY_SIZE(args_), args_);                                      \
        })

TEST_HELPER struct diag load_err(size_t argc, const char *const *args)
{
        struct devlet_config *cfg = NULL;
        struct diag d;
        assert_int_equal(load_args(argc, args, &cfg, &d, NULL), -EINVAL);
        assert_null(cfg);
        return d;
}

#define LOAD_ERR(...)                                                                   \
        ({                                                                              \
                const char *const args_[] = { "run", __VA_ARGS__ };                     \
                load_err(ARRAY_SIZE(args_), args_);                                     \
        })

TEST_HELPER void assert_strv(char **v, const char *const *want)
{
        size_t i = 0;
        for (; want[i]; i++) {
                assert_non_null(v[i]);
                assert_string_equal(v[i], want[i]);
        }
        assert_null(v[i]);
}

#define STRV(...) ((const char *const[]){ __VA_ARGS__, NULL })

#endif

/* A device backend's own config-file section, through the table config/
 * reads (config_backend_sections).  This binary stands in for the backend
 * table: it defines the two symbols devices/registry.c gives config/, with
 * a toy family "toy" whose section `toy: {slots: N, names: [...]}` is
 * parsed with the typed walkers, kept on the heap, replaced by a later
 * file and freed with the config. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/xalloc.h"
#include "config/config.h"
#include "config/sections.h"

#include "config-test.h"

struct toy_cfg {
        unsigned slots;
        char **names;
};

static int toy_parse(const struct config_node *node, const char *file,
                     const struct devlet_config *next, void *out, char ***warnings,
                     struct config_diag *diag)
{
        static const char *const known[] = { "slots", "names", NULL };
        struct config_walk w = { .file = file, .diag = diag, .warnings = warnings };
        struct toy_cfg *t = out;
        if (config_node_is_null(node))
                return 0;
        int r = config_walk_map(&w, node, "toy", known);
        if (r < 0)
                return r;
        r = config_walk_uint(&w, node, "slots", "toy", 1, 64, &t->slots, NULL);
        if (r < 0)
                return r;
        const struct config_node *names = NULL;
        r = config_walk_list(&w, node, "names", "toy", &names);
        for (size_t i = 0; r == 0 && names && i < names->n_items; i++) {
                r = config_walk_expect(&w, names->items[i], CONFIG_NODE_SCALAR, "toy.names");
                if (r == 0)
                        t->names = strv_push(t->names ? t->names : xcalloc(1, sizeof(char *)),
                                             names->items[i]->text);
        }
        if (r < 0)
                strv_free(t->names);
        return r;
}

static void toy_clear(void *p)
{
        strv_free(((struct toy_cfg *)p)->names);
}

static const struct config_section toy_section = {
        .key = "toy",
        .size = sizeof(struct toy_cfg),
        .parse = toy_parse,
        .clear = toy_clear,
};

const char *const config_backend_choices[] = { "auto", "toy", NULL };
const struct config_section *const config_backend_sections[] = { &toy_section, NULL };

static void test_backend_section(void **state)
{
        struct devlet_config *cfg = parse_ok("version: v1\n"
                                             "flags: {backends: [toy]}\n"
                                             "toy:\n"
                                             "  slots: 3\n"
                                             "  names: [a, b]\n");
        const struct toy_cfg *t = config_backend_section(cfg, &toy_section);
        assert_non_null(t);
        assert_int_equal(t->slots, 3);
        assert_strv(t->names, STRV("a", "b"));
        assert_null(cfg->warnings); /* the key is known: no "unknown key" warning */

        /* a later file replaces the value (the old one is freed: ASan) */
        const char *again = "version: v1\ntoy: {slots: 5}\n";
        assert_int_equal(config_parse_yaml("t2.yaml", again, strlen(again), cfg, NULL), 0);
        t = config_backend_section(cfg, &toy_section);
        assert_int_equal(t->slots, 5);
        assert_null(t->names);
        config_free(cfg);

        /* no section in the file: nothing */
        cfg = parse_ok("version: v1\n");
        assert_null(config_backend_section(cfg, &toy_section));
        config_free(cfg);
}

static void test_backend_section_errors(void **state)
{
        struct config_diag d = parse_err("version: v1\ntoy:\n  slots: 99\n");
        assert_int_equal(d.line, 3);
        assert_contains(d.message, "toy.slots");

        /* a bad section leaves the running config as it was */
        struct devlet_config *cfg = parse_ok("version: v1\ntoy: {slots: 2}\n");
        const char *bad = "version: v1\ntoy: {slots: 2, names: [x, {a: b}]}\n";
        assert_int_equal(config_parse_yaml("t.yaml", bad, strlen(bad), cfg, &d), -EINVAL);
        const struct toy_cfg *t = config_backend_section(cfg, &toy_section);
        assert_int_equal(t->slots, 2);
        assert_null(t->names);
        config_free(cfg);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_backend_section, setup, teardown),
                cmocka_unit_test_setup_teardown(test_backend_section_errors, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

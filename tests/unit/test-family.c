/* A made-up third family, "toy", is a folder and a table line: this file
 * plays its folder (rows, section, sharing rules, the "does this selector
 * name this device" of its backend) and hands config/ a table line of its
 * own instead of devices/' (dev_config_families), and nothing else of
 * devlet changes for it.  Its --backends choice, its sharing names
 * ("toy.example/<name>") and device selectors ("slot-<n>") come from that
 * line; the sharing selection itself is devices/sharing.c's, shared with
 * every family.  Its section `toy: {slots: N, names: [...]}` is
 * parsed with the typed walkers, kept on the heap, replaced by a later
 * file and freed with the config, and whose options (--toy-mode,
 * --toy-poll, --toy-tags) are loaded from flags, env vars and file keys
 * like devlet's own, into a struct of the toy's, with a finish hook. */
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
#include "devices/device.h"

static const struct config_families toy_families;
#define TEST_FAMILIES (&toy_families)
#include "config-test.h"

struct toy_cfg {
        unsigned slots;
        char **names;
};

static int toy_parse(const struct config_node *node, const char *file,
                     const struct devlet_config *next, void *out, char ***warnings,
                     struct diag *diag)
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

static bool toy_equal(const void *a, const void *b)
{
        const struct toy_cfg *x = a, *y = b;
        return x->slots == y->slots && strv_equal(x->names, y->names);
}

static const struct config_section toy_section = {
        .key = "toy",
        .size = sizeof(struct toy_cfg),
        .parse = toy_parse,
        .clear = toy_clear,
        .equal = toy_equal,
        .apply = CONFIG_APPLY_RESERVE,
};

/* ---- the toy's options ---- */

struct toy_options {
        char *mode;
        int64_t poll_ms;
        char **tags;
        bool fast; /* derived by finish: mode fast */
};

static const char *const toy_modes[] = { "fast", "slow", NULL };

static const struct config_option toy_rows[] = {
        {
                .flag = "toy-mode",
                .alias = "toy_mode",
                .envs = { "TOY_MODE" },
                .key = "flags.toy.mode",
                .type = CONFIG_STRING,
                .default_value = "slow",
                .offset = offsetof(struct toy_options, mode),
                .choices = toy_modes,
                .help = "How the toy runs",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "toy-poll",
                .envs = { "TOY_POLL", "TOY_PULSE" },
                .key = "flags.toy.poll",
                .type = CONFIG_DURATION,
                .default_value = "5s",
                .offset = offsetof(struct toy_options, poll_ms),
                .help = "How often the toy is polled",
                .apply = CONFIG_APPLY_RESERVE,
        },
        {
                .flag = "toy-tags",
                .envs = { "TOY_TAGS" },
                .key = "toyExtra.tags", /* a group of keys of its own, as NVIDIA's imex */
                .type = CONFIG_LIST,
                .default_value = "",
                .offset = offsetof(struct toy_options, tags),
                .help = "Tags of the toy",
                .apply = CONFIG_APPLY_OUTPUTS,
        },
};

static int toy_finish(const struct devlet_config *cfg, void *values, char ***warnings,
                      struct diag *diag)
{
        struct toy_options *o = values;
        o->fast = strcmp(o->mode, "fast") == 0;
        if (o->fast && o->poll_ms == 0) {
                snprintf(diag->message, sizeof(diag->message),
                         "--toy-mode=fast needs --toy-poll above 0");
                return -EINVAL;
        }
        if (strv_contains(o->tags, "old"))
                *warnings = strv_push(*warnings, "--toy-tags: \"old\" is deprecated");
        return 0;
}

static const struct config_option_set toy_options = {
        .options = toy_rows,
        .n_options = ARRAY_SIZE(toy_rows),
        .size = sizeof(struct toy_options),
        .finish = toy_finish,
};

/* ---- the toy's sharing rules ---- */

/* "slot-<n>", n below 100; canonical: no leading zeros */
static int toy_device(const char *ref, enum sharing_strategy strategy, char **canon, struct diag *diag)
{
        char *end;
        unsigned long n = strncmp(ref, "slot-", 5) == 0 && ref[5] ? strtoul(ref + 5, &end, 10) : 100;
        if (n >= 100 || *end || strategy == SHARING_MPS)
                return diag_set(diag, -EINVAL,
                                "\"%s\" is not a toy slot (\"slot-<n>\", time-slicing only)", ref);
        *canon = xasprintf("slot-%lu", n);
        return 0;
}

static bool toy_name(const char *name)
{
        return strncmp(name, "widget", 6) == 0;
}

static const struct config_sharing_rules toy_sharing = {
        .domain = "toy.example",
        .valid_name = toy_name,
        .name_rule = "toys are widgets",
        .device = toy_device,
};

/* ---- the table line ---- */

static const struct config_family toy_family = {
        .name = "toy",
        .options = &toy_options,
        .section = &toy_section,
        .sharing = &toy_sharing,
};
static const char *const toy_choices[] = { "auto", "toy", NULL };
static const struct config_family *const toy_list[] = { &toy_family, NULL };
static const struct config_families toy_families = { .choices = toy_choices, .v = toy_list };

static const struct toy_options *toy_get(const struct devlet_config *cfg)
{
        const struct toy_options *o = config_backend_options(cfg, &toy_options);
        assert_non_null(o);
        return o;
}

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
        struct diag d = parse_err("version: v1\ntoy:\n  slots: 99\n");
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

/* A reload sees a family's section change like devlet's own: present in
 * one config only, or with another value. */
static void test_backend_section_diff(void **state)
{
        struct devlet_config *none = parse_ok("version: v1\n");
        struct devlet_config *two = parse_ok("version: v1\ntoy: {slots: 2, names: [a]}\n");
        struct devlet_config *two2 = parse_ok("version: v1\ntoy: {slots: 2, names: [a]}\n");
        struct devlet_config *three = parse_ok("version: v1\ntoy: {slots: 3, names: [a]}\n");
        struct config_change *ch = NULL;
        size_t n = 0;
        assert_int_equal(config_diff(none, two, &ch, &n), CONFIG_APPLY_RESERVE);
        assert_int_equal(n, 1);
        assert_string_equal(ch[0].name, "toy");
        free(ch);
        assert_int_equal(config_diff(two, two2, NULL, NULL), 0);
        assert_int_equal(config_diff(two, three, NULL, NULL), CONFIG_APPLY_RESERVE);
        config_free(none);
        config_free(two);
        config_free(two2);
        config_free(three);
}

static void test_backend_options(void **state)
{
        /* defaults */
        struct devlet_config *cfg = LOAD_OK();
        assert_string_equal(toy_get(cfg)->mode, "slow");
        assert_int_equal(toy_get(cfg)->poll_ms, 5000);
        assert_strv(toy_get(cfg)->tags, STRV(NULL));
        assert_false(toy_get(cfg)->fast);
        config_free(cfg);

        /* file < env < flag, each source through the same row */
        const char *yaml = "version: v1\n"
                           "flags:\n"
                           "  toy: {mode: fast, poll: 7s}\n"
                           "toyExtra:\n"
                           "  tags: [a, b]\n";
        const char *path = write_tmp(yaml, strlen(yaml));
        cfg = LOAD_OK("--config-file", path);
        assert_string_equal(toy_get(cfg)->mode, "fast");
        assert_true(toy_get(cfg)->fast); /* finish ran */
        assert_int_equal(toy_get(cfg)->poll_ms, 7000);
        assert_strv(toy_get(cfg)->tags, STRV("a", "b"));
        assert_null(cfg->warnings);
        config_free(cfg);

        setenv("TOY_POLL", "2s", 1);
        setenv("TOY_MODE", "slow", 1);
        cfg = LOAD_OK("--config-file", path);
        assert_string_equal(toy_get(cfg)->mode, "slow");
        assert_int_equal(toy_get(cfg)->poll_ms, 2000);
        config_free(cfg);

        cfg = LOAD_OK("--config-file", path, "--toy-poll", "3s", "-toy_mode=fast",
                      "--toy-tags=x,old");
        assert_string_equal(toy_get(cfg)->mode, "fast");
        assert_int_equal(toy_get(cfg)->poll_ms, 3000);
        assert_strv(toy_get(cfg)->tags, STRV("x", "old"));
        assert_strv(cfg->warnings, STRV("--toy-tags: \"old\" is deprecated"));

        /* the effective-config dump holds the toy's options as devlet's own */
        char *json = config_to_json(cfg);
        assert_contains(json, "\"toy-mode\":\"fast\"");
        assert_contains(json, "\"toy-poll\":3000");
        assert_contains(json, "\"toy-tags\":[\"x\",\"old\"]");
        free(json);
        config_free(cfg);
}

static void test_backend_options_errors(void **state)
{
        /* choices, from a flag, an env var and a file key */
        struct diag d = LOAD_ERR("--toy-mode", "medium");
        assert_string_equal(d.message, "--toy-mode: invalid value \"medium\" (allowed: fast, slow)");
        setenv("TOY_PULSE", "soon", 1);
        d = LOAD_ERR();
        assert_contains(d.message, "TOY_PULSE: invalid value \"soon\"");
        unsetenv("TOY_PULSE");
        d = parse_err("version: v1\nflags:\n  toy:\n    mode: medium\n");
        assert_int_equal(d.line, 4);
        assert_int_equal(d.column, 11);
        assert_string_equal(d.message,
                            "flags.toy.mode: invalid value \"medium\" (allowed: fast, slow)");

        /* a typo gets the backend's flag as a hint */
        d = LOAD_ERR("--toy-mod", "fast");
        assert_string_equal(d.message, "unknown flag --toy-mod; did you mean --toy-mode?");

        /* the finish hook refuses */
        d = LOAD_ERR("--toy-mode=fast", "--toy-poll=0");
        assert_string_equal(d.message, "--toy-mode=fast needs --toy-poll above 0");
}

static void test_backend_options_help(void **state)
{
        char *buf = help_text();
        assert_contains(buf, "--toy-mode fast|slow  (also --toy_mode)\n      How the toy runs\n"
                             "      env: TOY_MODE; key: flags.toy.mode; default: slow");
        assert_contains(buf, "--toy-poll DURATION\n");
        assert_contains(buf, "env: TOY_TAGS; key: toyExtra.tags; default: (none)");
        /* after devlet's own options */
        assert_true(strstr(buf, "--toy-mode") > strstr(buf, "--verbosity"));
        free(buf);
}

/* The toy's backend side: 4 slots, all of resource toy.example/widget. */
static const char *toy_unit_resource(size_t unit, const void *ud)
{
        return "toy.example/widget";
}

static bool toy_unit_names(const char *ref, size_t unit, size_t nth, const void *ud)
{
        char want[16];
        snprintf(want, sizeof(want), "slot-%zu", unit);
        return strcmp(ref, want) == 0;
}

static const char *toy_ref_kind(const char *ref)
{
        return "in slot";
}

static void test_family_sharing(void **state)
{
        /* the toy's names and selectors, canonical */
        struct devlet_config *cfg = parse_ok("version: v1\n"
                                             "sharing:\n"
                                             "  timeSlicing:\n"
                                             "    resources:\n"
                                             "      - name: toy.example/widget\n"
                                             "        replicas: 2\n"
                                             "        devices: [slot-02, slot-3]\n");
        const struct sharing_resource_cfg *s = &cfg->sharing.resources[0];
        assert_strv(s->devices, STRV("slot-2", "slot-3"));

        /* selection is the shared one, the match the toy's */
        const struct dev_share_units units = { .n = 4,
                                               .resource = toy_unit_resource,
                                               .names = toy_unit_names,
                                               .ref_kind = toy_ref_kind };
        const struct sharing_resource_cfg *out[4];
        struct diag err = { 0 };
        assert_int_equal(dev_share_assign(&cfg->sharing, &units, out, &err), 0);
        assert_null(out[0]);
        assert_null(out[1]);
        assert_ptr_equal(out[2], s);
        assert_ptr_equal(out[3], s);
        config_free(cfg);

        cfg = parse_ok("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                       "      - {name: toy.example/widget, replicas: 2, devices: [slot-7]}\n");
        assert_int_equal(dev_share_assign(&cfg->sharing, &units, out, &err), -EINVAL);
        assert_string_equal(err.message, "unable to get IDs of devices to replicate for "
                                 "'toy.example/widget' resource: no matching device in slot: "
                                 "slot-7");
        config_free(cfg);

        /* the toy's grammar, name rule and domain; no other family's */
        struct diag d = parse_err("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                         "      - {name: toy.example/widget, replicas: 2, "
                                         "devices: [\"0\"]}\n");
        assert_string_equal(d.message, "sharing.timeSlicing.resources[0].devices[0]: \"0\" is "
                                       "not a toy slot (\"slot-<n>\", time-slicing only)");
        d = parse_err("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                      "      - {name: toy.example/gadget, replicas: 2}\n");
        assert_string_equal(d.message, "sharing.timeSlicing.resources[0].name: "
                                       "\"toy.example/gadget\" is not a valid resource name "
                                       "(toys are widgets)");
        d = parse_err("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                      "      - {name: gpu, replicas: 2}\n");
        assert_string_equal(d.message, "sharing.timeSlicing.resources[0].name: \"gpu\" is not "
                                       "a resource of a family that shares devices "
                                       "(toy.example)");
        d = parse_err("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                      "      - {name: nvidia.com/gpu, replicas: 2}\n");
        assert_contains(d.message, "\"nvidia.com/gpu\" is not a resource of a family");

        /* --backends offers the table's families only */
        cfg = LOAD_OK("--backends", "toy");
        assert_strv(cfg->backends, STRV("toy"));
        config_free(cfg);
        d = LOAD_ERR("--backends", "nvidia");
        assert_string_equal(d.message, "--backends: invalid value \"nvidia\" (allowed: auto, toy)");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_backend_section, setup, teardown),
                cmocka_unit_test_setup_teardown(test_backend_section_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_backend_section_diff, setup, teardown),
                cmocka_unit_test_setup_teardown(test_backend_options, setup, teardown),
                cmocka_unit_test_setup_teardown(test_backend_options_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_backend_options_help, setup, teardown),
                cmocka_unit_test_setup_teardown(test_family_sharing, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

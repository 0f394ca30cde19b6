/* GPU health in the NVIDIA backend: the XID policy as a pure function, and
 * the monitor thread against the mock, driven through a real uv loop until
 * the resources report the change; what a reload's new backend inherits;
 * stopping without waiting for the thread.  Events and lost GPUs are
 * injected by rewriting the mock's YAML; every test uses UUIDs of its own,
 * because the mock's event log lives as long as the process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dlfcn.h>

#include <cmocka.h>

#include "nvidia-test.h"

#include "devices/nvidia/health.h"
#include "devices/nvidia/internal.h"
#include "devices/nvidia/nvml-lib.h"

/* ---- the XID policy ---- */

static struct nvidia_xid_policy policy(const char *disable, const char *enable)
{
        struct nvidia_xid_policy p;
        char **w = NULL;
        nvidia_xid_policy_parse(disable, enable, &p, &w);
        assert_null(w);
        return p;
}

static void test_xid_policy(void **state)
{
        struct nvidia_xid_policy p = policy(NULL, NULL);
        assert_true(p.monitor);
        for (size_t i = 0; i < ARRAY_SIZE(nvidia_default_ignored_xids); i++)
                assert_false(nvidia_xid_critical(&p, nvidia_default_ignored_xids[i]));
        assert_true(nvidia_xid_critical(&p, 79));
        assert_true(nvidia_xid_critical(&p, 48));
        char *s = nvidia_xid_policy_ignored(&p);
        assert_string_equal(s, "13,31,43,45,68,109");
        free(s);

        p = policy(" 31, 79 ", "");
        assert_false(nvidia_xid_critical(&p, 79));
        assert_true(nvidia_xid_critical(&p, 48));

        p = policy("XIDs", NULL);
        assert_true(p.monitor);
        assert_false(nvidia_xid_critical(&p, 79));

        p = policy("all", NULL);
        assert_false(p.monitor);
        assert_false(nvidia_xid_critical(&p, 79));

        /* DISABLE=all with ENABLE=<list>: only those listed (NVIDIA turns checks off) */
        p = policy("all", "79,48");
        assert_true(p.monitor);
        assert_true(nvidia_xid_critical(&p, 79));
        assert_true(nvidia_xid_critical(&p, 48));
        assert_false(nvidia_xid_critical(&p, 92));
        assert_false(nvidia_xid_critical(&p, 13));
        s = nvidia_xid_policy_ignored(&p);
        assert_string_equal(s, "all except 79,48");
        free(s);

        p = policy(NULL, "all");
        assert_true(nvidia_xid_critical(&p, 13));
        p = policy("all", "all");
        assert_true(p.monitor);
        assert_true(nvidia_xid_critical(&p, 43));

        p = policy("13", "13,31");
        assert_true(nvidia_xid_critical(&p, 13));
        assert_true(nvidia_xid_critical(&p, 31));
        assert_false(nvidia_xid_critical(&p, 43));
        s = nvidia_xid_policy_ignored(&p);
        assert_string_equal(s, "43,45,68,109");
        free(s);

        char **w = NULL;
        nvidia_xid_policy_parse("abc,13x", "-1", &p, &w);
        assert_int_equal(strv_len(w), 3);
        assert_contains(w[0], "DP_DISABLE_HEALTHCHECKS: ignoring \"abc\"");
        assert_contains(w[2], "DP_ENABLE_HEALTHCHECKS");
        strv_free(w);
        assert_true(nvidia_xid_critical(&p, 79));
}

/* ---- the monitor ---- */

static unsigned gen = 0x70000000;
static char gpu0_extra[256], gpu1_extra[256], events[2048];

/* GPU 0: an A100 40GB in MIG mode (two 3g.20gb); GPU 1: a plain A100.
 * UUIDs carry this test's generation. */
static void write_node(void)
{
        char yaml[8192];
        snprintf(yaml, sizeof(yaml),
                 "devices:\n"
                 "  - uuid: GPU-%08x-0000-0000-0000-000000000000\n"
                 "    name: NVIDIA A100-SXM4-40GB\n    memoryMiB: 40960\n"
                 "    pciBusId: '00000000:10:00.0'\n    computeCapability: '8.0'\n    numaNode: 0\n"
                 "    mig:\n"
                 "      - {gi: 1, ci: 0, profile: 3g.20gb, placement: 0, uuid: MIG-%08x-0000-0000-0000-000000000001}\n"
                 "      - {gi: 2, ci: 0, profile: 3g.20gb, placement: 4, uuid: MIG-%08x-0000-0000-0000-000000000002}\n"
                 "%s"
                 "  - uuid: GPU-%08x-0000-0000-0000-000000000001\n"
                 "    name: NVIDIA A100-PCIE-40GB\n    memoryMiB: 40960\n"
                 "    pciBusId: '00000000:20:00.0'\n    computeCapability: '8.0'\n    numaNode: 1\n"
                 "%s"
                 "%s%s",
                 gen, gen, gen, gpu0_extra, gen, gpu1_extra, events[0] ? "events:\n" : "", events);
        nvml_write(yaml);
}

static void add_event(const char *ev)
{
        strncat(events, "  - ", sizeof(events) - strlen(events) - 1);
        strncat(events, ev, sizeof(events) - strlen(events) - 1);
        strncat(events, "\n", sizeof(events) - strlen(events) - 1);
        write_node();
}

static int health_setup(void **state)
{
        gen++;
        gpu0_extra[0] = gpu1_extra[0] = events[0] = '\0';
        unsetenv("DP_DISABLE_HEALTHCHECKS");
        unsetenv("DP_ENABLE_HEALTHCHECKS");
        write_node();
        return 0;
}

static const char *const shared_yaml =
    "version: v1\nflags: {migStrategy: mixed}\n"
    "sharing:\n  timeSlicing:\n"
    "    resources: [{name: gpu, replicas: 2}, {name: mig-3g.20gb, replicas: 2}]\n";

struct watch {
        uv_loop_t loop;
        struct devlet_config *cfg;
        struct dev_backend *b;
        int changes;
};

static void on_change(struct dev_resource *r, void *ud)
{
        ((struct watch *)ud)->changes++;
}

static void watch_resources(struct watch *w)
{
        size_t n;
        struct dev_resource **res = nvidia_backend_ops.resources(w->b, &n);
        for (size_t i = 0; i < n; i++) {
                res[i]->on_change = on_change;
                res[i]->on_change_ud = w;
        }
}

static void watch_start(struct watch *w, const char *yaml)
{
        memset(w, 0, sizeof(*w));
        assert_int_equal(uv_loop_init(&w->loop), 0);
        w->cfg = cfg_yaml(yaml);
        w->b = backend_new(&w->loop, w->cfg);
        watch_resources(w);
}

/* What the daemon's reload does: a new backend from a fresh scan (with
 * config yaml, NULL: the same), inherit, destroy the old one; the watch
 * follows the new one, its change count reset. */
static void watch_reload(struct watch *w, const char *yaml)
{
        struct devlet_config *cfg = yaml ? cfg_yaml(yaml) : NULL;
        struct dev_backend *next = backend_new(&w->loop, cfg ? cfg : w->cfg);
        nvidia_backend_ops.inherit(next, w->b);
        nvidia_backend_ops.destroy(w->b);
        if (cfg) {
                config_free(w->cfg);
                w->cfg = cfg;
        }
        w->b = next;
        w->changes = 0;
        watch_resources(w);
}

static void watch_stop(struct watch *w)
{
        nvidia_backend_ops.destroy(w->b);
        uv_run(&w->loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&w->loop), 0);
        config_free(w->cfg);
}

static void on_deadline(uv_timer_t *t)
{
        *(bool *)t->data = true;
}

/* Runs the loop until at least want changes were notified (deadline 10 s). */
static void wait_changes(struct watch *w, int want)
{
        bool expired = false;
        uv_timer_t t;
        uv_timer_init(&w->loop, &t);
        t.data = &expired;
        uv_timer_start(&t, on_deadline, 10000, 0);
        while (w->changes < want && !expired)
                uv_run(&w->loop, UV_RUN_ONCE);
        uv_close((uv_handle_t *)&t, NULL);
        uv_run(&w->loop, UV_RUN_NOWAIT);
        assert_true(w->changes >= want);
}

/* Health of every device of gpu (whole, MIG, replicas): 1 all healthy,
 * 0 all unhealthy, -1 mixed. */
static int gpu_health(struct watch *w, size_t gpu)
{
        size_t n, good = 0, bad = 0;
        struct dev_resource **res = nvidia_backend_ops.resources(w->b, &n);
        for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < res[i]->n_devices; k++) {
                        const struct nvidia_dev *nd = res[i]->devices[k].priv;
                        if (nd->gpu != gpu)
                                continue;
                        if (res[i]->devices[k].health == DEV_HEALTHY)
                                good++;
                        else
                                bad++;
                }
        assert_true(good + bad > 0);
        return bad == 0 ? 1 : good == 0 ? 0 : -1;
}

static void test_xid_marks_whole_gpu(void **state)
{
        struct watch w;
        watch_start(&w, shared_yaml);
        assert_int_equal(res_find(w.b, "nvidia.com/gpu")->n_devices, 2);
        assert_int_equal(res_find(w.b, "nvidia.com/mig-3g.20gb")->n_devices, 4);
        assert_int_equal(gpu_health(&w, 0), 1);
        assert_int_equal(gpu_health(&w, 1), 1);

        add_event("{device: 1, type: xid, xid: 79}");
        wait_changes(&w, 1);
        assert_int_equal(w.changes, 1); /* one resource, notified once */
        assert_int_equal(gpu_health(&w, 1), 0);
        assert_int_equal(gpu_health(&w, 0), 1);

        /* an XID in one MIG instance: the whole board, both instances, all replicas */
        add_event("{device: 0, type: xid, xid: 94, gi: 2, ci: 0}");
        wait_changes(&w, 2);
        assert_int_equal(gpu_health(&w, 0), 0);
        assert_int_equal(nvidia_backend_xid_count(w.b, 79), 1);
        assert_int_equal(nvidia_backend_xid_count(w.b, 94), 1);
        /* by GPU, in order: GPU 1's 79 first, then GPU 0's 94 */
        struct nvidia_xid_event ev[4];
        assert_int_equal(nvidia_backend_xid_events(w.b, ev, 4), 2);
        assert_int_equal(ev[0].xid, 79);
        assert_int_equal(ev[1].xid, 94);
        assert_true(ev[1].seq > ev[0].seq);
        assert_int_equal(ev[0].count, 1);
        assert_string_not_equal(ev[0].uuid, ev[1].uuid);
        assert_int_equal(nvidia_backend_xid_events(w.b, NULL, 0), 2);
        watch_stop(&w);
}

static void test_ignored_xid(void **state)
{
        struct watch w;
        watch_start(&w, shared_yaml);
        add_event("{device: 0, type: xid, xid: 43}");
        add_event("{device: 0, type: doubleBitEcc}");
        add_event("{device: 1, type: xid, xid: 79}");
        wait_changes(&w, 1);
        assert_int_equal(gpu_health(&w, 1), 0);
        assert_int_equal(gpu_health(&w, 0), 1);
        assert_int_equal(nvidia_backend_xid_count(w.b, 43), 1);
        watch_stop(&w);
}

static void test_disable_xids_lost_gpu(void **state)
{
        setenv("DP_DISABLE_HEALTHCHECKS", "xids", 1);
        struct watch w;
        watch_start(&w, shared_yaml);
        strcpy(gpu0_extra, "    lost: true\n");
        add_event("{device: 1, type: xid, xid: 79}");
        wait_changes(&w, 1);
        assert_int_equal(gpu_health(&w, 0), 0); /* lost */
        assert_int_equal(gpu_health(&w, 1), 1); /* XIDs off */
        assert_int_equal(nvidia_backend_xid_count(w.b, 79), 1);
        watch_stop(&w);
}

static void test_enable_with_disable_all(void **state)
{
        setenv("DP_DISABLE_HEALTHCHECKS", "all", 1);
        setenv("DP_ENABLE_HEALTHCHECKS", "79", 1);
        struct watch w;
        watch_start(&w, shared_yaml);
        add_event("{device: 0, type: xid, xid: 48}");
        add_event("{device: 1, type: xid, xid: 79}");
        wait_changes(&w, 1);
        assert_int_equal(gpu_health(&w, 1), 0);
        assert_int_equal(gpu_health(&w, 0), 1);
        assert_int_equal(nvidia_backend_xid_count(w.b, 48), 1);
        watch_stop(&w);
}

static const char *const no_metrics_yaml = "version: v1\nflags: {migStrategy: mixed, metricsAddress: \"\"}\n";

/* Without metrics, no monitor at all. */
static void test_disable_all(void **state)
{
        setenv("DP_DISABLE_HEALTHCHECKS", "all", 1);
        struct watch w;
        watch_start(&w, no_metrics_yaml);
        assert_null(((struct nvidia_backend *)w.b)->health);
        assert_int_equal(gpu_health(&w, 0), 1);
        assert_int_equal(gpu_health(&w, 1), 1);
        watch_stop(&w);
}

/* Runs the loop until the backend counted want of xid (deadline 10 s). */
static void wait_xid_count(struct watch *w, unsigned long long xid, uint64_t want)
{
        bool expired = false;
        uv_timer_t t;
        uv_timer_init(&w->loop, &t);
        t.data = &expired;
        uv_timer_start(&t, on_deadline, 10000, 0);
        while (nvidia_backend_xid_count(w->b, xid) < want && !expired)
                uv_run(&w->loop, UV_RUN_ONCE);
        uv_close((uv_handle_t *)&t, NULL);
        uv_run(&w->loop, UV_RUN_NOWAIT);
        assert_int_equal(nvidia_backend_xid_count(w->b, xid), want);
}

/* Health checks off but metrics on: the XIDs still reach the counters
 * (and the sampler), and no GPU is judged. */
static void test_disable_all_still_counts_xids(void **state)
{
        setenv("DP_DISABLE_HEALTHCHECKS", "all", 1);
        struct watch w;
        watch_start(&w, shared_yaml);
        assert_non_null(((struct nvidia_backend *)w.b)->health);
        add_event("{device: 1, type: xid, xid: 79}");
        add_event("{device: 0, type: xid, xid: 48}");
        wait_xid_count(&w, 79, 1);
        wait_xid_count(&w, 48, 1);
        assert_int_equal(w.changes, 0);
        assert_int_equal(gpu_health(&w, 0), 1);
        assert_int_equal(gpu_health(&w, 1), 1);
        watch_stop(&w);
}

static void test_lost_and_recovery(void **state)
{
        struct watch w;
        watch_start(&w, "version: v1\nhealth: {recovery: {enabled: true, quietPeriod: 200ms}}\n");
        strcpy(gpu1_extra, "    lost: true\n");
        write_node();
        wait_changes(&w, 1);
        assert_int_equal(gpu_health(&w, 1), 0);
        gpu1_extra[0] = '\0';
        write_node();
        wait_changes(&w, 2);
        assert_int_equal(gpu_health(&w, 1), 1);

        /* an XID, then quiet: back after the quiet period */
        add_event("{device: 0, type: xid, xid: 79}");
        wait_changes(&w, 3);
        assert_int_equal(gpu_health(&w, 0), 0);
        wait_changes(&w, 4);
        assert_int_equal(gpu_health(&w, 0), 1);
        watch_stop(&w);
}

static void test_lost_at_start_recovers(void **state)
{
        strcpy(gpu1_extra, "    lost: true\n");
        write_node();
        struct watch w;
        watch_start(&w, "version: v1\nhealth: {recovery: {enabled: true, quietPeriod: 0s}}\n");
        struct dev_resource *r = res_find(w.b, "nvidia.com/gpu");
        assert_string_equal(r->devices[1].id, "lost-gpu-1");
        assert_int_equal(gpu_health(&w, 1), 0);
        gpu1_extra[0] = '\0';
        write_node();
        wait_changes(&w, 1);
        assert_int_equal(gpu_health(&w, 1), 1);
        /* registered for events once back */
        add_event("{device: 1, type: xid, xid: 79}");
        wait_changes(&w, 2);
        watch_stop(&w);
}

static void test_unsupported_events(void **state)
{
        strcpy(gpu1_extra, "    supportedEvents: 0x4\n");
        write_node();
        struct watch w;
        watch_start(&w, NULL);
        assert_int_equal(gpu_health(&w, 1), 0);
        assert_int_equal(gpu_health(&w, 0), 1);
        assert_contains(((struct nvidia_backend *)w.b)->gpu_health[1].reason, "too old");
        watch_stop(&w);
}

static struct nvidia_gpu_health *gpu_state(struct watch *w, size_t gpu)
{
        return &((struct nvidia_backend *)w->b)->gpu_health[gpu];
}

static void test_inherit_health_and_counts(void **state)
{
        struct watch w;
        watch_start(&w, shared_yaml);
        add_event("{device: 0, type: xid, xid: 43}"); /* ignored, but counted */
        add_event("{device: 1, type: xid, xid: 79}");
        wait_changes(&w, 1);
        assert_int_equal(gpu_health(&w, 1), 0);
        int64_t since = gpu_state(&w, 1)->since;
        assert_true(since > 0);
        struct nvidia_xid_event before[4];
        assert_int_equal(nvidia_backend_xid_events(w.b, before, 4), 2);

        watch_reload(&w, NULL);
        /* the new scan's devices start unhealthy, MIG devices and replicas of
         * GPU 0 untouched, with the old reason and the time of the XID */
        assert_int_equal(gpu_health(&w, 1), 0);
        assert_int_equal(gpu_health(&w, 0), 1);
        assert_string_equal(gpu_state(&w, 1)->reason, "XID 79");
        assert_int_equal(gpu_state(&w, 1)->since, since);
        assert_int_equal(nvidia_backend_xid_count(w.b, 79), 1);
        assert_int_equal(nvidia_backend_xid_count(w.b, 43), 1);
        struct nvidia_xid_event after[4];
        assert_int_equal(nvidia_backend_xid_events(w.b, after, 4), 2);
        for (size_t i = 0; i < 2; i++) {
                assert_string_equal(after[i].uuid, before[i].uuid);
                assert_int_equal(after[i].xid, before[i].xid);
                assert_int_equal(after[i].count, before[i].count);
                assert_int_equal(after[i].seq, before[i].seq);
        }

        /* the new monitor counts on from there; GPU 1 stays unhealthy (no
         * recovery) */
        add_event("{device: 0, type: xid, xid: 79}");
        wait_changes(&w, 1);
        assert_int_equal(gpu_health(&w, 0), 0);
        assert_int_equal(gpu_health(&w, 1), 0);
        assert_int_equal(nvidia_backend_xid_count(w.b, 79), 2);
        struct nvidia_xid_event last[4];
        assert_int_equal(nvidia_backend_xid_events(w.b, last, 4), 3);
        assert_true(last[2].seq > before[1].seq);
        watch_stop(&w);
}

/* The new monitor never saw the XID: that it brings the GPU back proves
 * the seed reached its view. */
static void test_inherit_then_recover(void **state)
{
        struct watch w;
        watch_start(&w, "version: v1\nhealth: {recovery: {enabled: true, quietPeriod: 1h}}\n");
        add_event("{device: 1, type: xid, xid: 79}");
        wait_changes(&w, 1);
        assert_int_equal(gpu_health(&w, 1), 0);
        watch_reload(&w, "version: v1\nhealth: {recovery: {enabled: true, quietPeriod: 0s}}\n");
        assert_int_equal(gpu_health(&w, 1), 0);
        wait_changes(&w, 1);
        assert_int_equal(gpu_health(&w, 1), 1);
        assert_null(gpu_state(&w, 1)->reason);
        watch_stop(&w);
}

/* Lost while running, answering again at the reload: unhealthy still, and
 * its quiet period counts from the reload at the earliest. */
static void test_inherit_lost(void **state)
{
        struct watch w;
        watch_start(&w, NULL);
        strcpy(gpu1_extra, "    lost: true\n");
        write_node();
        wait_changes(&w, 1);
        gpu1_extra[0] = '\0';
        write_node();
        assert_true(gpu_state(&w, 1)->lasting);
        int64_t before = nvidia_health_now_ms();
        watch_reload(&w, NULL);
        assert_int_equal(gpu_health(&w, 1), 0);
        assert_true(gpu_state(&w, 1)->lasting);
        assert_true(gpu_state(&w, 1)->since >= before);
        watch_stop(&w);
}

/* Without a monitor the scan decides health; counters still carry over. */
static void test_inherit_unmonitored(void **state)
{
        struct watch w;
        watch_start(&w, NULL);
        add_event("{device: 1, type: xid, xid: 79}");
        wait_changes(&w, 1);
        setenv("DP_DISABLE_HEALTHCHECKS", "all", 1);
        watch_reload(&w, no_metrics_yaml);
        assert_null(((struct nvidia_backend *)w.b)->health);
        assert_int_equal(gpu_health(&w, 1), 1);
        assert_int_equal(nvidia_backend_xid_count(w.b, 79), 1);
        watch_stop(&w);
}

/* The same with metrics on: the monitor runs for the XIDs only and
 * carries no failure over. */
static void test_inherit_xids_only(void **state)
{
        struct watch w;
        watch_start(&w, NULL);
        add_event("{device: 1, type: xid, xid: 79}");
        wait_changes(&w, 1);
        assert_int_equal(gpu_health(&w, 1), 0);
        setenv("DP_DISABLE_HEALTHCHECKS", "all", 1);
        watch_reload(&w, NULL);
        assert_non_null(((struct nvidia_backend *)w.b)->health);
        assert_int_equal(gpu_health(&w, 1), 1);
        assert_int_equal(nvidia_backend_xid_count(w.b, 79), 1);
        watch_stop(&w);
}

static bool file_says_held(const char *path)
{
        char text[64] = "";
        FILE *f = fopen(path, "re");
        if (!f)
                return false;
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        text[n] = '\0';
        fclose(f);
        return strstr(text, "held") != NULL;
}

/* destroy() while the thread is stuck in nvmlEventSetWait (the mock holds
 * it) returns at once; the loop keeps the monitor's handle until the wait
 * ends, then releases everything. */
static void test_destroy_does_not_wait(void **state)
{
        char hold[PATH_MAX + 16];
        tmp_path(hold, sizeof(hold), "hold");
        tmp_write("hold", "");
        setenv("MOCK_NVML_EVENT_HOLD", hold, 1);
        struct watch w;
        watch_start(&w, NULL);
        for (int i = 0; i < 10000 && !file_says_held(hold); i++)
                usleep(1000);
        assert_true(file_says_held(hold));
        nvidia_backend_ops.destroy(w.b);
        uv_run(&w.loop, UV_RUN_NOWAIT);
        assert_true(uv_loop_alive(&w.loop)); /* the monitor's handle, waiting for the thread */
        assert_int_equal(unlink(hold), 0);
        unsetenv("MOCK_NVML_EVENT_HOLD");
        uv_run(&w.loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&w.loop), 0);
        config_free(w.cfg);
}

static void *hiding_lookup(void *ctx, const char *name)
{
        return strcmp(name, "nvmlEventSetCreate") == 0 ? NULL : dlsym(ctx, name);
}

static void test_start_failure(void **state)
{
        struct nvml_lib *l = xcalloc(1, sizeof(*l));
        l->handle = dlopen(mock_lib, RTLD_NOW | RTLD_LOCAL);
        l->path = xstrdup(mock_lib);
        struct diag err = { 0 };
        assert_int_equal(nvml_lib_resolve(l, hiding_lookup, l->handle, &err), 0);
        struct watch w;
        memset(&w, 0, sizeof(w));
        uv_loop_init(&w.loop);
        w.cfg = cfg_yaml(NULL);
        assert_int_equal(nvidia_backend_create_with(l, &w.loop, w.cfg, &w.b, &err), 0);
        assert_non_null(w.b);
        assert_int_equal(gpu_health(&w, 0), 0);
        assert_int_equal(gpu_health(&w, 1), 0);
        assert_contains(((struct nvidia_backend *)w.b)->health_state, "failed");
        watch_stop(&w);
}

static void test_no_loop_no_thread(void **state)
{
        struct devlet_config *cfg = cfg_yaml(NULL);
        struct dev_backend *b = backend_new(NULL, cfg);
        assert_null(((struct nvidia_backend *)b)->health);
        nvidia_backend_ops.destroy(b);
        config_free(cfg);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_xid_policy),
                cmocka_unit_test_setup(test_xid_marks_whole_gpu, health_setup),
                cmocka_unit_test_setup(test_ignored_xid, health_setup),
                cmocka_unit_test_setup(test_disable_xids_lost_gpu, health_setup),
                cmocka_unit_test_setup(test_enable_with_disable_all, health_setup),
                cmocka_unit_test_setup(test_disable_all, health_setup),
                cmocka_unit_test_setup(test_disable_all_still_counts_xids, health_setup),
                cmocka_unit_test_setup(test_lost_and_recovery, health_setup),
                cmocka_unit_test_setup(test_lost_at_start_recovers, health_setup),
                cmocka_unit_test_setup(test_unsupported_events, health_setup),
                cmocka_unit_test_setup(test_start_failure, health_setup),
                cmocka_unit_test_setup(test_no_loop_no_thread, health_setup),
                cmocka_unit_test_setup(test_inherit_health_and_counts, health_setup),
                cmocka_unit_test_setup(test_inherit_then_recover, health_setup),
                cmocka_unit_test_setup(test_inherit_lost, health_setup),
                cmocka_unit_test_setup(test_inherit_unmonitored, health_setup),
                cmocka_unit_test_setup(test_inherit_xids_only, health_setup),
                cmocka_unit_test_setup(test_destroy_does_not_wait, health_setup),
        };
        return cmocka_run_group_tests(tests, nvidia_group_setup, nvidia_group_teardown);
}

/* `devlet labels`: the node's feature-discovery labels (GFD's, plus
 * "<resource>.count" for host devices).
 *
 * With --oneshot (the default) the backends are created without a loop,
 * the labels printed (or written to --output-file when one is named, or
 * published once through the API server with --labels-output node-feature
 * or node) and devlet exits.  With --oneshot=false it runs like GFD: a loop, the
 * backends watching their devices, and the labeler rewriting the output
 * file every --sleep-interval and whenever a resource changes, until
 * SIGTERM/SIGINT. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "base/cleanup.h"
#include "base/pool.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "cmd.h"
#include "config/config.h"
#include "devices/device.h"
#include "labels/labels.h"

#define MAX_BACKENDS 8

struct labels_cmd {
        uv_loop_t loop;
        struct devlet_config *cfg;
        struct labels_backend backends[MAX_BACKENDS];
        size_t n;
        struct labeler *labeler;
        uv_signal_t sig_term, sig_int;
};

/* Creates every wanted backend; returns 0, or 1 after printing why one
 * failed (backends_destroy() frees those made before). */
static int backends_create(struct labels_cmd *c, uv_loop_t *loop)
{
        for (size_t i = 0; dev_backends[i] && c->n < MAX_BACKENDS; i++) {
                const struct dev_backend_ops *ops = dev_backends[i];
                if (!dev_backend_wanted(c->cfg, ops->name))
                        continue;
                struct dev_backend *b = NULL;
                struct diag why = { 0 };
                int r = ops->create(loop, c->cfg, &b, &why);
                if (r < 0) {
                        fprintf(stderr, "devlet labels: backend %s: %s\n", ops->name,
                                why.message[0] ? why.message : strerror(-r));
                        return 1;
                }
                if (b)
                        c->backends[c->n++] = (struct labels_backend){ ops, b };
        }
        return 0;
}

static void backends_destroy(struct labels_cmd *c)
{
        for (size_t i = 0; i < c->n; i++)
                c->backends[i].ops->destroy(c->backends[i].backend);
        c->n = 0;
}

static int oneshot(struct labels_cmd *c)
{
        struct dev_labels set = { 0 };
        _cleanup_strv_free_ char **warnings = NULL;
        labels_collect(c->cfg, c->backends, c->n, &set, &warnings);
        for (size_t i = 0; warnings && warnings[i]; i++)
                fprintf(stderr, "devlet labels: warning: %s\n", warnings[i]);
        if (labels_output_mode(c->cfg) != LABELS_TO_FILE) {
                struct diag diag = { 0 };
                int r = labels_publish_once(c->cfg, &set, &diag);
                dev_labels_release(&set);
                if (r < 0) {
                        char buf[DIAG_FORMAT_MAX];
                        fprintf(stderr, "devlet labels: %s\n",
                                diag.message[0] ? diag_format(&diag, buf, sizeof(buf))
                                                : strerror(-r));
                        return 1;
                }
                return 0;
        }
        /* no file named: print */
        const char *file = c->cfg->labels_output_file;
        const char *path = file[0] && strcmp(file, "-") != 0 ? file : NULL;
        struct diag diag = { 0 };
        int r = labels_write_file(path, &set, &diag);
        dev_labels_release(&set);
        if (r < 0) {
                char buf[DIAG_FORMAT_MAX];
                fprintf(stderr, "devlet labels: %s\n", diag_format(&diag, buf, sizeof(buf)));
                return 1;
        }
        return 0;
}

static void on_resource_change(struct dev_resource *r, void *ud)
{
        struct labels_cmd *c = ud;
        labels_refresh(c->labeler);
}

static void on_signal(uv_signal_t *h, int signum)
{
        struct labels_cmd *c = h->data;
        log_info("labels", "shutting down signal=%s", strsignal(signum));
        labels_stop(TAKE_PTR(c->labeler));
        backends_destroy(c);
        uv_signal_stop(&c->sig_term);
        uv_signal_stop(&c->sig_int);
        uv_stop(&c->loop);
}

static void close_any(uv_handle_t *h, void *arg)
{
        if (!uv_is_closing(h))
                uv_close(h, NULL);
}

static int keep_labeling(struct labels_cmd *c)
{
        int r = uv_loop_init(&c->loop);
        if (r < 0) {
                fprintf(stderr, "devlet labels: cannot create the event loop: %s\n", uv_strerror(r));
                return 1;
        }
        int rc = backends_create(c, &c->loop);
        if (rc == 0) {
                for (size_t i = 0; i < c->n; i++) {
                        size_t n = 0;
                        struct dev_resource **res =
                                c->backends[i].ops->resources(c->backends[i].backend, &n);
                        for (size_t k = 0; k < n; k++)
                                dev_resource_watch(res[k], on_resource_change, c);
                }
                signal(SIGPIPE, SIG_IGN);
                uv_signal_t *sigs[] = { &c->sig_term, &c->sig_int };
                int nums[] = { SIGTERM, SIGINT };
                pool_start_blocking(&c->loop, nums, ARRAY_SIZE(nums));
                for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
                        uv_signal_init(&c->loop, sigs[i]);
                        sigs[i]->data = c;
                        uv_signal_start(sigs[i], on_signal, nums[i]);
                }
                labels_start(&c->loop, c->cfg, c->backends, c->n, &c->labeler);
                uv_run(&c->loop, UV_RUN_DEFAULT);
        }
        labels_stop(TAKE_PTR(c->labeler));
        backends_destroy(c);
        /* the backends finish first (a GPU health thread leaves its event
         * wait); then whatever is left, our signal handles included */
        if (rc == 0) {
                uv_close((uv_handle_t *)&c->sig_term, NULL);
                uv_close((uv_handle_t *)&c->sig_int, NULL);
        }
        uv_run(&c->loop, UV_RUN_DEFAULT);
        uv_walk(&c->loop, close_any, NULL);
        uv_run(&c->loop, UV_RUN_DEFAULT);
        uv_loop_close(&c->loop);
        return rc;
}

int cmd_labels(int argc, char **argv)
{
        struct labels_cmd c = { 0 };
        int r = cmd_load_config(argc, argv, &c.cfg, NULL);
        if (r)
                return r;
        log_set_verbosity((int)c.cfg->verbosity);
        int rc;
        if (c.cfg->labels_oneshot) {
                rc = backends_create(&c, NULL);
                if (rc == 0)
                        rc = oneshot(&c);
                backends_destroy(&c);
        } else {
                rc = keep_labeling(&c);
        }
        config_free(c.cfg);
        return rc;
}

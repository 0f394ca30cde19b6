/* `devlet probe`: acts as the kubelet toward one device plugin socket (any
 * plugin's, not only devlet's) and prints what it answers as JSON: its
 * options, the first ListAndWatch snapshot, and optionally an Allocate and a
 * GetPreferredAllocation.  Operators use it to debug plugins. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "cmd.h"
#include "deviceplugin.pb-c.h"
#include "grpc/grpc.h"

struct probe {
        const char *socket;
        uint64_t timeout_ms;
};

static void probe_usage(FILE *f)
{
        fputs("usage: devlet probe --socket PATH [--allocate ID,...] [--preferred N] [--timeout 5s]\n"
              "\n"
              "Calls a device plugin the way the kubelet does and prints its answers as JSON:\n"
              "  --socket PATH      the plugin's socket (in /var/lib/kubelet/device-plugins)\n"
              "  --allocate IDS     also call Allocate for one container holding these IDs\n"
              "  --preferred N      also call GetPreferredAllocation for N of the healthy IDs\n"
              "  --timeout DUR      per call (default 5s; ms, s, m suffixes)\n",
              f);
}

static int parse_timeout(const char *s, uint64_t *out)
{
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (errno || end == s || v < 0)
                return -EINVAL;
        if (strcmp(end, "ms") == 0)
                *out = (uint64_t)v;
        else if (strcmp(end, "s") == 0 || *end == '\0')
                *out = (uint64_t)(v * 1000);
        else if (strcmp(end, "m") == 0)
                *out = (uint64_t)(v * 60000);
        else
                return -EINVAL;
        return 0;
}

static int fail_status(const char *what, int status, const char *message)
{
        fprintf(stderr, "devlet probe: %s failed: %s: %s\n", what, grpc_status_name(status),
                message ? message : "");
        return 1;
}

/* ---- the first ListAndWatch message, through a private loop ---- */

struct first_msg {
        uint8_t *buf;
        size_t len;
        int have;
        int status;
        char *message;
        int done;
};

static int on_first(const uint8_t *msg, size_t len, void *ud)
{
        struct first_msg *f = ud;
        f->buf = xmalloc(len ? len : 1);
        memcpy(f->buf, msg, len);
        f->len = len;
        f->have = 1;
        return 1; /* cancel: one snapshot is all we want */
}

static void on_stream_done(int status, const char *message, void *ud)
{
        struct first_msg *f = ud;
        f->status = status;
        f->message = message ? xstrdup(message) : NULL;
        f->done = 1;
}

static void close_any(uv_handle_t *h, void *arg)
{
        if (!uv_is_closing(h))
                uv_close(h, NULL);
}

static int first_snapshot(const struct probe *p, struct first_msg *f)
{
        uv_loop_t loop;
        uv_loop_init(&loop);
        V1beta1__Empty empty;
        v1beta1__empty__init(&empty);
        uint8_t buf[8];
        size_t len = v1beta1__empty__pack(&empty, buf);
        int r = grpc_client_call_start(&loop, p->socket, "/v1beta1.DevicePlugin/ListAndWatch", buf,
                                       len, p->timeout_ms, on_first, on_stream_done, f, NULL);
        if (r == 0)
                while (!f->done && uv_run(&loop, UV_RUN_ONCE))
                        ;
        uv_walk(&loop, close_any, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
        if (r < 0) {
                f->status = GRPC_STATUS_UNAVAILABLE;
                f->message = xstrdup(strerror(-r));
        }
        return f->have ? 0 : -1;
}

/* ---- unary calls ---- */

static int unary(const struct probe *p, const char *method, const ProtobufCMessage *req,
                 uint8_t **reply, size_t *reply_len, const char *what)
{
        size_t len = protobuf_c_message_get_packed_size(req);
        _cleanup_free_ uint8_t *buf = xmalloc(len ? len : 1);
        protobuf_c_message_pack(req, buf);
        _cleanup_free_ char *message = NULL;
        int status = grpc_client_unary_sync(p->socket, method, buf, len, p->timeout_ms, reply,
                                            reply_len, &message);
        if (status != GRPC_STATUS_OK)
                return fail_status(what, status, message);
        return 0;
}

static json_t *strv_json(char **v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

static json_t *container_response_json(const V1beta1__ContainerAllocateResponse *c)
{
        json_t *envs = json_object(), *anns = json_object(), *mounts = json_array(),
               *devs = json_array(), *cdis = json_array();
        for (size_t i = 0; i < c->n_envs; i++)
                json_object_set_new(envs, c->envs[i]->key, json_string(c->envs[i]->value));
        for (size_t i = 0; i < c->n_annotations; i++)
                json_object_set_new(anns, c->annotations[i]->key, json_string(c->annotations[i]->value));
        for (size_t i = 0; i < c->n_mounts; i++)
                json_array_append_new(mounts, json_pack("{s:s, s:s, s:b}", "container_path",
                                                        c->mounts[i]->container_path, "host_path",
                                                        c->mounts[i]->host_path, "read_only",
                                                        c->mounts[i]->read_only));
        for (size_t i = 0; i < c->n_devices; i++)
                json_array_append_new(devs, json_pack("{s:s, s:s, s:s}", "container_path",
                                                      c->devices[i]->container_path, "host_path",
                                                      c->devices[i]->host_path, "permissions",
                                                      c->devices[i]->permissions));
        for (size_t i = 0; i < c->n_cdi_devices; i++)
                json_array_append_new(cdis, json_string(c->cdi_devices[i]->name));
        return json_pack("{s:o, s:o, s:o, s:o, s:o}", "envs", envs, "mounts", mounts, "devices", devs,
                         "annotations", anns, "cdi_devices", cdis);
}

static char **split_ids(const char *s, size_t *n)
{
        char **v = NULL;
        _cleanup_free_ char *copy = xstrdup(s);
        char *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
                if (*tok)
                        v = strv_push(v, tok);
        *n = strv_len(v);
        return v;
}

int cmd_probe(int argc, char **argv)
{
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "allocate", required_argument, NULL, 'a' },
                { "preferred", required_argument, NULL, 'p' },
                { "timeout", required_argument, NULL, 't' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        struct probe p = { .timeout_ms = 5000 };
        const char *allocate = NULL;
        long preferred = -1;
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "s:h", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        p.socket = optarg;
                        break;
                case 'a':
                        allocate = optarg;
                        break;
                case 'p': {
                        char *end;
                        preferred = strtol(optarg, &end, 10);
                        if (*end || preferred < 0 || preferred > 1000000) {
                                fprintf(stderr, "devlet probe: --preferred needs a count, not \"%s\"\n", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                }
                case 't':
                        if (parse_timeout(optarg, &p.timeout_ms) < 0) {
                                fprintf(stderr, "devlet probe: bad --timeout \"%s\"\n", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 'h':
                        probe_usage(stdout);
                        return 0;
                default:
                        fprintf(stderr, "devlet probe: unknown or incomplete flag \"%s\"\n\n", argv[optind - 1]);
                        probe_usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (!p.socket || optind < argc) {
                fprintf(stderr, optind < argc ? "devlet probe: unexpected argument \"%s\"\n\n"
                                              : "devlet probe: --socket is required\n\n",
                        optind < argc ? argv[optind] : "");
                probe_usage(stderr);
                return EXIT_USAGE;
        }

        json_t *root = json_object();
        int rc = 0;

        /* options */
        V1beta1__Empty empty;
        v1beta1__empty__init(&empty);
        _cleanup_free_ uint8_t *reply = NULL;
        size_t reply_len = 0;
        if (unary(&p, "/v1beta1.DevicePlugin/GetDevicePluginOptions", &empty.base, &reply,
                  &reply_len, "GetDevicePluginOptions")) {
                json_decref(root);
                return 1;
        }
        V1beta1__DevicePluginOptions *o = v1beta1__device_plugin_options__unpack(NULL, reply_len, reply);
        if (!o) {
                fprintf(stderr, "devlet probe: malformed DevicePluginOptions\n");
                json_decref(root);
                return 1;
        }
        json_object_set_new(root, "options",
                            json_pack("{s:b, s:b}", "pre_start_required", o->pre_start_required,
                                      "get_preferred_allocation_available",
                                      o->get_preferred_allocation_available));
        v1beta1__device_plugin_options__free_unpacked(o, NULL);

        /* first snapshot */
        struct first_msg f = { 0 };
        _cleanup_strv_free_ char **healthy = NULL;
        if (first_snapshot(&p, &f) < 0) {
                rc = fail_status("ListAndWatch", f.status, f.message);
        } else {
                V1beta1__ListAndWatchResponse *l = v1beta1__list_and_watch_response__unpack(NULL, f.len, f.buf);
                if (!l) {
                        fprintf(stderr, "devlet probe: malformed ListAndWatchResponse\n");
                        rc = 1;
                } else {
                        json_t *devs = json_array();
                        for (size_t i = 0; i < l->n_devices; i++) {
                                V1beta1__Device *d = l->devices[i];
                                json_t *numa = json_null();
                                if (d->topology && d->topology->n_nodes > 0) {
                                        json_decref(numa);
                                        numa = json_integer(d->topology->nodes[0]->id);
                                }
                                json_array_append_new(devs, json_pack("{s:s, s:s, s:o}", "id", d->id,
                                                                      "health", d->health, "numa", numa));
                                if (strcmp(d->health, "Healthy") == 0)
                                        healthy = strv_push(healthy, d->id);
                        }
                        json_object_set_new(root, "devices", devs);
                        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
                }
        }
        free(f.buf);
        free(f.message);

        if (rc == 0 && allocate) {
                size_t n;
                _cleanup_strv_free_ char **ids = split_ids(allocate, &n);
                V1beta1__ContainerAllocateRequest creq;
                v1beta1__container_allocate_request__init(&creq);
                creq.n_devices_ids = n;
                creq.devices_ids = ids;
                V1beta1__ContainerAllocateRequest *cptr = &creq;
                V1beta1__AllocateRequest req;
                v1beta1__allocate_request__init(&req);
                req.n_container_requests = 1;
                req.container_requests = &cptr;
                free(TAKE_PTR(reply));
                if (unary(&p, "/v1beta1.DevicePlugin/Allocate", &req.base, &reply, &reply_len, "Allocate")) {
                        rc = 1;
                } else {
                        V1beta1__AllocateResponse *a = v1beta1__allocate_response__unpack(NULL, reply_len, reply);
                        if (!a || a->n_container_responses != 1) {
                                fprintf(stderr, "devlet probe: malformed AllocateResponse\n");
                                rc = 1;
                        } else {
                                json_object_set_new(root, "allocate",
                                                    container_response_json(a->container_responses[0]));
                        }
                        if (a)
                                v1beta1__allocate_response__free_unpacked(a, NULL);
                }
        }

        if (rc == 0 && preferred >= 0) {
                V1beta1__ContainerPreferredAllocationRequest creq;
                v1beta1__container_preferred_allocation_request__init(&creq);
                creq.n_available_deviceids = strv_len(healthy);
                creq.available_deviceids = healthy;
                creq.allocation_size = (int32_t)preferred;
                V1beta1__ContainerPreferredAllocationRequest *cptr = &creq;
                V1beta1__PreferredAllocationRequest req;
                v1beta1__preferred_allocation_request__init(&req);
                req.n_container_requests = 1;
                req.container_requests = &cptr;
                free(TAKE_PTR(reply));
                if (unary(&p, "/v1beta1.DevicePlugin/GetPreferredAllocation", &req.base, &reply,
                          &reply_len, "GetPreferredAllocation")) {
                        rc = 1;
                } else {
                        V1beta1__PreferredAllocationResponse *a =
                                v1beta1__preferred_allocation_response__unpack(NULL, reply_len, reply);
                        if (!a || a->n_container_responses != 1) {
                                fprintf(stderr, "devlet probe: malformed PreferredAllocationResponse\n");
                                rc = 1;
                        } else {
                                json_object_set_new(root, "preferred",
                                                    strv_json(a->container_responses[0]->deviceids,
                                                              a->container_responses[0]->n_deviceids));
                        }
                        if (a)
                                v1beta1__preferred_allocation_response__free_unpacked(a, NULL);
                }
        }

        json_dumpf(root, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(root);
        return rc;
}

/* One resource's device plugin: the DevicePlugin gRPC service on its own
 * socket, the ListAndWatch streams, and registration with the kubelet.
 *
 * The socket serves before Register is sent, because the kubelet calls
 * GetDevicePluginOptions while our Register call is still waiting for its
 * reply.  Register is an asynchronous client call; a failure retries with
 * exponential backoff, and a newer registration cancels an older one.  A
 * kubelet creates its socket just before it listens on it, so right after
 * one appears an UNAVAILABLE answer (connection refused) is first retried a
 * few times within milliseconds, before the backoff.
 * Every ListAndWatch message is a full snapshot.  A request is counted on
 * its wire bytes before it is decoded (grpc_call_unpack, request_limits).
 * Runs on the loop thread; never blocks it. */
#include "kubelet/kubelet.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/cleanup.h"
#include "base/list.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "deviceplugin.pb-c.h"
#include "grpc/grpc.h"
#include "grpc/server-fuzz.h"
#include "kubelet/plugin-fuzz.h"

#define REGISTER_TIMEOUT_MS 10000
#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS 10000
#define QUICK_RETRY_MS 2
#define QUICK_RETRIES 5

struct law_stream {
        struct grpc_call *call;
        struct plugin_server *p;
        DLIST_FIELDS(struct law_stream);
};

/* One Register attempt.  Outlives the server if it is freed mid-call: the
 * server then clears p, and the completion only frees the attempt. */
struct reg_attempt {
        struct plugin_server *p;
        struct grpc_client_call *call;
};

struct plugin_server {
        uv_loop_t *loop;
        struct dev_resource *res;
        char *socket_path;
        char *endpoint;
        struct grpc_server *grpc;
        dev_t sock_dev;
        ino_t sock_ino;

        struct law_stream *streams;

        char *kubelet_socket;
        struct reg_attempt *reg;
        uv_timer_t *retry_timer; /* heap: closed asynchronously */
        unsigned backoff_ms;
        unsigned quick_retries; /* left since the last plugin_server_register() */
        int registered;
        bool reg_preferred; /* the options it last registered with */

        struct plugin_stats stats;
};

static char api_version[] = KUBELET_API_VERSION;
static char health_healthy[] = "Healthy";
static char health_unhealthy[] = "Unhealthy";

char *plugin_endpoint_name(const char *plugin_dir, const char *resource)
{
        char *name = xasprintf("devlet-%s.sock", resource);
        for (char *s = name; *s; s++)
                if (*s == '/')
                        *s = '_';
        size_t dir = strlen(plugin_dir);
        if (dir + 1 + strlen(name) < PLUGIN_SOCKET_PATH_MAX)
                return name;
        /* Too long for sun_path: keep "devlet-", the end of the name (the
         * most specific part) and a hash of the whole resource name, so the
         * short name is the same at every start and differs per resource
         * (FNV-1a, 48 bits). */
        uint64_t h = 0xcbf29ce484222325ULL;
        for (const char *s = resource; *s; s++)
                h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
        char hash[13];
        snprintf(hash, sizeof(hash), "%012llx", (unsigned long long)(h & 0xffffffffffffULL));
        /* dir + '/' + "devlet-" + tail + '-' + hash + ".sock" + NUL */
        size_t fixed = dir + 1 + strlen("devlet-") + 1 + 12 + strlen(".sock") + 1;
        size_t keep = fixed < PLUGIN_SOCKET_PATH_MAX ? PLUGIN_SOCKET_PATH_MAX - fixed : 0;
        size_t body = strlen(name) - strlen("devlet-") - strlen(".sock");
        if (keep > body)
                keep = body;
        const char *tail = name + strlen("devlet-") + body - keep;
        char *shortened = keep ? xasprintf("devlet-%.*s-%s.sock", (int)keep, tail, hash)
                               : xasprintf("devlet-%s.sock", hash);
        free(name);
        return shortened;
}

/* ---- ListAndWatch ---- */

static int snapshot_pack(struct dev_resource *r, uint8_t **out, size_t *len)
{
        size_t n = r->n_devices;
        _cleanup_free_ V1beta1__Device *devs = xcalloc(n, sizeof(*devs));
        _cleanup_free_ V1beta1__Device **ptrs = xcalloc(n, sizeof(*ptrs));
        _cleanup_free_ V1beta1__TopologyInfo *topo = xcalloc(n, sizeof(*topo));
        _cleanup_free_ V1beta1__NUMANode *numa = xcalloc(n, sizeof(*numa));
        _cleanup_free_ V1beta1__NUMANode **numa_ptrs = xcalloc(n, sizeof(*numa_ptrs));

        for (size_t i = 0; i < n; i++) {
                const struct dev_device *d = &r->devices[i];
                v1beta1__device__init(&devs[i]);
                devs[i].id = d->id;
                devs[i].health = d->health == DEV_HEALTHY ? health_healthy : health_unhealthy;
                if (d->numa_node >= 0) {
                        v1beta1__topology_info__init(&topo[i]);
                        v1beta1__numanode__init(&numa[i]);
                        numa[i].id = d->numa_node;
                        numa_ptrs[i] = &numa[i];
                        topo[i].n_nodes = 1;
                        topo[i].nodes = &numa_ptrs[i];
                        devs[i].topology = &topo[i];
                }
                ptrs[i] = &devs[i];
        }
        V1beta1__ListAndWatchResponse msg;
        v1beta1__list_and_watch_response__init(&msg);
        msg.n_devices = n;
        msg.devices = ptrs;
        *len = v1beta1__list_and_watch_response__get_packed_size(&msg);
        *out = xmalloc(*len);
        v1beta1__list_and_watch_response__pack(&msg, *out);
        return 0;
}

static void law_unlink(struct law_stream *s)
{
        struct plugin_server *p = s->p;
        DLIST_REMOVE(p->streams, s);
        free(s);
}

static void on_law_cancel(struct grpc_call *call, void *ud)
{
        struct law_stream *s = ud;
        log_debug("kubelet", "ListAndWatch stream closed resource=%s", s->p->res->name);
        law_unlink(s);
}

static void on_resource_change(struct dev_resource *r, void *ud)
{
        struct plugin_server *p = ud;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len;
        snapshot_pack(r, &buf, &len);
        /* one copy for every stream; a stream whose peer is slow keeps only
         * the latest snapshot, each being complete */
        struct grpc_msg *m = grpc_msg_new(buf, len);
        for (struct law_stream *s = p->streams; m && s; s = s->next)
                if (grpc_call_send_latest(s->call, m) == 0)
                        p->stats.snapshots++;
        grpc_msg_unref(m);
        log_info("kubelet", "devices changed resource=%s devices=%zu healthy=%zu streams=%s",
                 r->name, r->n_devices, dev_resource_healthy(r), p->streams ? "yes" : "none");
}

static void handle_list_and_watch(struct grpc_call *call, const uint8_t *req, size_t len,
                                  void *userdata)
{
        struct plugin_server *p = userdata;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t n;
        snapshot_pack(p->res, &buf, &n);
        struct grpc_msg *m = grpc_msg_new(buf, n);
        int r = m ? grpc_call_send_latest(call, m) : -EMSGSIZE;
        grpc_msg_unref(m);
        if (r < 0) {
                grpc_call_finish(call, r == -EMSGSIZE ? GRPC_STATUS_RESOURCE_EXHAUSTED
                                                      : GRPC_STATUS_UNAVAILABLE,
                                 "%s", r == -EMSGSIZE ? "snapshot too large" : "stream closed");
                return;
        }
        p->stats.snapshots++;
        /* from here the kubelet can admit pods asking for this resource */
        log_info("kubelet", "watched resource=%s devices=%zu healthy=%zu", p->res->name,
                 p->res->n_devices, dev_resource_healthy(p->res));
        struct law_stream *s = xcalloc(1, sizeof(*s));
        s->call = call;
        s->p = p;
        DLIST_PREPEND(p->streams, s);
        grpc_call_on_cancel(call, on_law_cancel, s);
}

/* ---- unary methods ---- */

/* What one kubelet request may hold, counted on its wire bytes before it is
 * decoded: container requests and the device IDs of each list, summed over
 * the containers (far above any node: the kubelet sends one container per
 * call and a resource's own IDs, at most HOSTDEV_COUNT_MAX here), and
 * fields (an entry, and a container's own few). */
#define PLUGIN_REQUEST_ENTRIES_MAX 65536
static const struct grpc_pb_limits request_limits = {
        .max_entries = PLUGIN_REQUEST_ENTRIES_MAX,
        .max_fields = 3 * PLUGIN_REQUEST_ENTRIES_MAX,
};

static void fill_options(const struct plugin_server *p, V1beta1__DevicePluginOptions *o)
{
        v1beta1__device_plugin_options__init(o);
        o->pre_start_required = 0;
        o->get_preferred_allocation_available = p->res->preferred_allocation;
}

static void handle_options(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
        V1beta1__DevicePluginOptions o;
        fill_options(userdata, &o);
        grpc_call_reply_pb(call, &o.base);
}

static void handle_prestart(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
        V1beta1__PreStartContainerRequest *r = (V1beta1__PreStartContainerRequest *)
                grpc_call_unpack(call, &v1beta1__pre_start_container_request__descriptor, req, len,
                                 &request_limits);
        if (!r)
                return;
        v1beta1__pre_start_container_request__free_unpacked(r, NULL);
        V1beta1__PreStartContainerResponse resp;
        v1beta1__pre_start_container_response__init(&resp);
        grpc_call_reply_pb(call, &resp.base);
}

/* A ContainerAllocateResponse pointing into a dev_alloc (which owns the
 * strings); release frees only the arrays. */
struct alloc_msg {
        V1beta1__ContainerAllocateResponse msg;
        V1beta1__ContainerAllocateResponse__EnvsEntry *envs, **env_ptrs;
        V1beta1__ContainerAllocateResponse__AnnotationsEntry *anns, **ann_ptrs;
        V1beta1__Mount *mounts, **mount_ptrs;
        V1beta1__DeviceSpec *specs, **spec_ptrs;
        V1beta1__CDIDevice *cdis, **cdi_ptrs;
};

static void alloc_msg_fill(struct alloc_msg *m, struct dev_alloc *a)
{
        memset(m, 0, sizeof(*m));
        v1beta1__container_allocate_response__init(&m->msg);

        m->envs = xcalloc(a->n_envs, sizeof(*m->envs));
        m->env_ptrs = xcalloc(a->n_envs, sizeof(*m->env_ptrs));
        for (size_t i = 0; i < a->n_envs; i++) {
                v1beta1__container_allocate_response__envs_entry__init(&m->envs[i]);
                m->envs[i].key = a->envs[i].key;
                m->envs[i].value = a->envs[i].value;
                m->env_ptrs[i] = &m->envs[i];
        }
        m->msg.n_envs = a->n_envs;
        m->msg.envs = m->env_ptrs;

        m->anns = xcalloc(a->n_annotations, sizeof(*m->anns));
        m->ann_ptrs = xcalloc(a->n_annotations, sizeof(*m->ann_ptrs));
        for (size_t i = 0; i < a->n_annotations; i++) {
                v1beta1__container_allocate_response__annotations_entry__init(&m->anns[i]);
                m->anns[i].key = a->annotations[i].key;
                m->anns[i].value = a->annotations[i].value;
                m->ann_ptrs[i] = &m->anns[i];
        }
        m->msg.n_annotations = a->n_annotations;
        m->msg.annotations = m->ann_ptrs;

        m->mounts = xcalloc(a->n_mounts, sizeof(*m->mounts));
        m->mount_ptrs = xcalloc(a->n_mounts, sizeof(*m->mount_ptrs));
        for (size_t i = 0; i < a->n_mounts; i++) {
                v1beta1__mount__init(&m->mounts[i]);
                m->mounts[i].container_path = a->mounts[i].container_path;
                m->mounts[i].host_path = a->mounts[i].host_path;
                m->mounts[i].read_only = a->mounts[i].read_only;
                m->mount_ptrs[i] = &m->mounts[i];
        }
        m->msg.n_mounts = a->n_mounts;
        m->msg.mounts = m->mount_ptrs;

        m->specs = xcalloc(a->n_nodes, sizeof(*m->specs));
        m->spec_ptrs = xcalloc(a->n_nodes, sizeof(*m->spec_ptrs));
        for (size_t i = 0; i < a->n_nodes; i++) {
                v1beta1__device_spec__init(&m->specs[i]);
                m->specs[i].container_path = a->nodes[i].container_path;
                m->specs[i].host_path = a->nodes[i].host_path;
                m->specs[i].permissions = a->nodes[i].permissions;
                m->spec_ptrs[i] = &m->specs[i];
        }
        m->msg.n_devices = a->n_nodes;
        m->msg.devices = m->spec_ptrs;

        size_t n_cdi = strv_len(a->cdi_devices);
        m->cdis = xcalloc(n_cdi, sizeof(*m->cdis));
        m->cdi_ptrs = xcalloc(n_cdi, sizeof(*m->cdi_ptrs));
        for (size_t i = 0; i < n_cdi; i++) {
                v1beta1__cdidevice__init(&m->cdis[i]);
                m->cdis[i].name = a->cdi_devices[i];
                m->cdi_ptrs[i] = &m->cdis[i];
        }
        m->msg.n_cdi_devices = n_cdi;
        m->msg.cdi_devices = m->cdi_ptrs;
}

static void alloc_msg_release(struct alloc_msg *m)
{
        free(m->envs);
        free(m->env_ptrs);
        free(m->anns);
        free(m->ann_ptrs);
        free(m->mounts);
        free(m->mount_ptrs);
        free(m->specs);
        free(m->spec_ptrs);
        free(m->cdis);
        free(m->cdi_ptrs);
}

static void handle_allocate(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
        struct plugin_server *p = userdata;
        V1beta1__AllocateRequest *r = (V1beta1__AllocateRequest *)grpc_call_unpack(
                call, &v1beta1__allocate_request__descriptor, req, len, &request_limits);
        if (!r) {
                p->stats.allocation_errors++;
                return;
        }
        size_t n = r->n_container_requests;
        _cleanup_free_ struct dev_alloc *allocs = xcalloc(n, sizeof(*allocs));
        _cleanup_free_ struct alloc_msg *msgs = xcalloc(n, sizeof(*msgs));
        _cleanup_free_ V1beta1__ContainerAllocateResponse **ptrs = xcalloc(n, sizeof(*ptrs));
        size_t done = 0;
        int status = GRPC_STATUS_OK;
        struct diag why = { 0 };

        for (; done < n; done++) {
                V1beta1__ContainerAllocateRequest *c = r->container_requests[done];
                if (c->n_devices_ids == 0) {
                        status = GRPC_STATUS_INVALID_ARGUMENT;
                        diag_set(&why, -EINVAL, "container request without device IDs");
                        break;
                }
                if (dev_allocate(p->res, c->devices_ids, c->n_devices_ids, &allocs[done], &why) < 0) {
                        dev_alloc_release(&allocs[done]);
                        status = GRPC_STATUS_INVALID_ARGUMENT;
                        break;
                }
                alloc_msg_fill(&msgs[done], &allocs[done]);
                ptrs[done] = &msgs[done].msg;
        }

        if (status == GRPC_STATUS_OK) {
                V1beta1__AllocateResponse resp;
                v1beta1__allocate_response__init(&resp);
                resp.n_container_responses = n;
                resp.container_responses = ptrs;
                grpc_call_reply_pb(call, &resp.base);
                p->stats.allocations += n;
                log_info("kubelet", "allocated resource=%s containers=%zu", p->res->name, n);
        } else {
                p->stats.allocation_errors++;
                log_warn("kubelet", "allocate refused resource=%s error=\"%s\"", p->res->name,
                         why.message[0] ? why.message : "?");
                grpc_call_finish(call, status, "%s: %s", p->res->name,
                                 why.message[0] ? why.message : "allocation failed");
        }
        for (size_t i = 0; i < done; i++) {
                alloc_msg_release(&msgs[i]);
                dev_alloc_release(&allocs[i]);
        }
        v1beta1__allocate_request__free_unpacked(r, NULL);
}

static void handle_preferred(struct grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
        struct plugin_server *p = userdata;
        V1beta1__PreferredAllocationRequest *r = (V1beta1__PreferredAllocationRequest *)
                grpc_call_unpack(call, &v1beta1__preferred_allocation_request__descriptor, req, len,
                                 &request_limits);
        if (!r)
                return;
        size_t n = r->n_container_requests;
        _cleanup_free_ V1beta1__ContainerPreferredAllocationResponse *cr = xcalloc(n, sizeof(*cr));
        _cleanup_free_ V1beta1__ContainerPreferredAllocationResponse **ptrs = xcalloc(n, sizeof(*ptrs));
        _cleanup_free_ char ***chosen = xcalloc(n, sizeof(*chosen));
        int failed = 0;

        for (size_t i = 0; i < n && !failed; i++) {
                V1beta1__ContainerPreferredAllocationRequest *c = r->container_requests[i];
                if (c->allocation_size < 0 ||
                    dev_preferred(p->res, c->available_deviceids, c->n_available_deviceids,
                                  c->must_include_deviceids, c->n_must_include_deviceids,
                                  (size_t)c->allocation_size, &chosen[i]) < 0) {
                        failed = 1;
                        break;
                }
                v1beta1__container_preferred_allocation_response__init(&cr[i]);
                cr[i].n_deviceids = strv_len(chosen[i]);
                cr[i].deviceids = chosen[i];
                ptrs[i] = &cr[i];
        }
        if (failed) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT,
                                 "%s: cannot choose a preferred allocation from the given IDs",
                                 p->res->name);
        } else {
                V1beta1__PreferredAllocationResponse resp;
                v1beta1__preferred_allocation_response__init(&resp);
                resp.n_container_responses = n;
                resp.container_responses = ptrs;
                grpc_call_reply_pb(call, &resp.base);
        }
        for (size_t i = 0; i < n; i++)
                strv_free(chosen[i]);
        v1beta1__preferred_allocation_request__free_unpacked(r, NULL);
}

static const struct grpc_method plugin_methods[] = {
        { "/v1beta1.DevicePlugin/GetDevicePluginOptions", false, handle_options },
        { "/v1beta1.DevicePlugin/ListAndWatch", true, handle_list_and_watch },
        { "/v1beta1.DevicePlugin/GetPreferredAllocation", false, handle_preferred },
        { "/v1beta1.DevicePlugin/Allocate", false, handle_allocate },
        { "/v1beta1.DevicePlugin/PreStartContainer", false, handle_prestart },
};

/* ---- fuzzing hook (kubelet/plugin-fuzz.h) ---- */

int plugin_feed_for_fuzzing(struct dev_resource *res, const uint8_t *data, size_t len, size_t chunk)
{
        struct plugin_server p = { .res = res };
        int r = grpc_server_feed_for_fuzzing(plugin_methods, ARRAY_SIZE(plugin_methods), &p, data,
                                             len, chunk);
        while (p.streams) /* only if a stream outlived its connection: a bug */
                law_unlink(p.streams);
        return r;
}

/* ---- socket ---- */

static int socket_open(struct plugin_server *p)
{
        int r = grpc_server_new(p->loop, p->socket_path, plugin_methods, ARRAY_SIZE(plugin_methods),
                                p, &p->grpc);
        if (r < 0)
                return r;
        struct stat st;
        if (stat(p->socket_path, &st) < 0)
                return -errno;
        p->sock_dev = st.st_dev;
        p->sock_ino = st.st_ino;
        return 0;
}

int plugin_server_ensure_socket(struct plugin_server *p)
{
        struct stat st;
        if (p->grpc && stat(p->socket_path, &st) == 0 && st.st_dev == p->sock_dev &&
            st.st_ino == p->sock_ino)
                return 0;
        /* Gone or replaced: the kubelet cleaned its directory. */
        grpc_server_free(TAKE_PTR(p->grpc));
        p->registered = 0;
        int r = socket_open(p);
        if (r < 0)
                return log_error_errno(r, "kubelet", "cannot serve socket=%s", p->socket_path);
        log_info("kubelet", "socket re-created resource=%s socket=%s", p->res->name, p->socket_path);
        return 1;
}

/* ---- registration ---- */

static void register_send(struct plugin_server *p);

static void on_retry_timer(uv_timer_t *t)
{
        struct plugin_server *p = t->data;
        register_send(p);
}

static void register_schedule_retry(struct plugin_server *p)
{
        unsigned delay = p->backoff_ms ? p->backoff_ms : BACKOFF_FIRST_MS;
        p->backoff_ms = delay * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : delay * 2;
        uv_timer_start(p->retry_timer, on_retry_timer, delay, 0);
}

static void on_register_done(int status, const char *message, void *ud)
{
        struct reg_attempt *a = ud;
        struct plugin_server *p = a->p;
        free(a);
        if (!p)
                return; /* server freed or a newer attempt replaced this one */
        if (p->reg == a)
                p->reg = NULL;
        if (status == GRPC_STATUS_OK) {
                p->registered = 1;
                p->backoff_ms = 0;
                p->stats.registrations++;
                log_info("kubelet", "registered resource=%s endpoint=%s", p->res->name, p->endpoint);
                return;
        }
        p->stats.registration_errors++;
        if (status == GRPC_STATUS_UNAVAILABLE && p->quick_retries > 0) {
                p->quick_retries--;
                log_debug("kubelet", "registration failed, retrying at once resource=%s error=\"%s\"",
                          p->res->name, message ? message : "");
                uv_timer_start(p->retry_timer, on_retry_timer, QUICK_RETRY_MS, 0);
                return;
        }
        log_warn("kubelet", "registration failed resource=%s status=%s error=\"%s\" retry_ms=%u",
                 p->res->name, grpc_status_name(status), message ? message : "",
                 p->backoff_ms ? p->backoff_ms : BACKOFF_FIRST_MS);
        register_schedule_retry(p);
}

static void register_cancel(struct plugin_server *p)
{
        uv_timer_stop(p->retry_timer);
        if (p->reg) {
                struct reg_attempt *a = TAKE_PTR(p->reg);
                a->p = NULL;
                grpc_client_call_cancel(a->call);
        }
}

static void register_send(struct plugin_server *p)
{
        register_cancel(p);

        V1beta1__DevicePluginOptions opts;
        fill_options(p, &opts);
        p->reg_preferred = opts.get_preferred_allocation_available;
        V1beta1__RegisterRequest req;
        v1beta1__register_request__init(&req);
        req.version = api_version;
        req.endpoint = p->endpoint;
        req.resource_name = p->res->name;
        req.options = &opts;
        size_t len = v1beta1__register_request__get_packed_size(&req);
        _cleanup_free_ uint8_t *buf = xmalloc(len);
        v1beta1__register_request__pack(&req, buf);

        struct reg_attempt *a = xcalloc(1, sizeof(*a));
        a->p = p;
        p->reg = a;
        int r = grpc_client_call_start(p->loop, p->kubelet_socket, "/v1beta1.Registration/Register",
                                       buf, len, REGISTER_TIMEOUT_MS, NULL, on_register_done, a,
                                       &a->call);
        if (r < 0) {
                p->reg = NULL;
                free(a);
                p->stats.registration_errors++;
                log_warn_errno(r, "kubelet", "registration failed resource=%s", p->res->name);
                register_schedule_retry(p);
                return;
        }
}

void plugin_server_register(struct plugin_server *p, const char *kubelet_socket)
{
        if (!p->kubelet_socket || strcmp(p->kubelet_socket, kubelet_socket) != 0) {
                free(p->kubelet_socket);
                p->kubelet_socket = xstrdup(kubelet_socket);
        }
        p->registered = 0;
        p->backoff_ms = 0;
        p->quick_retries = QUICK_RETRIES;
        register_send(p);
}

int plugin_server_refresh(struct plugin_server *p)
{
        V1beta1__DevicePluginOptions opts;
        fill_options(p, &opts);
        bool same = (bool)opts.get_preferred_allocation_available == p->reg_preferred;
        if (p->registered && same)
                return 0;
        if (!p->registered && !p->reg)
                return 1; /* never registered, or given up on: nothing to replace */
        if (!same) {
                /* the kubelet keeps an endpoint while its connection lives */
                register_cancel(p);
                grpc_server_free(TAKE_PTR(p->grpc));
                p->registered = 0;
                int r = socket_open(p);
                if (r < 0)
                        return log_error_errno(r, "kubelet", "cannot serve socket=%s",
                                               p->socket_path);
                log_info("kubelet", "socket re-opened, options changed resource=%s "
                                    "preferred_allocation=%s",
                         p->res->name, opts.get_preferred_allocation_available ? "yes" : "no");
        }
        return 1;
}

/* ---- life cycle ---- */

int plugin_server_new(uv_loop_t *loop, const char *plugin_dir, struct dev_resource *res,
                      struct plugin_server **out)
{
        struct plugin_server *p = xcalloc(1, sizeof(*p));
        p->loop = loop;
        p->res = res;
        p->endpoint = plugin_endpoint_name(plugin_dir, res->name);
        p->socket_path = xasprintf("%s/%s", plugin_dir, p->endpoint);
        if (strlen(p->socket_path) >= PLUGIN_SOCKET_PATH_MAX) {
                log_error("kubelet", "cannot serve resource=%s: socket path too long for a Unix "
                                     "socket (%zu bytes, at most %d) socket=%s",
                          res->name, strlen(p->socket_path), PLUGIN_SOCKET_PATH_MAX - 1,
                          p->socket_path);
                plugin_server_free(p);
                return -ENAMETOOLONG;
        }
        _cleanup_free_ char *full = plugin_endpoint_name("", res->name);
        if (strcmp(full, p->endpoint) != 0)
                log_info("kubelet", "socket name shortened to fit a Unix socket path "
                                    "resource=%s endpoint=%s",
                         res->name, p->endpoint);
        p->retry_timer = xcalloc(1, sizeof(*p->retry_timer));
        uv_timer_init(loop, p->retry_timer);
        p->retry_timer->data = p;

        int r = socket_open(p);
        if (r < 0) {
                plugin_server_free(p);
                return r;
        }
        res->on_change = on_resource_change;
        res->on_change_ud = p;
        log_info("kubelet", "serving resource=%s socket=%s devices=%zu", res->name, p->socket_path,
                 res->n_devices);
        *out = p;
        return 0;
}

static void free_handle(uv_handle_t *h)
{
        free(h);
}

static void resource_detach(struct plugin_server *p)
{
        if (p->res->on_change_ud == p) {
                p->res->on_change = NULL;
                p->res->on_change_ud = NULL;
        }
}

void plugin_server_rebind(struct plugin_server *p, struct dev_resource *res)
{
        resource_detach(p);
        p->res = res;
        res->on_change = on_resource_change;
        res->on_change_ud = p;
        on_resource_change(res, p);
}

void plugin_server_free(struct plugin_server *p)
{
        if (!p)
                return;
        register_cancel(p);
        uv_close((uv_handle_t *)p->retry_timer, free_handle);
        resource_detach(p);
        grpc_server_free(p->grpc); /* cancels the ListAndWatch streams */
        while (p->streams)
                law_unlink(p->streams);
        free(p->kubelet_socket);
        free(p->socket_path);
        free(p->endpoint);
        free(p);
}

const struct plugin_stats *plugin_server_stats(const struct plugin_server *p)
{
        return &p->stats;
}

struct dev_resource *plugin_server_resource(const struct plugin_server *p)
{
        return p->res;
}

int plugin_server_registered(const struct plugin_server *p)
{
        return p->registered;
}

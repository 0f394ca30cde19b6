/* The kubelet-facing side of devlet: one plugin server (one socket, one
 * gRPC DevicePlugin service) per resource, registration with the kubelet, and
 * the watch that re-registers whenever the kubelet restarts.
 *
 * Everything here runs on the loop thread and owns all kubelet-facing state. */
#ifndef DEVLET_KUBELET_KUBELET_H
#define DEVLET_KUBELET_KUBELET_H

#include <stdint.h>
#include <uv.h>

#include "devices/device.h"

#define KUBELET_API_VERSION "v1beta1"

/* ---- plugin.c: one resource's DevicePlugin server ---- */

struct plugin_server;

/* Counters kept per plugin server (later exported as metrics). */
struct plugin_stats {
        uint64_t registrations;        /* successful Register calls */
        uint64_t registration_errors;
        uint64_t allocations;          /* container allocations answered */
        uint64_t allocation_errors;
        uint64_t snapshots;            /* ListAndWatch messages sent */
};

/* Creates the socket <plugin_dir>/devlet-<resource with '/' -> '_'>.sock and
 * serves the DevicePlugin service for res on it at once.  Observes res
 * (res->on_change) until freed.  Returns 0 or -errno. */
int plugin_server_new(uv_loop_t *loop, const char *plugin_dir, struct dev_resource *res,
                      struct plugin_server **out);
/* Stops serving, unlinks the socket, detaches from the resource. */
void plugin_server_free(struct plugin_server *p);

/* Serves res (a new object for the same resource name, after a re-scan)
 * instead of the current one, on the same socket; open ListAndWatch streams
 * get a snapshot of res at once. */
void plugin_server_rebind(struct plugin_server *p, struct dev_resource *res);

/* Re-creates the socket if it is missing or no longer ours (the kubelet
 * deletes every file in its plugin directory when it starts).  Returns 1 when
 * it was re-created, 0 when it was fine, -errno on failure. */
int plugin_server_ensure_socket(struct plugin_server *p);

/* Starts (or restarts) registration with the kubelet at kubelet_socket; it
 * never blocks and retries with backoff until it succeeds. */
void plugin_server_register(struct plugin_server *p, const char *kubelet_socket);

/* After a rebind (a reload): whether the kubelet must hear from p again.
 * Not while p is registered with the options it registered with: a
 * kubelet since 1.37 refuses a registration from a socket it is still
 * connected to ("device plugin already connected"), and the snapshot went
 * down the open ListAndWatch already.  When the options changed, the
 * socket is opened anew first (its connections closed, so the kubelet lets
 * the old endpoint go; the registration's retries wait for that).
 * Returns 1 when p must register, 0 when not, -errno when the socket
 * cannot be opened again. */
int plugin_server_refresh(struct plugin_server *p);

const struct plugin_stats *plugin_server_stats(const struct plugin_server *p);
struct dev_resource *plugin_server_resource(const struct plugin_server *p);
int plugin_server_registered(const struct plugin_server *p);

/* sun_path's size: a socket path is at most this minus one bytes. */
#define PLUGIN_SOCKET_PATH_MAX 108

/* The socket file name for a resource: "devlet-devlet.io_fuse.sock"; when
 * <plugin_dir>/<that> would not fit a Unix socket path, a shorter name that
 * is the same at every start and unique per resource:
 * "devlet-<end of the name>-<12 hex digits of its hash>.sock". */
char *plugin_endpoint_name(const char *plugin_dir, const char *resource);

/* ---- manager.c: all plugin servers and the kubelet watch ---- */

struct kubelet_manager;

/* Called when a new kubelet appears after an earlier one (a restart, not the
 * first appearance), before the manager registers every resource with it.
 * For counting: a kubelet restart is only a re-registration.  It must not
 * free the manager. */
typedef void (*kubelet_restart_fn)(void *ud);

/* Serves every resource, registers each with the kubelet when its socket
 * exists (or as soon as it appears) and keeps doing so across kubelet
 * restarts: a missing plugin socket is re-created and every resource
 * registers again; nothing else is rebuilt.  on_restart (may be NULL) hears
 * of each restart.  kubelet_socket "" serves the sockets and never
 * registers (NVIDIA's --kubelet-socket "").  A resource whose socket cannot
 * be created is logged and left out; the others serve.  resources must
 * outlive the manager. */
int kubelet_manager_new(uv_loop_t *loop, const char *plugin_dir, const char *kubelet_socket,
                        struct dev_resource *const *resources, size_t n,
                        kubelet_restart_fn on_restart, void *ud, struct kubelet_manager **out);
void kubelet_manager_free(struct kubelet_manager *m);

/* Serves a new set of resources (after a reload): servers of resources that
 * stay are rebound and keep their sockets, removed ones stop, new ones start;
 * then every resource registers again.  Returns 0, or the first -errno of a
 * resource that could not be served (the others are served). */
int kubelet_manager_update(struct kubelet_manager *m, struct dev_resource *const *resources,
                           size_t n);
/* The i-th plugin server (of the resources being served), or NULL past the
 * end. */
struct plugin_server *kubelet_manager_server(const struct kubelet_manager *m, size_t i);

#endif

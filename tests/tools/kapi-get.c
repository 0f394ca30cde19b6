/* Test client for tests/integration/test_kapi.py: one call of src/kapi/
 * against a (fake) API server.
 *
 *   kapi-get [options] METHOD PATH [BODY]
 *     --kubeconfig F     the kubeconfig (default $KUBECONFIG; none: in-cluster)
 *     --sa-dir D         the service account directory for in-cluster
 *     --watch            kapi_watch PATH (METHOD must be GET)
 *     --max-body N       kapi_limits.max_body
 *     --max-line N       kapi_limits.max_watch_line
 *     --low-speed-ms N   kapi_limits.low_speed_ms
 *     --timeout-ms N     the whole call's bound (requests only)
 *     --repeat N         make the call N times in a row (sequentially; one client)
 *     --threads N        make the call(s) from N threads at once (one client)
 *     --qps Q --burst N  kapi_client_set_rate (default -1: no limit, so that
 *                        the tests that hammer a server stay quick)
 *     --component C      kapi_client_set_user_agent
 *     --stop-after N     (with --watch) set the call's stop flag from the event
 *                        callback after N events, which goes on returning 0
 *
 * Prints "status=S" then the body as compact JSON on one line ("body=" for
 * none), or for a watch one line per event, "TYPE name" (the object's
 * metadata.name; "-" without one; an ERROR event's Status shows its code),
 * then "status=S".  With --repeat or --threads only the status lines.  On
 * failure prints "error=ENAME" on stdout and the diag on stderr.  Last,
 * "vmhwm_kib=N": the peak resident memory of this process, from
 * /proc/self/status (exec resets it, unlike wait4's ru_maxrss, which
 * carries the high-water mark of the process that forked us).
 * Exit: 0 an answer under 400 (a watch: the stream ended), 1 an answer of
 * 400 or more (a watch: -EPROTO), 3 no answer (any other -errno), 2 usage,
 * config or client errors. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/diag.h"
#include "kapi/kapi.h"

struct call {
        struct kapi_client *client;
        const char *method, *path;
        json_t *body;
        bool watch, quiet;
        long timeout_ms;
        unsigned repeat;
        unsigned stop_after, events;
        atomic_bool stop;
        int exit_code;
};

static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static int print_event(const char *type, json_t *object, void *ud)
{
        struct call *c = ud;
        if (c->stop_after && ++c->events >= c->stop_after)
                atomic_store(&c->stop, true);
        const char *name = json_string_value(json_object_get(json_object_get(object, "metadata"),
                                                             "name"));
        if (strcmp(type, "ERROR") == 0 && !name)
                printf("%s %lld\n", type, (long long)json_integer_value(json_object_get(object, "code")));
        else
                printf("%s %s\n", type, name ? name : "-");
        fflush(stdout);
        return 0;
}

static int report_error(int r, const struct diag *d)
{
        char buf[DIAG_FORMAT_MAX];
        const char *name = strerrorname_np(-r);
        pthread_mutex_lock(&print_lock);
        printf("error=%s\n", name ? name : "?");
        fprintf(stderr, "kapi-get: %s\n", diag_format(d, buf, sizeof(buf)));
        fflush(stdout);
        pthread_mutex_unlock(&print_lock);
        return r == -EPROTO ? 1 : 3;
}

static int call_once(struct call *c)
{
        struct diag d = { 0 };
        if (c->watch) {
                long status = 0;
                int r = kapi_watch(c->client, c->path, &c->stop, print_event, c, &status, &d);
                printf("status=%ld\n", status);
                if (r < 0)
                        return report_error(r, &d);
                return 0;
        }
        struct kapi_response resp;
        int r = kapi_request(c->client, c->method, c->path, c->body, c->timeout_ms, NULL, &resp, &d);
        pthread_mutex_lock(&print_lock);
        printf("status=%ld\n", resp.status);
        if (r == 0 && !c->quiet) {
                char *text = resp.body ? json_dumps(resp.body, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
                printf("body=%s\n", text ? text : "");
                free(text);
        }
        fflush(stdout);
        pthread_mutex_unlock(&print_lock);
        long status = resp.status;
        kapi_response_release(&resp);
        if (r < 0)
                return report_error(r, &d);
        if (status >= 400) {
                char buf[DIAG_FORMAT_MAX];
                fprintf(stderr, "kapi-get: %s\n", diag_format(&d, buf, sizeof(buf)));
                return 1;
        }
        return 0;
}

static void *call_thread(void *arg)
{
        struct call *c = arg;
        for (unsigned i = 0; i < c->repeat; i++) {
                int e = call_once(c);
                if (e > c->exit_code)
                        c->exit_code = e;
        }
        return NULL;
}

static void print_vmhwm(void)
{
        FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        while (f && fgets(line, sizeof(line), f)) {
                long kib;
                if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
                        printf("vmhwm_kib=%ld\n", kib);
        }
        if (f)
                fclose(f);
}

static long parse_num(const char *s)
{
        char *end;
        long v = strtol(s, &end, 10);
        if (*end || v < 0) {
                fprintf(stderr, "kapi-get: %s: not a number\n", s);
                exit(2);
        }
        return v;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "kubeconfig", required_argument, NULL, 'k' },
                { "sa-dir", required_argument, NULL, 's' },
                { "watch", no_argument, NULL, 'w' },
                { "max-body", required_argument, NULL, 'b' },
                { "max-line", required_argument, NULL, 'l' },
                { "low-speed-ms", required_argument, NULL, 'o' },
                { "timeout-ms", required_argument, NULL, 't' },
                { "repeat", required_argument, NULL, 'r' },
                { "threads", required_argument, NULL, 'n' },
                { "stop-after", required_argument, NULL, 'a' },
                { "qps", required_argument, NULL, 'q' },
                { "burst", required_argument, NULL, 'u' },
                { "component", required_argument, NULL, 'c' },
                { NULL, 0, NULL, 0 },
        };
        const char *kubeconfig = getenv("KUBECONFIG"), *sa_dir = NULL;
        struct kapi_limits lim = { 0 };
        struct call call = { .repeat = 1 };
        long threads = 1;
        double qps = -1;
        unsigned burst = 0;
        const char *component = NULL;
        int opt;
        while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (opt) {
                case 'k': kubeconfig = optarg; break;
                case 's': sa_dir = optarg; break;
                case 'w': call.watch = true; break;
                case 'b': lim.max_body = (size_t)parse_num(optarg); break;
                case 'l': lim.max_watch_line = (size_t)parse_num(optarg); break;
                case 'o': lim.low_speed_ms = parse_num(optarg); break;
                case 't': call.timeout_ms = parse_num(optarg); break;
                case 'r': call.repeat = (unsigned)parse_num(optarg); break;
                case 'n': threads = parse_num(optarg); break;
                case 'a': call.stop_after = (unsigned)parse_num(optarg); break;
                case 'q': qps = strtod(optarg, NULL); break;
                case 'u': burst = (unsigned)parse_num(optarg); break;
                case 'c': component = optarg; break;
                default: return 2;
                }
        }
        if (argc - optind < 2 || argc - optind > 3 || threads < 1 || threads > 64 ||
            call.repeat < 1) {
                fprintf(stderr, "usage: kapi-get [options] METHOD PATH [BODY]\n");
                return 2;
        }
        call.method = argv[optind];
        call.path = argv[optind + 1];
        call.quiet = threads > 1 || call.repeat > 1;
        if (call.watch && strcmp(call.method, "GET") != 0) {
                fprintf(stderr, "kapi-get: --watch takes GET\n");
                return 2;
        }
        if (argc - optind == 3) {
                json_error_t je;
                call.body = json_loads(argv[optind + 2], 0, &je);
                if (!call.body) {
                        fprintf(stderr, "kapi-get: BODY: %s\n", je.text);
                        return 2;
                }
        }

        struct diag d = { 0 };
        char buf[DIAG_FORMAT_MAX];
        struct kapi_config *cfg;
        int r = kapi_config_load(kubeconfig, sa_dir, &cfg, &d);
        if (r == 0)
                r = kapi_client_new(cfg, &call.client, &d);
        if (r < 0) {
                fprintf(stderr, "kapi-get: %s\n", diag_format(&d, buf, sizeof(buf)));
                json_decref(call.body);
                return 2;
        }
        kapi_client_set_limits(call.client, &lim);
        kapi_client_set_rate(call.client, qps, burst);
        kapi_client_set_user_agent(call.client, component);

        struct call calls[64];
        pthread_t tids[64];
        for (long i = 0; i < threads; i++) {
                calls[i] = call;
                if (pthread_create(&tids[i], NULL, call_thread, &calls[i]) != 0) {
                        fprintf(stderr, "kapi-get: pthread_create failed\n");
                        return 2;
                }
        }
        int exit_code = 0;
        for (long i = 0; i < threads; i++) {
                pthread_join(tids[i], NULL);
                if (calls[i].exit_code > exit_code)
                        exit_code = calls[i].exit_code;
        }
        kapi_client_free(call.client);
        json_decref(call.body);
        print_vmhwm();
        return exit_code;
}

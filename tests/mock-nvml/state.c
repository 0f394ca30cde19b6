/* The mock NVML library's one global state.
 *
 * It owns the current configuration, the objects that handles point to, the
 * event log and the live event sets, all under one mutex that every exported
 * call takes for its whole duration (mock.h: MOCK_LOCKED).  Only an event
 * wait gives the mutex up, inside mock_wait_until.
 *
 * The configuration is re-read whenever its file changes: every call stats
 * it (device, inode, size and mtime), which catches the atomic
 * write-and-rename tests use.  A file that fails to parse while initialised
 * is reported once on stderr and the previous configuration stays.
 *
 * Handle objects are created on first sight of a UUID (GPU instances and
 * compute instances on first sight of their IDs) and kept until the library
 * is unloaded, so a handle stays a valid pointer across reloads and
 * shutdown/init cycles; `present` says whether the current configuration
 * still has it.  Handles are checked by looking them up, never by
 * dereferencing what a caller passes.
 *
 * Events listed in the file go into an append-only log; on a reload the new
 * file's list is compared with the old one and what follows their common
 * prefix is appended, so appending events to the file delivers just those.
 * Each logged event is stamped with the time it happened on an event clock
 * that registrations tick too, so a set gets only the events that happened
 * after it registered their GPU, as with NVML.  Events logged before the
 * first wait since nvmlInit (those in the file at start-up) happen at that
 * wait, so every set registered by then gets them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "mock.h"

struct file_id {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
};

static struct {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        unsigned refcount;
        struct mock_config *cfg;
        char *path; /* file the current configuration came from */
        struct file_id loaded;
        bool have_rejected;
        struct file_id rejected;

        struct nvmlDevice_st **devs;
        size_t n_devs, cap_devs;
        struct nvmlGpuInstance_st **gis;
        size_t n_gis, cap_gis;
        struct nvmlComputeInstance_st **cis;
        size_t n_cis, cap_cis;

        struct mock_event *log;
        size_t n_log, cap_log;
        unsigned long long clock; /* the event clock */
        bool waited;              /* a wait happened since nvmlInit: events happen when seen */
        struct nvmlEventSet_st *sets;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t cond_once = PTHREAD_ONCE_INIT;

static void cond_init(void)
{
        pthread_condattr_t a;
        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(&S.cond, &a);
        pthread_condattr_destroy(&a);
}

void mock_lock(void)
{
        pthread_once(&cond_once, cond_init);
        pthread_mutex_lock(&S.lock);
}

void mock_unlock(void)
{
        pthread_mutex_unlock(&S.lock);
}

void mock_wait_until(unsigned long long deadline_us)
{
        struct timespec ts = {
            .tv_sec = (time_t)(deadline_us / 1000000ULL),
            .tv_nsec = (long)(deadline_us % 1000000ULL) * 1000L,
        };
        pthread_cond_timedwait(&S.cond, &S.lock, &ts);
}

static struct file_id file_id_of(const struct stat *st)
{
        return (struct file_id){st->st_dev, st->st_ino, st->st_size, st->st_mtim};
}

static bool file_id_equal(const struct file_id *a, const struct file_id *b)
{
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
               a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* Objects                                                             */

static struct nvmlDevice_st *device_get(const char *uuid)
{
        for (size_t i = 0; i < S.n_devs; i++)
                if (!strcmp(S.devs[i]->uuid, uuid))
                        return S.devs[i];
        mock_grow((void **)&S.devs, &S.cap_devs, S.n_devs + 1, sizeof(*S.devs));
        struct nvmlDevice_st *d = mock_alloc(sizeof(*d));
        d->uuid = mock_strdup(uuid);
        S.devs[S.n_devs++] = d;
        return d;
}

static struct nvmlGpuInstance_st *gi_get(struct nvmlDevice_st *gpu, unsigned id)
{
        for (size_t i = 0; i < S.n_gis; i++)
                if (S.gis[i]->gpu == gpu && S.gis[i]->id == id)
                        return S.gis[i];
        mock_grow((void **)&S.gis, &S.cap_gis, S.n_gis + 1, sizeof(*S.gis));
        struct nvmlGpuInstance_st *g = mock_alloc(sizeof(*g));
        g->gpu = gpu;
        g->id = id;
        S.gis[S.n_gis++] = g;
        return g;
}

static struct nvmlComputeInstance_st *ci_get(struct nvmlGpuInstance_st *gi, unsigned id)
{
        for (size_t i = 0; i < S.n_cis; i++)
                if (S.cis[i]->gi == gi && S.cis[i]->id == id)
                        return S.cis[i];
        mock_grow((void **)&S.cis, &S.cap_cis, S.n_cis + 1, sizeof(*S.cis));
        struct nvmlComputeInstance_st *c = mock_alloc(sizeof(*c));
        c->gi = gi;
        c->id = id;
        S.cis[S.n_cis++] = c;
        return c;
}

struct nvmlDevice_st *mock_gpu_at(unsigned index)
{
        for (size_t i = 0; i < S.n_devs; i++)
                if (S.devs[i]->present && !S.devs[i]->parent && S.devs[i]->index == index)
                        return S.devs[i];
        return NULL;
}

struct nvmlDevice_st *mock_mig_at(const struct nvmlDevice_st *gpu, unsigned index)
{
        for (size_t i = 0; i < S.n_devs; i++)
                if (S.devs[i]->present && S.devs[i]->parent == gpu && S.devs[i]->index == index)
                        return S.devs[i];
        return NULL;
}

struct nvmlDevice_st *mock_device_by_uuid(const char *uuid)
{
        for (size_t i = 0; i < S.n_devs; i++)
                if (S.devs[i]->present && !strcmp(S.devs[i]->uuid, uuid))
                        return S.devs[i];
        return NULL;
}

struct nvmlGpuInstance_st *mock_gi_find(const struct nvmlDevice_st *gpu, unsigned id)
{
        for (size_t i = 0; i < S.n_gis; i++)
                if (S.gis[i]->present && S.gis[i]->gpu == gpu && S.gis[i]->id == id)
                        return S.gis[i];
        return NULL;
}

struct nvmlComputeInstance_st *mock_ci_find(const struct nvmlGpuInstance_st *gi, unsigned id)
{
        for (size_t i = 0; i < S.n_cis; i++)
                if (S.cis[i]->present && S.cis[i]->gi == gi && S.cis[i]->id == id)
                        return S.cis[i];
        return NULL;
}

/* Points the objects at a new configuration and logs its new events. */
static void apply(struct mock_config *cfg, const char *path, const struct file_id *id)
{
        struct mock_config *old = S.cfg;
        size_t prefix = 0;
        if (old && S.path && !strcmp(S.path, path))
                while (prefix < old->n_events && prefix < cfg->n_events &&
                       mock_event_cfg_equal(&old->events[prefix], &cfg->events[prefix]))
                        prefix++;

        for (size_t i = 0; i < S.n_devs; i++) {
                S.devs[i]->present = false;
                S.devs[i]->gpu = NULL;
                S.devs[i]->mig = NULL;
        }
        for (size_t i = 0; i < S.n_gis; i++) {
                S.gis[i]->present = false;
                S.gis[i]->mig = NULL;
        }
        for (size_t i = 0; i < S.n_cis; i++) {
                S.cis[i]->present = false;
                S.cis[i]->mig = NULL;
        }
        for (size_t i = 0; i < cfg->n_gpus; i++) {
                const struct mock_gpu *g = &cfg->gpus[i];
                struct nvmlDevice_st *d = device_get(g->uuid);
                d->parent = NULL;
                d->gpu = g;
                d->index = (unsigned)i;
                d->present = true;
                for (size_t k = 0; k < g->n_mig; k++) {
                        const struct mock_mig *mg = &g->mig[k];
                        struct nvmlDevice_st *m = device_get(mg->uuid);
                        m->parent = d;
                        m->gpu = g;
                        m->mig = mg;
                        m->index = (unsigned)k;
                        m->present = true;
                        struct nvmlGpuInstance_st *gi = gi_get(d, mg->gi);
                        if (!gi->present) {
                                gi->present = true;
                                gi->mig = mg;
                        }
                        struct nvmlComputeInstance_st *ci = ci_get(gi, mg->ci);
                        ci->present = true;
                        ci->mig = mg;
                }
        }
        for (size_t i = prefix; i < cfg->n_events; i++) {
                const struct mock_event_cfg *e = &cfg->events[i];
                mock_grow((void **)&S.log, &S.cap_log, S.n_log + 1, sizeof(*S.log));
                S.log[S.n_log++] = (struct mock_event){
                    .gpu = mock_gpu_at(e->gpu),
                    .type = e->type,
                    .data = e->data,
                    .gi = e->gi,
                    .ci = e->ci,
                    .at = S.waited ? ++S.clock : 0,
                };
        }
        mock_config_free(old);
        S.cfg = cfg;
        if (!S.path || strcmp(S.path, path)) {
                free(S.path);
                S.path = mock_strdup(path);
        }
        S.loaded = *id;
        S.have_rejected = false;
        pthread_cond_broadcast(&S.cond);
}

static void refresh(void)
{
        struct stat st;
        if (!S.path || stat(S.path, &st) < 0)
                return;
        struct file_id id = file_id_of(&st);
        if (file_id_equal(&id, &S.loaded) || (S.have_rejected && file_id_equal(&id, &S.rejected)))
                return;
        char err[512];
        struct mock_config *cfg = mock_config_load(S.path, err, sizeof(err));
        if (!cfg) {
                fprintf(stderr, "mock-nvml: %s; keeping the previous configuration\n", err);
                S.rejected = id;
                S.have_rejected = true;
                return;
        }
        apply(cfg, S.path, &id);
}

/* ------------------------------------------------------------------ */
/* Init, shutdown, checks                                              */

nvmlReturn_t mock_init(unsigned flags)
{
        (void)flags;
        const char *path = getenv("MOCK_NVML_CONFIG");
        if (!path || !*path) {
                fputs("mock-nvml: MOCK_NVML_CONFIG is not set (it names the YAML file describing "
                      "the GPUs)\n",
                      stderr);
                return NVML_ERROR_LIBRARY_NOT_FOUND;
        }
        struct stat st;
        if (stat(path, &st) < 0) {
                fprintf(stderr, "mock-nvml: %s: %s\n", path, strerror(errno));
                return NVML_ERROR_LIBRARY_NOT_FOUND;
        }
        struct file_id id = file_id_of(&st);
        if (!S.cfg || strcmp(S.path, path) || !file_id_equal(&id, &S.loaded)) {
                char err[512];
                struct mock_config *cfg = mock_config_load(path, err, sizeof(err));
                if (!cfg) {
                        fprintf(stderr, "mock-nvml: %s\n", err);
                        return NVML_ERROR_UNKNOWN;
                }
                apply(cfg, path, &id);
        }
        if (S.cfg->init_error != NVML_SUCCESS)
                return S.cfg->init_error;
        S.refcount++;
        return NVML_SUCCESS;
}

static void set_free(struct nvmlEventSet_st *s)
{
        free(s->regs);
        free(s);
}

/* Unlinks a set; a set some thread still waits on is freed by that thread. */
static void set_kill(struct nvmlEventSet_st *s)
{
        for (struct nvmlEventSet_st **pp = &S.sets; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        break;
                }
        if (s->waiters)
                s->dead = true;
        else
                set_free(s);
        pthread_cond_broadcast(&S.cond);
}

nvmlReturn_t mock_shutdown(void)
{
        if (!S.refcount)
                return NVML_ERROR_UNINITIALIZED;
        if (--S.refcount == 0) {
                while (S.sets)
                        set_kill(S.sets);
                S.waited = false;
        }
        return NVML_SUCCESS;
}

nvmlReturn_t mock_enter(void)
{
        if (!S.refcount)
                return NVML_ERROR_UNINITIALIZED;
        refresh();
        return NVML_SUCCESS;
}

const struct mock_config *mock_cfg(void)
{
        return S.cfg;
}

nvmlReturn_t mock_device(nvmlDevice_t h, struct nvmlDevice_st **out)
{
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        bool known = false;
        for (size_t i = 0; i < S.n_devs && !known; i++)
                known = S.devs[i] == h;
        if (!known)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!h->present)
                /* A GPU gone from the configuration fell off the bus; a MIG
                 * device gone was reconfigured away. */
                return h->parent ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_GPU_IS_LOST;
        if (h->gpu->lost)
                return NVML_ERROR_GPU_IS_LOST;
        *out = h;
        return NVML_SUCCESS;
}

nvmlReturn_t mock_device_gpu(nvmlDevice_t h, struct nvmlDevice_st **out)
{
        nvmlReturn_t r = mock_device(h, out);
        if (r == NVML_SUCCESS && (*out)->parent)
                return NVML_ERROR_NOT_SUPPORTED;
        return r;
}

nvmlReturn_t mock_gpu_instance(nvmlGpuInstance_t h, struct nvmlGpuInstance_st **out)
{
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        for (size_t i = 0; i < S.n_gis; i++)
                if (S.gis[i] == h && h->present) {
                        if (h->gpu->gpu->lost)
                                return NVML_ERROR_GPU_IS_LOST;
                        *out = h;
                        return NVML_SUCCESS;
                }
        return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t mock_compute_instance(nvmlComputeInstance_t h, struct nvmlComputeInstance_st **out)
{
        nvmlReturn_t r = mock_enter();
        if (r != NVML_SUCCESS)
                return r;
        for (size_t i = 0; i < S.n_cis; i++)
                if (S.cis[i] == h && h->present) {
                        if (h->gi->gpu->gpu->lost)
                                return NVML_ERROR_GPU_IS_LOST;
                        *out = h;
                        return NVML_SUCCESS;
                }
        return NVML_ERROR_INVALID_ARGUMENT;
}

/* ------------------------------------------------------------------ */
/* Events                                                              */

size_t mock_event_count(void)
{
        return S.n_log;
}

const struct mock_event *mock_event_at(size_t i)
{
        return &S.log[i];
}

unsigned long long mock_event_clock_tick(void)
{
        return ++S.clock;
}

void mock_events_begin(void)
{
        if (S.waited)
                return;
        S.waited = true;
        for (size_t i = 0; i < S.n_log; i++)
                if (!S.log[i].at)
                        S.log[i].at = ++S.clock;
}

nvmlEventSet_t mock_event_set_new(void)
{
        struct nvmlEventSet_st *s = mock_alloc(sizeof(*s));
        s->next = S.sets;
        S.sets = s;
        return s;
}

bool mock_event_set_valid(nvmlEventSet_t set)
{
        for (struct nvmlEventSet_st *s = S.sets; s; s = s->next)
                if (s == set)
                        return true;
        return false;
}

void mock_event_set_release(nvmlEventSet_t set)
{
        set_kill(set);
}

void mock_event_set_leave(nvmlEventSet_t set)
{
        if (--set->waiters == 0 && set->dead)
                set_free(set);
}

/* Frees everything when the library is unloaded (dlclose or exit). */
__attribute__((destructor)) static void mock_fini(void)
{
        while (S.sets) {
                struct nvmlEventSet_st *s = S.sets;
                S.sets = s->next;
                if (!s->waiters)
                        set_free(s);
        }
        for (size_t i = 0; i < S.n_devs; i++) {
                free(S.devs[i]->uuid);
                free(S.devs[i]);
        }
        for (size_t i = 0; i < S.n_gis; i++)
                free(S.gis[i]);
        for (size_t i = 0; i < S.n_cis; i++)
                free(S.cis[i]);
        free(S.devs);
        free(S.gis);
        free(S.cis);
        free(S.log);
        free(S.path);
        mock_config_free(S.cfg);
        S.refcount = 0;
        S.devs = NULL;
        S.gis = NULL;
        S.cis = NULL;
        S.log = NULL;
        S.path = NULL;
        S.cfg = NULL;
        S.n_devs = S.n_gis = S.n_cis = S.n_log = 0;
        S.clock = 0;
        S.waited = false;
}

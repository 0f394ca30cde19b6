/* Small helpers of the mock NVML library: allocation that aborts on
 * exhaustion (the mock has no way to report it), NVML-style string copies,
 * clocks, and PCI address formatting.  No state, no locking. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mock.h"

void *mock_alloc(size_t n)
{
        void *p = calloc(1, n ? n : 1);
        if (!p) {
                fputs("mock-nvml: out of memory\n", stderr);
                abort();
        }
        return p;
}

char *mock_strdup(const char *s)
{
        size_t n = strlen(s) + 1;
        char *p = mock_alloc(n);
        memcpy(p, s, n);
        return p;
}

void mock_grow(void **arr, size_t *cap, size_t need, size_t elsz)
{
        if (need <= *cap)
                return;
        size_t ncap = *cap ? *cap * 2 : 8;
        while (ncap < need)
                ncap *= 2;
        void *p = realloc(*arr, ncap * elsz);
        if (!p) {
                fputs("mock-nvml: out of memory\n", stderr);
                abort();
        }
        memset((char *)p + *cap * elsz, 0, (ncap - *cap) * elsz);
        *arr = p;
        *cap = ncap;
}

/* NVML's contract for string outputs: NULL is an invalid argument, a buffer
 * that cannot hold the string and its NUL is "insufficient size". */
nvmlReturn_t mock_copy_str(char *dst, unsigned int len, const char *src)
{
        if (!dst)
                return NVML_ERROR_INVALID_ARGUMENT;
        size_t n = strlen(src);
        if (n + 1 > len)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        memcpy(dst, src, n + 1);
        return NVML_SUCCESS;
}

static unsigned long long clock_us(clockid_t id)
{
        struct timespec ts;
        clock_gettime(id, &ts);
        return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
}

unsigned long long mock_realtime_us(void)
{
        return clock_us(CLOCK_REALTIME);
}

unsigned long long mock_monotonic_us(void)
{
        return clock_us(CLOCK_MONOTONIC);
}

void mock_fill_pci(const struct mock_pci *p, nvmlPciInfo_t *out)
{
        memset(out, 0, sizeof(*out));
        snprintf(out->busIdLegacy, sizeof(out->busIdLegacy), "%04X:%02X:%02X.0", p->domain & 0xffff,
                 p->bus, p->device);
        snprintf(out->busId, sizeof(out->busId), "%08X:%02X:%02X.0", p->domain, p->bus, p->device);
        out->domain = p->domain;
        out->bus = p->bus;
        out->device = p->device;
        out->pciDeviceId = p->device_id;
        out->pciSubSystemId = p->subsystem_id;
}

/* The layout the unversioned calls fill: busId[16], five integers and four
 * reserved ones, 52 bytes in all; it shares its first 36 bytes with
 * nvmlPciInfo_t. */
void mock_fill_pci_v1(const struct mock_pci *p, void *out)
{
        nvmlPciInfo_t full;
        mock_fill_pci(p, &full);
        memset(out, 0, 52);
        memcpy(out, &full, offsetof(nvmlPciInfo_t, busId));
}

static bool parse_hex(const char **s, unsigned max_digits, unsigned *out)
{
        unsigned v = 0, n = 0;
        while (isxdigit((unsigned char)**s) && n < max_digits) {
                char c = (char)tolower((unsigned char)**s);
                v = v * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
                (*s)++;
                n++;
        }
        if (!n || isxdigit((unsigned char)**s))
                return false;
        *out = v;
        return true;
}

bool mock_parse_pci(const char *s, struct mock_pci *out)
{
        unsigned domain, bus, dev, fn;
        if (!s || !parse_hex(&s, 8, &domain) || *s++ != ':' || !parse_hex(&s, 2, &bus) ||
            *s++ != ':' || !parse_hex(&s, 2, &dev) || *s++ != '.' || !parse_hex(&s, 1, &fn) || *s ||
            dev > 31 || fn > 7)
                return false;
        out->domain = domain;
        out->bus = bus;
        out->device = dev;
        return fn == 0;
}

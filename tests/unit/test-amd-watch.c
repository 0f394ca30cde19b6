/* Unit tests for src/devices/amd/watch.c's fingerprint: what a rebuild
 * would change (a GPU bound or unbound, a partition mode, KFD's topology
 * generation) changes it, and nothing else does (a health figure moving). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/cleanup.h"
#include "base/xalloc.h"
#include "devices/amd/internal.h"
#include "amd-fixture.h"
#include "test-util.h"


static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static void test_fingerprint_names_gpus_and_modes(void **state)
{
        _cleanup_free_ char *sys = amd_fixture_tree(amd_fixture_root, "mi300x-8x-cpx");
        assert_non_null(sys);
        _cleanup_free_ char *fp = amd_fingerprint_read(sys);
        assert_contains(fp, "kfd 1\n");
        assert_contains(fp, "gpu 0000:0c:00.0 cpx nps4\n");
        assert_contains(fp, "gpu 0000:df:00.0 cpx nps4\n");
        /* health figures are not in it */
        _cleanup_free_ char *ras = xasprintf("%s/devices/pci0000:00/0000:0c:00.0/ras/umc_err_count",
                                             sys);
        write_file(ras, "ue: 9\nce: 9\n");
        _cleanup_free_ char *same = amd_fingerprint_read(sys);
        assert_string_equal(fp, same);
}

static void test_fingerprint_follows_binds_modes_and_kfd(void **state)
{
        _cleanup_free_ char *sys = amd_fixture_tree(amd_fixture_root, "mi210-pair");
        assert_non_null(sys);
        _cleanup_free_ char *fp = amd_fingerprint_read(sys);
        /* MI210s have no partition files */
        assert_contains(fp, "gpu 0000:22:00.0 - -\n");
        _cleanup_free_ char *link = xasprintf("%s/module/amdgpu/drivers/pci:amdgpu/0000:22:00.0",
                                              sys);
        assert_int_equal(unlink(link), 0);
        _cleanup_free_ char *unbound = amd_fingerprint_read(sys);
        assert_null(strstr(unbound, "0000:22:00.0"));
        assert_int_equal(symlink("../../../../devices/pci0000:00/0000:22:00.0", link), 0);
        _cleanup_free_ char *bound = amd_fingerprint_read(sys);
        assert_string_equal(fp, bound);

        _cleanup_free_ char *mode = xasprintf("%s/devices/pci0000:00/0000:38:00.0/"
                                              "current_compute_partition",
                                              sys);
        write_file(mode, "DPX\n");
        _cleanup_free_ char *moded = amd_fingerprint_read(sys);
        assert_contains(moded, "gpu 0000:38:00.0 dpx -\n");
        /* garbage in a mode file stays bounded and printable */
        write_file(mode, "\x01\xff this is far too long for a partition mode\n");
        _cleanup_free_ char *odd = amd_fingerprint_read(sys);
        assert_contains(odd, "gpu 0000:38:00.0 ???this?is?far?t -\n");

        _cleanup_free_ char *gen = xasprintf("%s/class/kfd/kfd/topology/generation_id", sys);
        write_file(gen, "2\n");
        _cleanup_free_ char *kfd = amd_fingerprint_read(sys);
        assert_contains(kfd, "kfd 2\n");
}

static void test_fingerprint_without_amdgpu(void **state)
{
        _cleanup_free_ char *fp = amd_fingerprint_read("/nonexistent-devlet-sysfs");
        assert_string_equal(fp, "amdgpu -\n");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fingerprint_names_gpus_and_modes),
                cmocka_unit_test(test_fingerprint_follows_binds_modes_and_kfd),
                cmocka_unit_test(test_fingerprint_without_amdgpu),
        };
        return cmocka_run_group_tests(tests, amd_fixture_root_setup, amd_fixture_root_teardown);
}

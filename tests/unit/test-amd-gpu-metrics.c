/* Unit tests for devices/amd/gpu-metrics.c: each layout the parser knows,
 * built here byte by byte at the offsets the kernel's structs have (worked
 * out by hand from kgd_pp_interface.h, apart from the parser's own
 * arithmetic), sentinels, truncated tables, refused headers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <string.h>

#include "devices/amd/gpu-metrics.h"

static unsigned char buf[4096];

static void put(size_t off, unsigned width, uint64_t v)
{
        for (unsigned i = 0; i < width; i++)
                buf[off + i] = (unsigned char)(v >> (8 * i));
}

/* A table of size bytes, all ones ("not supported") past its header. */
static void table(unsigned size, unsigned format, unsigned content)
{
        memset(buf, 0xff, sizeof(buf));
        put(0, 2, size);
        buf[2] = (unsigned char)format;
        buf[3] = (unsigned char)content;
}

static void test_v1_3(void **state)
{
        struct amd_gpu_metrics m;
        table(120, 1, 3);
        put(4, 2, 38);           /* temperature_edge */
        put(6, 2, 41);           /* temperature_hotspot */
        put(22, 2, 42);          /* average_socket_power */
        put(24, 8, 1000000);     /* energy_accumulator */
        put(54, 2, 800);         /* current_gfxclk */
        put(58, 2, 1600);        /* current_uclk */
        put(74, 2, 16);          /* pcie_link_width */
        put(76, 2, 160);         /* pcie_link_speed */
        put(88, 2, 44);          /* temperature_hbm[0] */
        put(94, 2, 47);          /* temperature_hbm[3] */
        put(106, 2, 731);        /* voltage_gfx */
        assert_int_equal(amd_gpu_metrics_parse(buf, 120, &m), 0);
        assert_int_equal(m.content, 3);
        assert_true(m.temp_edge == 38 && m.temp_hotspot == 41 && m.socket_power == 42);
        assert_true(m.energy_acc == 1000000);
        assert_true(m.gfxclk[0] == 800 && isnan(m.gfxclk[1]) && m.uclk == 1600);
        assert_true(m.pcie_width == 16 && m.pcie_speed == 160);
        assert_true(m.temp_hbm[0] == 44 && isnan(m.temp_hbm[1]) && m.temp_hbm[3] == 47);
        assert_true(m.voltage_gfx == 731 && isnan(m.voltage_soc));
        /* none of the MI300 fields */
        assert_true(isnan(m.xgmi_read[0]) && isnan(m.xcp[0].gfx_busy_inst[0]));

        /* v1.1 is v1.3 cut before the firmware timestamp: no voltages */
        table(96, 1, 1);
        put(88, 2, 50);
        put(106, 2, 731); /* past structure_size */
        assert_int_equal(amd_gpu_metrics_parse(buf, 120, &m), 0);
        assert_true(m.temp_hbm[0] == 50 && isnan(m.voltage_gfx));
}

static void test_v1_4_v1_5(void **state)
{
        struct amd_gpu_metrics m;
        table(288, 1, 4);
        put(10, 2, 350);         /* curr_socket_power */
        put(16, 2, 3);           /* vcn_activity[0] */
        put(24, 8, 77);          /* energy_accumulator */
        put(104, 8, 5000);       /* xgmi_read_data_acc[0] */
        put(168 + 7 * 8, 8, 9);  /* xgmi_write_data_acc[7] */
        put(280, 2, 1300);       /* current_uclk */
        assert_int_equal(amd_gpu_metrics_parse(buf, 288, &m), 0);
        assert_true(m.socket_power == 350 && m.vcn_activity[0] == 3 && m.energy_acc == 77);
        assert_true(m.xgmi_read[0] == 5000 && m.xgmi_write[7] == 9 && m.uclk == 1300);
        assert_true(isnan(m.pcie_nak_sent));

        table(360, 1, 5);
        put(24 + 31 * 2, 2, 12); /* jpeg_activity[31] */
        put(88, 8, 78);          /* energy_accumulator */
        put(128, 8, 92000);      /* pcie_bandwidth_acc */
        put(136, 8, 800);        /* pcie_bandwidth_inst */
        put(168, 4, 5);          /* pcie_nak_sent_count_acc */
        put(172, 4, 6);          /* pcie_nak_rcvd_count_acc */
        put(176, 8, 1000);       /* xgmi_read_data_acc[0] */
        put(312 + 2, 2, 2100);   /* current_gfxclk[1] */
        put(352, 2, 1300);       /* current_uclk */
        assert_int_equal(amd_gpu_metrics_parse(buf, 360, &m), 0);
        assert_true(m.jpeg_activity[31] == 12 && m.energy_acc == 78);
        assert_true(m.pcie_bw_acc == 92000 && m.pcie_bw_inst == 800);
        assert_true(m.pcie_nak_sent == 5 && m.pcie_nak_rcvd == 6 && m.xgmi_read[0] == 1000);
        assert_true(isnan(m.gfxclk[0]) && m.gfxclk[1] == 2100 && m.uclk == 1300);
        /* a v1.5 of another size is not a layout we know */
        table(328, 1, 5);
        assert_int_equal(amd_gpu_metrics_parse(buf, 360, &m), -ENOTSUP);
}

static void test_v1_6_to_v1_8(void **state)
{
        struct amd_gpu_metrics m;
        table(1664, 1, 6);
        put(16, 8, 79);                      /* energy_accumulator */
        put(32, 4, 4000000);                 /* accumulation_counter */
        put(40, 4, 1200);                    /* ppt_residency_acc */
        put(52, 4, 3);                       /* hbm_thm_residency_acc */
        put(80, 8, 93000);                   /* pcie_bandwidth_acc */
        put(304, 2, 1300);                   /* current_uclk */
        put(306, 2, 8);                      /* num_partition */
        put(312 + 5 * 168, 4, 68);           /* xcp_stats[5].gfx_busy_inst[0] */
        put(312 + 5 * 168 + 96, 2, 4);       /* xcp_stats[5].vcn_busy[0] */
        put(312 + 7 * 168 + 104, 8, 12345);  /* xcp_stats[7].gfx_busy_acc[0] */
        put(1656, 4, 2);                     /* pcie_lc_perf_other_end_recovery */
        assert_int_equal(amd_gpu_metrics_parse(buf, 1664, &m), 0);
        assert_true(m.energy_acc == 79 && m.accumulation_counter == 4000000);
        assert_true(m.ppt_acc == 1200 && m.hbm_thm_acc == 3 && m.pcie_bw_acc == 93000);
        assert_true(m.uclk == 1300 && m.num_partition == 8);
        assert_true(m.xcp[5].gfx_busy_inst[0] == 68 && isnan(m.xcp[5].gfx_busy_inst[1]));
        assert_true(m.xcp[5].vcn_busy[0] == 4 && m.xcp[7].gfx_busy_acc[0] == 12345);
        assert_true(isnan(m.xcp[0].gfx_busy_inst[0]) && m.pcie_other_end_recovery == 2);
        /* v1.6's earlier shape (384 bytes, never released) is refused */
        table(384, 1, 6);
        assert_int_equal(amd_gpu_metrics_parse(buf, 384, &m), -ENOTSUP);

        table(2208, 1, 7);
        put(16, 8, 5300);                    /* mem_max_bandwidth */
        put(24, 8, 80);                      /* energy_accumulator */
        put(264 + 6 * 2, 2, 1);              /* xgmi_link_status[6] */
        put(336, 2, 1300);                   /* current_uclk */
        put(344 + 3 * 232, 4, 55);           /* xcp_stats[3].gfx_busy_inst[0] */
        put(344 + 3 * 232 + 168, 8, 7);      /* xcp_stats[3].gfx_below_host_limit_acc[0] */
        put(2200, 4, 1);                     /* pcie_lc_perf_other_end_recovery */
        assert_int_equal(amd_gpu_metrics_parse(buf, 2208, &m), 0);
        assert_true(m.mem_max_bandwidth == 5300 && m.energy_acc == 80 && m.uclk == 1300);
        assert_true(m.xgmi_link_status[6] == 1 && isnan(m.xgmi_link_status[7]));
        assert_true(m.xcp[3].gfx_busy_inst[0] == 55 && m.xcp[3].gfx_below_host_limit_acc[0] == 7);
        assert_true(m.pcie_other_end_recovery == 1);

        table(3360, 1, 8);
        put(344 + 7 * 376, 4, 91);           /* xcp_stats[7].gfx_busy_inst[0] */
        put(344 + 7 * 376 + 32 + 39 * 2, 2, 9); /* xcp_stats[7].jpeg_busy[39] */
        put(344 + 7 * 376 + 312, 8, 6);      /* xcp_stats[7].gfx_low_utilization_acc[0] */
        put(3352, 4, 4);
        assert_int_equal(amd_gpu_metrics_parse(buf, 3360, &m), 0);
        assert_true(m.xcp[7].gfx_busy_inst[0] == 91 && m.xcp[7].jpeg_busy[39] == 9);
        assert_true(m.xcp[7].gfx_low_utilization_acc[0] == 6 && m.pcie_other_end_recovery == 4);
}

static void test_truncated_and_refused(void **state)
{
        struct amd_gpu_metrics m;
        /* a file cut short keeps what it holds, nothing past it */
        table(1664, 1, 6);
        put(4, 2, 40);
        put(16, 8, 79);
        put(312, 4, 20);
        assert_int_equal(amd_gpu_metrics_parse(buf, 100, &m), 0);
        assert_true(m.energy_acc == 79 && isnan(m.xcp[0].gfx_busy_inst[0]) && isnan(m.uclk));
        /* a field straddling the end is absent */
        assert_int_equal(amd_gpu_metrics_parse(buf, 20, &m), 0);
        assert_true(isnan(m.energy_acc) && m.temp_hotspot == 40);
        /* headers that cannot be */
        assert_int_equal(amd_gpu_metrics_parse(buf, 3, &m), -EINVAL);
        table(2, 1, 3);
        assert_int_equal(amd_gpu_metrics_parse(buf, 120, &m), -EINVAL);
        /* APU tables, v1.9's pointers, unknown formats */
        table(120, 2, 1);
        assert_int_equal(amd_gpu_metrics_parse(buf, 120, &m), -ENOTSUP);
        assert_int_equal(m.format, 2);
        table(256, 3, 0);
        assert_int_equal(amd_gpu_metrics_parse(buf, 256, &m), -ENOTSUP);
        table(8, 1, 9);
        assert_int_equal(amd_gpu_metrics_parse(buf, 8, &m), -ENOTSUP);
        table(120, 1, 0);
        assert_int_equal(amd_gpu_metrics_parse(buf, 120, &m), -ENOTSUP);
        /* v1.3 claiming more than it has room for */
        table(4000, 1, 3);
        assert_int_equal(amd_gpu_metrics_parse(buf, 4000, &m), -ENOTSUP);
        assert_true(isnan(m.temp_edge));
        /* a missing file */
        assert_int_equal(amd_gpu_metrics_read("/nonexistent", &m), -ENOENT);
        assert_true(isnan(m.temp_hotspot));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_v1_3),
                cmocka_unit_test(test_v1_4_v1_5),
                cmocka_unit_test(test_v1_6_to_v1_8),
                cmocka_unit_test(test_truncated_and_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}

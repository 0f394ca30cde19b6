#!/usr/bin/python3
"""Fake amdgpu/KFD sysfs trees (and /dev nodes) from YAML profiles.

    gen_sysfs.py PROFILE --sysfs DIR [--dev DIR] [--mknod] [--manifest FILE]

writes the files devlet's AMD backend reads, with the layouts the kernel
uses (drivers/gpu/drm/amd/amdgpu and amdkfd, Documentation/gpu/amdgpu):

  module/amdgpu/{version,srcversion}
  module/amdgpu/drivers/pci:amdgpu/<BDF> -> ../../../../devices/pci0000:00/<BDF>
  devices/pci0000:00/<BDF>/  vendor device numa_node product_name serial_number
      unique_id mem_info_vram_total mem_info_vram_used gpu_busy_percent
      xgmi_hive_id (hive members only)
      mem_busy_percent pp_dpm_sclk pp_dpm_mclk current_compute_partition
      current_memory_partition available_compute_partition
      available_memory_partition drm/card<N>/dev drm/renderD<M>/dev
      hwmon/hwmon<K>/{name,temp*_input,temp*_label,power1_*,energy1_input}
      ras/<block>_err_count ("ue: N\\nce: N", MI300's also "de: N")
      gpu_metrics (the firmware's binary table: v1.7 on MI300X, v1.3 on
      MI200/MI210 and Navi, see GPU_METRICS below) mem_info_vis_vram_*
      mem_info_gtt_* pp_dpm_{fclk,socclk,vclk,dclk} current_link_speed
      max_link_speed current_link_width pcie_replay_count
  devices/platform/amdgpu_xcp_<N>/drm/{card<N>,renderD<M>}/dev
  class/kfd/kfd/dev, class/kfd/kfd/topology/nodes/<n>/{properties,gpu_id,name,
      mem_banks/0/properties,io_links/<k>/properties,p2p_links/<k>/properties}
  class/kfd/kfd/proc/<pid>/{pasid,vram_<gpu_id>}

MI300-class parts have 8 XCDs: the driver makes 7 amdgpu_xcp_* platform
devices per GPU whatever the mode; in CPX the PCI device's own nodes are
partition 0 and the xcp devices partitions 1-7, each a KFD node of its own
with the GPU's unique_id and location_id.  In SPX the xcp render nodes are
not in the KFD topology (AMD's plugin skips them for that reason).

The module can be imported: generate(profile_dict, sysfs, dev) returns the
manifest (GPUs, their IDs and files) the tests assert against."""

import argparse
import json
import os
import struct
import sys

import yaml

DRM_MAJOR = 226
# /dev/kfd's major is allocated at load time (register_chrdev(0, ...)); the
# tree says which in class/kfd/kfd/dev, as the kernel does.
KFD_MAJOR = 235

# fw_version/<block>_fw_version: compute GPUs have no VCE/UVD/ME/PFP/CE
# (the graphics front end), the rest are each model's released firmware.
_NO_GFX = dict(vce=0, uvd=0, mc=0, me=0, pfp=0, ce=0)
FIRMWARE = {
    "mi300x": dict(_NO_GFX, rlc=0x00000032, mec=0x0000009d, smc=0x00556b00, sdma=0x00000013,
                   sos=0x00250096, asd=0x21000107, ta_ras=0x1b00013e, vcn=0x0e00d001),
    "mi250": dict(_NO_GFX, rlc=0x00000011, mec=0x00000048, smc=0x00443a00, sdma=0x00000008,
                  sos=0x00270082, asd=0x2100009c, vcn=0x0210a006),
    "mi210": dict(_NO_GFX, rlc=0x00000011, mec=0x00000048, smc=0x00443a00, sdma=0x00000008,
                  sos=0x00270082, asd=0x2100009c, vcn=0x0210a006),
    "w7900": dict(vce=0, uvd=0, mc=0, me=0x000005c6, pfp=0x000005ee, ce=0, rlc=0x00000064,
                  mec=0x000001f4, smc=0x004e6a00, sdma=0x00000011, mes=0x00000046),
}

MODELS = {
    "mi300x": dict(device="0x74a1", product="AMD Instinct MI300X OAM", vram=192 << 30,
                   gfx=90402, cus=304, simd_per_cu=4, xcds=8,
                   compute_modes="SPX, DPX, QPX, CPX", memory_modes="NPS1, NPS4",
                   temps=[("junction", 2, 52000), ("mem", 3, 44000)],
                   power="power1_input", watts=182, energy=True, ras=True,
                   sclk=[500, 1300, 2100], mclk=[900, 1300], fclk=[1200, 1400, 1600, 1900, 2000],
                   socclk=[28, 1143], vclk=[29, 1333], dclk=[22, 1143],
                   pcie="32.0 GT/s PCIe", gtt=1008 << 30, vis_vram=192 << 30,
                   metrics=(1, 7), ras_deferred=True),
    "mi250": dict(device="0x740c", product="AMD Instinct MI250X/MI250", vram=64 << 30,
                  gfx=90010, cus=104, simd_per_cu=4, xcds=1,
                  temps=[("edge", 1, 35000), ("junction", 2, 40000), ("mem", 3, 46000)],
                  power="power1_average", watts=96, energy=True, ras=True,
                  sclk=[500, 800, 1700], mclk=[400, 1600], fclk=[1200], socclk=[500, 1090],
                  vclk=[400, 1333], dclk=[400, 1143],
                  pcie="16.0 GT/s PCIe", gtt=504 << 30, vis_vram=64 << 30, metrics=(1, 3)),
    "mi210": dict(device="0x740f", product="AMD Instinct MI210", vram=64 << 30,
                  gfx=90010, cus=104, simd_per_cu=4, xcds=1,
                  temps=[("edge", 1, 38000), ("junction", 2, 41000), ("mem", 3, 45000)],
                  power="power1_average", watts=42, energy=False, ras=True,
                  sclk=[500, 800, 1700], mclk=[400, 1600], fclk=[1200], socclk=[500, 1090],
                  vclk=[400, 1333], dclk=[400, 1143],
                  pcie="16.0 GT/s PCIe", gtt=504 << 30, vis_vram=64 << 30, metrics=(1, 3)),
    "w7900": dict(device="0x7448", product="AMD Radeon PRO W7900", vram=48 << 30,
                  gfx=110000, cus=96, simd_per_cu=2, xcds=1,
                  temps=[("edge", 1, 33000), ("junction", 2, 35000), ("mem", 3, 40000)],
                  power="power1_average", watts=18, energy=False, ras=False,
                  sclk=[500, 1000, 2495], mclk=[96, 1249], socclk=[500, 1200],
                  pcie="16.0 GT/s PCIe", gtt=31 << 30, vis_vram=48 << 30, metrics=(1, 3)),
}

PARTITIONS = {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}
BUSES = ["0c", "22", "38", "5c", "9f", "af", "bf", "df", "03", "26", "43", "63", "83", "a3", "c3", "e3"]
RAS_BLOCKS = ["umc", "gfx", "sdma", "mmhub", "xgmi_wafl", "pcie_bif", "hdp", "athub"]
KFD_PROPERTIES = ["cpu_cores_count", "simd_count", "mem_banks_count", "caches_count",
                  "io_links_count", "p2p_links_count", "cpu_core_id_base", "simd_id_base",
                  "max_waves_per_simd", "lds_size_in_kb", "gds_size_in_kb", "num_gws",
                  "wave_front_size", "array_count", "simd_arrays_per_engine",
                  "cu_per_simd_array", "simd_per_cu", "max_slots_scratch_cu",
                  "gfx_target_version", "vendor_id", "device_id", "location_id", "domain",
                  "drm_render_minor", "hive_id", "num_sdma_engines", "num_sdma_xgmi_engines",
                  "num_sdma_queues_per_engine", "num_cp_queues", "max_engine_clk_fcompute",
                  "local_mem_size", "fw_version", "capability", "debug_prop",
                  "sdma_fw_version", "unique_id", "num_xcc", "max_engine_clk_ccompute"]
IOLINK_PCIE = 2
IOLINK_XGMI = 11


# ---- gpu_metrics: the firmware's table, as the kernel's
# kgd_pp_interface.h declares it (struct gpu_metrics_v<format>_<content>):
# members in declaration order, laid out with C's natural alignment, every
# byte 0xff ("not supported") until set.  Each layout: (name, format char,
# count); "xcp_stats" is an array of the partition element.

GM_V1_3 = [("hdr", "I", 1), ("temperature_edge", "H", 1), ("temperature_hotspot", "H", 1),
           ("temperature_mem", "H", 1), ("temperature_vrgfx", "H", 1), ("temperature_vrsoc", "H", 1),
           ("temperature_vrmem", "H", 1), ("average_gfx_activity", "H", 1),
           ("average_umc_activity", "H", 1), ("average_mm_activity", "H", 1),
           ("average_socket_power", "H", 1), ("energy_accumulator", "Q", 1),
           ("system_clock_counter", "Q", 1), ("average_clocks", "H", 7), ("current_gfxclk", "H", 1),
           ("current_socclk", "H", 1), ("current_uclk", "H", 1), ("current_vclk0", "H", 1),
           ("current_dclk0", "H", 1), ("current_vclk1", "H", 1), ("current_dclk1", "H", 1),
           ("throttle_status", "I", 1), ("current_fan_speed", "H", 1), ("pcie_link_width", "H", 1),
           ("pcie_link_speed", "H", 1), ("padding", "H", 1), ("gfx_activity_acc", "I", 1),
           ("mem_activity_acc", "I", 1), ("temperature_hbm", "H", 4), ("firmware_timestamp", "Q", 1),
           ("voltage_soc", "H", 1), ("voltage_gfx", "H", 1), ("voltage_mem", "H", 1),
           ("padding1", "H", 1), ("indep_throttle_status", "Q", 1)]
_GM_HEAD = [("hdr", "I", 1), ("temperature_hotspot", "H", 1), ("temperature_mem", "H", 1),
            ("temperature_vrsoc", "H", 1), ("curr_socket_power", "H", 1),
            ("average_gfx_activity", "H", 1), ("average_umc_activity", "H", 1)]
_GM_LINKS = [("pcie_link_width", "H", 1), ("pcie_link_speed", "H", 1), ("xgmi_link_width", "H", 1),
             ("xgmi_link_speed", "H", 1), ("gfx_activity_acc", "I", 1), ("mem_activity_acc", "I", 1),
             ("pcie_bandwidth_acc", "Q", 1), ("pcie_bandwidth_inst", "Q", 1),
             ("pcie_l0_to_recov_count_acc", "Q", 1), ("pcie_replay_count_acc", "Q", 1),
             ("pcie_replay_rover_count_acc", "Q", 1)]
_GM_NAK = [("pcie_nak_sent_count_acc", "I", 1), ("pcie_nak_rcvd_count_acc", "I", 1)]
_GM_XGMI = [("xgmi_read_data_acc", "Q", 8), ("xgmi_write_data_acc", "Q", 8)]
_GM_CLOCKS = [("current_gfxclk", "H", 8), ("current_socclk", "H", 4), ("current_vclk0", "H", 4),
              ("current_dclk0", "H", 4), ("current_uclk", "H", 1)]
_GM_RESID = [("accumulation_counter", "I", 1), ("prochot_residency_acc", "I", 1),
             ("ppt_residency_acc", "I", 1), ("socket_thm_residency_acc", "I", 1),
             ("vr_thm_residency_acc", "I", 1), ("hbm_thm_residency_acc", "I", 1)]
GM_V1_4 = (_GM_HEAD + [("vcn_activity", "H", 4), ("energy_accumulator", "Q", 1),
                       ("system_clock_counter", "Q", 1), ("throttle_status", "I", 1),
                       ("gfxclk_lock_status", "I", 1)] + _GM_LINKS + _GM_XGMI
           + [("firmware_timestamp", "Q", 1)] + _GM_CLOCKS + [("padding", "H", 1)])
GM_V1_5 = (_GM_HEAD + [("vcn_activity", "H", 4), ("jpeg_activity", "H", 32),
                       ("energy_accumulator", "Q", 1), ("system_clock_counter", "Q", 1),
                       ("throttle_status", "I", 1), ("gfxclk_lock_status", "I", 1)]
           + _GM_LINKS + _GM_NAK + _GM_XGMI + [("firmware_timestamp", "Q", 1)] + _GM_CLOCKS
           + [("padding", "H", 1)])
XCP_V1_0 = [("gfx_busy_inst", "I", 8), ("jpeg_busy", "H", 32), ("vcn_busy", "H", 4),
            ("gfx_busy_acc", "Q", 8)]
XCP_V1_1 = XCP_V1_0 + [("gfx_below_host_limit_acc", "Q", 8)]
XCP_V1_2 = [("gfx_busy_inst", "I", 8), ("jpeg_busy", "H", 40), ("vcn_busy", "H", 4),
            ("gfx_busy_acc", "Q", 8), ("gfx_below_host_limit_ppt_acc", "Q", 8),
            ("gfx_below_host_limit_thm_acc", "Q", 8), ("gfx_low_utilization_acc", "Q", 8)]
GM_V1_6 = (_GM_HEAD + [("energy_accumulator", "Q", 1), ("system_clock_counter", "Q", 1)]
           + _GM_RESID + [("gfxclk_lock_status", "I", 1)] + _GM_LINKS + _GM_NAK + _GM_XGMI
           + [("firmware_timestamp", "Q", 1)] + _GM_CLOCKS
           + [("num_partition", "H", 1), ("xcp_stats", XCP_V1_0, 8),
              ("pcie_lc_perf_other_end_recovery", "I", 1)])
_GM_V1_7_BODY = (_GM_HEAD + [("mem_max_bandwidth", "Q", 1), ("energy_accumulator", "Q", 1),
                             ("system_clock_counter", "Q", 1)]
                 + _GM_RESID + [("gfxclk_lock_status", "I", 1)] + _GM_LINKS + _GM_NAK + _GM_XGMI
                 + [("xgmi_link_status", "H", 8), ("padding", "H", 1), ("firmware_timestamp", "Q", 1)]
                 + _GM_CLOCKS + [("num_partition", "H", 1)])
GM_V1_7 = _GM_V1_7_BODY + [("xcp_stats", XCP_V1_1, 8), ("pcie_lc_perf_other_end_recovery", "I", 1)]
GM_V1_8 = _GM_V1_7_BODY + [("xcp_stats", XCP_V1_2, 8), ("pcie_lc_perf_other_end_recovery", "I", 1)]
GPU_METRICS = {(1, 1): GM_V1_3[:29], (1, 2): GM_V1_3[:30], (1, 3): GM_V1_3, (1, 4): GM_V1_4,
               (1, 5): GM_V1_5, (1, 6): GM_V1_6, (1, 7): GM_V1_7, (1, 8): GM_V1_8}


def gm_layout(members):
    """{name: (offset, format, count, sub-layout)}, size, alignment."""
    off, align, out = 0, 1, {}
    for name, fmt, count in members:
        if isinstance(fmt, list):
            sub, size, a = gm_layout(fmt)
            size = (size + a - 1) // a * a
        else:
            sub, size, a = None, struct.calcsize(fmt), struct.calcsize(fmt)
        off = (off + a - 1) // a * a
        out[name] = (off, fmt, count, sub, size)
        off += size * count
        align = max(align, a)
    return out, off, align


def gm_size(version):
    _, size, align = gm_layout(GPU_METRICS[version])
    return (size + align - 1) // align * align


def gpu_metrics_blob(version, values, xcp=None):
    """The table of version (format, content): values {member: value or
    list}, xcp [{member: list}] per partition; everything else all ones."""
    layout, _, _ = gm_layout(GPU_METRICS[version])
    size = gm_size(version)
    buf = bytearray(b"\xff" * size)
    struct.pack_into("<HBB", buf, 0, size, version[0], version[1])

    def put(lay, base, name, v):
        off, fmt, count, _, width = lay[name]
        for i, x in enumerate(v if isinstance(v, list) else [v]):
            if i < count and x is not None:
                struct.pack_into("<" + fmt, buf, base + off + i * width, x)

    for name, v in values.items():
        if name in layout:
            put(layout, 0, name, v)
    if xcp and "xcp_stats" in layout:
        off, _, count, sub, width = layout["xcp_stats"]
        for k, part in enumerate(xcp[:count]):
            for name, v in part.items():
                if name in sub:
                    put(sub, off + k * width, name, v)
    return bytes(buf)


def gpu_metrics_for(g, version):
    """Plausible figures for GPU g (its model's, moved by its index so GPUs
    differ); partitions' busy values differ too."""
    i, m = g["index"], g["model"]
    hot = m["temps"][0][2] // 1000 + i if m["temps"][0][0] == "junction" else 41 + i
    sclk = m["sclk"][1]
    v = dict(temperature_edge=38 + i, temperature_hotspot=hot, temperature_mem=45 + i,
             temperature_vrgfx=40 + i, temperature_vrsoc=41 + i, temperature_vrmem=39 + i,
             average_gfx_activity=(7 * i) % 100, average_umc_activity=(3 * i) % 100,
             average_mm_activity=0, average_socket_power=m["watts"] + i,
             curr_socket_power=m["watts"] + i, energy_accumulator=8090000000 + 1000 * i,
             system_clock_counter=1700000000000000000,
             current_gfxclk=[sclk] * (8 if version >= (1, 4) else 1), current_socclk=m["socclk"][-1],
             current_uclk=m["mclk"][-1], current_vclk0=m.get("vclk", [0])[-1],
             current_dclk0=m.get("dclk", [0])[-1], current_vclk1=m.get("vclk", [0])[-1],
             current_dclk1=m.get("dclk", [0])[-1],
             throttle_status=0, pcie_link_width=16,
             pcie_link_speed=int(float(m["pcie"].split()[0]) * 10), gfx_activity_acc=1000 * i,
             mem_activity_acc=500 * i, temperature_hbm=[44 + i, 45 + i, 46 + i, 47 + i],
             firmware_timestamp=123456789, voltage_soc=806, voltage_gfx=731 + i, voltage_mem=1200,
             indep_throttle_status=0, vcn_activity=[0, 0, 0, 0], jpeg_activity=[0] * 32,
             gfxclk_lock_status=0, xgmi_link_width=16, xgmi_link_speed=32,
             pcie_bandwidth_acc=92000 + i, pcie_bandwidth_inst=(100 + i) * 8,
             pcie_l0_to_recov_count_acc=2 + i, pcie_replay_count_acc=i, pcie_replay_rover_count_acc=0,
             pcie_nak_sent_count_acc=i, pcie_nak_rcvd_count_acc=2 * i,
             xgmi_read_data_acc=[(i + 1) * 1000 + k for k in range(7)] + [None],
             xgmi_write_data_acc=[(i + 1) * 2000 + k for k in range(7)] + [None],
             xgmi_link_status=[1] * 7 + [None],
             accumulation_counter=4000000 + i, prochot_residency_acc=0, ppt_residency_acc=1200 + i,
             socket_thm_residency_acc=0, vr_thm_residency_acc=0, hbm_thm_residency_acc=3 + i,
             mem_max_bandwidth=5300, num_partition=g["partitions"], pcie_lc_perf_other_end_recovery=0)
    xcp = []
    xccs = m["xcds"] // g["partitions"] if m["xcds"] > 1 else 1
    for p in range(g["partitions"]):
        busy = [(10 + 3 * i + 11 * p + x) % 100 for x in range(xccs)]
        xcp.append(dict(gfx_busy_inst=busy, jpeg_busy=[p % 7] * 4, vcn_busy=[p % 5],
                        gfx_busy_acc=[b * 1000 for b in busy],
                        gfx_below_host_limit_acc=[0] * xccs,
                        gfx_below_host_limit_ppt_acc=[0] * xccs,
                        gfx_below_host_limit_thm_acc=[0] * xccs,
                        gfx_low_utilization_acc=[0] * xccs))
    return gpu_metrics_blob(version, v, xcp)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(text, bytes) else "w") as f:
        f.write(text)


def symlink(target, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(os.path.relpath(target, os.path.dirname(path)), path)


def node_file(path, major, minor, mknod):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.lexists(path):
        os.unlink(path)
    if mknod:
        os.mknod(path, 0o666 | 0o020000, os.makedev(major, minor))
    else:
        write(path, "")


def kfd_properties(values):
    return "".join(f"{k} {values.get(k, 0)}\n" for k in KFD_PROPERTIES)


def link_properties(kind, node_from, node_to, weight, bandwidth):
    return (f"type {kind}\nversion_major 0\nversion_minor 0\nnode_from {node_from}\n"
            f"node_to {node_to}\nweight {weight}\nmin_latency 0\nmax_latency 0\n"
            f"min_bandwidth {bandwidth}\nmax_bandwidth {bandwidth}\n"
            f"recommended_transfer_size 0\nflags 1\n")


def dpm(levels, current):
    return "".join(f"{i}: {mhz}Mhz{' *' if i == current else ''}\n" for i, mhz in enumerate(levels))


def expand(profile):
    """The profile's GPUs, one dict each, in PCI order."""
    gpus = []
    for group in profile.get("gpus", []):
        model = MODELS[group["model"]]
        for _ in range(group.get("count", 1)):
            i = len(gpus)
            compute = group.get("compute_partition")
            memory = group.get("memory_partition")
            gpus.append(dict(index=i, model_name=group["model"], model=model,
                             bdf=f"0000:{BUSES[i]}:00.0", bus=int(BUSES[i], 16),
                             compute=compute, memory=memory,
                             partitions=PARTITIONS[compute] if compute else 1,
                             unique_id=0x3B8F0E2C5A710000 + i * 0x1111,
                             gpu_metrics=group.get("gpu_metrics"),
                             serial=f"69225100{1124 + i}"))
    return gpus


def group_metrics(profile, g):
    """A profile's gpu_metrics version for g ("1.5"; "none": no file)."""
    v = g.get("gpu_metrics") or profile.get("gpu_metrics")
    if v is None:
        return None
    if v == "none":
        return (0, 0)
    return tuple(int(x) for x in str(v).split("."))


def generate(profile, sysfs, dev=None, mknod=False):
    kfd = profile.get("kfd", True)
    cpus = profile.get("cpus", 1)
    gpus = expand(profile)
    drv = profile.get("driver", {})
    write(f"{sysfs}/module/amdgpu/version", drv.get("version", "6.8.5") + "\n")
    write(f"{sysfs}/module/amdgpu/srcversion", drv.get("srcversion", "0") + "\n")
    os.makedirs(f"{sysfs}/module/amdgpu/drivers/pci:amdgpu", exist_ok=True)
    os.makedirs(f"{sysfs}/devices/platform", exist_ok=True)
    if dev:
        os.makedirs(f"{dev}/dev/dri", exist_ok=True)
        if kfd:
            node_file(f"{dev}/dev/kfd", KFD_MAJOR, 0, mknod)

    # XGMI hives: the GPUs the xgmi pairs join, each group one hive ("all":
    # one hive of every GPU); amdgpu writes xgmi_hive_id only for hive members
    xgmi = profile.get("xgmi") or []
    hives = {}
    if xgmi == "all":
        hives = {g["index"]: 0x5A5A0000 for g in gpus}
    else:
        groups = []
        for pair in xgmi:
            joined = [grp for grp in groups if grp & set(pair)]
            merged = set(pair).union(*joined)
            groups = [grp for grp in groups if grp not in joined] + [merged]
        hives = {i: 0x5A5A0000 + k for k, grp in enumerate(groups) for i in grp}
    card = 1
    xcp = 0
    per_numa = max(1, (len(gpus) + cpus - 1) // cpus)
    manifest = dict(name=profile.get("name"), kfd=kfd, kfd_major=KFD_MAJOR, gpus=[],
                    driver_version=drv.get("version", "6.8.5"))
    kfd_nodes = []  # (node index, gpu index, partition index, render minor)
    for g in gpus:
        m = g["model"]
        d = f"{sysfs}/devices/pci0000:00/{g['bdf']}"
        numa = min(g["index"] // per_numa, cpus - 1)
        g["numa"] = numa
        symlink(d, f"{sysfs}/module/amdgpu/drivers/pci:amdgpu/{g['bdf']}")
        symlink(d, f"{sysfs}/bus/pci/devices/{g['bdf']}")
        write(f"{d}/vendor", "0x1002\n")
        write(f"{d}/device", m["device"] + "\n")
        write(f"{d}/numa_node", f"{numa}\n")
        write(f"{d}/product_name", m["product"] + "\n")
        write(f"{d}/serial_number", g["serial"] + "\n")
        write(f"{d}/unique_id", f"{g['unique_id']:016x}\n")
        write(f"{d}/vbios_version", m.get("vbios", "113-D65201-X") + "\n")
        write(f"{d}/mem_info_vram_total", f"{m['vram']}\n")
        if g["index"] in hives:
            write(f"{d}/xgmi_hive_id", f"{hives[g['index']]}\n")
        write(f"{d}/mem_info_vram_used", f"{(300 + g['index']) << 20}\n")
        write(f"{d}/gpu_busy_percent", f"{(7 * g['index']) % 100}\n")
        write(f"{d}/mem_busy_percent", f"{(3 * g['index']) % 100}\n")
        write(f"{d}/pp_dpm_sclk", dpm(m["sclk"], 1))
        write(f"{d}/pp_dpm_mclk", dpm(m["mclk"], len(m["mclk"]) - 1))
        for clk in ("fclk", "socclk", "vclk", "dclk"):
            if clk in m:
                write(f"{d}/pp_dpm_{clk}", dpm(m[clk], len(m[clk]) - 1))
        write(f"{d}/mem_info_vis_vram_total", f"{m['vis_vram']}\n")
        write(f"{d}/mem_info_vis_vram_used", f"{(200 + g['index']) << 20}\n")
        write(f"{d}/mem_info_gtt_total", f"{m['gtt']}\n")
        write(f"{d}/mem_info_gtt_used", f"{(20 + g['index']) << 20}\n")
        write(f"{d}/current_link_speed", m["pcie"] + "\n")
        write(f"{d}/max_link_speed", m["pcie"] + "\n")
        write(f"{d}/current_link_width", "16\n")
        write(f"{d}/pcie_replay_count", f"{g['index']}\n")
        # amdgpu writes every block's file, 0 for one the GPU lacks
        for block, ver in FIRMWARE.get(g["model_name"], {}).items():
            write(f"{d}/fw_version/{block}_fw_version", f"0x{ver:08x}\n")
        version = tuple(group_metrics(profile, g) or m["metrics"])
        if version != (0, 0):
            write(f"{d}/gpu_metrics", gpu_metrics_for(g, version))
        if "compute_modes" in m:
            write(f"{d}/available_compute_partition", m["compute_modes"] + "\n")
            write(f"{d}/available_memory_partition", m["memory_modes"] + "\n")
            write(f"{d}/current_compute_partition", (g["compute"] or "SPX") + "\n")
            write(f"{d}/current_memory_partition", (g["memory"] or "NPS1") + "\n")
        hw = f"{d}/hwmon/hwmon{g['index'] + 2}"
        write(f"{hw}/name", "amdgpu\n")
        for label, n, milli in m["temps"]:
            write(f"{hw}/temp{n}_input", f"{milli + 1000 * g['index']}\n")
            write(f"{hw}/temp{n}_label", label + "\n")
        write(f"{hw}/{m['power']}", f"{(m['watts'] + g['index']) * 1000000}\n")
        if m["energy"]:
            write(f"{hw}/energy1_input", f"{123456789000 + g['index']}\n")
        if m["ras"]:
            for block in RAS_BLOCKS:
                de = "de: 0\n" if m.get("ras_deferred") else ""
                write(f"{d}/ras/{block}_err_count", f"ue: 0\nce: {g['index'] % 3}\n{de}")
        devices = []
        slots = m["xcds"]
        for p in range(slots):
            c, r = card + p, 128 + card + p - 1
            if p == 0:
                base = d
                ident = g["bdf"]
            else:
                base = f"{sysfs}/devices/platform/amdgpu_xcp_{xcp}"
                ident = f"amdgpu_xcp_{xcp}"
                xcp += 1
            write(f"{base}/drm/card{c}/dev", f"{DRM_MAJOR}:{c}\n")
            write(f"{base}/drm/renderD{r}/dev", f"{DRM_MAJOR}:{r}\n")
            if dev:
                node_file(f"{dev}/dev/dri/card{c}", DRM_MAJOR, c, mknod)
                node_file(f"{dev}/dev/dri/renderD{r}", DRM_MAJOR, r, mknod)
            if p < g["partitions"]:
                devices.append(dict(id=ident, card=c, render=r, partition=p))
        card += slots
        g["devices"] = devices
        for dv in devices:
            kfd_nodes.append((cpus + len(kfd_nodes), g["index"], dv["partition"], dv["render"]))
        manifest["gpus"].append(dict(bdf=g["bdf"], numa=numa, model=g["model_name"],
                                     hive=hives.get(g["index"], 0),
                                     compute=(g["compute"] or "").lower(),
                                     memory=(g["memory"] or "").lower(),
                                     serial=g["serial"], sysfs=d, devices=devices))

    if kfd:
        write(f"{sysfs}/class/kfd/kfd/dev", f"{KFD_MAJOR}:0\n")
        os.makedirs(f"{sysfs}/class/kfd/kfd/proc", exist_ok=True)
        topo = f"{sysfs}/class/kfd/kfd/topology"
        write(f"{topo}/generation_id", "1\n")
        write(f"{topo}/system_properties", f"platform_oem 0\nplatform_id 0\nplatform_rev 0\n")
        for c in range(cpus):
            nd = f"{topo}/nodes/{c}"
            write(f"{nd}/properties", kfd_properties(dict(cpu_cores_count=96, cpu_core_id_base=96 * c)))
            write(f"{nd}/gpu_id", "0\n")
            write(f"{nd}/name", "\n")
        for n, gi, p, render in kfd_nodes:
            g = gpus[gi]
            m = g["model"]
            nd = f"{topo}/nodes/{n}"
            cus = m["cus"] // g["partitions"]
            vram = m["vram"] // g["partitions"]
            props = dict(simd_count=cus * m["simd_per_cu"], mem_banks_count=1, simd_per_cu=m["simd_per_cu"],
                         max_waves_per_simd=8, lds_size_in_kb=64, wave_front_size=64,
                         gfx_target_version=m["gfx"], vendor_id=4098, device_id=int(m["device"], 16),
                         location_id=(g["bus"] << 8), domain=0, drm_render_minor=render,
                         hive_id=hives.get(gi, 0), local_mem_size=vram,
                         unique_id=g["unique_id"], num_xcc=8 // g["partitions"] if m["xcds"] > 1 else 1,
                         max_engine_clk_fcompute=m["sclk"][-1])
            links = []
            links.append((IOLINK_PCIE, cpus and g["numa"], 20))
            for n2, gj, p2, _ in kfd_nodes:
                if n2 == n:
                    continue
                if gj == gi:
                    links.append((IOLINK_XGMI, n2, 13))
                elif xgmi == "all" or [min(gi, gj), max(gi, gj)] in [sorted(x) for x in xgmi]:
                    links.append((IOLINK_XGMI, n2, 15))
            p2p = []
            for n2, gj, _, _ in kfd_nodes:
                if n2 == n or any(l[1] == n2 for l in links):
                    continue
                p2p.append((IOLINK_PCIE, n2, 40 if gpus[gj]["numa"] == g["numa"] else 60))
            props["io_links_count"] = len(links)
            props["p2p_links_count"] = len(p2p)
            write(f"{nd}/properties", kfd_properties(props))
            write(f"{nd}/gpu_id", f"{40000 + n * 17}\n")
            write(f"{nd}/name", f"{'aldebaran' if gi >= 0 and m['gfx'] == 90010 else 'ip discovery'}\n")
            write(f"{nd}/mem_banks/0/properties",
                  f"heap_type 1\nsize_in_bytes {vram}\nflags 0\nwidth 8192\nmem_clk_max {m['mclk'][-1]}\n")
            for k, (kind, to, weight) in enumerate(links):
                write(f"{nd}/io_links/{k}/properties",
                      link_properties(kind, n, to, weight, 50000 if kind == IOLINK_XGMI else 32000))
            for k, (kind, to, weight) in enumerate(p2p):
                write(f"{nd}/p2p_links/{k}/properties", link_properties(kind, n, to, weight, 32000))
            for dv in g["devices"]:
                if dv["render"] == render:
                    dv["kfd_node"] = n
                    dv["gpu_id"] = 40000 + n * 17
    return manifest


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profile", help="YAML profile (a path, or a name in tests/mock-amd/profiles)")
    ap.add_argument("--sysfs", required=True, help="directory to write the sysfs tree into")
    ap.add_argument("--dev", help="root to write dev/kfd and dev/dri/* under")
    ap.add_argument("--mknod", action="store_true", help="real character devices (root only)")
    ap.add_argument("--manifest", help="write what was generated as JSON here ('-': stdout)")
    a = ap.parse_args()
    path = a.profile
    if not os.path.exists(path):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles", a.profile + ".yaml")
    with open(path) as f:
        profile = yaml.safe_load(f)
    manifest = generate(profile, a.sysfs, a.dev, a.mknod)
    if a.manifest == "-":
        json.dump(manifest, sys.stdout, indent=1)
    elif a.manifest:
        with open(a.manifest, "w") as f:
            json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()

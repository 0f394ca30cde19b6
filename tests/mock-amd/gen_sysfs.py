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
      ras/<block>_err_count ("ue: N\\nce: N")
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
import sys

import yaml

DRM_MAJOR = 226
# /dev/kfd's major is allocated at load time (register_chrdev(0, ...)); the
# tree says which in class/kfd/kfd/dev, as the kernel does.
KFD_MAJOR = 235

MODELS = {
    "mi300x": dict(device="0x74a1", product="AMD Instinct MI300X OAM", vram=192 << 30,
                   gfx=90402, cus=304, simd_per_cu=4, xcds=8,
                   compute_modes="SPX, DPX, QPX, CPX", memory_modes="NPS1, NPS4",
                   temps=[("junction", 2, 52000), ("mem", 3, 44000)],
                   power="power1_input", watts=182, energy=True, ras=True,
                   sclk=[500, 1300, 2100], mclk=[900, 1300]),
    "mi210": dict(device="0x740f", product="AMD Instinct MI210", vram=64 << 30,
                  gfx=90010, cus=104, simd_per_cu=4, xcds=1,
                  temps=[("edge", 1, 38000), ("junction", 2, 41000), ("mem", 3, 45000)],
                  power="power1_average", watts=42, energy=False, ras=True,
                  sclk=[500, 800, 1700], mclk=[400, 1600]),
    "w7900": dict(device="0x7448", product="AMD Radeon PRO W7900", vram=48 << 30,
                  gfx=110000, cus=96, simd_per_cu=2, xcds=1,
                  temps=[("edge", 1, 33000), ("junction", 2, 35000), ("mem", 3, 40000)],
                  power="power1_average", watts=18, energy=False, ras=False,
                  sclk=[500, 1000, 2495], mclk=[96, 1249]),
}

PARTITIONS = {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}
BUSES = ["0c", "22", "38", "5c", "9f", "af", "bf", "df", "03", "26", "43", "63", "83", "a3", "c3", "e3"]
RAS_BLOCKS = ["umc", "gfx", "sdma", "mmhub", "xgmi_wafl"]
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


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
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
                             serial=f"69225100{1124 + i}"))
    return gpus


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
        write(f"{d}/mem_info_vram_total", f"{m['vram']}\n")
        if g["index"] in hives:
            write(f"{d}/xgmi_hive_id", f"{hives[g['index']]}\n")
        write(f"{d}/mem_info_vram_used", f"{(300 + g['index']) << 20}\n")
        write(f"{d}/gpu_busy_percent", f"{(7 * g['index']) % 100}\n")
        write(f"{d}/mem_busy_percent", f"{(3 * g['index']) % 100}\n")
        write(f"{d}/pp_dpm_sclk", dpm(m["sclk"], 1))
        write(f"{d}/pp_dpm_mclk", dpm(m["mclk"], len(m["mclk"]) - 1))
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
                write(f"{d}/ras/{block}_err_count", "ue: 0\nce: 0\n")
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

#!/usr/bin/python3
"""Writes the seed corpus of fuzz-plugin: requests as the kubelet sends them.

Each file is the method byte (0 options, 1 ListAndWatch, 2
GetPreferredAllocation, 3 Allocate, 4 PreStartContainer; +128 adds an
Allocate on a second stream), the read-size byte, then the serialized
request, built with the protobuf module generated from proto/ by `make py`.
Run: DEVLET_BUILD=build fuzz/gen-corpus-plugin.py  (writes fuzz/corpus/fuzz-plugin/)
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.environ.get("DEVLET_BUILD", os.path.join(HERE, "..", "build")), "py"))
import deviceplugin_pb2 as pb  # noqa: E402

OUT = os.path.join(HERE, "corpus", "fuzz-plugin")


def allocate(*containers):
    return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)
                                                  for ids in containers]).SerializeToString()


def preferred(available, must, size):
    return pb.PreferredAllocationRequest(container_requests=[pb.ContainerPreferredAllocationRequest(
        available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size)]).SerializeToString()


SEEDS = {
    "options": (0, 0, b""),
    "list-and-watch": (1, 0, b""),
    "list-and-watch-7-byte-reads": (1, 7, b""),
    "preferred": (2, 0, preferred([f"fuse-{i}" for i in range(8)], ["fuse-2"], 3)),
    "preferred-unknown": (2, 0, preferred(["fuse-0", "nope", "fuse-0"], ["zz"], 9)),
    "preferred-too-many": (2, 0, preferred(["fuse-0"], ["fuse-0", "fuse-1"], 1)),
    "allocate": (3, 0, allocate(["fuse-0", "fuse-3"])),
    "allocate-two-containers": (3, 13, allocate(["fuse-1"], ["fuse-2", "fuse-4"])),
    "allocate-unknown": (3, 0, allocate(["fuse-99", ""])),
    "allocate-empty": (3, 0, allocate()),
    "allocate-twice": (3 | 128, 0, allocate(["fuse-5"])),
    "allocate-garbage": (3, 0, b"\x0a\xff\xff\xff\xff\x0f"),
    "prestart": (4, 0, pb.PreStartContainerRequest(devices_ids=["fuse-0"]).SerializeToString()),
}

os.makedirs(OUT, exist_ok=True)
for name, (method, chunk, body) in SEEDS.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([method, chunk]) + body)

"""A file whose reads can be made to block, as a sysfs attribute of a GPU
in reset blocks: a one-file FUSE filesystem (the kernel's protocol spoken
directly on /dev/fuse, no library) mounted over an existing regular file.
Until hold() it serves `text`; after it, every READ waits unanswered (the
reader sits in the kernel, as in a real stall) until close(), which
unmounts and aborts the connection, so a stuck reader gets an error and
goes on.  Needs root (mount) and /dev/fuse.

    stall = StalledFile(path, "42\\n")
    stall.hold()
    ...
    stall.close()
"""

import ctypes
import errno
import os
import select
import struct
import threading

MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH = 2
FOPEN_DIRECT_IO = 1
# opcodes (linux/fuse.h)
GETATTR, OPEN, READ, RELEASE, FLUSH, INIT = 3, 14, 15, 18, 25, 26
NO_REPLY = {2, 36, 42}  # FORGET, INTERRUPT, BATCH_FORGET
IN_HEADER = struct.Struct("<IIQQIIIHH")  # len opcode unique nodeid uid gid pid extlen pad
OUT_HEADER = struct.Struct("<IiQ")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


class StalledFile:
    def __init__(self, path, text="0\n"):
        self.path = os.path.abspath(path)
        self.data = text.encode()
        self.held = threading.Event()
        self.reads_held = 0
        self.stop = threading.Event()
        self.fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
        opts = f"fd={self.fd},rootmode=100444,user_id=0,group_id=0".encode()
        if _libc.mount(b"devlet-stall", self.path.encode(), b"fuse", MS_NOSUID | MS_NODEV, opts) != 0:
            e = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(e, f"mounting FUSE over {self.path}: {os.strerror(e)}")
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def hold(self):
        """From now on, reads block until close()."""
        self.held.set()

    def close(self):
        self.stop.set()
        self.thread.join(5)
        _libc.umount2(self.path.encode(), MNT_DETACH)
        os.close(self.fd)  # aborts the connection: held reads fail with ENOTCONN

    def _reply(self, unique, payload=b"", error=0):
        try:
            os.write(self.fd, OUT_HEADER.pack(OUT_HEADER.size + len(payload), -error, unique) + payload)
        except OSError as e:  # the request was interrupted meanwhile
            if e.errno != errno.ENOENT:
                raise

    def _attr(self):
        # struct fuse_attr: ino size blocks atime mtime ctime (u64), atimensec
        # mtimensec ctimensec mode nlink uid gid rdev blksize flags (u32)
        return struct.pack("<QQQQQQIIIIIIIIII", 1, len(self.data), 1, 0, 0, 0, 0, 0, 0,
                           0o100444, 1, 0, 0, 0, 4096, 0)

    def _serve(self):
        poll = select.poll()
        poll.register(self.fd, select.POLLIN)
        while not self.stop.is_set():
            if not poll.poll(50):
                continue
            try:
                req = os.read(self.fd, 1 << 20)
            except OSError as e:
                if e.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
                    continue
                return  # unmounted
            _, opcode, unique, _, _, _, _, _, _ = IN_HEADER.unpack_from(req)
            body = req[IN_HEADER.size:]
            if opcode == INIT:
                major, minor, readahead, _flags = struct.unpack_from("<IIII", body)
                # fuse_init_out: major minor max_readahead flags max_background
                # congestion_threshold max_write time_gran max_pages map_alignment
                # flags2 max_stack_depth, then reserved (64 bytes in all)
                out = struct.pack("<IIIIHHIIHHII", 7, 26, readahead, 0, 0, 0, 1 << 16, 1, 0, 0, 0, 0)
                self._reply(unique, out + bytes(64 - len(out)))
            elif opcode == GETATTR:
                self._reply(unique, struct.pack("<QII", 0, 0, 0) + self._attr())
            elif opcode == OPEN:
                self._reply(unique, struct.pack("<QIi", 1, FOPEN_DIRECT_IO, 0))
            elif opcode == READ:
                if self.held.is_set():
                    self.reads_held += 1  # never answered: the reader waits in the kernel
                    continue
                _fh, offset, size = struct.unpack_from("<QQI", body)
                self._reply(unique, self.data[offset:offset + size])
            elif opcode in (RELEASE, FLUSH):
                self._reply(unique)
            elif opcode not in NO_REPLY:
                self._reply(unique, error=errno.ENOSYS)

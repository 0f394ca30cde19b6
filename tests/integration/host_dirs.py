"""Host directories that a test must write into because a real peer reads
them there (podman reads CDI specs only from /etc/cdi and /var/run/cdi).

A fresh machine has none of them, so a test never assumes one: `host_dirs()`
creates what is missing and, afterwards, removes only the directories it
created, and only when they are empty and no other test (in this run or a
concurrent one on the same host) still uses them.  Users hold a shared lock
on one lock file for as long as they use the directories and append what
they created to it; the cleanup takes the lock exclusively without waiting,
so with a concurrent user still there the last one to finish cleans up.
"""

import contextlib
import fcntl
import os
import pathlib

LOCK = "/run/devlet-test-host-dirs.lock"


def _missing_chain(path: pathlib.Path):
    """path and its missing ancestors, outermost first."""
    chain = []
    p = path
    while not p.exists():
        chain.append(p)
        p = p.parent
    return list(reversed(chain))


@contextlib.contextmanager
def host_dirs(*paths):
    fd = os.open(LOCK, os.O_CREAT | os.O_RDWR | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        for path in map(pathlib.Path, paths):
            for p in _missing_chain(path):
                try:
                    p.mkdir(mode=0o755)
                    os.write(fd, f"{p}\n".encode())
                except FileExistsError:
                    pass
        yield [pathlib.Path(p) for p in paths]
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with open(LOCK, encoding="utf-8") as f:
                made = f.read().split()
            for p in reversed(made):
                with contextlib.suppress(OSError):
                    os.rmdir(p)  # only if empty
            os.truncate(LOCK, 0)
        except BlockingIOError:
            pass  # still in use elsewhere: its last user cleans up
        os.close(fd)

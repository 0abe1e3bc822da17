"""What a path given as a workload or cluster file must be: an existing, readable regular file.

Each other case has its own message, naming the path: a missing file, a broken symbolic link, a folder, a named
pipe (FIFO), a socket or a device (the readers look at a file's first bytes, then read it again, which a pipe
cannot do: it would wait for a writer), and a file the user may not read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kubeflux.sim.workloads.errors import WorkloadError

_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def check_file(path: Path, what: str = "workload") -> None:
    """Raise :class:`WorkloadError` unless ``path`` is a regular file this process may read; ``what`` names the
    role of the file in the message (``workload``, ``cluster``)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise WorkloadError(f"{path}: a broken symbolic link (to {os.readlink(path)}), not a {what} file") from None
        raise WorkloadError(f"{path}: no such file") from None
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(mode):
        raise WorkloadError(f"{path}: is a folder, not a {what} file (give one of the files in it)")
    for test, kind in _KINDS:
        if test(mode):
            raise WorkloadError(
                f"{path}: is {kind}, not a regular file: a {what} is read twice (its format from its first bytes, "
                "then all of it); save it to a file first"
            )
    if not os.access(path, os.R_OK):
        raise WorkloadError(f"{path}: cannot read: permission denied")


__all__ = ["check_file"]

"""Output files that are never half-written: a temporary file in the destination's folder, renamed over the
destination only once it is complete.

An interrupted, failed or killed (SIGKILL) writer leaves the previous file, or none, never a truncated one: the
rename is atomic on POSIX file systems, and until it happens the destination is not touched. A destination that
exists and is not a regular file (``/dev/null``, ``/dev/full``, a named pipe) is written in place, as a rename
would replace the device or pipe instead of writing to it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from typing import TextIO

__all__ = ["is_special", "replacing", "replacing_path", "same_file"]


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether paths ``a`` and ``b`` name one file: the same resolved path (symbolic links followed), or, both
    existing, the same device and inode (a hard link, a bind mount)."""
    try:
        if os.path.realpath(a) == os.path.realpath(b):
            return True
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def is_special(path: str | os.PathLike[str]) -> bool:
    """``path`` exists and is not a regular file (a device such as /dev/null, a named pipe, a socket)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _mode_for(path: str) -> int:
    """The permission bits the finished file gets: the old file's, else what ``open()`` would give (0o666 less
    the umask); ``mkstemp`` alone would leave 0o600."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def replacing_path(path: str | os.PathLike[str], suffix: str = "") -> Iterator[str]:
    """The name of a new temporary file beside ``path`` (ending in ``suffix``, e.g. ".png" for a writer that
    takes the format from the name) to write; renamed to ``path`` when the block ends without an exception,
    removed when it raises. A special file (:func:`is_special`) is yielded itself, written in place.

    Raises:
        OSError: the folder is not writable (from creating the temporary file) or the rename failed.
    """
    target = os.fspath(path)
    if os.path.islink(target):  # write the file the link points to, not a new file in place of the link
        target = os.path.realpath(target)
    if is_special(target):
        yield target
        return
    folder = os.path.dirname(target) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=f".part{suffix}", dir=folder)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str], *, encoding: str = "utf-8", newline: str = "") -> Iterator[TextIO]:
    """A text file to write that becomes ``path`` when the block ends without an exception (flushed and synced
    to disk first); the old ``path`` is kept when the block raises or the process dies first. A special file is
    opened and written in place.

    Raises:
        OSError: from creating, writing, syncing or renaming the file (the old ``path`` kept).
    """
    with replacing_path(path) as tmp:
        fh = open(tmp, "w", encoding=encoding, newline=newline)
        try:
            yield fh
            fh.flush()
            if not is_special(tmp):
                os.fsync(fh.fileno())
        except BaseException:
            # Closing flushes what is buffered, which fails again on a full disk: the first error is the one
            # to report, not a second one chained to it.
            with contextlib.suppress(OSError):
                fh.close()
            raise
        fh.close()

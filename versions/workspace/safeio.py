"""Read, write and delete workspace files without being led outside the workspace.

A path checked when a rollback is planned can be swapped for a symlink before it is used (the
agent that wrote the workspace may still be running). So nothing trusts a path name at the moment
of use: a read opens the file without following a final symlink and then asks where the open
file really is; a write or a delete opens the parent folder the same way, checks it, and works
inside it by name (a temporary file and a rename for writes), so the last component cannot be
swapped for a symlink either. A check that fails raises OSError subclasses, which the engine
reports for that one file while the rest of the rollback continues.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import sys

O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_PROC_FD = "/proc/self/fd"
_HAS_PROC_FD = sys.platform.startswith("linux") and os.path.isdir(_PROC_FD)
_SYMLINK_ERRNOS = {errno.ELOOP, errno.EMLINK}  # O_NOFOLLOW on a symlink: ELOOP (BSD: EMLINK)

UNDO_DIR = ".rollback-undo"
LEADS_OUTSIDE = "it leads outside the workspace"
INTO_GIT = "it leads into .git"
INTO_UNDO = f"it leads into {UNDO_DIR}/"
SWAPPED = "it was swapped for a symlink while being opened"
NOT_REGULAR = "not a regular file"
NOT_A_FOLDER = "its folder is not a folder"


class OutsideWorkspaceError(OSError):
    """An open file or folder is not where the workspace allows (a symlink led elsewhere)."""

    def __init__(self, path: str | os.PathLike[str], reason: str = LEADS_OUTSIDE) -> None:
        super().__init__(errno.EPERM, reason, os.fspath(path))


class NotRegularFileError(OSError):
    """A FIFO, device, socket or other special file where a plain file was expected."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(errno.EINVAL, NOT_REGULAR, os.fspath(path))


def is_inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """True when the real path `path` is `root` or below it (both already resolved)."""
    p, r = os.fspath(path), os.fspath(root)
    return p == r or p.startswith(r.rstrip(os.sep) + os.sep)


def _refusal(real: str, root: str, *, undo_ok: bool) -> str | None:
    """Why the real path `real` is not allowed, or None when it is."""
    if not is_inside(real, root):
        return LEADS_OUTSIDE
    rel = real[len(root.rstrip(os.sep)) + 1 :]
    parts = [part.lower() for part in rel.split(os.sep) if part]
    if ".git" in parts:
        return INTO_GIT
    if not undo_ok and parts and parts[0] == UNDO_DIR:
        return INTO_UNDO
    return None


def _real_path_of(fd: int, opened: str, st: os.stat_result) -> str | None:
    """Where the open `fd` really is: /proc on Linux; elsewhere a fresh realpath of the name it
    was opened by, accepted only when it is the very same file (device and inode)."""
    if _HAS_PROC_FD:
        try:
            return os.readlink(f"{_PROC_FD}/{fd}")
        except OSError:
            pass
    real = os.path.realpath(opened)
    try:
        now = os.stat(real, follow_symlinks=False)
    except OSError:
        return None
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
        return None
    return real


def _verify(fd: int, opened: str, st: os.stat_result, root: str, *, undo_ok: bool) -> None:
    real = _real_path_of(fd, opened, st)
    reason = LEADS_OUTSIDE if real is None else _refusal(real, root, undo_ok=undo_ok)
    if reason is not None:
        raise OutsideWorkspaceError(opened, reason)


def _open_nofollow(path: str, flags: int, *, dir_fd: int | None = None) -> int:
    try:
        return os.open(path, flags | O_NOFOLLOW | O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in _SYMLINK_ERRNOS:
            raise OutsideWorkspaceError(path, SWAPPED) from exc
        raise


def open_for_reading(
    root: str | os.PathLike[str], path: str | os.PathLike[str], *, undo_ok: bool = True
) -> tuple[int, os.stat_result]:
    """An fd on the regular file `path` names, checked to lie inside `root` once open.

    Symlinks inside the workspace are followed (by resolving the name first); the file is then
    opened without following a final symlink, never blocking on a FIFO, and its real place is
    verified from the open fd. Raises FileNotFoundError, IsADirectoryError, NotRegularFileError,
    OutsideWorkspaceError (or another OSError). The caller closes the fd.
    """
    root_s = os.fspath(root)
    real = os.path.realpath(path)
    reason = _refusal(real, root_s, undo_ok=undo_ok)
    if reason is not None:
        raise OutsideWorkspaceError(path, reason)
    before = os.stat(real, follow_symlinks=False)  # never open a device just to look at it
    if stat.S_ISDIR(before.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", os.fspath(path))
    if stat.S_ISLNK(before.st_mode):
        raise OutsideWorkspaceError(path, SWAPPED)
    if not stat.S_ISREG(before.st_mode):
        raise NotRegularFileError(path)
    fd = _open_nofollow(real, os.O_RDONLY | O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", os.fspath(path))
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(path)
        _verify(fd, real, st, root_s, undo_ok=undo_ok)
        return fd, st
    except BaseException:
        os.close(fd)
        raise


def _open_folder(root: str, folder: str, *, undo_ok: bool, create: bool) -> int:
    """An fd on `folder` (a real path), verified inside `root`; missing folders are made
    one by one from the root, never through a symlink, when `create`."""
    try:
        fd = _open_nofollow(folder, os.O_RDONLY | O_DIRECTORY)
    except FileNotFoundError:
        if not create:
            raise
        fd = _make_folders(root, folder, undo_ok=undo_ok)
    except NotADirectoryError as exc:
        raise OutsideWorkspaceError(folder, NOT_A_FOLDER) from exc
    try:
        _verify(fd, folder, os.fstat(fd), root, undo_ok=undo_ok)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _make_folders(root: str, folder: str, *, undo_ok: bool) -> int:
    reason = _refusal(folder, root, undo_ok=undo_ok)
    if reason is not None:
        raise OutsideWorkspaceError(folder, reason)
    rel = folder[len(root.rstrip(os.sep)) + 1 :]
    fd = os.open(root, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    try:
        for part in [p for p in rel.split(os.sep) if p]:
            try:
                child = _open_nofollow(part, os.O_RDONLY | O_DIRECTORY, dir_fd=fd)
            except FileNotFoundError:
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                child = _open_nofollow(part, os.O_RDONLY | O_DIRECTORY, dir_fd=fd)
            except NotADirectoryError as exc:
                raise OutsideWorkspaceError(folder, NOT_A_FOLDER) from exc
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_parent(
    root: str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    undo_ok: bool = False,
    create: bool = False,
) -> tuple[int, str]:
    """An fd on the real folder holding `path` (checked inside `root`) and `path`'s last name.

    The last component is not resolved: work on it by name with `dir_fd`, never following it.
    """
    root_s = os.fspath(root)
    name = os.path.basename(os.fspath(path))
    if name in ("", ".", ".."):
        raise OutsideWorkspaceError(path, LEADS_OUTSIDE)
    folder = os.path.realpath(os.path.dirname(os.fspath(path)))
    return _open_folder(root_s, folder, undo_ok=undo_ok, create=create), name


def _copy_fd(src: int, dst: int) -> None:
    os.lseek(src, 0, os.SEEK_SET)
    if hasattr(os, "sendfile") and sys.platform.startswith("linux"):
        try:
            while os.sendfile(dst, src, None, 1 << 30):
                pass
            return
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                raise
            os.lseek(src, 0, os.SEEK_SET)
            os.lseek(dst, 0, os.SEEK_SET)
            os.ftruncate(dst, 0)
    while chunk := os.read(src, 1 << 20):
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view) :]


def replace_file(
    root: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    source_fd: int | None = None,
    data: bytes | None = None,
    mode: int | None = None,
    times_ns: tuple[int, int] | None = None,
    undo_ok: bool = False,
    fsync: bool = False,
    fresh: bool = False,
) -> None:
    """Put the content of `source_fd` (or `data`) at `destination`, inside `root`, atomically.

    Written as a temporary file in the verified parent folder and renamed over the last name, so
    a symlink (or a hard link) there is replaced, never written through. `mode` defaults to the
    replaced file's, else the source's, else 0o644 less the umask.

    `fresh`: `destination` is a new file (a counter-backup); it is created in place (O_EXCL, so
    never through anything already there), and only if a file is there after all is it replaced.
    """
    folder, name = open_parent(root, destination, undo_ok=undo_ok, create=True)
    temp = f".rollback-{secrets.token_hex(8)}.tmp"
    made = False
    try:
        old = None
        if not fresh:
            try:
                old = os.stat(name, dir_fd=folder, follow_symlinks=False)
            except FileNotFoundError:
                pass
        if old is not None and stat.S_ISDIR(old.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", os.fspath(destination))
        if mode is None:
            if old is not None and stat.S_ISREG(old.st_mode):
                mode = stat.S_IMODE(old.st_mode)
            elif source_fd is not None:
                mode = stat.S_IMODE(os.fstat(source_fd).st_mode)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC
        create_mode = 0o600 if mode is not None else 0o666
        out = -1
        if fresh:
            try:
                out = os.open(name, flags, create_mode, dir_fd=folder)
                temp = name  # written in place; removed again if writing fails
            except FileExistsError:
                pass
        if out < 0:
            out = os.open(temp, flags, create_mode, dir_fd=folder)
        made = True
        try:
            if source_fd is not None:
                _copy_fd(source_fd, out)
            elif data is not None:
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view) :]
            if mode is not None:
                os.fchmod(out, mode)
            if times_ns is not None:
                os.utime(out, ns=times_ns)
            if fsync:
                os.fsync(out)
        finally:
            os.close(out)
        if temp != name:
            os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
        made = False
    finally:
        if made:
            try:
                os.unlink(temp, dir_fd=folder)
            except OSError:
                pass
        os.close(folder)


def copy_into(
    root: str | os.PathLike[str],
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    keep_times: bool = False,
    undo_ok: bool = False,
    fresh: bool = False,
) -> None:
    """Copy the regular file `source` to `destination`, both checked inside `root` as used."""
    fd, st = open_for_reading(root, source)
    try:
        replace_file(
            root,
            destination,
            source_fd=fd,
            mode=stat.S_IMODE(st.st_mode) if keep_times else None,
            times_ns=(st.st_atime_ns, st.st_mtime_ns) if keep_times else None,
            undo_ok=undo_ok,
            fresh=fresh,
        )
    finally:
        os.close(fd)


def lstat_inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> os.stat_result:
    """lstat of `path` (its last component not followed), looked up in its verified folder."""
    folder, name = open_parent(root, path)
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    finally:
        os.close(folder)


def remove_inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Delete `path`: a file or a symlink (never its target), or a folder with all inside it,
    by name inside its verified parent folder, so nothing outside `root` is ever removed."""
    folder, name = open_parent(root, path)
    try:
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            # rmtree with dir_fd walks by fds and never follows a symlink inside the tree.
            shutil.rmtree(name, dir_fd=folder)
        else:
            os.unlink(name, dir_fd=folder)
    finally:
        os.close(folder)


def read_bytes(
    root: str | os.PathLike[str], path: str | os.PathLike[str], *, limit: int | None = None
) -> tuple[bytes, os.stat_result]:
    """The content of the regular file `path` inside `root` (at most `limit` bytes + 1)."""
    fd, st = open_for_reading(root, path)
    try:
        chunks = []
        total = 0
        while limit is None or total <= limit:
            want = 1 << 20 if limit is None else min(1 << 20, limit + 1 - total)
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)

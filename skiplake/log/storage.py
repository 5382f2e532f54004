"""Where the log lives, and the one operation a commit needs: put-if-absent.

A commit is correct only if exactly one writer can create `_delta_log/<version>.json`, and
readers never see a half-written file. `LocalStorage` writes the whole file under a unique
temporary name, then `os.link`s it to the target name: link(2) fails with EEXIST if the name
is taken, on local filesystems and on NFS alike, and never replaces an existing file (unlike
rename). An object store implements the same method with a conditional PUT (If-None-Match: *).
"""
from __future__ import annotations

import errno
import os
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable


@dataclass(frozen=True)
class FileInfo:
    """A listed file. Size and mtime are fetched on first use: a log with thousands of commits is
    listed on every snapshot load, and most loads need neither."""
    name: str
    _stat: Callable[[], tuple[int, int]] = field(repr=False, compare=False)

    @cached_property
    def _size_mtime(self) -> tuple[int, int]:
        return self._stat()

    @property
    def size(self) -> int:
        return self._size_mtime[0]

    @property
    def mtime_ms(self) -> int:
        return self._size_mtime[1]


class Storage(ABC):
    """The operations the log needs from a file system or object store; paths are relative to the log root."""

    @abstractmethod
    def read(self, name: str) -> bytes: ...

    @abstractmethod
    def exists(self, name: str) -> bool: ...

    @abstractmethod
    def put_if_absent(self, name: str, data: bytes) -> bool:
        """Write `data` at `name` atomically unless `name` exists. True if written, False if taken."""

    @abstractmethod
    def put(self, name: str, data: bytes) -> None:
        """Write `data` at `name` atomically, replacing what is there (for `_last_checkpoint`)."""

    @abstractmethod
    def list(self) -> list[FileInfo]: ...

    @abstractmethod
    def delete(self, name: str) -> None: ...


class LocalStorage(Storage):
    def __init__(self, root: str) -> None:
        self.root = root

    def _full(self, name: str) -> str:
        return os.path.join(self.root, name)

    def read(self, name: str) -> bytes:
        with open(self._full(name), "rb") as f:
            return f.read()

    def exists(self, name: str) -> bool:
        return os.path.exists(self._full(name))

    def _write_temp(self, data: bytes) -> str:
        os.makedirs(self.root, exist_ok=True)
        tmp = self._full(f".tmp-{uuid.uuid4().hex}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        return tmp

    def put_if_absent(self, name: str, data: bytes) -> bool:
        tmp = self._write_temp(data)
        try:
            os.link(tmp, self._full(name))
            return True
        except OSError as e:
            if e.errno == errno.EEXIST:
                return False
            raise
        finally:
            os.unlink(tmp)

    def put(self, name: str, data: bytes) -> None:
        tmp = self._write_temp(data)
        os.replace(tmp, self._full(name))

    def list(self) -> list[FileInfo]:
        out: list[FileInfo] = []
        try:
            entries = list(os.scandir(self.root))
        except (FileNotFoundError, NotADirectoryError):
            return out
        for e in entries:
            if not e.name.startswith("."):
                out.append(FileInfo(e.name, _stat_of(e)))
        return out

    def delete(self, name: str) -> None:
        try:
            os.unlink(self._full(name))
        except FileNotFoundError:
            pass


def _stat_of(entry: os.DirEntry) -> Callable[[], tuple[int, int]]:
    def stat() -> tuple[int, int]:
        try:
            st = entry.stat()
        except FileNotFoundError:
            return 0, 0
        return st.st_size, int(st.st_mtime * 1000)
    return stat

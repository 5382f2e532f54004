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
from dataclasses import dataclass


@dataclass(frozen=True)
class FileInfo:
    name: str
    size: int
    mtime_ms: int


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
            if e.name.startswith("."):
                continue
            try:
                st = e.stat()
            except FileNotFoundError:
                continue
            out.append(FileInfo(e.name, st.st_size, int(st.st_mtime * 1000)))
        return out

    def delete(self, name: str) -> None:
        try:
            os.unlink(self._full(name))
        except FileNotFoundError:
            pass

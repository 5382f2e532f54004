"""Where the log lives, and the one operation a commit needs: put-if-absent.

A commit is correct only if exactly one writer can create `_delta_log/<version>.json`, and
readers never see a half-written file. `LocalStorage` writes the whole file under a unique
temporary name, then `os.link`s it to the target name: link(2) fails with EEXIST if the name
is taken, on local filesystems and on NFS alike, and never replaces an existing file (unlike
rename). An object store implements the same method with a conditional PUT (If-None-Match: *).
"""
from __future__ import annotations

import builtins
import errno
import io
import os
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property
from typing import BinaryIO, Callable, Iterator


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
        """The file's size in bytes (fetched on first use)."""
        return self._size_mtime[0]

    @property
    def mtime_ms(self) -> int:
        """The file's modification time, ms since the epoch (fetched on first use)."""
        return self._size_mtime[1]


@dataclass(frozen=True)
class ObjectInfo:
    """A file found by a recursive listing: its path relative to the storage root, size, mtime."""
    name: str
    size: int
    mtime_ms: int


class Storage(ABC):
    """The operations tables need from a file system or object store, on paths relative to a
    root: the log's own (`_delta_log/`), or a table's for its data and deletion-vector files."""

    root: str

    @abstractmethod
    def read(self, name: str) -> bytes:
        """The whole file; FileNotFoundError if there is none."""

    @abstractmethod
    def open_input(self, name: str, size: int | None = None) -> BinaryIO | io.RawIOBase:
        """A seekable binary reader of the file (Parquet footers are read from its end)."""

    def local_path(self, name: str) -> str | None:
        """The file's path on this machine's file system; None on an object store."""
        return None

    @abstractmethod
    def walk(self) -> list[ObjectInfo]:
        """Every file below the root, at any depth."""

    def walk_pages(self) -> Iterator[list[ObjectInfo]]:
        """walk()'s files a page at a time (a folder, or a listing request's answer), so that a
        caller going through millions of files holds one page of them."""
        yield self.walk()

    @abstractmethod
    def dirs(self) -> list[str]:
        """The names of the folders (common prefixes) directly under the root."""

    @abstractmethod
    def delete_many(self, names: list[str]) -> None:
        """Delete files (missing ones are no error)."""

    def where(self, name: str) -> str:
        """The full location of `name`, for messages."""
        return f"{self.root.rstrip('/')}/{name}" if "://" in self.root else os.path.join(self.root, name)

    @abstractmethod
    def exists(self, name: str) -> bool:
        """Whether there is a file at `name`."""

    @abstractmethod
    def put_if_absent(self, name: str, data: bytes) -> bool:
        """Write `data` at `name` atomically unless `name` exists. True if written, False if taken."""

    @abstractmethod
    def put(self, name: str, data: bytes) -> None:
        """Write `data` at `name` atomically, replacing what is there (for `_last_checkpoint`)."""

    @abstractmethod
    def list(self, start_after: str | None = None) -> list[FileInfo]:
        """The files directly under the root (not below), names after `start_after` only if given."""

    @abstractmethod
    def delete(self, name: str) -> None:
        """Delete the file `name`."""


class LocalStorage(Storage):
    """Storage in a local folder; put_if_absent links a whole temporary file to its name (see the module)."""

    def __init__(self, root: str) -> None:
        """Storage in the local folder `root`, created by the first write."""
        self.root = root

    def _full(self, name: str) -> str:
        return os.path.join(self.root, name)

    def local_path(self, name: str) -> str | None:
        """The file's path on this machine's file system."""
        return self._full(name)

    def read(self, name: str) -> bytes:
        """The whole file; FileNotFoundError if there is none."""
        with open(self._full(name), "rb") as f:
            return f.read()

    def exists(self, name: str) -> bool:
        """Whether there is a file (or folder) at `name`."""
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
        """Write `data` at `name` unless it exists: a whole temporary file, linked to the name
        (link(2) refuses a taken name). True if written, False if taken."""
        if os.sep in name:
            os.makedirs(os.path.dirname(self._full(name)), exist_ok=True)
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
        """Write `data` at `name`, replacing what is there: a whole temporary file renamed over it."""
        if os.sep in name:
            os.makedirs(os.path.dirname(self._full(name)), exist_ok=True)
        tmp = self._write_temp(data)
        os.replace(tmp, self._full(name))

    def list(self, start_after: str | None = None) -> list[FileInfo]:
        """The files directly under the root, dot-files and folders left out, names after `start_after`
        only if given; none when the root does not exist."""
        out: list[FileInfo] = []
        try:
            entries = list(os.scandir(self.root))
        except (FileNotFoundError, NotADirectoryError):
            return out
        for e in entries:
            if not e.name.startswith(".") and (start_after is None or e.name > start_after) and not e.is_dir():
                out.append(FileInfo(e.name, _stat_of(e)))
        return out

    def delete(self, name: str) -> None:
        """Delete the file; a missing one is no error."""
        try:
            os.unlink(self._full(name))
        except FileNotFoundError:
            pass

    def open_input(self, name: str, size: int | None = None) -> BinaryIO:
        """The file opened for binary reading (`size` is not needed on a disk)."""
        return open(self._full(name), "rb")

    # builtins.list: in this class, after `def list`, a bare `list` names that method
    def walk(self) -> builtins.list[ObjectInfo]:
        """Every file below the root, at any depth; one deleted while walked is left out."""
        return [obj for page in self.walk_pages() for obj in page]

    def walk_pages(self) -> Iterator[builtins.list[ObjectInfo]]:
        """walk()'s files a folder at a time."""
        for root, _dirs, files in os.walk(self.root):
            page = []
            for f in files:
                full = os.path.join(root, f)
                try:
                    st = os.stat(full)
                except FileNotFoundError:
                    continue
                page.append(ObjectInfo(os.path.relpath(full, self.root), st.st_size, int(st.st_mtime * 1000)))
            if page:
                yield page

    def delete_many(self, names: builtins.list[str]) -> None:
        """Delete the files one by one; missing ones are no error."""
        for name in names:
            self.delete(name)

    def dirs(self) -> builtins.list[str]:
        """The names of the folders directly under the root; none when the root does not exist."""
        try:
            return [e.name for e in os.scandir(self.root) if e.is_dir()]
        except (FileNotFoundError, NotADirectoryError):
            return []


def _stat_of(entry: os.DirEntry) -> Callable[[], tuple[int, int]]:
    def stat() -> tuple[int, int]:
        try:
            st = entry.stat()
        except FileNotFoundError:
            return 0, 0
        return st.st_size, int(st.st_mtime * 1000)
    return stat

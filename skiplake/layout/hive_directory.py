"""The data files of a Parquet directory, as Spark's file index lists them, with their folders.

Spark (InMemoryFileIndex) skips every file and folder whose name starts with `.` or with `_`
(a folder named `_x=1` is kept: a partition column may start with `_`), and files still being
copied (`._COPYING_`). That skips `_SUCCESS`, `_committed_*`/`_started_*` markers, Parquet
summary files (`_metadata`), Hadoop's `.crc` checksums, `_temporary/` folders of unfinished
jobs, `.spark-staging-*` folders and a Delta `_delta_log/`. Every other file is a data file.

Each data file's folders below the root are kept as written: Hive-style `column=value` folders
(the value escaped as Spark escapes folder names) or other folders, which a caller refuses or
takes as it sees fit. A bucketed file's bucket id is the number Spark reads from its name.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Sequence

from skiplake.errors import ConversionPartitionError
from skiplake.layout.bucket_spec import bucket_id_from_name
from skiplake.layout.partitioning import partition_value, unescape_path_name
from skiplake.log.storage_for import storage_at

COPYING_SUFFIX = "._COPYING_"


def hidden(name: str) -> bool:
    """Whether Spark's file index skips a file or folder of this name (shouldFilterOutPathName)."""
    return name.startswith(".") or (name.startswith("_") and "=" not in name) or name.endswith(COPYING_SUFFIX)


@dataclass(frozen=True)
class Folder:
    """One folder level of a data file's path: `column=value` (value as written), or a plain name."""
    name: str

    @property
    def is_partition(self) -> bool:
        """Whether it is a `column=value` folder."""
        return "=" in self.name

    @property
    def column(self) -> str:
        """The column a `column=value` folder names, unescaped."""
        return unescape_path_name(self.name.partition("=")[0])

    @property
    def raw_value(self) -> str:
        """The value as the folder name spells it (escaped; `__HIVE_DEFAULT_PARTITION__` for NULL)."""
        return self.name.partition("=")[2]

    @property
    def value(self) -> str | None:
        """The partition value, unescaped; None for NULL (`__HIVE_DEFAULT_PARTITION__`)."""
        return partition_value(self.raw_value)


@dataclass(frozen=True)
class DataFile:
    """A data file below the root: its path, size in bytes and modification time in ms since the epoch."""
    rel: str            # path below the root as on disk, '/'-separated
    size: int
    mtime_ms: int

    @property
    def folders(self) -> tuple[Folder, ...]:
        """The folders of its path below the root, outermost first."""
        return tuple(Folder(p) for p in self.rel.split("/")[:-1])

    @property
    def folder(self) -> str:
        """Its folder's path below the root; empty at the root."""
        return self.rel.rpartition("/")[0]

    @property
    def name(self) -> str:
        """Its file name."""
        return self.rel.rpartition("/")[2]

    @property
    def bucket_id(self) -> int | None:
        """The bucket id Spark reads from its name; None when it has none."""
        return bucket_id_from_name(self.name)


@dataclass
class DirectoryListing:
    """A directory's files: its data files, by path, and the paths Spark's file index skips."""
    root: str
    files: list[DataFile]
    skipped: list[str] = field(default_factory=list)   # hidden files (and files in hidden folders)

    @property
    def total_bytes(self) -> int:
        """The size of the data files, in bytes."""
        return sum(f.size for f in self.files)


def list_data_files(root: str) -> DirectoryListing:
    """Every file below `root` (a canonical location), split into data files and those Spark skips."""
    files: list[DataFile] = []
    skipped: list[str] = []
    for obj in storage_at(root).walk():
        rel = obj.name.replace(os.sep, "/")
        if any(hidden(part) for part in rel.split("/")):
            skipped.append(rel)
        else:
            files.append(DataFile(rel, obj.size, obj.mtime_ms))
    files.sort(key=lambda f: f.rel)
    return DirectoryListing(root, files, sorted(skipped))


def _check_unpartitioned(listing: DirectoryListing, found: list[str]) -> None:
    """No partition columns were given: no data file may sit in a partition folder."""
    if not any(f.folders for f in listing.files):
        return
    raise ConversionPartitionError(
        listing.root, f"the data files are in partition folders ({', '.join(found) or '?'}) but no partition "
                      "columns were given", sorted({f.folder for f in listing.files if f.folders}),
        f"Name them: partition_by=[{', '.join(repr(c) for c in found)}] (types inferred as Spark infers "
        "them), or typed by a DDL string such as \"" + ", ".join(f"{c} STRING" for c in found)
        + "\" (--partition-by on the command line).")


def partition_columns_of(listing: DirectoryListing, names: Sequence[str]) -> list[str]:
    """The partition columns `names` as the directory's folders spell them, after checking that
    every data file sits exactly one `column=value` folder per column below the root, in the
    order of `names` (compared as Spark compares names, ignoring case). ConversionPartitionError
    names the folders that do not."""
    root = listing.root
    plain = sorted({f.folder for f in listing.files if any(not d.is_partition for d in f.folders)})
    if plain:
        raise ConversionPartitionError(
            root, "data files sit in folders that are not Hive-style partition folders (column=value), which "
            "Spark's partition discovery does not read as one table", plain,
            "Move those files out (or into partition folders), or convert each such folder on its own.")
    found = [d.column for d in listing.files[0].folders] if listing.files else []
    if not names:
        _check_unpartitioned(listing, found)
        return []
    wanted = [n.lower() for n in names]
    wrong = sorted({f.folder or "(the directory itself)" for f in listing.files
                    if [d.column.lower() for d in f.folders] != wanted})
    if wrong:
        raise ConversionPartitionError(
            root, f"folders that do not match the partition columns {list(names)} (one column=value folder per "
                  "column, in that order)", wrong,
            "Give the partition columns in the order the folders nest them, or move the files that are "
            "elsewhere out of the directory.")
    return found

"""Which table a statement names: a table of the lake's root, ``delta.`path` ``, or (with a
catalog) the catalog's `name` or `db.name`."""
from __future__ import annotations

from typing import TYPE_CHECKING

from skiplake.errors import InvalidArgumentError, NotATableError
from skiplake.log.location import join
from skiplake.log.storage_for import has_log
from skiplake.statements.records import TableName
from skiplake.table import Table

if TYPE_CHECKING:
    from skiplake.statements.lake_access import LakeAccess


def open_table(lake: "LakeAccess", name: TableName) -> Table:
    """The Delta table `name` names, at its latest version. NotATableError when there is none; a
    catalog's table of plain Parquet is refused (statements write Delta tables)."""
    if name.path is not None:
        return Table.open(lake.spark, name.path)
    assert name.name is not None
    if name.database is None and lake.root is not None:
        folder = find_folder(lake, name.name)
        if folder is not None:
            return Table.open(lake.spark, join(lake.root, folder))
    if lake.catalog is None:
        raise NotATableError(lake.path_of(name.name) if lake.root else str(name),
                             f"the statement names table {str(name)!r}; the lake has {lake.tables()}")
    found = lake.catalog_table(f"{name.database}.{name.name}" if name.database else name.name)
    if not isinstance(found, Table):
        raise InvalidArgumentError(f"{name} is a catalog table of plain Parquet, not a Delta table: convert it "
                                   "first (CONVERT TO DELTA parquet.`location`)")
    return found


def find_folder(lake: "LakeAccess", name: str) -> str | None:
    """The root's folder of table `name`, as named or in lower case (Spark's names ignore case)."""
    if lake.root is None or not name or "/" in name or name.startswith((".", "_")):
        return None
    for candidate in dict.fromkeys((name, name.lower())):
        if has_log(join(lake.root, candidate)):
            return candidate
    return {t.lower(): t for t in lake.tables()}.get(name.lower())


def exists(lake: "LakeAccess", name: TableName) -> bool:
    """Whether `name` names a Delta table now."""
    try:
        open_table(lake, name)
    except NotATableError:
        return False
    return True

"""Every exception a skiplake user can see.

Each message says what was wrong, where (table path, column, version), and how to fix it.
A raised error never leaves a partial commit behind: the log is only ever changed by one
atomic put-if-absent of a complete commit file.
"""
from __future__ import annotations


class SkiplakeError(Exception):
    """Base class of every skiplake error."""


# ---------------------------------------------------------------- installation


class MissingExtraError(SkiplakeError):
    """A feature was used whose optional packages (a `skiplake[extra]`) are not installed."""

    def __init__(self, feature: str, extra: str, missing: list[str]) -> None:
        """The error for `feature`, whose `extra` is not installed (`missing`: the absent packages)."""
        self.feature = feature
        self.extra = extra
        self.missing = missing
        verb = "is" if len(missing) == 1 else "are"
        super().__init__(
            f"{feature} needs the optional packages of skiplake[{extra}], and {', '.join(missing)} {verb} not "
            f"installed. Install them with: pip install 'skiplake[{extra}]'"
        )


# ---------------------------------------------------------------- tables and paths


class NotATableError(SkiplakeError):
    """The path holds no Delta log (`_delta_log/` with at least one commit), or a Lake's catalog or SQL
    query names a table the lake does not have."""

    def __init__(self, path: str, detail: str = "") -> None:
        """The error for `path` (or a catalog's `database.table`); `detail`, when given, says more."""
        self.path = path
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"{path} is not a skiplake/Delta table: no commit found under {path}/_delta_log{extra}. "
            "Create it with Lake.create_table(...) or check the path."
        )


class TableAlreadyExistsError(SkiplakeError):
    """A table is created where one already exists: version 0 of its log is taken (by an earlier or a
    concurrent creator); nothing of this creation is written."""

    def __init__(self, path: str) -> None:
        """The error for the table at `path`."""
        self.path = path
        super().__init__(
            f"a table already exists at {path} (its _delta_log/00000000000000000000.json is taken). "
            "Open it with Lake.table(...)/Table.open(...), or pick another name."
        )


class VersionNotFoundError(SkiplakeError):
    """A version asked for (time travel, RESTORE, a change read) that is not in the log, or no longer
    readable there (its commits cleaned up with no checkpoint to rebuild it)."""

    def __init__(self, path: str, version: int, earliest: int | None, latest: int | None) -> None:
        """The error for `version` of `path`; earliest..latest are the readable versions (None: there are none)."""
        self.path = path
        self.version = version
        if latest is None:
            avail = "the table has no readable versions"
        else:
            avail = f"readable versions are {earliest}..{latest}"
        super().__init__(f"version {version} of {path} does not exist: {avail}.")


class TimestampNotFoundError(SkiplakeError):
    """A timestamp (time travel, RESTORE, a change read) that no version of the table answers: before its
    earliest readable commit, or, for the start of a change read, after its latest."""

    def __init__(self, path: str, timestamp: str, earliest: str | None) -> None:
        """The error for `timestamp` on `path`; `earliest` is the time of the table's earliest commit."""
        self.path = path
        super().__init__(
            f"no version of {path} existed at {timestamp}: the earliest commit is at {earliest}. "
            "Use a later timestamp."
        )


class UnsupportedLocationError(SkiplakeError):
    """A table or lake location whose scheme skiplake cannot store tables at (never taken for a local path)."""

    def __init__(self, location: str, scheme: str) -> None:
        """The error for `location`, whose URL scheme is `scheme`."""
        self.location = location
        self.scheme = scheme
        super().__init__(
            f"{location!r}: skiplake stores tables on local or network filesystems (a path or file:) and on "
            f"S3 or S3-compatible stores (s3:// or s3a://), not at {scheme}:// locations. "
            "Use one of those, or mount the store as a local filesystem.")


class StorageError(SkiplakeError):
    """The object store refused or failed a request; nothing was committed."""

    def __init__(self, location: str, what: str, fix: str = "") -> None:
        """The error for `location`: `what` went wrong, and `fix`, when given, what to do."""
        self.location = location
        super().__init__(f"{location}: {what}" + (f". {fix}" if fix else ""))


class StorageAccessError(StorageError):
    """Credentials missing, wrong, or without permission for the location."""


class BucketNotFoundError(StorageError):
    """The bucket of an s3:// location does not exist."""


class ConditionalWritesUnsupportedError(StorageError):
    """The store does not honour If-None-Match: *, so two writers could both take one version."""


class FilesVacuumedError(SkiplakeError):
    """A version is in the log but some of its data files were deleted by VACUUM."""

    def __init__(self, path: str, version: int, missing: list[str]) -> None:
        """The error for `version` of `path`, whose data files `missing` are gone."""
        self.path = path
        self.version = version
        self.missing = missing
        shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
        super().__init__(
            f"version {version} of {path} cannot be read: {len(missing)} of its data files were removed "
            f"by VACUUM ({shown}). Read a newer version, or vacuum with a longer retention."
        )


class RestoreFilesMissingError(FilesVacuumedError):
    """RESTORE to a version some of whose files are gone (VACUUM, or deleted by hand)."""

    def __init__(self, path: str, version: int, missing: list[str]) -> None:
        """The error for restoring `path` to `version`, whose files `missing` are gone."""
        SkiplakeError.__init__(
            self, f"cannot restore {path} to version {version}: {len(missing)} of the files that version "
            f"needs no longer exist (removed by VACUUM or by hand): {', '.join(missing[:100])}"
            f"{' ...' if len(missing) > 100 else ''}. Restore a newer version whose files are all still there; "
            "nothing was changed.")
        self.path = path
        self.version = version
        self.missing = missing


class CorruptLogError(SkiplakeError):
    """A Delta log that cannot be read as it is: a commit, checkpoint or sidecar file that is missing,
    empty or does not parse, a commit missing that no checkpoint replaces, or stats or a domain the
    log holds in a malformed shape."""

    def __init__(self, file: str, detail: str) -> None:
        """The error for the log file `file`; `detail` says what is wrong with it."""
        self.file = file
        super().__init__(
            f"the Delta log file {file} is corrupt: {detail}. A commit file is written whole or not at all "
            "by skiplake, so another writer or a manual edit damaged it; restore it from a backup or "
            "remove it if it is the newest commit and nothing depends on it."
        )


class CheckpointRemovedError(SkiplakeError):
    """A snapshot of a large table left its files' JSON stats in the checkpoint it was loaded
    from, and that checkpoint was removed (log cleanup) before they were needed."""

    def __init__(self, file: str) -> None:
        """The error for the removed checkpoint (or sidecar) `file`."""
        self.file = file
        super().__init__(
            f"the checkpoint {file} this table was loaded from no longer exists (log cleanup removed it), "
            "and the stats of its files were still to be read from it. Nothing was changed: load the table "
            "again (a new Lake.table or DeltaTable.forPath) and retry, or keep checkpoints longer "
            "(delta.logRetentionDuration).")


class CorruptPartitionValueError(CorruptLogError):
    """A partition value in the log that does not parse as its column's type."""

    def __init__(self, value: str, type_name: str, detail: str) -> None:
        """The error for the partition value `value`, which is not a `type_name`; `file` is left empty."""
        self.file = ""
        self.value = value
        SkiplakeError.__init__(
            self, f"a partition value in the Delta log is corrupt: {value!r} is not a {type_name} ({detail}). "
                  "Another writer or a manual edit damaged the log; restore it from a backup."
        )


class CorruptDeletionVectorError(SkiplakeError):
    """A deletion vector that cannot be read: its file of an unknown format version or cut short, or its
    bitmap not decoding or not matching its descriptor (size, checksum, number of rows)."""

    def __init__(self, where: str, detail: str) -> None:
        """The error for the deletion vector at `where` (its file and offset, or its id and table)."""
        self.where = where
        super().__init__(
            f"the deletion vector {where} is corrupt: {detail}. Deletion vector files are written once and "
            "never changed, so another writer or a manual edit damaged it; restore the file from a backup "
            "(the rows it deletes cannot be known without it)."
        )


class ProtocolNotSupportedError(SkiplakeError):
    """A table whose protocol needs a reader or writer version or a table feature skiplake does not
    support: checked before every read, and before every write for the writer side."""

    def __init__(self, path: str, detail: str) -> None:
        """The error for the table at `path`, whose protocol needs `detail` (a version, or features)."""
        self.path = path
        super().__init__(
            f"the table at {path} needs {detail}, which skiplake does not support; "
            "read it with a reader that supports that protocol feature."
        )


# ---------------------------------------------------------------- schema and data


class SchemaMismatchError(SkiplakeError):
    """Columns that do not fit the table's schema: a written DataFrame's (a non-nullable column missing, a
    column of another type, a new one without merge_schema=True), an UPDATE setting an unknown column,
    partition columns missing from a new table's schema, or a column named as the change data feed
    names its own."""

    def __init__(self, path: str, differences: list[str], hint: str = "") -> None:
        """The error for `path`, one of `differences` per problem; `hint` replaces the default advice."""
        self.path = path
        self.differences = differences
        how = hint or (
            "Cast or rename the DataFrame's columns to the table schema, or pass merge_schema=True "
            "to add new nullable columns."
        )
        super().__init__(
            f"the DataFrame does not match the schema of {path}: " + "; ".join(differences) + f". {how}"
        )


class PartitionValueError(SkiplakeError):
    """A partition column whose values cannot be stored as partition values: not in the schema, of a
    type without a partition value encoding, or (on a write) too long for a folder name."""

    def __init__(self, path: str, column: str, value: object, detail: str) -> None:
        """The error for partition column `column` of `path` and a `value` of it; `detail` says why."""
        self.path = path
        self.column = column
        super().__init__(
            f"partition column {column!r} of {path} has a value that cannot be stored as a partition "
            f"value: {value!r} ({detail}). Partition by a column of type string, integer, date, "
            "timestamp, boolean or decimal, or cast the column first."
        )


class InvalidPredicateError(SkiplakeError):
    """A predicate (a `where`, a condition) that is empty, is not valid Spark SQL, or names a column the
    table does not have."""

    def __init__(self, text: str, detail: str) -> None:
        """The error for the predicate `text`; `detail` says why it cannot be used."""
        self.text = text
        super().__init__(f"cannot use the predicate {text!r}: {detail}")


class InvalidArgumentError(SkiplakeError):
    """An argument, option or table setting skiplake refuses: a value out of range, a combination that
    conflicts, an unknown name, or an operation the table does not allow (a write to a table opened
    for time travel); the message says which and how to fix it."""


class SqlStatementError(InvalidArgumentError):
    """A SQL statement `lake.sql` cannot run: not valid SQL, or a statement skiplake does not run.

    `statement` is its text, `position` the offset in it where the problem was found (None when the
    whole statement is meant); the message gives it as line and column."""

    def __init__(self, statement: str, detail: str, position: int | None = None, fix: str = "") -> None:
        """The error for `statement`; `detail` says what is wrong, `fix` how to mend it."""
        self.statement, self.detail, self.position = statement, detail, position
        where = ""
        if position is not None:
            before = statement[:position]
            line = before.count("\n") + 1
            column = position - (before.rfind("\n") + 1) + 1
            where = f" at line {line}, column {column}"
        shown = " ".join(statement.split())
        shown = shown if len(shown) <= 200 else shown[:197] + "..."
        super().__init__(f"cannot run the SQL statement{where}: {detail}. Statement: {shown}"
                         + (f". {fix}" if fix else ""))


class UnsupportedStatementError(SqlStatementError):
    """A statement that is valid SQL but one skiplake does not run (docs/sql-reference.md lists
    those it runs)."""


class SqlScriptError(SkiplakeError):
    """A statement of a script failed: the statements before it stayed committed, the ones after it
    did not run. `number` counts statements from 1; `cause` is the statement's own error."""

    def __init__(self, number: int, statement: str, cause: BaseException, line: int | None = None) -> None:
        """The error for statement `number` (`statement`, starting on `line` of the script)."""
        self.number, self.statement, self.cause, self.line = number, statement, cause, line
        shown = " ".join(statement.split())
        shown = shown if len(shown) <= 200 else shown[:197] + "..."
        at = f" (line {line})" if line is not None else ""
        super().__init__(f"statement {number}{at} of the script failed, and the statements after it did not "
                         f"run (those before it stay committed): {shown}\n{type(cause).__name__}: {cause}")


class ConstraintViolationError(SkiplakeError):
    """A write (or a new CHECK constraint) meets a row that breaks a rule of the table."""

    def __init__(self, path: str, rule: str, expression: str, row: str, existing: bool = False,
                 fix: str = "") -> None:
        """The error for `row` (as text) of `path`, which breaks `rule` (`expression`, when it has one): a
        row already in the table when `existing`; `fix` replaces the default advice."""
        self.path, self.rule, self.expression, self.row = path, rule, expression, row
        where = "a row already in the table" if existing else "a row of the write"
        fix = fix or ("Fix or delete such rows first." if existing else
                      "Fix the rows, or drop the constraint with drop_constraint.")
        shown = f" ({expression})" if expression else ""
        super().__init__(f"{path}: {where} breaks the {rule}{shown}: {row}. Nothing was written. {fix}")


class ChangeDataNotRecordedError(InvalidArgumentError):
    """A change read over versions written while the table's change data feed was off."""

    def __init__(self, path: str, version: int, start: int, end: int) -> None:
        """The error for `version` of `path`, in a change read of versions `start` to `end`."""
        self.path, self.version = path, version
        super().__init__(f"{path}: no change data was recorded for version {version} (the table's "
                         f"delta.enableChangeDataFeed was off then), so changes of versions {start} to {end} "
                         f"cannot be read; read from a version after the feed was turned on")


class SparkConnectUnsupportedError(SkiplakeError):
    """An operation that needs Spark's JVM objects, which a Spark Connect client does not have."""

    def __init__(self, operation: str, why: str, instead: str) -> None:
        """The error for `operation`: `why` it needs the JVM, and what to do `instead`."""
        self.operation = operation
        super().__init__(f"{operation} is not available on a Spark Connect session: {why}. {instead}")


class AppendOnlyTableError(SkiplakeError):
    """A commit would remove or change rows of a table whose `delta.appendOnly` is true."""

    def __init__(self, path: str, operation: str) -> None:
        """The error for `operation` on the append-only table at `path`."""
        self.path = path
        super().__init__(
            f"{path} only allows appends (delta.appendOnly=true), and {operation} would remove or change rows; "
            "nothing was written. To permit it, set the property to false first: "
            "t.set_properties({'delta.appendOnly': 'false'}).")


class WriterFeatureUnsupportedError(SkiplakeError):
    """A write through the `skiplake` data source to a table with a writer feature that path
    cannot apply (it runs in Python workers, without Spark's SQL): nothing was written."""

    def __init__(self, path: str, feature: str, instead: str) -> None:
        """The error for a write to `path`, whose `feature` the data source cannot apply; `instead`
        names the API call that can."""
        self.path, self.feature = path, feature
        super().__init__(f"{path}: the skiplake data source cannot write a table with {feature}; nothing was "
                         f"written. Write it with {instead}.")


class StreamSourceChangedError(SkiplakeError):
    """A streaming read met a commit it cannot pass on as new rows: one that removes data, or a
    schema change that is not additive. The query stops at that version."""

    def __init__(self, path: str, version: int, what: str, fix: str) -> None:
        """The error for version `version` of `path`: `what` it did, and how to go on (`fix`)."""
        self.path, self.version = path, version
        super().__init__(f"{path}: version {version} {what}, which a streaming read cannot pass on. {fix}")


class ConversionError(SkiplakeError):
    """A Parquet directory that cannot be converted in place as it is. Nothing was written: no
    `_delta_log` is left behind. `files` lists the offending files or folders (below the
    directory), all of them when they are few."""

    SHOWN = 5

    def __init__(self, path: str, problem: str, files: list[str] | None = None, fix: str = "") -> None:
        """The error for converting `path`: the `problem`, the offending `files` (SHOWN of them named), a `fix`."""
        self.path = path
        self.files = list(files or [])
        shown = ""
        if self.files:
            more = len(self.files) - self.SHOWN
            shown = ": " + ", ".join(self.files[:self.SHOWN]) + (f" and {more} more" if more > 0 else "")
        super().__init__(f"cannot convert {path} to a table: {problem}{shown}." + (f" {fix}" if fix else ""))


class ConversionSchemaError(ConversionError):
    """The data files' schemas disagree (and cannot be merged as asked)."""


class ConversionPartitionError(ConversionError):
    """The folders do not match the partition columns given (names, order, or values of their type)."""


class ConversionBucketError(ConversionError):
    """A bucketed conversion found a file without a usable bucket id, or rows in the wrong bucket."""


class MergeConflictError(SkiplakeError):
    """Several source rows of a MERGE matched the same target row (Delta allows it only when the
    one WHEN MATCHED clause is an unconditional DELETE)."""

    def __init__(self, path: str, file: str) -> None:
        """The error for a MERGE into `path` whose target row in `file` several source rows matched."""
        self.path = path
        self.file = file
        super().__init__(
            f"MERGE into {path} cannot proceed: several source rows matched the same target row (in {file}), "
            "so it is ambiguous which one updates or deletes it. Deduplicate the source on the join keys "
            "(a MERGE whose only WHEN MATCHED clause is an unconditional DELETE may match a row several times).")


class MergeClauseError(InvalidArgumentError):
    """A MERGE whose condition or clauses break Delta's rules; nothing was read or written.

    `clause` says where (`"WHEN MATCHED clause 2"`, `"the ON condition"`), `reason` which rule:
    `no_clauses`, `condition_order` (only the last clause of a kind may omit its condition),
    `unresolved` (a column the clause cannot see), `ambiguous`, `duplicate_column`, `nested_insert`,
    `non_deterministic`, `aggregate`, `subquery`, `void_column`, or `invalid` (Spark refused an
    expression: a type mismatch, a syntax error)."""

    def __init__(self, path: str, clause: str, reason: str, detail: str, fix: str = "") -> None:
        """The error for a MERGE into `path`: `clause`, `reason` (as above), what is wrong and, optionally, a `fix`."""
        self.path = path
        self.clause = clause
        self.reason = reason
        where = f" ({clause})" if clause else ""
        super().__init__(f"MERGE into {path}{where}: {detail}" + (f". {fix}" if fix else ""))


class ReplaceWhereViolationError(SkiplakeError):
    """An overwrite with `where` (replaceWhere) whose DataFrame holds rows that do not satisfy it;
    nothing is committed."""

    def __init__(self, path: str, where: str) -> None:
        """The error for an overwrite of `path` with the condition `where`."""
        self.path = path
        super().__init__(
            f"overwrite of {path} with where={where!r}: the DataFrame holds rows that do not satisfy the "
            "condition, so they would land outside the part of the table being replaced. Filter the "
            "DataFrame with the same condition, or widen the condition.")


class RetentionTooShortError(SkiplakeError):
    """A VACUUM whose retention is shorter than the table's `delta.deletedFileRetentionDuration` (7 days
    by default), without force=True; nothing is deleted."""

    def __init__(self, path: str, hours: float, minimum: float) -> None:
        """The error for a vacuum of `path` keeping `hours`, less than the table's `minimum` hours."""
        self.path = path
        super().__init__(
            f"vacuum of {path} with retention_hours={hours} is shorter than the table's minimum of "
            f"{minimum} hours: files still needed by running readers or time travel could be deleted. "
            "Use a longer retention, or pass force=True if no reader or writer is running."
        )


# ---------------------------------------------------------------- concurrency


class ConcurrentModificationError(SkiplakeError):
    """A concurrent commit conflicts with this transaction; nothing of this transaction was written."""

    def __init__(self, message: str, *, winning_version: int | None = None,
                 winning_operation: str | None = None) -> None:
        """The error with its `message`, and the version and operation of the commit that won."""
        self.winning_version = winning_version
        self.winning_operation = winning_operation
        super().__init__(message)


class ConcurrentAppendException(ConcurrentModificationError):
    """A concurrent commit added files (rows) that this transaction's reads would have seen at its
    isolation level."""


class ConcurrentDeleteReadException(ConcurrentModificationError):
    """A concurrent commit removed a file that this transaction read."""


class ConcurrentDeleteDeleteException(ConcurrentModificationError):
    """A concurrent commit removed, rewrote or marked rows of a file that this transaction also removes
    or changes, in a way row-level concurrency cannot reconcile (the same rows, or both compacted it)."""


class MetadataChangedException(ConcurrentModificationError):
    """A concurrent commit changed the table's metadata (schema, partitioning, properties), or a
    metadata domain this transaction acted on (such as the clustering columns)."""


class ConcurrentTransactionException(ConcurrentModificationError):
    """A concurrent commit wrote the same application transaction id (a txn appId), or the same
    metadata domain, as this transaction."""


class ProtocolChangedException(ConcurrentModificationError):
    """A concurrent commit changed the table's protocol."""


class ConcurrentWriteException(ConcurrentModificationError):
    """A commit that must follow its snapshot directly (RESTORE) found another commit there."""


class CommitFailedError(SkiplakeError):
    """A commit could not be written after retries (not a logical conflict)."""


# ---------------------------------------------------------------- the catalog (AWS Glue's error shapes)


class CatalogError(SkiplakeError):
    """An error of the Glue-compatible catalog; `code` is Glue's error type on the wire."""
    code = "InternalServiceException"

    def __init__(self, message: str) -> None:
        """The error with its `message`, kept as `.message` for Glue's error body."""
        self.message = message
        super().__init__(message)


class InvalidInputError(CatalogError):
    """A request Glue would refuse as InvalidInputException (bad expression, bad value, ...)."""
    code = "InvalidInputException"


class EntityNotFoundError(CatalogError):
    """Glue's EntityNotFoundException: a database, table, partition or partition index that does not exist."""
    code = "EntityNotFoundException"


class AlreadyExistsError(CatalogError):
    """Glue's AlreadyExistsException: a database, table, partition or partition index created where one
    exists (or a partition named twice in one batch)."""
    code = "AlreadyExistsException"


class ResourceNumberLimitExceededError(CatalogError):
    """Glue's ResourceNumberLimitExceededException: more partition indexes than a table may have."""
    code = "ResourceNumberLimitExceededException"


class ValidationError(CatalogError):
    """A request that breaks Glue's API model (a missing member, a wrong type, a string too long
    or not of its pattern, ...), refused before it reaches the catalog, as Glue's front end does."""
    code = "ValidationException"


# Glue's error types skiplake raises and recognises, each with its code on the wire.
CATALOG_ERRORS: tuple[type[CatalogError], ...] = (
    InvalidInputError, EntityNotFoundError, AlreadyExistsError, ResourceNumberLimitExceededError, ValidationError)

"""What every catalog operation shares: Glue's limits, paging tokens, required members, the
shapes of errors and times in answers, and a table's partition keys."""
from __future__ import annotations

import base64
import datetime as dt
import json
import time
from typing import Any

from skiplake.errors import CatalogError, InvalidInputError

MAX_INDEXES = 3
MAX_FAILED_INDEXES = 10
MAX_BATCH_CREATE = 100
MAX_BATCH_DELETE = 25
MAX_BATCH_GET = 1000
MAX_RESULTS = 1000
MAX_SEGMENTS = 10
INDEXABLE_TYPES = ("string", "char", "varchar", "int", "bigint", "long", "tinyint", "smallint", "date")


def now_seconds() -> float:
    """The time now in seconds since the epoch, as the store's time columns hold it."""
    return time.time()


def utc_time(seconds: float) -> dt.datetime:
    """A stored time (seconds since the epoch) as a UTC datetime, as answers give times."""
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc)


def next_token(payload: Any) -> str:
    """A NextToken carrying `payload` (where the next page starts): its JSON in URL-safe base64."""
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()


def read_token(token: str | None) -> Any:
    """The payload of a NextToken; None without one, InvalidInputError for one that does not decode."""
    if not token:
        return None
    try:
        return json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, json.JSONDecodeError):
        raise InvalidInputError(f"NextToken {token!r} is not a token this catalog issued") from None


def require_members(params: dict, *names: str) -> None:
    """Raise InvalidInputError for the first of `names` that `params` lacks or has empty."""
    for n in names:
        if params.get(n) in (None, ""):
            raise InvalidInputError(f"{n} is required")


def page_size(max_results: int | None, ceiling: int) -> int:
    """The page size MaxResults asks for, `ceiling` when it asks none; InvalidInputError outside 1..ceiling."""
    if max_results is None:
        return ceiling
    if not 1 <= int(max_results) <= ceiling:
        raise InvalidInputError(f"MaxResults must be between 1 and {ceiling}, not {max_results}")
    return int(max_results)


def segment_of(segment: dict | None) -> tuple[int, int]:
    """(SegmentNumber, TotalSegments) of GetPartitions' Segment, (0, 1) without one; InvalidInputError
    when out of range."""
    if not segment:
        return 0, 1
    number, total = int(segment.get("SegmentNumber", 0)), int(segment.get("TotalSegments", 1))
    if not 1 <= total <= MAX_SEGMENTS or not 0 <= number < total:
        raise InvalidInputError(f"Segment must have 1 <= TotalSegments <= {MAX_SEGMENTS} and "
                                f"0 <= SegmentNumber < TotalSegments, not {segment}")
    return number, total


def item_error(partition: dict, error: CatalogError) -> dict:
    """One entry of a batch operation's Errors list, as Glue shapes it."""
    return {"PartitionValues": partition.get("Values") or [],
            "ErrorDetail": {"ErrorCode": error.code, "ErrorMessage": error.message}}


def key_types(body: dict) -> dict[str, str]:
    """Partition key name -> declared type, in the table's order."""
    return {k["Name"]: k.get("Type", "string") for k in body.get("PartitionKeys") or []}


def check_partition_keys(keys: list) -> None:
    """Raise InvalidInputError for a partition key without a Name, or a name given twice (ignoring case)."""
    names = [k.get("Name") for k in keys]
    if any(not n for n in names):
        raise InvalidInputError("every partition key needs a Name")
    if len({n.lower() for n in names}) != len(names):
        raise InvalidInputError(f"partition keys must be unique: {names}")

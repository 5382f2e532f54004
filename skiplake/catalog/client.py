"""One way to call a catalog, whichever it is: in-process, a URL, or boto3's Glue client."""
from __future__ import annotations

from typing import Any, Iterator, Protocol

from skiplake.catalog.operations import method_name
from skiplake.errors import CATALOG_ERRORS, CatalogError
from skiplake.extras import require, require_database


class CatalogClient(Protocol):
    """Anything that answers Glue operations by name: a GlueCatalog, a Boto3Catalog."""

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Glue's response to `operation` (GetPartitions, ...) on request `params`, both in Glue's JSON shapes."""


class Boto3Catalog:
    """boto3's Glue client (AWS Glue itself, or `skiplake catalog serve`) behind `call`."""

    def __init__(self, client: Any) -> None:
        """The catalog behind `client`, a boto3 Glue client."""
        self.client = client

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """The operation's answer; Glue's errors as skiplake's typed catalog errors (an
        EntityNotFoundException is an EntityNotFoundError, whichever catalog answered)."""
        try:
            return getattr(self.client, method_name(operation))(**params)
        except Exception as e:
            typed = _typed(e)
            if typed is None:
                raise
            raise typed from e


def _typed(error: Exception) -> CatalogError | None:
    """botocore's ClientError of a Glue error code skiplake has a type for, as that type."""
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    code = (response.get("Error") or {}).get("Code")
    kind = next((k for k in CATALOG_ERRORS if k.code == code), None)
    if kind is None:
        return None
    message = (response.get("Error") or {}).get("Message") or str(error)
    return kind(message)


def catalog_client(catalog: Any) -> CatalogClient:
    """A GlueCatalog, a database URL (sqlite:///..., postgresql+psycopg://...), an http(s)
    endpoint of a Glue-compatible server, or a boto3 Glue client."""
    if isinstance(catalog, str):
        if catalog.startswith(("http://", "https://")):
            require("catalog", f"the catalog endpoint {catalog}", ("boto3",))
            import boto3
            # The standard AWS chain signs the requests (a server with --credentials checks them);
            # with no credentials anywhere, placeholder keys for a server that checks none.
            session = boto3.session.Session()
            keys = {} if session.get_credentials() is not None else {"aws_access_key_id": "x",
                                                                      "aws_secret_access_key": "x"}
            return Boto3Catalog(session.client("glue", endpoint_url=catalog,
                                               region_name=session.region_name or "us-east-1", **keys))
        require_database(catalog)  # before the import: a missing package is named with its extra
        from skiplake.catalog.service import GlueCatalog
        return GlueCatalog(catalog)
    if hasattr(catalog, "call"):
        return catalog
    if hasattr(catalog, "get_partitions"):
        return Boto3Catalog(catalog)
    raise TypeError(f"not a catalog: {catalog!r}; pass a GlueCatalog, a database URL, an endpoint or a boto3 client")


def all_partitions(client: CatalogClient, database: str, table: str, expression: str | None = None,
                   exclude_columns: bool = True) -> Iterator[dict[str, Any]]:
    """Every partition GetPartitions returns, following NextToken."""
    token: str | None = None
    while True:
        params: dict[str, Any] = {"DatabaseName": database, "TableName": table, "ExcludeColumnSchema": exclude_columns}
        if expression:
            params["Expression"] = expression
        if token:
            params["NextToken"] = token
        out = client.call("GetPartitions", params)
        yield from out.get("Partitions", [])
        token = out.get("NextToken")
        if not token:
            return

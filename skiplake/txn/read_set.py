"""What a transaction read, which decides what concurrent commits it conflicts with."""
from __future__ import annotations

from dataclasses import dataclass, field

from skiplake.expr.tree import Node


@dataclass
class ReadSet:
    """What a transaction read: its scans' predicates and files, and the app ids and metadata domains
    it read or acted on."""
    predicates: list[Node] = field(default_factory=list)   # bound predicates of its scans
    files: set[str] = field(default_factory=set)           # log paths of the files it read
    whole_table: bool = False                              # it scanned without a predicate
    app_ids: set[str] = field(default_factory=set)         # application transaction ids it read
    domains: set[str] = field(default_factory=set)         # metadata domains it acted on (clustering keys)

    @property
    def empty(self) -> bool:
        """Whether it read no data: no predicate, file or whole-table scan (app ids and domains aside)."""
        return not (self.predicates or self.files or self.whole_table)

"""Spark's optimized plan as Python objects, parsed from its numbered tree string.

Walking a Catalyst plan through py4j costs a round trip per node and per expression (a few
hundred microseconds each here), hundreds per TPC-DS query. `numberedTreeString` is one call
that returns the whole tree as text: this module parses it into nodes with their Spark
numbers (so `plan.apply(number)` reaches any node in one call), their kinds, their children and
subqueries, and for the nodes that matter (relations, projections, aggregates, unions, joins,
filters) the attributes they output and where each came from.

What cannot be parsed with certainty is left unknown, and every user of it treats unknown as
"do not prune": a mis-parse can cost pruning, never rows.

The text is Spark's: `NN <tree prefix><node>`, where each level of the prefix is three
characters ("   ", ":  ", "+- ", ":- "); a node's children sit one level deeper, its subquery
plans two levels deeper (printed first), in the order `TreeNode.apply` numbers them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

_NUMBER = re.compile(r"^\d+ ")
_LINE = re.compile(r"^((?:   |:  |\+- |:- )*)([A-Z][A-Za-z]*.*)$")
_ATTR = re.compile(r"^(?P<name>.+)#(?P<id>\d+)L?$")
_ALIAS = re.compile(r"^(?P<expr>.+) AS (?P<name>.+)#(?P<id>\d+)L?$")
_KIND = re.compile(r"^([A-Za-z]+)")
_HINT = re.compile(r", (?:leftHint|rightHint)=.*$")
_CAST = re.compile(r"^cast\((?P<attr>.+) as (?P<type>[a-z0-9_(), ]+)\)$")

# Nodes whose output is their (only) child's, row for row a subset of it.
_PASS_THROUGH = {"Filter", "Sort", "Sample", "Repartition", "RepartitionByExpression", "RebalancePartitions",
                 "GlobalLimit", "LocalLimit", "Tail", "Offset", "Distinct", "Subquery"}
# Of those, the ones a filter on an output column commutes with (a limit does not: it keeps n rows).
FILTER_COMMUTES = {"Filter", "Sort", "Repartition", "RepartitionByExpression", "RebalancePartitions", "Distinct",
                   "Subquery"}
JOIN_TYPES = ("Inner", "LeftOuter", "RightOuter", "FullOuter", "LeftSemi", "LeftAnti", "Cross")
# The child a row of a join's output comes from unchanged, per join type, when that child's rows
# pass into the output whole (filtering them first filters the output the same way).
PRESERVED = {"Inner": (0, 1), "Cross": (0, 1), "LeftOuter": (0,), "RightOuter": (1,), "LeftSemi": (0,),
              "LeftAnti": (0,)}


@dataclass(frozen=True)
class Attr:
    """An attribute as the plan prints it (`name#12`): its expression id and name."""
    id: int
    name: str


@dataclass(frozen=True)
class Operand:
    """One side of a join equality: an attribute, possibly under a cast to `cast` (a Spark type)."""
    attr: Attr
    cast: str | None = None


@dataclass(eq=False)
class PlanNode:
    """One node of a parsed plan: Spark's number of it, its kind and text, its children and subqueries."""
    number: int                  # Spark's number of the node: `plan.apply(number)` returns it
    kind: str                    # "Join", "Filter", "Project", "Relation", ...
    text: str                    # the node's string after its kind
    depth: int
    children: list["PlanNode"] = field(default_factory=list)
    subqueries: list["PlanNode"] = field(default_factory=list)
    parent: "PlanNode | None" = field(default=None, repr=False)
    _output: "list[Attr] | None | Literal[False]" = field(default=False, repr=False)  # False: not read yet

    # ---- what the node outputs

    @property
    def output(self) -> list[Attr] | None:
        """The attributes the node outputs, in order; None when the text does not say for sure."""
        if self._output is False:
            self._output = _output_of(self)
        return self._output

    def sources(self, attr_id: int) -> list[tuple["PlanNode", int]] | None:
        """For an output attribute, the (child, attribute id) pairs it comes from unchanged, one per
        child that provides it (several under a Union); None when it is computed here."""
        return _sources(self, attr_id)

    # ---- joins

    @property
    def join_type(self) -> str:
        """A Join node's type as Spark prints it ("Inner", "LeftSemi", ...)."""
        head = self.text.split(",", 1)[0].strip()
        return head.split("(", 1)[0]

    @property
    def join_condition(self) -> str | None:
        """A Join node's condition text, its hints left out; None when it has no condition."""
        parts = self.text.split(", ", 1)
        if len(parts) < 2:
            return None
        return _HINT.sub("", parts[1]).strip() or None

    def equi_keys(self) -> list[tuple[Operand, Operand]]:
        """The `a = b` conjuncts of a join's condition between two attributes (either may be cast)."""
        cond = self.join_condition
        if cond is None:
            return []
        out = []
        for conj in conjuncts(cond):
            sides = split_top(conj, " = ")
            if len(sides) != 2:
                continue
            left, right = operand(sides[0]), operand(sides[1])
            if left is not None and right is not None:
                out.append((left, right))
        return out

    # ---- walking

    def walk(self) -> "list[PlanNode]":
        """This node and every node below it, subqueries included, in Spark's numbering order."""
        out = [self]
        for n in self.subqueries + self.children:
            out.extend(n.walk())
        return out

    def line(self) -> str:
        """The node as its line of the tree string says it: kind, then text."""
        return f"{self.kind} {self.text}".strip()


def parse_plan(text: str, numbered: bool = False) -> PlanNode:
    """The root of a plan's tree string (`treeString`; with `numbered`, `numberedTreeString`).

    Nodes are numbered in line order, which is Spark's numbering: a line that does not start a
    node (a string literal with a line break) continues the previous node's text."""
    nodes: list[PlanNode] = []
    for raw in text.splitlines():
        line = _NUMBER.sub("", raw, count=1) if numbered else raw
        m = _LINE.match(line)
        if m is None:
            if nodes:
                nodes[-1].text += "\n" + raw
            continue
        prefix, body = m.group(1), m.group(2)
        kind_match = _KIND.match(body)
        assert kind_match is not None  # _LINE's body starts with a letter
        kind = kind_match.group(1)
        node = PlanNode(len(nodes), kind, body[len(kind):].strip(), len(prefix) // 3)
        _attach(nodes, node)
        nodes.append(node)
    if not nodes:
        raise ValueError("empty plan text")
    return nodes[0]


def _attach(nodes: list[PlanNode], node: PlanNode) -> None:
    for candidate in reversed(nodes):
        if candidate.depth < node.depth:
            node.parent = candidate
            if candidate.depth == node.depth - 1:
                candidate.children.append(node)
            else:
                candidate.subqueries.append(node)
            return


# ---------------------------------------------------------------- text helpers


def trace(node: PlanNode, attr_id: int) -> list[tuple[PlanNode, int]]:
    """The relations (with the attribute id there) an output attribute of `node` comes from
    unchanged, through nodes a filter on it commutes with; empty when it is computed."""
    if node.kind == "Relation":
        return [(node, attr_id)] if any(a.id == attr_id for a in node.output or []) else []
    if node.kind == "Join":
        side = next((i for i, c in enumerate(node.children) if any(a.id == attr_id for a in c.output or [])), None)
        if side is None or side not in PRESERVED.get(node.join_type, ()):
            return []
        return trace(node.children[side], attr_id)
    if node.kind not in FILTER_COMMUTES | {"Project", "Aggregate", "Union"}:
        return []
    sources = node.sources(attr_id)
    return [hit for child, child_attr in sources or [] for hit in trace(child, child_attr)]


def split_top(text: str, sep: str = ",") -> list[str]:
    """`text` split at `sep` outside parentheses and brackets, each piece stripped."""
    out, depth, start = [], 0, 0
    # Only brackets and separators matter: the regex skips the rest (plan lines run long).
    for m in _splitter(sep).finditer(text):
        token = m.group()
        if token in _OPENING:
            depth += 1
        elif token in _CLOSING:
            depth -= 1
        elif depth == 0:
            out.append(text[start:m.start()].strip())
            start = m.end()
    out.append(text[start:].strip())
    return [p for p in out if p]


_OPENING, _CLOSING = ("(", "[", "{"), (")", "]", "}")
_SPLITTERS: dict[str, re.Pattern[str]] = {}
_PARENS = re.compile(r"[()]")


def _splitter(sep: str) -> re.Pattern[str]:
    if sep not in _SPLITTERS:
        _SPLITTERS[sep] = re.compile(r"[(\[{)\]}]|" + re.escape(sep))
    return _SPLITTERS[sep]


def strip_parens(text: str) -> str:
    """`text` without parentheses that enclose all of it."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")") and _closes_at_end(text):
        text = text[1:-1].strip()
    return text


def _closes_at_end(text: str) -> bool:
    depth = 0
    for m in _PARENS.finditer(text):
        depth += 1 if m.group() == "(" else -1
        if depth == 0 and m.end() < len(text):
            return False
    return True


def conjuncts(condition: str) -> list[str]:
    """The AND-conjuncts of a condition's text."""
    parts = split_top(strip_parens(condition), " AND ")
    if len(parts) == 1:
        return [strip_parens(parts[0])]
    return [c for p in parts for c in conjuncts(p)]


# A condition that is AND-ed null tests of plainly named attributes and nothing else, as Spark
# prints it: `(isnotnull(a#1L) AND isnotnull(b#2))`.
_NULL_TESTS = re.compile(r"(?:[()]| AND |is(?:not)?null\([A-Za-z_][A-Za-z0-9_]*#\d+L?\))+")
_ATTR_ID = re.compile(r"#\d+L?\)")


def null_tests_sql(condition: str) -> str | None:
    """A condition made of null tests only, as SQL over the attributes' names; None for any
    other. Spark puts such a filter (on join keys) above more than half the relations of a
    TPC-DS plan, and its text here says all there is to say: no literal, no operator but AND."""
    if not _NULL_TESTS.fullmatch(condition):
        return None
    return _ATTR_ID.sub(")", condition)


def attribute(text: str) -> Attr | None:
    """`name#12` or `name#12L` as an attribute, else None."""
    m = _ATTR.match(text.strip())
    if m is None or any(ch in m.group("name") for ch in "()#"):
        return None
    return Attr(int(m.group("id")), m.group("name"))


def operand(text: str) -> Operand | None:
    """`a#1` or `cast(a#1 as type)` (in parentheses or not) as an Operand, else None."""
    text = strip_parens(text)
    a = attribute(text)
    if a is not None:
        return Operand(a)
    m = _CAST.match(text)
    if m is not None:
        inner = attribute(m.group("attr"))
        if inner is not None:
            return Operand(inner, m.group("type").strip())
    return None


def _items(text: str) -> list[str] | None:
    """The items of a `[a, b, ...]` list at the start of `text`."""
    text = text.strip()
    if not text.startswith("["):
        return None
    depth = 0
    for i, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0:
            return split_top(text[1:i], ",")
    return None


def _named(item: str) -> tuple[Attr, Attr | None] | None:
    """(output attribute, the attribute it passes on unchanged or None) of a projection item."""
    alias = _ALIAS.match(item)
    if alias is not None and not any(ch in alias.group("name") for ch in "()#"):
        out = Attr(int(alias.group("id")), alias.group("name"))
        return out, attribute(strip_parens(alias.group("expr")))
    a = attribute(item)
    return (a, a) if a is not None else None


# ---------------------------------------------------------------- outputs and lineage


def _output_of(node: PlanNode) -> list[Attr] | None:
    kind = node.kind
    if kind == "Relation":
        start = node.text.find("[")
        return _attributes(_items(node.text[start:]) if start >= 0 else None)
    if kind == "Project":
        return _named_outputs(_items(node.text))
    if kind == "Aggregate":
        lists = split_top(node.text, ", ") if node.text.startswith("[") else []
        return _named_outputs(_items(lists[1])) if len(lists) == 2 else None
    if kind in _PASS_THROUGH and len(node.children) == 1:
        return node.children[0].output
    if kind == "Union" and node.children:
        return node.children[0].output
    if kind == "Join" and len(node.children) == 2:
        left, right = node.children[0].output, node.children[1].output
        jt = node.join_type
        if jt in ("LeftSemi", "LeftAnti"):
            return left
        if jt in ("Inner", "LeftOuter", "RightOuter", "FullOuter", "Cross") and left is not None and right is not None:
            return left + right
    return None


def _attributes(items: list[str] | None) -> list[Attr] | None:
    """The attributes a relation outputs; None when an item is not one."""
    if items is None:
        return None
    out = []
    for item in items:
        a = attribute(item)
        if a is None:
            return None
        out.append(a)
    return out


def _named_outputs(items: list[str] | None) -> list[Attr] | None:
    if items is None:
        return None
    out = []
    for item in items:
        named = _named(item)
        if named is None:
            return None
        out.append(named[0])
    return out


def _sources(node: PlanNode, attr_id: int) -> list[tuple[PlanNode, int]] | None:
    kind = node.kind
    if kind in _PASS_THROUGH and len(node.children) == 1:
        return [(node.children[0], attr_id)]
    if kind == "Project":
        return _from_items(node, _items(node.text), attr_id, None)
    if kind == "Aggregate":
        lists = split_top(node.text, ", ") if node.text.startswith("[") else []
        if len(lists) != 2:
            return None
        grouping = {a.id for a in (attribute(g) for g in _items(lists[0]) or []) if a is not None}
        return _from_items(node, _items(lists[1]), attr_id, grouping)
    if kind == "Union":
        return _from_union(node, attr_id)
    if kind == "Join":
        for child in node.children:
            out = child.output
            if out is not None and any(a.id == attr_id for a in out):
                return [(child, attr_id)]
    return None


def _from_items(node: PlanNode, items: list[str] | None, attr_id: int, grouping: set[int] | None
                ) -> list[tuple[PlanNode, int]] | None:
    """Where a Project's (or an Aggregate's: only its grouping keys) output attribute comes from."""
    if items is None or len(node.children) != 1:
        return None
    for item in items:
        named = _named(item)
        if named is None or named[0].id != attr_id:
            continue
        source = named[1]
        if source is None or (grouping is not None and source.id not in grouping):
            return None
        return [(node.children[0], source.id)]
    return None


def _from_union(node: PlanNode, attr_id: int) -> list[tuple[PlanNode, int]] | None:
    first = node.output
    if first is None:
        return None
    positions = [i for i, a in enumerate(first) if a.id == attr_id]
    if len(positions) != 1:
        return None
    out = []
    for child in node.children:
        out_child = child.output
        if out_child is None or len(out_child) != len(first):
            return None
        out.append((child, out_child[positions[0]].id))
    return out

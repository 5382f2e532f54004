"""Compactions that keep row-level changes, without Spark: where each input's rows went, and both
orders of an OPTIMIZE and a DML ending with the same rows."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skiplake.log.actions import AddFile, RemoveFile
from skiplake.log.deletion_vectors import marked_rows, write_dv_file
from skiplake.txn.row_placements import (
    COMPACTED_FROM,
    Placement,
    RowIdPlacement,
    compacted_tag,
    placements,
    positions,
    rebase_compaction,
    rebase_onto_compaction,
)
from tests.tiers import examples


def add(path: str, rows: int, dv: dict | None = None, data_change: bool = True, tags: dict | None = None) -> AddFile:
    return AddFile(path, {}, 100, 0, data_change, f'{{"numRecords":{rows}}}', tags, dv)


def dv(table: str, rows) -> dict | None:
    rows = np.asarray(sorted(rows), dtype=np.uint64)
    return write_dv_file(table, [rows])[0].to_json() if len(rows) else None


def live(table: str, f: AddFile) -> list[int]:
    dead = set(marked_rows(table, f.deletionVector).tolist())
    return [i for i in range(f.num_records or 0) if i not in dead]


def test_positions_skip_the_rows_deleted_before(tmp_path):
    table = str(tmp_path)
    place = Placement("g", 10, 4, dv(table, [1, 3]))  # 6 rows, live 0, 2, 4, 5
    assert positions(table, place, np.array([2, 5], dtype=np.uint64)).tolist() == [11, 13]
    assert positions(table, place, None).tolist() == [10, 11, 12, 13]
    with pytest.raises(ValueError):
        positions(table, place, np.array([3], dtype=np.uint64))  # deleted before the compaction read it
    with pytest.raises(ValueError):
        positions(table, place, np.array([6], dtype=np.uint64))  # past its rows


def test_the_tag_round_trips_in_order(tmp_path):
    table = str(tmp_path)
    f1, f2 = add("a.parquet", 6, dv(table, [0])), add("b.parquet", 3)
    out = add("g.parquet", 8, data_change=False, tags={COMPACTED_FROM: compacted_tag([(f1, 5), (f2, 3)])})
    got = placements([out, f1.remove(data_change=False)])
    assert got == {"a.parquet": Placement("g.parquet", 0, 5, f1.deletionVector),
                   "b.parquet": Placement("g.parquet", 5, 3, None)}
    # A data change never claims to be a compaction; a tag not skiplake's is ignored.
    assert placements([add("g.parquet", 8, tags=out.tags)]) == {}
    assert placements([add("g.parquet", 8, data_change=False, tags={COMPACTED_FROM: "[{}]"})]) == {}


def _refuse(path: str, rows: int) -> None:
    raise AssertionError(f"conflict on {path} ({rows} rows)")


def _dml(table: str, data, files: dict[str, AddFile], expected: set) -> list:
    """A DML over the live `files`: per file nothing, some live rows marked, or the file removed
    whole; `files` and `expected` (live (input, row) pairs) follow it."""
    out: list = []
    for path, f in sorted(files.items()):
        rows = live(table, f)
        what = data.draw(st.sampled_from(["none", "mark", "remove"]))
        if what == "mark" and rows:
            hit = data.draw(st.sets(st.sampled_from(rows), min_size=1))
            old = marked_rows(table, f.deletionVector).tolist()
            new = replace(f, dataChange=True, deletionVector=dv(table, set(old) | hit))  # ids kept
            out += [f.remove(), new]
            files[path] = new
            expected -= {(path, r) for r in hit}
        elif what == "remove":
            out.append(f.remove())
            del files[path]
            expected -= {(path, r) for r in rows}
    return out


def _live_rows(table: str, inputs: list[AddFile], commits: list[list], origin: dict[str, list]) -> set:
    """The live (input, row) pairs after `commits` in order; each remove must name a live file
    (`origin`: each output's rows as (input, row) pairs)."""
    files = {f.path: f for f in inputs}
    for actions in commits:
        for a in actions:
            if isinstance(a, RemoveFile):
                assert files.pop(a.path).deletionVector == a.deletionVector
            else:
                files[a.path] = a
    rows = set()
    for f in files.values():
        for r in live(table, f):
            rows.add(origin[f.path][r] if f.path in origin else (f.path, r))
    return rows


@settings(max_examples=examples(80), deadline=None)
@given(st.data())
def test_every_order_keeps_the_same_rows(tmp_path_factory, data):
    """Inputs with random DVs are compacted while two DMLs, one after the other, mark random live
    rows of some inputs and remove others whole. Whichever way round they commit, the live rows
    (named by input file and row index) are the inputs' live rows less both DMLs'."""
    table = str(tmp_path_factory.mktemp("t"))
    sizes = data.draw(st.lists(st.integers(1, 40), min_size=1, max_size=5))
    inputs = []
    for i, n in enumerate(sizes):
        dead = data.draw(st.sets(st.integers(0, n - 1), max_size=n - 1))
        inputs.append(add(f"f{i}.parquet", n, dv(table, dead)))
    # The compaction: every input's live rows, in order, with the tag.
    given_rows = [(f, live(table, f)) for f in inputs]
    origin = [(f.path, r) for f, rows in given_rows for r in rows]
    out = add("g.parquet", len(origin), data_change=False,
              tags={COMPACTED_FROM: compacted_tag([(f, len(rows)) for f, rows in given_rows])})
    opt = [f.remove(data_change=False) for f in inputs] + [out]
    _check_every_order(table, data, inputs, opt, {"g.parquet": origin}, placements)


def _check_every_order(table: str, data, inputs: list[AddFile], opt: list, origin: dict[str, list],
                       placed) -> None:
    """Two DMLs over `inputs` and the compaction `opt` (its outputs' rows as `origin` names
    them; `placed` finds where a commit put its inputs' rows) in every order of commits."""
    moved = placed(opt)
    files = {f.path: f for f in inputs}
    expected = {pair for rows in origin.values() for pair in rows}
    first = _dml(table, data, files, expected)
    second = _dml(table, data, files, expected)  # read after the first, before OPTIMIZE committed

    # OPTIMIZE first: the first DML rebased onto it; the second read after the first committed.
    first_after = rebase_onto_compaction(table, moved, opt, first, _refuse)
    assert _live_rows(table, inputs, [opt, first_after], origin) == _live_rows(table, inputs, [first], origin)
    # Both DMLs first, OPTIMIZE rebased on each in turn.
    opt_after = rebase_compaction(table, moved, second, rebase_compaction(table, moved, first, opt, _refuse), _refuse)
    assert _live_rows(table, inputs, [first, second, opt_after], origin) == expected
    # The first DML, OPTIMIZE rebased on it, then the second DML rebased onto OPTIMIZE.
    opt_once = rebase_compaction(table, moved, first, opt, _refuse)
    if not any(isinstance(a, AddFile) for a in opt_once):
        return  # the first DML deleted every row: OPTIMIZE wrote nothing to map the second onto
    second_after = rebase_onto_compaction(table, placed(opt_once), opt_once, second, _refuse)
    assert _live_rows(table, inputs, [first, opt_once, second_after], origin) == expected


ROW_ID = "_row-id-col-test"


@settings(max_examples=examples(40), deadline=None)
@given(st.data())
def test_every_order_keeps_the_same_rows_when_row_ids_say_where_they_went(tmp_path_factory, data):
    """As above, for a compaction that reordered the rows (a Z-order, clustering) over two
    outputs, which hold each row's id in the materialized column: the inputs' rows are found
    in them by id (baseRowId + index)."""
    table = str(tmp_path_factory.mktemp("t"))
    sizes = data.draw(st.lists(st.integers(1, 30), min_size=1, max_size=4))
    inputs = []
    for i, n in enumerate(sizes):
        pq.write_table(pa.table({"x": list(range(n))}), f"{table}/f{i}.parquet")
        dead = data.draw(st.sets(st.integers(0, n - 1), max_size=n - 1))
        inputs.append(replace(add(f"f{i}.parquet", n, dv(table, dead)), baseRowId=1000 * i))
    pairs = data.draw(st.permutations([(f.path, r) for f in inputs for r in live(table, f)]))
    cut = data.draw(st.integers(0, len(pairs)))
    origin = {"g0.parquet": pairs[:cut], "g1.parquet": pairs[cut:]}
    base = {f.path: f.baseRowId for f in inputs}
    opt = [f.remove(data_change=False) for f in inputs]
    for path, rows in origin.items():
        if rows:
            ids = [base[p] + r for p, r in rows]
            pq.write_table(pa.table({"x": [0] * len(ids), ROW_ID: pa.array(ids, pa.int64())}), f"{table}/{path}")
            opt.append(add(path, len(ids), data_change=False))
    origin = {p: rows for p, rows in origin.items() if rows}
    moved = placements(opt, table, ROW_ID)
    assert set(moved) == set(base) and all(isinstance(p, RowIdPlacement) for p in moved.values())
    _check_every_order(table, data, inputs, opt, origin, lambda actions: placements(actions, table, ROW_ID))


def test_rows_a_compaction_did_not_keep_the_ids_of_conflict(tmp_path):
    """A compaction whose outputs lack the ids (a writer that did not keep them) cannot say where
    an input's rows went: a DML of that input conflicts, as at file level."""
    table = str(tmp_path)
    pq.write_table(pa.table({"x": [1, 2, 3]}), f"{table}/f.parquet")
    pq.write_table(pa.table({"x": [1, 2, 3]}), f"{table}/g.parquet")
    f = replace(add("f.parquet", 3), baseRowId=0)
    opt = [f.remove(data_change=False), replace(add("g.parquet", 3, data_change=False), baseRowId=3)]
    moved = placements(opt, table, ROW_ID)
    dml = [f.remove(), replace(f, deletionVector=dv(table, [1]))]
    with pytest.raises(AssertionError, match="conflict on f.parquet"):
        rebase_onto_compaction(table, moved, opt, dml, _refuse)


def test_a_dml_whose_dv_is_older_than_the_compactions_conflicts(tmp_path):
    table = str(tmp_path)
    f = add("f.parquet", 10)
    newer = add("f.parquet", 10, dv(table, [1]))  # another DML marked row 1; OPTIMIZE read that
    out = add("g.parquet", 9, data_change=False, tags={COMPACTED_FROM: compacted_tag([(newer, 9)])})
    optimize = [newer.remove(data_change=False), out]
    ours = [f.remove(), add("f.parquet", 10, dv(table, [2]))]  # read before row 1 went

    def conflict(path: str, rows: int) -> None:
        raise RuntimeError(path)
    with pytest.raises(RuntimeError, match="f.parquet"):
        rebase_onto_compaction(table, placements(optimize), optimize, ours, conflict)

"""map_value picks a key's value from a string map column exactly as Arrow's map_lookup does."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from skiplake.log.arrow_schema import STRING_MAP, map_value
from tests.tiers import examples

entry = st.tuples(st.sampled_from("pqx"), st.one_of(st.none(), st.sampled_from(["1", "2", ""])))
row = st.one_of(st.none(), st.lists(entry, max_size=3))


def _plain(a: pa.Array | pa.ChunkedArray) -> list:
    return (a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a).to_pylist()


@settings(max_examples=examples(300), deadline=None)
@given(rows=st.lists(row, max_size=8), start=st.integers(0, 3), key=st.sampled_from("pq"))
def test_map_value_is_map_lookup_first(rows, start, key):
    array = pa.array(rows, STRING_MAP)
    for maps in (array, array.slice(min(start, len(array))), pa.chunked_array([array, array], STRING_MAP)):
        assert _plain(map_value(maps, key)) == _plain(pc.map_lookup(maps, pa.scalar(key, pa.string()), "first"))


def test_one_key_per_row_takes_the_fast_path_and_agrees():
    array = pa.array([[("p", str(i % 7))] for i in range(1000)], STRING_MAP).slice(3)
    assert _plain(map_value(array, "p")) == [str(i % 7) for i in range(3, 1000)]

"""Arrow arrays as NumPy arrays that sort the way Spark sorts the values (NULLs aside).

Binary search (IN lists against file bounds, rows against Z-order range boundaries) needs
values NumPy can order. Numbers, dates, timestamps and booleans become machine numbers;
strings and decimals stay exact as Python objects (code-point order is UTF-8 byte order, which
is how Spark compares strings). NULLs become a placeholder: callers mask them out.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa


def sortable(values: pa.Array) -> np.ndarray:
    """`values` as a NumPy array that sorts as Spark sorts them, NULLs as a placeholder; TypeError for a
    type with no order here."""
    t = values.type
    if pa.types.is_dictionary(t):
        return sortable(values.dictionary_decode())
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return values.fill_null(0).to_numpy(zero_copy_only=False)
    if pa.types.is_date32(t):
        return values.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False)
    if pa.types.is_date64(t) or pa.types.is_timestamp(t):
        return values.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    if pa.types.is_boolean(t):
        return values.cast(pa.int8()).fill_null(0).to_numpy(zero_copy_only=False)
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_decimal(t)):
        raise TypeError(f"no sort order for values of type {t}")
    py = values.to_pylist()
    filler = next((x for x in py if x is not None), b"" if pa.types.is_binary(t) else "")
    out = np.empty(len(py), dtype=object)
    out[:] = [filler if x is None else x for x in py]
    return out

"""Mutations of real inputs for the property test and the fuzzer: truncate, flip bits, delete, insert,
repeat spans, or put a JSON-significant byte somewhere."""

from __future__ import annotations

from hypothesis import strategies as st

OPS = ("truncate", "flip", "delete", "insert", "duplicate", "byte")


def mutate(draw: st.DrawFn, seed: bytes, *, most: int = 4, span: int = 256) -> bytes:
    """``seed`` with 1 to ``most`` random mutations, each touching at most ``span`` bytes."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, most))):
        if not data:
            break
        op = draw(st.sampled_from(OPS))
        at = draw(st.integers(0, len(data) - 1))
        if op == "truncate":
            del data[at:]
        elif op == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, span))]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=32))
        elif op == "duplicate":
            data[at:at] = data[at : at + draw(st.integers(1, 2 * span))]
        else:
            data[at] = draw(st.sampled_from(b'{}[],:"\\\n0-.eE'))
    return bytes(data)

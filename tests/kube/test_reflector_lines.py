"""A watch stream's lines, however the network cuts them into chunks, are read as the objects sent, in order."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
from hypothesis import given
from hypothesis import strategies as st

from kubeflux.kube.reflector import _lines


class _Stream:
    """What ``_lines`` reads of urllib3's response: its chunks."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amount: int) -> Iterator[bytes]:
        yield from self.chunks


_OBJECTS = st.lists(
    st.dictionaries(st.sampled_from(["type", "object", "a\nb"]), st.text(max_size=5) | st.integers(-(2**40), 2**40)), max_size=8
)


@given(_OBJECTS, st.lists(st.integers(1, 40), max_size=20), st.booleans())
def test_any_cut_of_a_stream_gives_its_objects(objects: list[dict[str, object]], cuts: list[int], end: bool) -> None:
    data = b"\n".join(orjson.dumps(o) for o in objects) + (b"\n" if end and objects else b"")
    points = sorted({0, len(data), *(c * 7 % (len(data) + 1) for c in cuts)})
    chunks = [data[a:b] for a, b in zip(points, points[1:], strict=False)]
    assert list(_lines(_Stream(chunks))) == objects

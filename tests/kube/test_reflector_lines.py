"""A watch stream's lines, however the server cuts them into HTTP chunks and the network into reads, are read as the
objects sent, in order: through urllib3, and straight from the connection's buffered reader (serve's pods' watch)."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from urllib3.exceptions import ProtocolError

from kubeflux.kube.reflector import _lines


class _Stream:
    """What ``_lines`` reads of urllib3's response: its chunks."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amount: int) -> Iterator[bytes]:
        yield from self.chunks


class _Network(io.RawIOBase):
    """A connection that gives at most ``most`` bytes a read."""

    def __init__(self, data: bytes, most: int) -> None:
        self.data, self.most, self.at = data, most, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        taken = self.data[self.at : self.at + min(self.most, len(buffer))]
        buffer[: len(taken)] = taken
        self.at += len(taken)
        return len(taken)


_OBJECTS = st.lists(
    st.dictionaries(st.sampled_from(["type", "object", "a\nb"]), st.text(max_size=5) | st.integers(-(2**40), 2**40)),
    max_size=8,
)


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c * 7 % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def _chunked(pieces: list[bytes], extension: bool, trailer: bool) -> bytes:
    body = b"".join(b"%x%s\r\n%s\r\n" % (len(p), b";x=y" if extension else b"", p) for p in pieces if p)
    return body + b"0\r\n" + (b"Trailer-Field: 1\r\n" if trailer else b"") + b"\r\n"


@given(_OBJECTS, st.lists(st.integers(1, 40), max_size=20), st.booleans())
def test_any_cut_of_a_stream_gives_its_objects(objects: list[dict[str, object]], cuts: list[int], end: bool) -> None:
    data = b"\n".join(orjson.dumps(o) for o in objects) + (b"\n" if end and objects else b"")
    assert list(_lines(_Stream(_cut(data, cuts)))) == objects


@given(
    _OBJECTS,
    st.lists(st.integers(1, 40), max_size=20),
    st.integers(1, 50),
    st.booleans(),
    st.booleans(),
)
def test_a_chunked_stream_read_from_the_connection_gives_its_objects(
    objects: list[dict[str, object]], cuts: list[int], most: int, extension: bool, trailer: bool
) -> None:
    data = b"".join(orjson.dumps(o) + b"\n" for o in objects)
    wire = _chunked(_cut(data, cuts), extension, trailer) + b"HTTP/1.1 200 OK\r\n"  # (the next response: not read)
    reader = io.BufferedReader(_Network(wire, most), buffer_size=64)
    assert list(_lines(None, reader.read1)) == objects


@pytest.mark.parametrize(
    ("wire", "why"),
    [
        (b'5\r\n{"a":\r\n', "closed mid-body"),
        (b"zz\r\n", "bad chunk size"),
        (b"3\r\n{}\nXX0\r\n\r\n", "a chunk not followed by CRLF"),
    ],
)
def test_a_broken_chunked_stream_is_a_protocol_error(wire: bytes, why: str) -> None:
    reader = io.BufferedReader(_Network(wire, 4))
    with pytest.raises(ProtocolError):
        list(_lines(None, reader.read1))

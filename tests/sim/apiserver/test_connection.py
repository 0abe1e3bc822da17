"""The transport under uvicorn: a response's writes leave together, in order, and nothing is lost on close."""

from __future__ import annotations

import asyncio
from typing import Any

from kubeflux.sim.apiserver.connection import LARGE_WRITE, CoalescingTransport


class _Recorded:
    """A transport that keeps what was written to it."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> Any:
        return f"info:{name}"


def test_headers_and_body_of_a_response_leave_in_one_write_in_order() -> None:
    async def scenario() -> list[list[bytes]]:
        recorded = _Recorded()
        transport: Any = CoalescingTransport(recorded, asyncio.get_running_loop())
        seen = []
        transport.write(b"HTTP/1.1 201 Created\r\n\r\n")
        transport.write(b"{}")
        seen.append(list(recorded.writes))
        await asyncio.sleep(0)
        seen.append(list(recorded.writes))
        large = b"x" * LARGE_WRITE
        transport.write(b"head")
        transport.write(large)
        seen.append(list(recorded.writes))
        small = b"y" * (LARGE_WRITE // 2)
        transport.write(small)
        transport.write(small)
        seen.append(list(recorded.writes))
        transport.write(b"tail")
        transport.close()
        seen.append(list(recorded.writes))
        assert transport.get_extra_info("socket") == "info:socket"
        return seen

    before_turn, after_turn, large, gathered_large, closed = asyncio.run(scenario())
    assert before_turn == []
    assert after_turn == [b"HTTP/1.1 201 Created\r\n\r\n{}"]
    small = b"y" * (LARGE_WRITE // 2)
    assert large == [*after_turn, b"head", b"x" * LARGE_WRITE]
    assert gathered_large == [*large, small * 2]
    assert closed == [*gathered_large, b"tail"]

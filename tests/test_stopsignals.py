"""A long-running command stops on SIGTERM or Ctrl-C whenever the signal comes: the handler takes no lock.

``threading.Event.set`` in the handler could deadlock the main thread on the event's own lock (it hung ``kubeflux
kube up`` once in CI); these children wait in the tightest loop there is, with another thread taking the
interpreter, and are signalled at random instants: every one must exit at once.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from kubeflux.stopsignals import StopSignals

CHILD = """
import sys, threading
from kubeflux.stopsignals import StopSignals

def spin():  # another thread, as serve's and kube up's have: the main thread gives up the interpreter at any point
    while True:
        sum(range(100))

threading.Thread(target=spin, daemon=True).start()
stop = StopSignals()
print("waiting", flush=True)
while not stop.wait(0):
    pass
print(stop.heard.name, flush=True)
"""


@pytest.fixture
def restored() -> Iterator[None]:
    """The test process's own handlers put back."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def test_a_waiting_loop_stops_at_any_instant_of_the_signal() -> None:
    chance = random.Random(28)
    for trial in range(30):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "waiting"
            sig = chance.choice([signal.SIGTERM, signal.SIGINT])
            time.sleep(chance.uniform(0.0, 0.02))
            os.kill(child.pid, sig)
            out, _ = child.communicate(timeout=30)  # at once, unless the handler deadlocked the loop
            assert (child.returncode, out.strip()) == (0, sig.name), f"trial {trial}"
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()


def test_the_first_signal_is_kept_and_a_later_wait_does_not_sleep(restored: None) -> None:
    stop = StopSignals()
    assert stop.heard is None and not stop.wait(0.0)
    os.kill(os.getpid(), signal.SIGTERM)
    assert stop.wait(0.0) and stop.heard is signal.SIGTERM
    os.kill(os.getpid(), signal.SIGINT)  # a second stop signal: no KeyboardInterrupt, the first one named
    assert stop.wait(3600.0) and stop.heard is signal.SIGTERM

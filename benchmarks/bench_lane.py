"""What a message hop between two actor processes costs through Thespian,
against a lane of their own beside it (a lever measured, not built).

python -m benchmarks.bench_lane [--round-trips 2000] [--rounds 3]

Two plain Thespian actors in their own processes (with the transport patches
of ``supervisors``, as every process of the runtime has them): a pinger and
an echo. A round trip is the pinger's message to the echo and the echo's
answer, the message the size of a task's (a dict of a few fields). Through
Thespian each goes by ``send`` (its frame, the receiver's ACK); through the
lane each is a length-prefixed pickle written on a Unix stream socket that
the other actor watches with ``ThespianWatch``, so it arrives as a
``WatchMessage`` in the same actor loop. Rounds alternate the two ways; the
figure of a round is its mean round trip. Results:
``benchmarks/results/lane.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import socket
import statistics
import struct
import time
from dataclasses import dataclass
from typing import Any

from thespian.actors import Actor, ThespianWatch, WatchMessage

from benchmarks._util import environment, write_json
from supervisors import System

PAYLOAD = {"task_id": "t" * 32, "node": "n1", "input": {"text": "x", "steps": ["a", "b"]},
           "token": 7, "folded": None}
"""About what a trivial node's task carries."""

_HEADER = struct.Struct("!I")


@dataclass(frozen=True)
class Listen:
    """To the echo: answer frames on the lane ``name`` (an abstract Unix socket)."""

    name: str


@dataclass(frozen=True)
class Go:
    """To the pinger: ``count`` round trips with ``echo`` by ``way``; answers
    the seconds they took."""

    way: str
    count: int
    echo: Any
    lane: str


class _Frames:
    """Length-prefixed pickles read from a non-blocking socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def write(self, value: Any) -> None:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        self.sock.sendall(_HEADER.pack(len(data)) + data)

    def read(self) -> list[Any]:
        with contextlib.suppress(BlockingIOError):  # nothing more yet
            self.buffer += self.sock.recv(1 << 16)
        values = []
        while len(self.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buffer)
            if len(self.buffer) < _HEADER.size + size:
                break
            values.append(pickle.loads(self.buffer[_HEADER.size:_HEADER.size + size]))
            self.buffer = self.buffer[_HEADER.size + size:]
        return values


class Echo(Actor):  # type: ignore[misc]
    """Answers each message by the way it came."""

    listener: socket.socket | None = None
    lane: _Frames | None = None

    def receiveMessage(self, message: Any, sender: Any) -> ThespianWatch | None:
        if isinstance(message, Listen):
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind("\0" + message.name)
            self.listener.listen(1)
            self.send(sender, "listening")
        elif isinstance(message, WatchMessage):
            if self.lane is None and self.listener is not None \
                    and self.listener.fileno() in message.ready:
                conn, _ = self.listener.accept()
                conn.setblocking(False)
                self.lane = _Frames(conn)
            elif self.lane is not None and self.lane.sock.fileno() in message.ready:
                for value in self.lane.read():
                    self.lane.write(value)
        elif isinstance(message, dict):
            self.send(sender, message)
        if self.lane is not None:
            return ThespianWatch([self.lane.sock.fileno()])
        return ThespianWatch([self.listener.fileno()]) if self.listener is not None else None


class Pinger(Actor):  # type: ignore[misc]
    """Runs the round trips of a :class:`Go`."""

    lane: _Frames | None = None
    go: Go | None = None
    asker: Any = None
    left = 0
    began = 0.0

    def receiveMessage(self, message: Any, sender: Any) -> ThespianWatch | None:
        if isinstance(message, Go):
            self.go, self.asker, self.left = message, sender, message.count
            if message.way == "lane" and self.lane is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect("\0" + message.lane)
                sock.setblocking(False)
                self.lane = _Frames(sock)
            self.began = time.perf_counter()
            self._ping()
        elif isinstance(message, WatchMessage) and self.lane is not None:
            for _ in self.lane.read():
                self._pong()
        elif isinstance(message, dict):
            self._pong()
        return ThespianWatch([self.lane.sock.fileno()]) if self.lane is not None else None

    def _ping(self) -> None:
        assert self.go is not None
        if self.go.way == "lane":
            assert self.lane is not None
            self.lane.write(PAYLOAD)
        else:
            self.send(self.go.echo, PAYLOAD)

    def _pong(self) -> None:
        self.left -= 1
        if self.left > 0:
            self._ping()
        else:
            self.send(self.asker, time.perf_counter() - self.began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    load_before = os.getloadavg()
    per_round: dict[str, list[float]] = {"thespian": [], "lane": []}
    with System() as system:
        endpoint = system.endpoint()
        echo, pinger = endpoint.createActor(Echo), endpoint.createActor(Pinger)
        lane = f"hayata-bench-lane-{os.getpid()}"
        assert endpoint.ask(echo, Listen(lane), 10) == "listening"
        for way in ("thespian", "lane"):  # warm-up
            endpoint.ask(pinger, Go(way, 200, echo, lane), 60)
        for _ in range(args.rounds):
            for way in ("thespian", "lane"):
                took = endpoint.ask(pinger, Go(way, args.round_trips, echo, lane), 120)
                if not isinstance(took, float):
                    raise RuntimeError(f"no answer from the pinger ({took!r})")
                per_round[way].append(took / args.round_trips * 1e6)
    for way, values in per_round.items():
        print(f"{way:9} round trip {min(values):.0f}-{max(values):.0f} us "
              f"(median of rounds {statistics.median(values):.0f})")
    ratio = statistics.median(per_round["lane"]) / statistics.median(per_round["thespian"])
    print(f"lane / thespian: {ratio:.2f}x")
    path = write_json("lane", {
        "environment": environment(), "load_before": load_before,
        "load_after": os.getloadavg(), "round_trips": args.round_trips,
        "round_trip_us": per_round, "ratio_median": ratio})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

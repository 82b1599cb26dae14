# ruff: noqa: E501
"""Measure lease renewal cost and takeover latency in the store (issue 7's fencing rules).

Run from the repository root::

    .venv/bin/python examples/convention/lease_takeover.py [--url postgresql+psycopg://...] [--lease 1.0]

System A creates an invocation with a lease and renews it; then A "dies"
(stops renewing). System B polls ``claim_invocation`` every 50 ms: it gets
``invocation_busy`` until A's lease expires, then a higher fencing token. A's
late write with its old token is refused (``stale_writer``) and records nothing.
Default store: a SQLite file in a temporary directory (removed afterwards).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hayata_py._errors import InvocationBusy, StaleWriter
from hayata_py.store import InvocationRecord, open_store


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default=None)
    ap.add_argument("--lease", type=float, default=1.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{tmp}/lease.db"
        store = open_store(url)
        try:
            inv = f"inv-{uuid.uuid4().hex[:8]}"
            rec = InvocationRecord(inv, f"agent-{inv}", "running", 0, {"n": 0}, None)
            token_a = store.create_invocation(rec, owner="A", lease_seconds=args.lease)
            lat = []
            for _ in range(50):
                t = time.perf_counter()
                store.renew_lease(inv, owner="A", token=token_a, lease_seconds=args.lease)
                lat.append((time.perf_counter() - t) * 1000)
            print(f"{url.split(':')[0]}: renew_lease median {statistics.median(lat):.2f} ms, "
                  f"max {max(lat):.2f} ms")
            died = time.time()  # A's last renewal: A dies now
            busy = 0
            while True:
                try:
                    token_b = store.claim_invocation(inv, owner="B", lease_seconds=args.lease)
                    break
                except InvocationBusy:
                    busy += 1
                    time.sleep(0.05)
            print(f"B got invocation_busy {busy} times, then claimed with token {token_b} "
                  f"(A had {token_a}) {(time.time() - died) * 1000:.0f} ms after A's last renewal "
                  f"(lease {args.lease}s)")
            try:
                store.save_checkpoint(
                    InvocationRecord(inv, rec.agent_id, "running", 1, {"n": "stale"}, None),
                    token=token_a)
                print("STALE WRITE LANDED (bug)")
            except StaleWriter as exc:
                stored = store.get_invocation(inv)
                print(f"A's late write refused: {exc.code}; stored state still {stored.state}")
        finally:
            store.close()


if __name__ == "__main__":
    main()

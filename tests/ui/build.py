"""Build agent-chat-ui for ``make test-ui``: create-agent-chat-app's vite
template, fetched from npm, built once into ``tests/ui/.cache`` (gitignored).

``python -m tests.ui.build`` (or the test's fixture):

1. ``npm pack`` :data:`TEMPLATE` and extract its ``templates/vite`` into
   ``.cache/app``;
2. replace its ``package.json`` by ``tests/ui/app/package.json`` and add
   ``tests/ui/app/package-lock.json`` (so the build is the same every time:
   the template ships no lock), after checking the template's own file
   differs only in the SDK line below;
3. turn on the SDK's ``reconnectOnMount`` in ``src/providers/Stream.tsx``
   (:data:`PATCH`);
4. ``npm ci`` and the template's build (``tsc -b && vite build``).

The template as published pins ``@langchain/langgraph-sdk`` ``^0.0.57``, whose
``useStream`` sends every run with ``on_disconnect: "cancel"`` and cannot
rejoin a run: a page reloaded mid-answer cancels it. Our package.json takes
``0.0.112`` (the last 0.0.x), whose ``reconnectOnMount`` sends
``stream_resumable: true`` and ``on_disconnect: "continue"``, keeps the run id
in ``sessionStorage`` and, after a reload, rejoins the run's stream
(``GET .../runs/{r}/stream`` with ``Last-Event-ID: -1``). Nothing else of the
app changes.

A build is reused while its key (template, package files, patch) is the same.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from tests import node

TEMPLATE = "create-agent-chat-app@0.1.6"
HERE = Path(__file__).resolve().parent
PINNED = HERE / "app"
CACHE = HERE / ".cache"
APP = CACHE / "app"
DIST = APP / "dist"
KEY = DIST / ".hayata-build-key"
SDK = "@langchain/langgraph-sdk"
#: The template's SDK range, which tests/ui/app/package.json replaces.
TEMPLATE_SDK = "^0.0.57"
STREAM_TSX = "src/providers/Stream.tsx"
PATCH = ("    threadId: threadId ?? null,\n",
         "    threadId: threadId ?? null,\n    reconnectOnMount: true,\n")
BUILD_TIMEOUT = 600.0


def key() -> str:
    """What a build depends on: the template, the package files and the patch."""
    digest = hashlib.sha256(TEMPLATE.encode())
    for name in ("package.json", "package-lock.json"):
        digest.update((PINNED / name).read_bytes())
    digest.update(json.dumps(PATCH).encode())
    return digest.hexdigest()


def built() -> bool:
    return (DIST / "index.html").is_file() and KEY.is_file() and KEY.read_text() == key()


def _run(args: list[str], cwd: Path) -> None:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode} in {cwd}:\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def fetch_template(found: node.Node) -> None:
    """:data:`TEMPLATE`'s ``templates/vite`` into :data:`APP` (its
    ``node_modules`` kept), with our package files and :data:`PATCH`."""
    pack = CACHE / "pack"
    shutil.rmtree(pack, ignore_errors=True)
    pack.mkdir(parents=True)
    _run([found.npm, "pack", TEMPLATE, "--silent", "--pack-destination", str(pack)], pack)
    [tgz] = pack.glob("*.tgz")
    prefix = "package/templates/vite/"
    for child in APP.iterdir() if APP.is_dir() else ():
        if child.name != "node_modules":
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    with tarfile.open(tgz) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.startswith(prefix):
                member.name = member.name[len(prefix):]
                archive.extract(member, APP, filter="data")
    shipped = json.loads((APP / "package.json").read_text())
    ours = json.loads((PINNED / "package.json").read_text())
    if shipped["dependencies"].get(SDK) != TEMPLATE_SDK or {
            **shipped, "dependencies": {**shipped["dependencies"], SDK: None}} != {
            **ours, "dependencies": {**ours["dependencies"], SDK: None}}:
        raise RuntimeError(f"{TEMPLATE}'s templates/vite/package.json is not the one "
                           f"tests/ui/app/package.json was made from (with {SDK} "
                           f"{TEMPLATE_SDK}): remake tests/ui/app from it")
    for name in ("package.json", "package-lock.json"):
        shutil.copy(PINNED / name, APP / name)
    stream = APP / STREAM_TSX
    source = stream.read_text()
    if source.count(PATCH[0]) != 1:
        raise RuntimeError(f"{STREAM_TSX} of {TEMPLATE} has no single line {PATCH[0]!r} "
                           f"to add reconnectOnMount after: update tests/ui/build.py's PATCH")
    stream.write_text(source.replace(PATCH[0], PATCH[1]))


def build(found: node.Node) -> Path:
    """The built app's folder (``index.html`` and ``assets/``), built if needed
    (runs at once take turns)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with node.locked(CACHE / ".build.lock"):
        return _build(found)


def _build(found: node.Node) -> Path:
    if built():
        print("agent-chat-ui: cached build", file=sys.stderr)
        return DIST
    started = time.monotonic()
    APP.mkdir(parents=True, exist_ok=True)
    fetch_template(found)
    fetched = time.monotonic()
    took = node.npm_ci(APP, found)
    installed = time.monotonic()
    bin_ = APP / "node_modules" / ".bin"
    _run([str(bin_ / "tsc"), "-b"], APP)
    _run([str(bin_ / "vite"), "build", "--logLevel", "warn"], APP)
    KEY.write_text(key())
    print(f"agent-chat-ui: template {fetched - started:.1f}s, npm ci "
          f"{'cached' if took is None else f'{took:.1f}s'}, build "
          f"{time.monotonic() - installed:.1f}s", file=sys.stderr)
    return DIST


def main() -> int:
    found = node.ensure()
    if found is None:
        print(f"error: {node.MISSING}", file=sys.stderr)
        return 1
    print(build(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

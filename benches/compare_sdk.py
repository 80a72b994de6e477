#!/usr/bin/env python3
"""Mnemo against the Anthropic Python SDK's filesystem memory tool, same workloads, same machine.

Times, one call at a time,

  (a) the SDK's `BetaLocalFilesystemMemoryTool` (anthropic==2.14.0): `tool.call(input)`, as its
      tool runner calls it, on a base directory under --workdir;
  (b) Mnemo in the same Python process, through its Python package (`pip install ./python`):
      `MnemoMemoryToolServer(client=MnemoClient(...), profile="python-sdk").handle(input)`, with
      the default durability (fsync) — what a Python agent that embeds Mnemo pays;
  (c) one long-running `mnemo tool --profile python-sdk` process (same durability), one JSON line
      written to its stdin, one `tool_result` line read back and decoded; the time is the whole
      round trip as a host in another language would see it. This is the default path: the
      process answers through the server it started for the store (on its local socket);
  (d) Mnemo's Python package when a server already holds the store: `MnemoClient(db_path)` finds
      that server and sends every call to it (a copy of the store, held by a `mnemo tool`
      process of its own that is not timed);

on these workloads (the three sides' calls alternate, so noise from other work on the machine
falls on all of them alike; the first WARMUP calls of each workload are not counted):

  create          a new ~160-byte file per call
  view_file       a 20-line note (~1 KiB)
  str_replace     `status: open` <-> `status: done` in a 20-line note
  insert          a line after line 1 of a log file (reset, untimed, every 100 inserts)
  view_dir_1k     a directory of 1,000 files in 10 subdirectories (two levels)
  rename_dir_10k  a directory of 10,000 files, back and forth
  delete_dir_10k  a directory of 10,000 files (one prebuilt directory per call)

The large directories are built before timing: on the SDK side by writing the files directly (the
same layout the SDK's `create` makes, without its per-file fsync), on the Mnemo side through a
separate `mnemo tool --durability buffered --no-start` process on the same store (which opens it
itself, so nothing is left to a server when it exits), closed before the timed fsync process
starts; the in-process side gets a copy of that store (a store is open in one
process at a time).

Prints a table of medians (and 10th/90th percentiles) and the ratios Mnemo/SDK. Without the
`mnemo` package importable, the in-process column is left out.

Usage: compare_sdk.py --mnemo PATH [--workdir DIR] [--durability fsync|flush|buffered]
                      [--calls N] [--dir-calls N] [--deletes N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple, Union

import anthropic
from anthropic.lib.tools import ToolError
from anthropic.tools.memory import BetaLocalFilesystemMemoryTool

try:
    import mnemo as mnemo_py
except ImportError:  # the package is optional here: the pipe column still runs
    mnemo_py = None

WARMUP = 5
CREATE_TEXT = (
    "# Preference\nThe user prefers concise answers, British spelling and code samples in Rust.\n"
    "Confirmed in the session about the memory store.\n"
)
SMALL_FILE = "a small memory\n"
INSERT_LOG = "# Log\n"
INSERT_RESET_EVERY = 100


def note() -> str:
    lines = ["# Project notes", "status: open"]
    lines += [f"- line {i}: the user prefers concise answers and short code samples" for i in range(3, 21)]
    return "\n".join(lines) + "\n"


def big_dir_files(top: str, files: int) -> List[str]:
    """`/memories/<top>/dNNNN/fNNNNNN.txt`, 100 files per subdirectory (as the Rust benches)."""
    return [f"/memories/{top}/d{i // 100:04}/f{i:06}.txt" for i in range(files)]


class Timed:
    """A side of the comparison: `call` runs one tool call, `timed` runs it and returns its ns."""

    def call(self, tool_input: dict) -> object:
        raise NotImplementedError

    def timed(self, tool_input: dict) -> int:
        start = time.perf_counter_ns()
        self.call(tool_input)
        return time.perf_counter_ns() - start


class Sdk(Timed):
    """The SDK's local-filesystem memory tool in `base`."""

    def __init__(self, base: Path) -> None:
        self.tool = BetaLocalFilesystemMemoryTool(base_path=str(base))
        self.root = base / "memories"

    def call(self, tool_input: dict) -> str:
        try:
            return self.tool.call(tool_input)
        except ToolError as exc:
            raise RuntimeError(f"SDK error for {tool_input}: {exc}") from None

    def write_files(self, paths: Sequence[str], text: str) -> None:
        """Writes files directly (the layout the SDK's `create` makes), without a tool call."""
        for path in paths:
            full = self.root / path[len("/memories/"):]
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_text(text, encoding="utf-8")


class Mnemo(Timed):
    """One long-running `mnemo tool --profile python-sdk` process."""

    def __init__(self, mnemo: str, db: Path, durability: str, stderr: Path, alone: bool = False) -> None:
        self._stderr = open(stderr, "ab")
        # `alone`: `--no-start`, the store opened in this process and closed, whole, at its exit.
        extra = ["--no-start"] if alone else []
        self.proc = subprocess.Popen(
            [mnemo, "tool", "--profile", "python-sdk", "--durability", durability, "--db", str(db)] + extra,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        raw = self.proc.stdout.readline()
        if not raw:
            raise RuntimeError(f"mnemo tool exited (status {self.proc.poll()})")
        reply = json.loads(raw)
        if reply.get("is_error"):
            raise RuntimeError(f"mnemo error: {reply.get('content')}")
        return reply

    def call(self, tool_input: dict) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(tool_input).encode("utf-8") + b"\n")
        self.proc.stdin.flush()
        return self._read()

    def pipeline(self, inputs: Sequence[dict]) -> None:
        """Sends every input without waiting (a thread writes while this one reads the replies)."""

        def write() -> None:
            assert self.proc.stdin is not None
            for tool_input in inputs:
                self.proc.stdin.write(json.dumps(tool_input).encode("utf-8") + b"\n")
            self.proc.stdin.flush()

        writer = threading.Thread(target=write)
        writer.start()
        for _ in inputs:
            self._read()
        writer.join()

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        if self.proc.wait(timeout=120) != 0:
            raise RuntimeError(f"mnemo tool exited with status {self.proc.returncode}")
        self._stderr.close()


class MnemoInProcess(Timed):
    """Mnemo's Python package in this process: one client and one python-sdk-profile server."""

    def __init__(self, db: Path, durability: str) -> None:
        assert mnemo_py is not None
        self.db = db
        self.client = mnemo_py.MnemoClient(db_path=str(db), agent_id="bench", durability=durability)
        self.server = mnemo_py.MnemoMemoryToolServer(client=self.client, profile="python-sdk")

    def call(self, tool_input: dict) -> dict:
        reply = self.server.handle(tool_input)
        if reply.get("is_error"):
            raise RuntimeError(f"mnemo error ({self.db.name}): {reply.get('content')}")
        return reply

    def close(self) -> None:
        self.client.close()


Side = Union[Sdk, Mnemo, MnemoInProcess]  # MnemoInProcess also as a client of a server


class Workload:
    """A name, how many calls to count, and a function that makes (and times) call i on a side."""

    def __init__(self, name: str, calls: int, step: Callable[[Side, int], int], warmup: int = WARMUP) -> None:
        self.name = name
        self.calls = calls
        self.step = step
        self.warmup = warmup


def workloads(calls: int, dir_calls: int, deletes: int) -> List[Workload]:
    def create(side: Side, i: int) -> int:
        return side.timed({"command": "create", "path": f"/memories/bench/created/c{i}.md", "file_text": CREATE_TEXT})

    def view_file(side: Side, _i: int) -> int:
        return side.timed({"command": "view", "path": "/memories/bench/view.md"})

    def str_replace(side: Side, i: int) -> int:
        old, new = ("status: open", "status: done") if i % 2 == 0 else ("status: done", "status: open")
        return side.timed({"command": "str_replace", "path": "/memories/bench/edit.md", "old_str": old, "new_str": new})

    def insert(side: Side, i: int) -> int:
        if i % INSERT_RESET_EVERY == INSERT_RESET_EVERY - 1:
            side.call({"command": "delete", "path": "/memories/bench/insert.md"})
            side.call({"command": "create", "path": "/memories/bench/insert.md", "file_text": INSERT_LOG})
        return side.timed(
            {
                "command": "insert",
                "path": "/memories/bench/insert.md",
                "insert_line": 1,
                "insert_text": f"- entry {i}: the agent noted a decision\n",
            }
        )

    def view_dir(side: Side, _i: int) -> int:
        return side.timed({"command": "view", "path": "/memories/v1k"})

    def rename_dir(side: Side, i: int) -> int:
        old, new = ("/memories/r10k", "/memories/r10k-moved") if i % 2 == 0 else ("/memories/r10k-moved", "/memories/r10k")
        return side.timed({"command": "rename", "old_path": old, "new_path": new})

    def delete_dir(side: Side, i: int) -> int:
        return side.timed({"command": "delete", "path": f"/memories/del{i}"})

    return [
        Workload("create", calls, create),
        Workload("view_file", calls, view_file),
        Workload("str_replace", calls, str_replace),
        Workload("insert", calls, insert),
        Workload("view_dir_1k", dir_calls, view_dir),
        Workload("rename_dir_10k", dir_calls, rename_dir),
        Workload("delete_dir_10k", deletes, delete_dir, warmup=0),
    ]


def seed_inputs() -> List[dict]:
    return [
        {"command": "create", "path": "/memories/bench/view.md", "file_text": note()},
        {"command": "create", "path": "/memories/bench/edit.md", "file_text": note()},
        {"command": "create", "path": "/memories/bench/insert.md", "file_text": INSERT_LOG},
    ]


def big_inputs(deletes: int) -> List[Tuple[str, int]]:
    return [("v1k", 1_000), ("r10k", 10_000)] + [(f"del{k}", 10_000) for k in range(deletes)]


def fmt_us(ns: float) -> str:
    us = ns / 1e3
    if us >= 10_000:
        return f"{us / 1e3:,.1f} ms"
    if us >= 1_000:
        return f"{us / 1e3:,.2f} ms"
    return f"{us:,.0f} µs"


def pct(values: Sequence[int], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def mnemo_version(mnemo: str) -> str:
    done = subprocess.run([mnemo, "--version"], capture_output=True, text=True)
    return done.stdout.strip() or "?"


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mnemo", required=True, help="path to the mnemo binary (release build)")
    parser.add_argument("--workdir", default=None, help="where the SDK's files and the store go (default: a temp dir)")
    parser.add_argument("--durability", default="fsync", choices=("fsync", "flush", "buffered"))
    parser.add_argument("--calls", type=int, default=400, help="timed calls per small workload")
    parser.add_argument("--dir-calls", type=int, default=40, help="timed calls of view_dir_1k and rename_dir_10k")
    parser.add_argument("--deletes", type=int, default=10, help="timed deletes of a 10,000-file directory")
    args = parser.parse_args(argv)

    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="compare-sdk-", dir=args.workdir))
    started = time.monotonic()
    try:
        sdk = Sdk(work / "sdk")
        db = work / "store.mnemo.db"
        stderr = work / "mnemo-tool.stderr"

        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}")
        print(f"python {platform.python_version()}, anthropic {anthropic.__version__}, {mnemo_version(args.mnemo)}")
        print(f"workdir: {work}")

        t0 = time.monotonic()
        for top, files in big_inputs(args.deletes):
            sdk.write_files(big_dir_files(top, files), SMALL_FILE)
        for tool_input in seed_inputs():
            sdk.call(tool_input)
        t1 = time.monotonic()
        builder = Mnemo(args.mnemo, db, "buffered", stderr, alone=True)
        for top, files in big_inputs(args.deletes):
            builder.pipeline(
                [{"command": "create", "path": p, "file_text": SMALL_FILE} for p in big_dir_files(top, files)]
            )
        builder.pipeline(seed_inputs())
        builder.close()
        t2 = time.monotonic()
        print(f"fixtures: SDK {t1 - t0:.1f} s, Mnemo {t2 - t1:.1f} s (not timed)")

        sides: List[Tuple[str, Side]] = [("SDK", sdk)]
        if mnemo_py is not None:
            db_py = work / "store-in-process.mnemo.db"
            shutil.copytree(db, db_py)
            sides.append(("Mnemo in-process", MnemoInProcess(db_py, args.durability)))
        else:
            print("the mnemo Python package is not importable: no in-process column", file=sys.stderr)
        sides.append(("Mnemo pipe", Mnemo(args.mnemo, db, args.durability, stderr)))
        holder = None
        if mnemo_py is not None:
            db_served = work / "store-served.mnemo.db"
            shutil.copytree(db, db_served)
            holder = Mnemo(args.mnemo, db_served, args.durability, stderr)
            holder.call({"command": "view", "path": "/memories/bench/view.md"})
            sides.append(("Mnemo Py+server", MnemoInProcess(db_served, args.durability)))
        results: Dict[str, List[List[int]]] = {}
        for load in workloads(args.calls, args.dir_calls, args.deletes):
            times: List[List[int]] = [[] for _ in sides]
            for i in range(load.warmup + load.calls):
                for k, (_, side) in enumerate(sides):
                    elapsed = load.step(side, i)
                    if i >= load.warmup:
                        times[k].append(elapsed)
            results[load.name] = times
            print(f"  {load.name}: done", file=sys.stderr)
        for _, side in sides[1:]:
            side.close()
        if holder is not None:
            holder.close()

        print()
        print(f"Mnemo durability: {args.durability}; times are medians [p10 – p90] per call, as seen from Python")
        header = f"{'workload':<16} {'n':>4}"
        for name, _ in sides:
            header += f"  {name:>17} {'[p10 – p90]':>23}"
        for name, _ in sides[1:]:
            header += f"  {name + '/SDK':>20}"
        print(header)
        print("-" * len(header))
        for name, times in results.items():
            line = f"{name:<16} {len(times[0]):>4}"
            for ns in times:
                rng = f"[{fmt_us(pct(ns, 0.1))} – {fmt_us(pct(ns, 0.9))}]"
                line += f"  {fmt_us(statistics.median(ns)):>17} {rng:>23}"
            sdk_med = statistics.median(times[0])
            for ns in times[1:]:
                line += f"  {statistics.median(ns) / sdk_med:>19.2f}x"
            print(line)
        print(f"\ntotal wall time {time.monotonic() - started:.0f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

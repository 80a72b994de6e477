#!/usr/bin/env python3
"""Differential test: Mnemo's `python-sdk` profile against the Anthropic Python SDK.

For each seed, a seeded random sequence of memory-tool inputs is fed to

  (a) the SDK's `BetaLocalFilesystemMemoryTool` (anthropic==2.14.0), called the way the SDK's tool
      runner calls it: `tool.call(input)`; a `ToolError` becomes `content` with `is_error` true,
      anything else the runner's generic `repr` rendering;
  (b) one long-running `mnemo tool --profile python-sdk` process, one JSON line in, one line out;

and every `tool_result` (content and `is_error`) is compared, then the final trees (every regular
file under the SDK's `memories/` directory against `mnemo ls` / `mnemo cat`, byte for byte).

What is deliberately not generated (documented in docs/agent-builders.md's Profiles section as
differences, or inputs on which the SDK only fails with a generic exception):
  * traversal spellings (`..`, `%2e%2e`, `/memoriesX` prefixes, `.` segments);
  * `create` or `rename` involving a path whose parent chain runs through a regular file
    (the SDK raises `NotADirectoryError`); `view`, `str_replace`, `insert` and `delete` of such
    paths *are* generated, because there the SDK answers with an ordinary `ToolError`;
  * renaming a directory into its own subtree onto a destination that does not exist (`OSError`
    EINVAL); onto an existing destination the SDK answers `The destination ... already exists`,
    so that case is generated.
The SDK leaves empty directories on disk where Mnemo's directories are implicit (gone when their
last file goes); after every SDK step the harness removes empty directories under `memories/`
bottom-up, which is exactly the store's rule.

A seed stops at its first divergence (the two states may differ afterwards), which is printed
with the seed, the step, the input, both results and a shrunk reproducing input sequence; the
summary's mismatch count is the number of diverging seeds.

Usage: sdk_differential.py --mnemo PATH [--steps N] [--seed S] [--seeds K]
Exit status: 0 when every result and every final tree matched, 1 otherwise, 2 on a harness error.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import anthropic
from anthropic.lib.tools import ToolError

# The runner's own renderers (pinned SDK version): a ToolError's message verbatim, anything else
# its `repr`; a success string as is. Using them keeps the reference exactly what the runner sends.
from anthropic.lib.tools._tool_dispatch import tool_error_content, tool_result_content
from anthropic.tools.memory import BetaLocalFilesystemMemoryTool

ROOT = "/memories"
SDK_VERSION = "2.14.0"
LISTING_HEADER_PREFIX = "Here're the files and directories up to 2 levels deep in "
NORMALISED_DIR_SIZE = "<dir-size>"
STEP_TIMEOUT_SECONDS = 30.0
MAX_CANDIDATES_PER_STEP = 200
MINIMIZE_BUDGET_SECONDS = 180.0

# Path alphabet: small, so that paths collide. The rare names exercise the listing rules
# (hidden names, `node_modules`, code-point order, non-ASCII) and files named like directories.
DIR_NAMES = ("a", "b", "c", "notes")
RARE_DIR_NAMES = ("node_modules", ".hid", "Ü", "B")
FILE_NAMES = ("x.txt", "y.md")
RARE_FILE_NAMES = (
    "z.txt", "é.md", "e\u0301.md", "10.txt", "9.txt", "a-b.txt", "A.md", ".h.txt", "sp ace.md", "😀.md",
    "a", "notes",
)
# Mnemo refuses bidi controls and zero-width (format) characters in names in both profiles, a
# deliberate difference from the SDK (see docs/agent-builders.md), so the alphabet holds none.
assert not any(
    unicodedata.category(c) in ("Cf", "Zl", "Zp")
    for name in DIR_NAMES + RARE_DIR_NAMES + FILE_NAMES + RARE_FILE_NAMES
    for c in name
)

# Line vocabulary for file contents and replacement texts: duplicates on purpose.
LINES = (
    "alpha",
    "beta",
    "alpha",
    "gamma delta",
    "",
    "  indented",
    "tab\tseparated\t",
    "`tick` and ``double``",
    "$& $1 $$ \\1 \\n",
    "naïve café ☕",
    "emoji 😀 and 𝄞",
    "x",
    "TODO: x",
    "carriage\r",
    "sep\u2028inside",
    "ff\x0cvt\x0bnel\x85",
    "nul\x00esc\x1b del\x7f",
    "end.",
)
# Exact UTF-8 sizes around the size-column boundaries (B/K, integral K, round-half-even at .x5).
SIZED_TEXT_BYTES = (999, 1023, 1024, 1025, 1280, 1536, 2047, 2304, 2816, 3328, 4096, 5000, 10240, 10291)
MISSING_STRINGS = ("not-present-anywhere", "ALPHA", "zz\nzz", "é\r\n", "\t\t\t")

COMMAND_WEIGHTS = (
    ("view", 24),
    ("create", 22),
    ("str_replace", 20),
    ("insert", 14),
    ("delete", 8),
    ("rename", 12),
)


@dataclass(frozen=True)
class Result:
    """One tool_result as the model sees it: the content string and the error flag."""

    content: str
    is_error: bool


@dataclass
class Snapshot:
    """The SDK's tree after a step: files (relative path -> text) and directories (relative)."""

    files: Dict[str, str]
    dirs: List[str]

    def is_file(self, rel: str) -> bool:
        """True when `rel` names a regular file."""
        return rel in self.files

    def is_dir(self, rel: str) -> bool:
        """True when `rel` names a directory (the root `""` included)."""
        return rel == "" or rel in self.dirs

    def has_file_ancestor(self, rel: str) -> bool:
        """True when a proper ancestor of `rel` is a regular file."""
        parts = rel.split("/")
        return any("/".join(parts[:i]) in self.files for i in range(1, len(parts)))


@dataclass
class Divergence:
    """A difference between the SDK and Mnemo: at a step (`step` >= 0) or in the final tree."""

    kind: str  # "result", "tree", "sdk-generic" or "mnemo-failure"
    step: int
    detail: str


@dataclass
class SeedReport:
    """The outcome of one seed's run."""

    seed: int
    steps: int = 0
    skipped: int = 0
    tally: Dict[str, int] = field(default_factory=dict)
    divergence: Optional[Divergence] = None
    inputs: List[dict] = field(default_factory=list)


def normalise_content(result: Result) -> str:
    """The content with the size column of directory lines replaced by a placeholder.

    The SDK prints a directory's OS `st_size` (ext4: 4096 -> `4K`, but a directory that once held
    many entries grows to e.g. `12K`, and tmpfs/overlay/btrfs report other values), while Mnemo
    always prints `4K`. Only directory lines of a successful listing are touched: the first data
    line (the viewed directory itself) and every line whose path ends in `/`. File lines, the
    header and every other byte must still match exactly.
    """
    if result.is_error or not result.content.startswith(LISTING_HEADER_PREFIX):
        return result.content
    header, *rows = result.content.split("\n")
    normalised = [header]
    for index, row in enumerate(rows):
        _size, tab, path = row.partition("\t")
        if tab and (index == 0 or path.endswith("/")):
            row = f"{NORMALISED_DIR_SIZE}\t{path}"
        normalised.append(row)
    return "\n".join(normalised)


class SdkSide:
    """The reference: the SDK's local-filesystem memory tool in a temporary base directory."""

    def __init__(self, base: Path) -> None:
        self.tool = BetaLocalFilesystemMemoryTool(base_path=str(base))
        self.root = base / "memories"

    def call(self, tool_input: dict) -> Tuple[Result, bool]:
        """Run one input as the tool runner does; returns the result and whether it was generic.

        A `ToolError` is the message verbatim; any other exception is the runner's generic
        rendering (its `repr`), flagged so the caller can tell the generator produced an input
        outside the compared domain.
        """
        generic = False
        try:
            result = Result(tool_result_content(self.tool.call(tool_input)), False)
        except ToolError as exc:
            result = Result(tool_error_content(exc), True)
        except Exception as exc:  # noqa: BLE001 - the runner catches everything, so do we
            result = Result(tool_error_content(exc), True)
            generic = True
        self.prune_empty_dirs()
        return result, generic

    def prune_empty_dirs(self) -> None:
        """Remove directories under the root that have become empty, bottom-up (the store's rule)."""
        for dirpath, _dirnames, _filenames in os.walk(self.root, topdown=False):
            if Path(dirpath) != self.root and not os.listdir(dirpath):
                os.rmdir(dirpath)

    def snapshot(self) -> Snapshot:
        """The current tree, sorted so that generation does not depend on directory order."""
        files: Dict[str, str] = {}
        dirs: List[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            base = Path(dirpath).relative_to(self.root).as_posix()
            prefix = "" if base == "." else base + "/"
            dirs.extend(prefix + name for name in dirnames)
            for name in filenames:
                files[prefix + name] = (Path(dirpath) / name).read_bytes().decode("utf-8")
        return Snapshot(dict(sorted(files.items())), sorted(dirs))

    def file_bytes(self) -> Dict[str, bytes]:
        """Every regular file under the root as `/memories/<rel>` -> exact bytes."""
        out: Dict[str, bytes] = {}
        for dirpath, _dirnames, filenames in os.walk(self.root):
            for name in filenames:
                full = Path(dirpath) / name
                out[f"{ROOT}/{full.relative_to(self.root).as_posix()}"] = full.read_bytes()
        return out


class MnemoSide:
    """One long-running `mnemo tool --profile python-sdk` process on a fresh store.

    `ascii_json` chooses how inputs are encoded: `\\uXXXX` escapes (surrogate pairs for astral
    characters) or raw UTF-8; seeds alternate so that both parsing paths are exercised.
    """

    def __init__(self, mnemo: str, workdir: Path, ascii_json: bool) -> None:
        self.mnemo = mnemo
        self.ascii_json = ascii_json
        self.db = workdir / "store.mnemo.db"
        self.stderr_path = workdir / "mnemo-tool.stderr"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [mnemo, "tool", "--profile", "python-sdk", "--durability", "buffered", "--db", str(self.db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        self._lines: "queue.Queue[Optional[bytes]]" = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        """Move stdout lines into a queue so that a read can time out instead of hanging."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def call(self, tool_input: dict) -> Result:
        """Write one JSON line, read one `tool_result` line; raises RuntimeError on a bad reply."""
        assert self.proc.stdin is not None
        line = json.dumps(tool_input, ensure_ascii=self.ascii_json) + "\n"
        self.proc.stdin.write(line.encode("utf-8"))
        self.proc.stdin.flush()
        try:
            raw = self._lines.get(timeout=STEP_TIMEOUT_SECONDS)
        except queue.Empty:
            raise RuntimeError(f"no reply within {STEP_TIMEOUT_SECONDS}s") from None
        if raw is None:
            raise RuntimeError(f"mnemo tool exited (status {self.proc.poll()}): {self.stderr_tail()}")
        reply = json.loads(raw.decode("utf-8"))
        if reply.get("type") != "tool_result" or not isinstance(reply.get("content"), str):
            raise RuntimeError(f"not a tool_result with string content: {raw!r}")
        if "is_error" in reply and reply["is_error"] is not True:
            raise RuntimeError(f"is_error must be absent on success, got: {raw!r}")
        return Result(reply["content"], "is_error" in reply)

    def close(self) -> None:
        """Close stdin and wait for the process to exit (it releases the store)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=STEP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()

    def stderr_tail(self) -> str:
        """The last part of the tool process's stderr, for error messages."""
        self._stderr.flush()
        return self.stderr_path.read_bytes()[-2000:].decode("utf-8", "replace")

    def file_bytes(self) -> Dict[str, bytes]:
        """Every file in the store (after `close`), via `mnemo ls` and `mnemo cat`."""
        if not self.db.exists():
            return {}
        listing = self._run(["ls", "--db", str(self.db)]).decode("utf-8")
        out: Dict[str, bytes] = {}
        for row in listing.splitlines():
            match = re.match(r"^\s*\S+  (/.*)$", row)
            if not match:
                raise RuntimeError(f"unexpected `mnemo ls` line: {row!r}")
            out[match.group(1)] = self._run(["cat", match.group(1), "--db", str(self.db)])
        return out

    def _run(self, args: Sequence[str]) -> bytes:
        """Run a read-only mnemo subcommand and return its stdout."""
        done = subprocess.run([self.mnemo, *args], capture_output=True, timeout=STEP_TIMEOUT_SECONDS)
        if done.returncode != 0:
            raise RuntimeError(f"mnemo {' '.join(args)} failed: {done.stderr.decode('utf-8', 'replace')}")
        return done.stdout


class InputGenerator:
    """Draws memory-tool inputs from a seeded RNG, steered by the SDK's current tree."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    # -- paths -------------------------------------------------------------------------------

    def fresh_rel(self, leaf_kind: str) -> str:
        """A random relative path, depth 1-3, from the small alphabet."""
        depth = self.rng.choices((1, 2, 3), weights=(40, 40, 20))[0]
        parts = [self.dir_name() for _ in range(depth - 1)]
        parts.append(self.dir_name() if leaf_kind == "dir" else self.file_name())
        return "/".join(parts)

    def dir_name(self) -> str:
        """A directory name, usually from the common set."""
        return self.rng.choice(RARE_DIR_NAMES if self.rng.random() < 0.08 else DIR_NAMES)

    def file_name(self) -> str:
        """A file name, usually from the common set."""
        return self.rng.choice(RARE_FILE_NAMES if self.rng.random() < 0.12 else FILE_NAMES)

    def pick_rel(self, snap: Snapshot, kind: str, p_existing: float = 0.7) -> str:
        """A relative path of `kind` ("file" or "dir"): an existing one or a fresh one."""
        pool = list(snap.files) if kind == "file" else snap.dirs
        if pool and self.rng.random() < p_existing:
            return self.rng.choice(pool)
        return self.fresh_rel(kind)

    def under_file_rel(self, snap: Snapshot) -> Optional[str]:
        """A path below an existing regular file, or None when there is no file."""
        if not snap.files:
            return None
        return self.rng.choice(list(snap.files)) + "/" + self.file_name()

    def spell(self, rel: str) -> str:
        """The memory path for `rel`, with occasional harmless variants (extra or trailing `/`)."""
        if rel == "":
            return self.rng.choice((ROOT, ROOT, ROOT + "/", ROOT + "//"))
        roll = self.rng.random()
        if roll < 0.06:
            return f"{ROOT}/{rel}/"
        if roll < 0.10:
            return f"{ROOT}//{rel}"
        if roll < 0.13 and "/" in rel:
            return f"{ROOT}/{rel.replace('/', '//', 1)}"
        return f"{ROOT}/{rel}"

    # -- texts -------------------------------------------------------------------------------

    def text(self) -> str:
        """File content: vocabulary lines with LF, CRLF or CR, optional trailing newline(s)."""
        roll = self.rng.random()
        if roll < 0.05:
            return ""
        if roll < 0.08:  # large enough for the K size formats (1.0K, 2.5K, 4K ...)
            line = self.rng.choice(LINES[:4]) * self.rng.randint(1, 6)
            return "\n".join([line] * self.rng.randint(60, 400))
        if roll < 0.11:
            return self.sized_text(self.rng.choice(SIZED_TEXT_BYTES))
        count = self.rng.randint(1, 9)
        sep = self.rng.choices(("\n", "\r\n", "\r"), weights=(80, 15, 5))[0]
        body = sep.join(self.rng.choice(LINES) for _ in range(count))
        return body + self.rng.choices(("", "\n", "\r\n", "\n\n"), weights=(35, 45, 10, 10))[0]

    def sized_text(self, size: int) -> str:
        """Text of exactly `size` UTF-8 bytes: vocabulary lines, padded with ASCII."""
        out = ""
        while True:
            line = self.rng.choice(LINES) + "\n"
            if len((out + line).encode("utf-8")) > size:
                break
            out += line
        return out + "p" * (size - len(out.encode("utf-8")))

    def fragment(self) -> str:
        """A replacement or insertion text: one line, several, empty, with or without newlines."""
        roll = self.rng.random()
        if roll < 0.10:
            return ""
        if roll < 0.55:
            core = self.rng.choice(LINES)
        else:
            sep = self.rng.choice(("\n", "\n", "\r\n"))
            core = sep.join(self.rng.choice(LINES) for _ in range(self.rng.randint(2, 4)))
        return core + self.rng.choices(("", "\n", "\n\n", "\r\n"), weights=(50, 30, 10, 10))[0]

    def old_str(self, content: str) -> str:
        """An `old_str` for `content`: a slice, a line, two lines, the whole text, missing or empty."""
        roll = self.rng.random()
        if not content or roll < 0.12:
            return self.rng.choice(MISSING_STRINGS + LINES[:6])
        if roll < 0.16:
            return ""
        lines = content.split("\n")
        if roll < 0.50:
            start = self.rng.randrange(len(content))
            return content[start:start + self.rng.randint(1, 15)]
        if roll < 0.75:
            return self.rng.choice(lines)
        if roll < 0.92 and len(lines) > 1:
            index = self.rng.randrange(len(lines) - 1)
            return lines[index] + "\n" + lines[index + 1]
        return content

    def view_range(self, content: str) -> Tuple[bool, object]:
        """(present, value) for `view_range`: ranges in and past the file, negatives, odd shapes."""
        roll = self.rng.random()
        if roll < 0.40:
            return False, None
        n = len(content.split("\n"))
        if roll < 0.44:
            return True, None
        if roll < 0.48:
            return True, []
        if roll < 0.52:
            return True, [self.rng.randint(-1, n + 1)]
        if roll < 0.56:
            return True, [1, n, n]
        start = self.rng.randint(-2, n + 3)
        end = -1 if self.rng.random() < 0.3 else self.rng.randint(-4, n + 4)
        return True, [start, end]

    def insert_line(self, content: str) -> int:
        """An `insert_line`: usually within [0, N] (N as the SDK counts lines), sometimes outside."""
        lines = content.split("\n")
        if lines[-1] == "":
            lines.pop()
        n = len(lines)
        if self.rng.random() < 0.78:
            return self.rng.randint(0, n)
        return self.rng.choice((-3, -1, n + 1, n + 7))

    # -- commands ----------------------------------------------------------------------------

    def candidate(self, snap: Snapshot) -> Optional[dict]:
        """One candidate input, or None when it falls in a skipped (documented) domain."""
        names = [name for name, _ in COMMAND_WEIGHTS]
        command = self.rng.choices(names, weights=[weight for _, weight in COMMAND_WEIGHTS])[0]
        return getattr(self, f"gen_{command}")(snap)

    def target_file(self, snap: Snapshot) -> str:
        """A target for a file command: mostly an existing file, else a dir, missing or under-file path."""
        roll = self.rng.random()
        if roll < 0.80 and snap.files:
            return self.rng.choice(list(snap.files))
        if roll < 0.88 and snap.dirs:
            return self.rng.choice(snap.dirs)
        if roll < 0.93:
            return self.under_file_rel(snap) or self.fresh_rel("file")
        return self.fresh_rel("file")

    def gen_view(self, snap: Snapshot) -> Optional[dict]:
        """A `view` of the root, a directory or a file (with optional `view_range`)."""
        roll = self.rng.random()
        if roll < 0.15:
            rel = ""
        elif roll < 0.45:
            rel = self.pick_rel(snap, "dir", 0.85)
        else:
            rel = self.target_file(snap)
        tool_input: dict = {"command": "view", "path": self.spell(rel)}
        present, value = self.view_range(snap.files.get(rel, "x\ny"))
        if present:
            tool_input["view_range"] = value
        return tool_input

    def gen_create(self, snap: Snapshot) -> Optional[dict]:
        """A `create`: a fresh path, an existing file or directory, or the root."""
        roll = self.rng.random()
        if roll < 0.02:
            rel = ""
        elif roll < 0.10 and snap.dirs:
            rel = self.rng.choice(snap.dirs)
        else:
            rel = self.pick_rel(snap, "file", 0.2)
        if snap.has_file_ancestor(rel):
            return None  # SDK: NotADirectoryError (generic) - a documented difference
        return {"command": "create", "path": self.spell(rel), "file_text": self.text()}

    def gen_str_replace(self, snap: Snapshot) -> Optional[dict]:
        """A `str_replace`: unique, missing, repeated, multi-line or empty `old_str`."""
        rel = self.target_file(snap)
        return {
            "command": "str_replace",
            "path": self.spell(rel),
            "old_str": self.old_str(snap.files.get(rel, "")),
            "new_str": self.fragment(),
        }

    def gen_insert(self, snap: Snapshot) -> Optional[dict]:
        """An `insert` at a valid or out-of-range line."""
        rel = self.target_file(snap)
        return {
            "command": "insert",
            "path": self.spell(rel),
            "insert_line": self.insert_line(snap.files.get(rel, "")),
            "insert_text": self.fragment(),
        }

    def gen_delete(self, snap: Snapshot) -> Optional[dict]:
        """A `delete` of a file, a directory, a missing or under-file path, or the root."""
        roll = self.rng.random()
        if roll < 0.03:
            rel = ""
        elif roll < 0.45:
            rel = self.pick_rel(snap, "file", 0.9)
        elif roll < 0.80:
            rel = self.pick_rel(snap, "dir", 0.9)
        elif roll < 0.85:
            rel = self.under_file_rel(snap) or self.fresh_rel("file")
        else:
            rel = self.fresh_rel("file")
        return {"command": "delete", "path": self.spell(rel)}

    def gen_rename(self, snap: Snapshot) -> Optional[dict]:
        """A `rename` of a file or directory onto a fresh or existing path; missing sources too."""
        roll = self.rng.random()
        if roll < 0.03:
            old = ""
        elif roll < 0.50:
            old = self.pick_rel(snap, "file", 0.9)
        elif roll < 0.85:
            old = self.pick_rel(snap, "dir", 0.9)
        else:
            old = self.fresh_rel(self.rng.choice(("file", "dir")))
        roll = self.rng.random()
        if roll < 0.03:
            new = ""
        elif roll < 0.08:
            new = old
        elif roll < 0.13 and old:
            new = f"{old}/{self.rng.choice(DIR_NAMES + FILE_NAMES)}"
        elif roll < 0.35:
            new = self.pick_rel(snap, self.rng.choice(("file", "dir")), 0.9)
        else:
            new = self.fresh_rel(self.rng.choice(("file", "file", "dir")))
        if snap.has_file_ancestor(old) or snap.has_file_ancestor(new):
            return None  # SDK: NotADirectoryError (generic) - a documented difference
        inside = old != "" and new.startswith(old + "/")
        if inside and not (snap.is_file(new) or snap.is_dir(new)):
            return None  # SDK: OSError EINVAL (generic) - moving a directory into itself
        return {"command": "rename", "old_path": self.spell(old), "new_path": self.spell(new)}

    def next_input(self, snap: Snapshot) -> Tuple[dict, int]:
        """The next input and how many candidates were skipped to reach it."""
        for skipped in range(MAX_CANDIDATES_PER_STEP):
            tool_input = self.candidate(snap)
            if tool_input is not None:
                return tool_input, skipped
        raise RuntimeError("the generator could not produce an input; check the skip rules")


def compare_results(step: int, tool_input: dict, sdk: Result, mnemo: Result) -> Optional[Divergence]:
    """A result divergence (after directory-size normalisation), or None when they agree."""
    if sdk.is_error == mnemo.is_error and normalise_content(sdk) == normalise_content(mnemo):
        return None
    detail = (
        f"input: {json.dumps(tool_input, ensure_ascii=False)}\n"
        f"  sdk   (is_error={sdk.is_error}): {sdk.content!r}\n"
        f"  mnemo (is_error={mnemo.is_error}): {mnemo.content!r}"
    )
    return Divergence("result", step, detail)


def compare_trees(sdk_files: Dict[str, bytes], mnemo_files: Dict[str, bytes]) -> Optional[Divergence]:
    """A final-tree divergence (file set or any byte of content), or None when they agree."""
    problems = []
    for path in sorted(set(sdk_files) | set(mnemo_files)):
        if path not in mnemo_files:
            problems.append(f"  only in the SDK tree: {path}")
        elif path not in sdk_files:
            problems.append(f"  only in the store: {path}")
        elif sdk_files[path] != mnemo_files[path]:
            problems.append(f"  {path}:\n    sdk   {sdk_files[path]!r}\n    mnemo {mnemo_files[path]!r}")
    if not problems:
        return None
    return Divergence("tree", -1, "final trees differ:\n" + "\n".join(problems))


def run_session(
    mnemo: str,
    next_input: Callable[[int, Snapshot], Optional[Tuple[dict, int]]],
    report: SeedReport,
) -> None:
    """Drive both sides until `next_input` returns None or the first divergence.

    Fills `report` (steps, skips, tally of (command, outcome), inputs, divergence). The final trees
    are compared whenever every step agreed.
    """
    with tempfile.TemporaryDirectory(prefix="mnemo-sdk-diff-") as tmp:
        sdk = SdkSide(Path(tmp) / "sdk")
        store = MnemoSide(mnemo, Path(tmp), ascii_json=report.seed % 2 == 1)
        try:
            step = 0
            while True:
                drawn = next_input(step, sdk.snapshot())
                if drawn is None:
                    break
                tool_input, skipped = drawn
                report.inputs.append(tool_input)
                report.skipped += skipped
                sdk_result, generic = sdk.call(tool_input)
                try:
                    mnemo_result = store.call(tool_input)
                except RuntimeError as err:
                    report.divergence = Divergence(
                        "mnemo-failure", step, f"input: {json.dumps(tool_input, ensure_ascii=False)}\n  {err}"
                    )
                    return
                report.steps += 1
                if generic:
                    report.divergence = Divergence(
                        "sdk-generic",
                        step,
                        f"the SDK raised a generic exception (outside the compared domain): "
                        f"input: {json.dumps(tool_input, ensure_ascii=False)}\n  sdk: {sdk_result.content!r}",
                    )
                    return
                outcome = "error" if sdk_result.is_error else "ok"
                key = f"{tool_input['command']} {outcome}"
                report.tally[key] = report.tally.get(key, 0) + 1
                report.divergence = compare_results(step, tool_input, sdk_result, mnemo_result)
                if report.divergence is not None:
                    return
                step += 1
        finally:
            store.close()
        try:
            report.divergence = compare_trees(sdk.file_bytes(), store.file_bytes())
        except RuntimeError as err:
            report.divergence = Divergence("mnemo-failure", -1, str(err))


def run_seed(mnemo: str, seed: int, steps: int) -> SeedReport:
    """Generate and compare `steps` random inputs for one seed."""
    generator = InputGenerator(random.Random(seed))
    report = SeedReport(seed)

    def next_input(step: int, snap: Snapshot) -> Optional[Tuple[dict, int]]:
        return generator.next_input(snap) if step < steps else None

    run_session(mnemo, next_input, report)
    return report


def replay(mnemo: str, seed: int, inputs: Sequence[dict]) -> SeedReport:
    """Run a fixed input sequence on fresh sides (encoded as for `seed`) and report how it went."""
    report = SeedReport(seed)

    def next_input(step: int, _snap: Snapshot) -> Optional[Tuple[dict, int]]:
        return (inputs[step], 0) if step < len(inputs) else None

    run_session(mnemo, next_input, report)
    return report


def minimize(mnemo: str, seed: int, inputs: List[dict], kind: str) -> List[dict]:
    """Shrink a diverging sequence by removing chunks while a divergence of the same kind remains.

    A shortened sequence on which the SDK raises a generic exception is rejected (it left the
    compared domain), so the result is a valid reproduction. Bounded by a time budget; the result
    is then small but not necessarily minimal.
    """
    deadline = time.monotonic() + MINIMIZE_BUDGET_SECONDS

    def still_fails(candidate: List[dict]) -> bool:
        divergence = replay(mnemo, seed, candidate).divergence
        return divergence is not None and divergence.kind == kind

    current = list(inputs)
    chunk = max(1, len(current) // 2)
    while time.monotonic() < deadline:
        index = 0
        removed = False
        while index < len(current) and time.monotonic() < deadline:
            candidate = current[:index] + current[index + chunk:]
            if candidate and still_fails(candidate):
                current = candidate
                removed = True
            else:
                index += chunk
        if chunk == 1 and not removed:
            break
        chunk = max(1, chunk // 2)
    return current


def print_divergence(mnemo: str, report: SeedReport, do_minimize: bool) -> None:
    """Print a divergence with the seed, the step and a (minimised) reproducing sequence."""
    divergence = report.divergence
    assert divergence is not None
    where = f"step {divergence.step}" if divergence.step >= 0 else f"end of run ({report.steps} steps)"
    print(f"MISMATCH seed {report.seed}, {where} [{divergence.kind}]")
    print(divergence.detail)
    sequence = report.inputs
    if do_minimize and divergence.kind in ("result", "tree"):
        sequence = minimize(mnemo, report.seed, report.inputs, divergence.kind)
        final = replay(mnemo, report.seed, sequence).divergence
        print(f"minimal reproduction ({len(sequence)} of {len(report.inputs)} inputs, one JSON line each):")
        for tool_input in sequence:
            print("  " + json.dumps(tool_input, ensure_ascii=False))
        if final is not None:
            print("which gives:\n" + final.detail)
    else:
        print(f"inputs so far ({len(sequence)}), one JSON line each:")
        for tool_input in sequence:
            print("  " + json.dumps(tool_input, ensure_ascii=False))


def split_steps(total: int, parts: int) -> List[int]:
    """`total` steps split into `parts` nearly equal counts (the first ones take the remainder)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mnemo", required=True, help="path to the mnemo binary")
    parser.add_argument("--steps", type=int, default=3000, help="total steps over all seeds (default 3000)")
    parser.add_argument("--seed", type=int, default=20250818, help="base seed; seed i runs SEED+i")
    parser.add_argument("--seeds", type=int, default=3, help="number of seeds to split the steps over")
    parser.add_argument("--no-minimize", action="store_true", help="print the whole failing sequence")
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    """Run every seed, print per-seed lines and the summary; 0 only when nothing diverged."""
    args = parse_args(argv)
    if anthropic.__version__ != SDK_VERSION:
        found = anthropic.__version__
        print(f"sdk-differential: needs anthropic=={SDK_VERSION}, found {found}", file=sys.stderr)
        return 2
    if not os.access(args.mnemo, os.X_OK):
        print(f"sdk-differential: no executable mnemo at {args.mnemo}", file=sys.stderr)
        return 2
    started = time.monotonic()
    total_steps = 0
    mismatches = 0
    harness_errors = 0
    for index, steps in enumerate(split_steps(args.steps, max(1, args.seeds))):
        seed = args.seed + index
        report = run_seed(args.mnemo, seed, steps)
        total_steps += report.steps
        tally = ", ".join(f"{key} {count}" for key, count in sorted(report.tally.items()))
        status = "ok" if report.divergence is None else f"MISMATCH ({report.divergence.kind})"
        encoding = "ascii" if seed % 2 == 1 else "utf-8"
        print(
            f"seed {seed} ({encoding} json): {report.steps} steps, "
            f"{report.skipped} candidates skipped, {status}; {tally}"
        )
        if report.divergence is not None:
            if report.divergence.kind == "sdk-generic":
                harness_errors += 1  # a generator bug, not a Mnemo bug
            else:
                mismatches += 1
            print_divergence(args.mnemo, report, not args.no_minimize)
        sys.stdout.flush()
    print(f"sdk-differential: wall time {time.monotonic() - started:.1f}s")
    print(f"sdk-differential: {total_steps} steps, {mismatches} mismatches")
    if mismatches:
        return 1
    if harness_errors:
        print(f"sdk-differential: {harness_errors} harness errors", file=sys.stderr)
        return 2
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

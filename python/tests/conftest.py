"""Fixtures of the tests that need a real `mnemo serve` on loopback (the CLI built with the server
feature; python/test.sh builds it and names it in MNEMO_SERVE_BIN)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator, List, Tuple

import pytest

# A started server: its URL, its operator token, and its process.
Started = Tuple[str, str, "subprocess.Popen[bytes]"]


def serve_bin() -> str:
    path = os.environ.get("MNEMO_SERVE_BIN")
    if not path:
        if os.environ.get("CI") == "true":
            pytest.fail("MNEMO_SERVE_BIN is not set; python/test.sh builds it (CI=true: a skipped check fails)")
        pytest.skip("MNEMO_SERVE_BIN is not set: run python/test.sh, which builds `mnemo serve`")
    return path


@pytest.fixture
def start_server() -> Iterator[Callable[..., Started]]:
    """Starts `mnemo serve --db DB ARGS...` and waits for its server file; every server started
    is stopped (SIGTERM) at the end of the test."""
    started: List["subprocess.Popen[bytes]"] = []

    def start(db: Path, *args: str) -> Started:
        proc = subprocess.Popen(
            [serve_bin(), "serve", "--db", str(db), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        started.append(proc)
        server_file = db / "mnemo-server.json"
        deadline = time.monotonic() + 20
        while not server_file.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            assert time.monotonic() < deadline, "mnemo serve wrote no server file"
            time.sleep(0.05)
        info = json.loads(server_file.read_text())
        return info["url"], info["token"], proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=20)


@pytest.fixture
def served(tmp_path: Path, start_server: Callable[..., Started]) -> Tuple[str, str, Path]:
    db = tmp_path / "served.db"
    url, token, _proc = start_server(db)
    return url, token, db

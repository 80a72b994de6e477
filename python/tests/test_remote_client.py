"""MnemoClient.connect: a store a real `mnemo serve` holds (started here on loopback), used
from Python with the calls of an opened store: the memory tool, the agent's files, head, verify,
and the server's refusals as ServerError."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Tuple

import pytest

import mnemo
from mnemo import MnemoClient

from conftest import serve_bin


def test_a_remote_client_is_an_opened_store_over_http(served: Tuple[str, str, Path]) -> None:
    url, token, db = served
    remote = MnemoClient.connect(url, token, agent_id="planner")
    assert isinstance(remote, mnemo.RemoteClient) and remote.url == url and remote.agent_id == "planner"
    block = {"type": "tool_use", "id": "toolu_1", "name": "memory",
             "input": {"command": "create", "path": "/memories/plan.md", "file_text": "ship it\n"}}
    assert remote.handle(block) == {"type": "tool_result", "tool_use_id": "toolu_1",
                                    "content": "File created successfully at: /memories/plan.md"}
    # The same id and input again: the retry is answered from the record, as in-process.
    assert remote.handle(block)["content"] == "File created successfully at: /memories/plan.md"
    bad = remote.handle({"command": "view", "path": "/memories/../etc/passwd"})
    assert bad["is_error"] is True
    record = remote.record("/memories/plan.md")
    assert record is not None and record.content == "ship it\n"
    assert [r.path for r in remote.records_by_tag("memorytool")] == ["/memories/plan.md"]
    assert remote.head().seq == 3
    report = remote.verify()
    assert report["status"] == "intact" and report["events"] == 3
    # Another agent on the same server is recorded as itself.
    assert remote.with_agent("reviewer").handle({"command": "view", "path": "/memories"})["content"].startswith("Here")


def test_a_wrong_token_or_no_server_is_a_server_error(served: Tuple[str, str, Path]) -> None:
    url, _token, _db = served
    with pytest.raises(mnemo.ServerError, match="401"):
        MnemoClient.connect(url, "mnemo_wrong").head()
    with pytest.raises(mnemo.ServerError):
        MnemoClient.connect("http://127.0.0.1:9", "t").head()


def test_connect_names_a_store_of_a_data_server(tmp_path: Path) -> None:
    """`MnemoClient.connect(url, token, store=NAME)` reaches one store of `mnemo serve --data`:
    writes land there and not in another store; a name that is not one is a ValueError."""
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [serve_bin(), "serve", "--data", str(data), "--durability", "buffered"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        server_file = data / "mnemo-server.json"
        deadline = time.monotonic() + 20
        while not server_file.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            assert time.monotonic() < deadline, "mnemo serve wrote no server file"
            time.sleep(0.05)
        info = json.loads(server_file.read_text())
        url, token = info["url"], info["token"]
        for name in ["a", "b"]:
            request = urllib.request.Request(
                url + "/v1/stores",
                data=json.dumps({"name": name}).encode(),
                headers={"Authorization": "Bearer " + token},
                method="POST",
            )
            with urllib.request.urlopen(request) as answer:
                assert answer.status == 201
        a = MnemoClient.connect(url, token, store="a")
        result = a.handle({"command": "create", "path": "/memories/x.md", "file_text": "in a"})
        assert "is_error" not in result, result
        assert [r.content for r in a.records_by_tag("memorytool")] == ["in a"]
        b = MnemoClient.connect(url, token, store="b")
        assert b.records_by_tag("memorytool") == []
        with pytest.raises(ValueError, match="not a store name"):
            MnemoClient.connect(url, token, store="../a")
    finally:
        proc.terminate()
        proc.wait(timeout=20)

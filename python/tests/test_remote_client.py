"""MnemoClient.connect: a store a real `mnemo serve` holds (started here on loopback), used
from Python with the calls of an opened store: the memory tool, the agent's files, head, verify,
and the server's refusals as ServerError."""

from __future__ import annotations

from pathlib import Path
from typing import Tuple

import pytest

import mnemo
from mnemo import MnemoClient


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

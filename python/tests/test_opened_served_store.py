"""MnemoClient(db_path) on a store a real `mnemo serve` holds: the client connects to the server
and keeps the calls of an opened store (the tool server, the adapter, records, log, history,
show, diff, grants, verify), answering what a store opened here answers and what the server
logged; a server that stops mid-session raises ServerError and leaves the store to open here."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

import mnemo
from mnemo import MnemoClient, MnemoMemoryToolServer

SIX = [
    {"type": "tool_use", "id": "toolu_1", "name": "memory",
     "input": {"command": "create", "path": "/memories/plan.md", "file_text": "a\nb\n"}},
    {"command": "view", "path": "/memories/plan.md"},
    {"command": "str_replace", "path": "/memories/plan.md", "old_str": "b", "new_str": "c"},
    {"command": "insert", "path": "/memories/plan.md", "insert_line": 1, "insert_text": "z\n"},
    {"command": "rename", "old_path": "/memories/plan.md", "new_path": "/memories/done.md"},
    {"command": "create", "path": "/memories/tmp.md", "file_text": "x"},
    {"command": "delete", "path": "/memories/tmp.md"},
    {"command": "view", "path": "/memories/../etc/passwd"},
]


def timeless(event: mnemo.Event) -> Dict[str, Any]:
    """What an event says apart from when it was logged (its time, and so its chain hashes) and
    its salt (and so its result hash, a commitment keyed by the salt)."""
    return {key: getattr(event, key) for key in ("seq", "agent", "tool_use_id", "command", "paths", "is_error")}


def test_opening_a_served_store_connects_with_the_calls_of_an_opened_store(
    tmp_path: Path, start_server: Callable[..., Any]
) -> None:
    db = tmp_path / "served.db"
    url, _token, _proc = start_server(db, "--max-request-bytes", "4096")
    client = MnemoClient(db, agent_id="planner")
    assert client.server_url == url
    here = MnemoClient(tmp_path / "here.db", agent_id="planner")
    assert here.server_url is None
    served_tool = MnemoMemoryToolServer(client, max_request_bytes=4096)
    here_tool = MnemoMemoryToolServer(here, max_request_bytes=4096)
    answers = [served_tool.handle(block) for block in SIX]
    assert answers == [here_tool.handle(block) for block in SIX]
    assert answers[0]["tool_use_id"] == "toolu_1" and answers[-1]["is_error"] is True
    # An object past the request limit is refused as a digest, as in-process.
    big = {"type": "tool_use", "id": "toolu_big", "name": "memory",
           "input": {"command": "create", "path": "/memories/big.md", "file_text": "x" * 5000}}
    refused = served_tool.handle(big)
    assert refused == here_tool.handle(big) and refused["is_error"] is True and refused["tool_use_id"] == "toolu_big"
    assert served_tool.store_failures == 0

    # Each answer is the one the server logged: show re-derives it, and it verifies.
    log = client.log()
    assert [timeless(e) for e in log] == [timeless(e) for e in here.log()]
    assert [e.agent for e in log] == ["planner"] * (len(SIX) + 1)
    assert log[1].prev_hash == log[0].hash
    for seq, answer in enumerate(answers, start=1):
        shown = client.show(seq)
        assert shown["answer"] == answer["content"] and shown["verified"] is True
    assert [e.seq for e in client.log(path="/memories/tmp.md")] == [6, 7]
    assert [e.seq for e in client.log(agent="planner", from_seq=3, limit=2)] == [3, 4]

    # Files now and in the past, history, diff.
    assert client.records_by_tag("memorytool") == here.records_by_tag("memorytool")
    record = client.record("/memories/done.md")
    assert record is not None and record.content == "a\nz\nc\n"
    assert [(r.path, r.content) for r in client.records_at(1)] == [("/memories/plan.md", "a\nb\n")]
    assert client.records_at(1) == here.records_at(1)
    assert [timeless(e) for e in client.history("/memories/done.md")] == [
        timeless(e) for e in here.history("/memories/done.md")
    ]
    assert client.diff(0, 3) == here.diff(0, 3)

    # Grants through the server, and the policy they make.
    receipt = client.grant("reader", "/memories", "read")
    assert receipt.text == here.grant("reader", "/memories", "read").text
    assert client.policy() == here.policy()
    with pytest.raises(mnemo.InvalidArgumentError, match="refused; logged as seq"):
        client.revoke("reader", "/memories/none")
    reader = client.with_agent("reader")
    assert [r.path for r in reader.records_by_tag("memorytool")] == ["/memories/done.md"]

    head = client.head()
    assert head.seq == len(SIX) + 3
    report = client.verify()
    assert report.status == "intact" and report.events == head.seq and report.head == head


def test_the_sdk_adapter_over_a_served_store_answers_through_the_server(
    tmp_path: Path, start_server: Callable[..., Any]
) -> None:
    pytest.importorskip("anthropic")
    from mnemo.anthropic import MnemoMemoryTool

    db = tmp_path / "served.db"
    start_server(db, "--profile", "python-sdk")
    tool = MnemoMemoryTool(MnemoClient(db, agent_id="sdk"))
    assert tool.call({"command": "create", "path": "/memories/n.md", "file_text": "n\n"}) == (
        "File created successfully at: /memories/n.md"
    )
    assert "n" in tool.call({"command": "view", "path": "/memories/n.md"})
    events: List[mnemo.Event] = tool.server.client.log()
    assert [(e.agent, e.command) for e in events] == [("sdk", "create"), ("sdk", "view")]


def test_a_tool_server_with_other_settings_is_refused_and_records_nothing(
    served: Any,
) -> None:
    _url, _token, db = served
    client = MnemoClient(db)
    answer = MnemoMemoryToolServer(client, profile="python-sdk").handle({"command": "view", "path": "/memories"})
    assert answer["is_error"] is True and "profile spec here, python-sdk" in answer["content"]
    buffered = MnemoClient(db, durability="buffered")
    answer = MnemoMemoryToolServer(buffered).handle({"command": "view", "path": "/memories"})
    assert "durability fsync here, buffered" in answer["content"]
    assert client.log() == []


def test_a_server_that_stops_mid_session_raises_server_error(
    tmp_path: Path, start_server: Callable[..., Any]
) -> None:
    db = tmp_path / "served.db"
    _url, _token, proc = start_server(db)
    client = MnemoClient(db)
    server = MnemoMemoryToolServer(client)
    assert "is_error" not in server.handle({"command": "create", "path": "/memories/a.md", "file_text": "a"})
    proc.terminate()
    proc.wait(timeout=20)
    answer = server.handle({"type": "tool_use", "id": "toolu_2", "name": "memory",
                            "input": {"command": "view", "path": "/memories"}})
    assert answer["is_error"] is True and answer["tool_use_id"] == "toolu_2"
    assert "cannot reach the mnemo server" in answer["content"]
    assert server.store_failures == 1
    with pytest.raises(mnemo.ServerError, match="cannot reach"):
        client.head()
    with pytest.raises(mnemo.ServerError):
        client.log()
    # The server gone, the store opens in this process; twice is one store.
    client.close()
    again = MnemoClient(db)
    assert again.server_url is None
    assert [e.command for e in again.log()] == ["create"]
    assert MnemoClient(db, agent_id="other").head() == again.head()

"""The Python package against the memory tool's contract, the SDK's tool runner, and threads.

Every store lives in pytest's tmp_path. The model's responses are fixed: the SDK's own `Message`
type built from literal `tool_use` blocks, or a fake HTTP transport for the tool runner, so nothing
here needs a network or an API key.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import mnemo
from mnemo import MnemoClient, MnemoMemoryToolServer

anthropic = pytest.importorskip("anthropic", reason="the anthropic-memory-tool extra is not installed")

README = Path(__file__).resolve().parents[2] / "README.md"
# The package's own README, which PyPI shows: its quick start is the main README's.
PACKAGE_README = Path(__file__).resolve().parents[1] / "README.md"
LISTING = "Here're the files and directories up to 2 levels deep in"


def tool_use(i: int, **input: Any) -> Dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{i:02}", "name": "memory", "input": input}


def fixed_response(blocks: List[Dict[str, Any]]) -> Any:
    """A model response carrying `blocks`, as the SDK's own type."""
    from anthropic.types import Message

    return Message.model_validate(
        {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-8",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
            "content": blocks,
        }
    )


# The spec profile's documented result strings, in the order of a session that reaches each one.
# (input, content, is_error)
CONTRACT: List[Tuple[Dict[str, Any], str, bool]] = [
    ({"command": "view", "path": "/memories"},
     f"{LISTING} /memories, excluding hidden items and node_modules:\n4K\t/memories", False),
    ({"command": "create", "path": "/memories/notes.md", "file_text": "- likes tea\n- works on Mnemo\n"},
     "File created successfully at: /memories/notes.md", False),
    ({"command": "create", "path": "/memories/notes.md", "file_text": "again"},
     "Error: File /memories/notes.md already exists", True),
    ({"command": "create", "path": "/memories", "file_text": "x"},
     "Error: /memories is the memory root directory, which always exists and cannot be a file; create a file inside it, such as /memories/notes.md",
     True),
    ({"command": "view", "path": "/memories/notes.md"},
     "Here's the content of /memories/notes.md with line numbers:\n     1\t- likes tea\n     2\t- works on Mnemo\n     3\t",
     False),
    ({"command": "view", "path": "/memories/notes.md", "view_range": [2, -1]},
     "Here's the content of /memories/notes.md with line numbers:\n     2\t- works on Mnemo\n     3\t", False),
    ({"command": "view", "path": "/memories/missing.md"},
     "The path /memories/missing.md does not exist. Please provide a valid path.", True),
    ({"command": "str_replace", "path": "/memories/notes.md", "old_str": "tea", "new_str": "green tea"},
     "The memory file has been edited.\n     1\t- likes green tea\n     2\t- works on Mnemo\n     3\t", False),
    ({"command": "str_replace", "path": "/memories/notes.md", "old_str": "coffee", "new_str": "tea"},
     "No replacement was performed, old_str `coffee` did not appear verbatim in /memories/notes.md.", True),
    ({"command": "str_replace", "path": "/memories/notes.md", "old_str": "- ", "new_str": "* "},
     "No replacement was performed. Multiple occurrences of old_str `- ` in lines: 1, 2. Please ensure it is unique",
     True),
    ({"command": "str_replace", "path": "/memories/missing.md", "old_str": "a", "new_str": "b"},
     "Error: The path /memories/missing.md does not exist. Please provide a valid path.", True),
    ({"command": "insert", "path": "/memories/notes.md", "insert_line": 2, "insert_text": "- reads sci-fi\n"},
     "The file /memories/notes.md has been edited.", False),
    ({"command": "insert", "path": "/memories/notes.md", "insert_line": 9, "insert_text": "x\n"},
     "Error: Invalid `insert_line` parameter: 9. It should be within the range of lines of the file: [0, 3]", True),
    ({"command": "insert", "path": "/memories/missing.md", "insert_line": 0, "insert_text": "x\n"},
     "Error: The path /memories/missing.md does not exist", True),
    ({"command": "create", "path": "/memories/scratch.md", "file_text": "temporary\n"},
     "File created successfully at: /memories/scratch.md", False),
    ({"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/profile/notes.md"},
     "Successfully renamed /memories/notes.md to /memories/profile/notes.md", False),
    ({"command": "rename", "old_path": "/memories/scratch.md", "new_path": "/memories/profile/notes.md"},
     "Error: The destination /memories/profile/notes.md already exists", True),
    ({"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/n.md"},
     "Error: The path /memories/notes.md does not exist", True),
    ({"command": "rename", "old_path": "/memories", "new_path": "/memories/all"},
     "Cannot rename the /memories directory itself", True),
    ({"command": "view", "path": "/memories/"},
     f"{LISTING} /memories, excluding hidden items and node_modules:\n4K\t/memories\n4K\t/memories/profile/\n"
     "50B\t/memories/profile/notes.md\n10B\t/memories/scratch.md", False),
    ({"command": "delete", "path": "/memories/scratch.md"}, "Successfully deleted /memories/scratch.md", False),
    ({"command": "delete", "path": "/memories/scratch.md"}, "Error: The path /memories/scratch.md does not exist", True),
    ({"command": "delete", "path": "/memories/"}, "Cannot delete the /memories directory itself", True),
    ({"command": "view", "path": "/etc/passwd"}, "Path must start with /memories, got: /etc/passwd", True),
    ({"command": "view", "path": "/memories/../etc/passwd"},
     "Path /memories/../etc/passwd would escape /memories directory", True),
]


def test_quick_start_with_a_fixed_response(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # The quick start, line for line; only the response is fixed.
    from anthropic import Anthropic  # noqa: F401  (the real program calls Anthropic().messages.create)
    from mnemo import MnemoClient, MnemoMemoryToolServer

    client = MnemoClient(db_path="memory.mnemo.db", agent_id="agent-1")
    server = MnemoMemoryToolServer(client=client)            # root="/other", managed_agents_beta=True
    tools = [server.tool_schema()]; header = server.beta_header()
    response = fixed_response([tool_use(i, **case[0]) for i, case in enumerate(CONTRACT, 1)])
    results = []
    for block in response.content:
        if block.type == "tool_use":
            result = server.handle({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
            results.append(result)

    assert tools == [{"type": "memory_20250818", "name": "memory"}]
    assert header is None
    assert len(results) == len(CONTRACT)
    for i, ((input, content, is_error), result) in enumerate(zip(CONTRACT, results), 1):
        want: Dict[str, Any] = {"type": "tool_result", "tool_use_id": f"toolu_{i:02}", "content": content}
        if is_error:
            want["is_error"] = True
        assert result == want, f"call {i}: {input}"

    record = client.record("/memories/profile/notes.md")
    assert record is not None
    assert record.content == "- likes green tea\n- works on Mnemo\n- reads sci-fi\n"
    assert [r.path for r in client.records_by_tag("memorytool")] == ["/memories/profile/notes.md"]

    # verify() after the session: every call is one event, and every answer is proven.
    report = client.verify()
    assert report.is_intact() and report.status == "intact" and report.violations == []
    assert report.events == len(CONTRACT)
    assert report.head.seq == len(CONTRACT) == report.index_applied
    assert report.checkpoint == str(client.head()) == f"{len(CONTRACT)}:{report.head.hash}"
    assert re.fullmatch(r"[0-9a-f]{64}", report.head.hash)
    assert Path("memory.mnemo.db").is_dir()


def test_view_of_a_file_over_the_line_limit(tmp_path: Path) -> None:
    server = MnemoMemoryToolServer(MnemoClient(tmp_path / "db", durability="buffered"))
    assert server.handle({"command": "create", "path": "/memories/big.txt", "file_text": "\n" * 1_000_000})[
        "content"
    ] == "File created successfully at: /memories/big.txt"
    assert server.handle(tool_use(1, command="view", path="/memories/big.txt")) == {
        "type": "tool_result",
        "tool_use_id": "toolu_01",
        "content": "File /memories/big.txt exceeds maximum line limit of 999,999 lines.",
        "is_error": True,
    }


def quick_start_source(readme: Path = README, heading: str = "### Python quick start") -> str:
    text = readme.read_text(encoding="utf-8")
    section = text.split("\n" + heading + "\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


QUICK_STARTS = [(README, "### Python quick start"), (PACKAGE_README, "## Quick start")]


@pytest.mark.skipif(not README.exists(), reason="runs from a clone of the repository")
def test_the_package_readme_shows_the_main_readmes_quick_start() -> None:
    assert quick_start_source(*QUICK_STARTS[1]) == quick_start_source(*QUICK_STARTS[0])


@pytest.mark.skipif(not README.exists(), reason="runs from a clone of the repository")
@pytest.mark.parametrize(("readme", "heading"), QUICK_STARTS, ids=["README.md", "python/README.md"])
def test_readme_quick_start_runs_as_written(
    readme: Path, heading: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    scope: Dict[str, Any] = {}
    exec(compile(quick_start_source(readme, heading), f"{readme.name} (Python quick start)", "exec"), scope)
    assert [r["content"] for r in scope["results"]] == [
        f"{LISTING} /memories, excluding hidden items and node_modules:\n4K\t/memories",
        "File created successfully at: /memories/preferences.md",
    ]
    assert [r["tool_use_id"] for r in scope["results"]] == ["toolu_01", "toolu_02"]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "File created successfully at: /memories/preferences.md"
    assert re.fullmatch(r"intact 2 2:[0-9a-f]{64}", out[1])
    assert scope["messages"][-1]["content"] == scope["results"]


def test_server_options_root_profile_and_managed_agents_beta(tmp_path: Path) -> None:
    client = MnemoClient(tmp_path / "db", agent_id="agent-1")
    server = MnemoMemoryToolServer(client=client, root="/other", managed_agents_beta=True)
    assert server.beta_header() == "managed-agents-2026-04-01"
    assert server.root == "/other" and server.profile == "spec" and server.managed_agents_beta
    assert server.handle({"command": "create", "path": "/other/a.md", "file_text": "x"})["content"] == (
        "File created successfully at: /other/a.md"
    )
    assert server.handle({"command": "view", "path": "/memories/a.md"})["content"] == (
        "Path must start with /other, got: /memories/a.md"
    )
    assert server.handle({"command": "delete", "path": "/other"})["content"] == (
        "Cannot delete the /other directory itself"
    )

    sdk = MnemoMemoryToolServer(client, profile="python-sdk", max_file_bytes=10, view_max_chars=100)
    assert (sdk.profile, sdk.max_file_bytes, sdk.view_max_chars) == ("python-sdk", 10, 100)
    assert sdk.handle({"command": "view", "path": "/memories"})["content"] == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n4K\t/memories"
    )
    assert sdk.handle({"command": "create", "path": "/memories/b.md", "file_text": "0123456789x"})["is_error"]

    bads: List[Dict[str, Any]] = [{"profile": "typescript"}, {"root": "relative"}]
    for bad in bads:
        with pytest.raises(mnemo.InvalidArgumentError):
            MnemoMemoryToolServer(client, **bad)
    with pytest.raises(mnemo.InvalidArgumentError, match="durability"):
        MnemoClient(tmp_path / "other", durability="sometimes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        MnemoMemoryToolServer("not a client")  # type: ignore[arg-type]
    assert client.verify().is_intact()


TRAVERSALS = [
    "/memories/../secrets.env",
    "/memories/../../etc/passwd",
    "/memories/a/../../x",
    "/memories/%2e%2e/x",
    "/memories/%2E%2E%2Fx",
    "/memories/..%2fx",
    "/memories/..%5cx",
    "/memories/..\\x",
    "/memories/%252e%252e/x",
    "/memories/./../x",
]


def test_path_safety(tmp_path: Path) -> None:
    client = MnemoClient(tmp_path / "db", durability="buffered")
    server = MnemoMemoryToolServer(client)
    calls = 0
    for path in TRAVERSALS:
        for input in (
            {"command": "view", "path": path},
            {"command": "create", "path": path, "file_text": "pwned"},
            {"command": "str_replace", "path": path, "old_str": "a", "new_str": "b"},
            {"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"},
            {"command": "delete", "path": path},
            {"command": "rename", "old_path": path, "new_path": "/memories/x.md"},
            {"command": "rename", "old_path": "/memories/x.md", "new_path": path},
        ):
            result = server.handle(input)
            calls += 1
            assert result["is_error"] is True, input
            assert result["content"] == f"Path {path} would escape /memories directory", input
    for path, content in (
        ("/etc/passwd", "Path must start with /memories, got: /etc/passwd"),
        ("/memoriesfoo.txt", "Path must start with /memories, got: /memoriesfoo.txt"),
        ("memories/a.md", "Path must start with /memories, got: memories/a.md"),
        ("", "Path must start with /memories, got: "),
    ):
        assert server.handle({"command": "create", "path": path, "file_text": "x"}) == {
            "type": "tool_result", "tool_use_id": f"mnemo-{calls + 1}", "content": content, "is_error": True,
        }
        calls += 1
    control = server.handle({"command": "create", "path": "/memories/a\tb.md", "file_text": "x"})
    assert control["is_error"] and "control character" in control["content"]
    calls += 1
    assert client.records_by_tag("memorytool") == []
    assert not any(tmp_path.glob("**/secrets.env")) and not any(tmp_path.glob("**/x.md"))
    report = client.verify()
    assert report.is_intact() and report.events == calls


class Opaque:
    def __repr__(self) -> str:
        return "Opaque()"


def test_handle_never_raises_on_what_the_model_sends(tmp_path: Path) -> None:
    client = MnemoClient(tmp_path / "db", durability="buffered")
    server = MnemoMemoryToolServer(client)
    assert server.handle({"command": "create", "path": "/memories/a.md", "file_text": "one\ntwo\n"})["content"] == (
        "File created successfully at: /memories/a.md"
    )
    deep: Any = {"command": "view", "path": "/memories"}
    for _ in range(10_000):
        deep = [deep]
    hostile: List[Any] = [
        42, None, "view /memories", [], b"bytes", Opaque(), deep,
        {"command": "create", "path": "/memories/b.md", "file_text": b"bytes"},
        {"command": "create", "path": "/memories/b.md", "file_text": None},
        {"command": "create", "path": "/memories/b.md"},
        {"command": "view", "path": "/memories/a.md", "view_range": [1, float("nan")]},
        {"command": "view", "path": "/memories/a.md", "view_range": [1, float("inf")]},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 10**30, "insert_text": "x"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": -(10**400), "insert_text": "x"},
        {"command": "insert", "path": "/memories/a.md", "insert_line": 1.5, "insert_text": "x"},
        {"command": "view", "path": "/memories/a.md", "view_range": (1, 2, 3)},
        {"command": "explode", "path": "/memories/a.md"},
        {"command": 7},
        {1: "x", None: "y", "command": "view", "path": {"nested": Opaque()}},
        {"type": "tool_use", "id": "toolu_x1", "name": "memory"},
        {"type": "tool_use", "id": "toolu_x2", "name": "other_tool", "input": {"command": "view", "path": "/memories"}},
        {"type": "tool_use", "id": "toolu_x3", "name": "memory", "input": "not an object"},
        {"type": "tool_use", "id": "toolu_x4", "name": "memory", "input": {"command": "view", "path": "/memories/\ud800"}},
    ]
    for input in hostile:
        result = server.handle(input)
        assert set(result) == {"type", "tool_use_id", "content", "is_error"}, input
        assert result["type"] == "tool_result" and result["is_error"] is True, input
        assert isinstance(result["content"], str) and result["content"], input
    assert server.handle(hostile[-1])["tool_use_id"] == "toolu_x4"
    # The valid tuple spelling of a range, and an SDK pydantic command, work as their JSON forms.
    assert server.handle({"command": "view", "path": "/memories/a.md", "view_range": (2, 2)})["content"] == (
        "Here's the content of /memories/a.md with line numbers:\n     2\ttwo"
    )
    from anthropic.types.beta import BetaMemoryTool20250818ViewCommand

    typed = server.handle(BetaMemoryTool20250818ViewCommand(command="view", path="/memories/a.md", view_range=[1, 1]))
    assert typed["content"] == "Here's the content of /memories/a.md with line numbers:\n     1\tone"
    assert client.record("/memories/a.md").content == "one\ntwo\n"  # type: ignore[union-attr]
    assert client.record("/memories/b.md") is None
    report = client.verify()
    # One event per call, the repeated toolu_x4 (a retry) included.
    assert report.is_intact() and report.events == 1 + len(hostile) + 3


def test_show_and_diff_give_an_event_whole_and_the_files_changed(tmp_path: Path) -> None:
    client = MnemoClient(tmp_path / "db")
    server = MnemoMemoryToolServer(client)
    server.handle({"command": "create", "path": "/memories/a.md", "file_text": "one\ntwo\n"})
    edited = server.handle({"command": "str_replace", "path": "/memories/a.md", "old_str": "two", "new_str": "TWO"})
    shown = client.show(2)
    assert shown["input"] == {"command": "str_replace", "path": "/memories/a.md", "old_str": "two", "new_str": "TWO"}
    assert shown["answer"] == edited["content"] and shown["verified"] is True
    assert shown["change"]["kind"] == "edited"
    assert shown["change"]["diff"].endswith(" one\n-two\n+TWO\n")
    files = client.diff(0, 2)
    assert [(f["path"], f["kind"]) for f in files] == [("/memories/a.md", "added")]
    assert client.diff(1, 2)[0]["kind"] == "changed"
    with pytest.raises(mnemo.InvalidArgumentError, match="no event 9"):
        client.show(9)


def test_retried_tool_use_id_is_answered_from_the_log(tmp_path: Path) -> None:
    client = MnemoClient(tmp_path / "db")
    server = MnemoMemoryToolServer(client)
    block = tool_use(1, command="create", path="/memories/a.md", file_text="x")
    first = server.handle(block)
    again = server.handle(block)
    assert first == again == {"type": "tool_result", "tool_use_id": "toolu_01",
                              "content": "File created successfully at: /memories/a.md"}
    # The retry is logged, and ran nothing: running the create again would fail.
    assert client.head().seq == 2 and client.verify().events == 2


def test_access_control_grant_revoke_policy(tmp_path: Path) -> None:
    admin = MnemoClient(tmp_path / "db", agent_id="operator")
    assert [(g.agent, g.prefix, g.access) for g in admin.policy()] == [("*", "/", "read-write")]
    admin.grant("agent-2", "/memories/agent-2", "read-write")
    admin.grant("operator", "/", "read-write")
    receipt = admin.revoke("*", "/")
    assert receipt.seq == 3 and not receipt.is_error
    assert {(g.agent, g.prefix, g.access) for g in admin.policy()} == {
        ("agent-2", "/memories/agent-2", "read-write"), ("operator", "/", "read-write"),
    }
    with pytest.raises(mnemo.InvalidArgumentError, match="absolute"):
        admin.grant("agent-2", "relative", "read")
    with pytest.raises(mnemo.InvalidArgumentError, match="access"):
        admin.grant("agent-2", "/memories", "write-only")  # type: ignore[arg-type]

    agent2 = MnemoMemoryToolServer(admin.with_agent("agent-2"))
    assert agent2.client.agent_id == "agent-2"
    assert agent2.handle({"command": "create", "path": "/memories/plan.md", "file_text": "x"}) == {
        "type": "tool_result", "tool_use_id": "mnemo-5",
        "content": "Error: Access denied: agent agent-2 has no read-write grant covering /memories/plan.md",
        "is_error": True,
    }
    assert not agent2.handle({"command": "create", "path": "/memories/agent-2/p.md", "file_text": "x"}).get("is_error")
    admin.grant("agent-3", "/memories/agent-2", "read")
    agent3 = admin.with_agent("agent-3")
    assert [r.path for r in agent3.records_by_tag("memorytool")] == ["/memories/agent-2/p.md"]
    assert agent3.with_agent("agent-4").records_by_tag("memorytool") == []
    with pytest.raises(mnemo.InvalidArgumentError):
        admin.with_agent("*")
    # The refused grant is logged too (as an error); the bad access name never reached the store.
    assert [(e.command, e.is_error) for e in admin.log(agent="operator")] == [
        ("acl-grant", False), ("acl-grant", False), ("acl-revoke", False), ("acl-grant", True), ("acl-grant", False),
    ]
    assert admin.verify().is_intact()


def test_reads_log_history_and_the_past(tmp_path: Path) -> None:
    client = MnemoClient(tmp_path / "db", agent_id="agent-1", durability="flush")
    server = MnemoMemoryToolServer(client)
    for i, input in enumerate([
        {"command": "create", "path": "/memories/a/notes.md", "file_text": "v1\n"},
        {"command": "str_replace", "path": "/memories/a/notes.md", "old_str": "v1", "new_str": "v2"},
        {"command": "create", "path": "/memories/other.md", "file_text": "o\n"},
        {"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"},
        {"command": "view", "path": "/memories/b/notes.md"},
    ], 1):
        assert not server.handle(tool_use(i, **input)).get("is_error")

    events = client.log()
    assert [(e.seq, e.command, e.paths, e.tool_use_id) for e in events] == [
        (1, "create", ["/memories/a/notes.md"], "toolu_01"),
        (2, "str_replace", ["/memories/a/notes.md"], "toolu_02"),
        (3, "create", ["/memories/other.md"], "toolu_03"),
        (4, "rename", ["/memories/a", "/memories/b"], "toolu_04"),
        (5, "view", ["/memories/b/notes.md"], "toolu_05"),
    ]
    assert events[0].prev_hash == "0" * 64
    # Every call of this build is answered under the current semantics, 5.
    assert {e.semantics for e in events} == {5}
    assert all(later.prev_hash == earlier.hash for earlier, later in zip(events, events[1:]))
    assert events[-1].hash == client.head().hash
    assert all(e.agent == "agent-1" and not e.is_error and re.fullmatch(r"\d{4}-\d\d-\d\dT.*Z", e.time) for e in events)
    assert [e.seq for e in client.log(path="/memories/a")] == [1, 2, 4]
    assert [e.seq for e in client.log(from_seq=3, limit=1)] == [3]
    assert client.log(agent="nobody") == []
    assert [e.seq for e in client.history("/memories/b/notes.md")] == [1, 2, 4, 5]
    with pytest.raises(mnemo.InvalidArgumentError):
        client.history("relative")

    assert [(r.path, r.content) for r in client.records_at(1)] == [("/memories/a/notes.md", "v1\n")]
    assert [r.path for r in client.records_at(99)] == ["/memories/b/notes.md", "/memories/other.md"]
    record = client.record("/memories/b/notes.md")
    assert record is not None
    assert (record.content, record.created, record.updated) == ("v2\n", 1, 2)
    assert record.tags == ["memorytool", "path:/memories/b/notes.md"]
    assert client.records_by_tag("path:/memories/other.md")[0].content == "o\n"
    assert client.record("/memories/../b/notes.md") is None


def test_store_errors_and_close(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with MnemoClient(db, agent_id="agent-1") as client:
        server = MnemoMemoryToolServer(client)
        server.handle({"command": "create", "path": "/memories/a.md", "file_text": "x"})
        # Opened again in this process (a notebook cell run twice): the same store.
        again = MnemoClient(db, agent_id="agent-2")
        assert again.record("/memories/a.md").content == "x"  # type: ignore[union-attr]
        again.close()
        assert not client.closed
    assert client.closed
    with pytest.raises(mnemo.ClosedError):
        server.handle({"command": "view", "path": "/memories"})
    with pytest.raises(mnemo.ClosedError):
        client.with_agent("agent-2")

    reopened = MnemoClient(str(db), agent_id="agent-1")  # a str path works too
    assert reopened.record("/memories/a.md").content == "x"  # type: ignore[union-attr]
    assert reopened.db_path == db and reopened.durability == "fsync"
    reopened.close()
    reopened.close()  # closing twice is harmless

    (tmp_path / "file").write_text("not a store")
    with pytest.raises(mnemo.InvalidArgumentError, match="not a directory"):
        MnemoClient(tmp_path / "file")
    with pytest.raises(mnemo.MnemoError, match="does not exist"):
        MnemoClient(tmp_path / "missing" / "parent" / "db")
    (db / "db").write_bytes(b"garbage" * 100)
    with pytest.raises(mnemo.MnemoError) as damaged:
        MnemoClient(db)
    assert isinstance(damaged.value, (mnemo.CorruptStoreError, mnemo.StorageError)), damaged.value
    assert issubclass(mnemo.StoreLockedError, mnemo.MnemoError) and issubclass(mnemo.MnemoError, Exception)


def test_threads_share_one_client(tmp_path: Path) -> None:
    client = MnemoClient(tmp_path / "db", agent_id="main")
    server = MnemoMemoryToolServer(client)
    threads_n, calls_n = 8, 25
    errors: List[BaseException] = []

    def work(t: int) -> None:
        try:
            own = MnemoMemoryToolServer(client.with_agent(f"worker-{t}"))
            for i in range(calls_n):
                path = f"/memories/t{t}/f{i}.md"
                shared = server if i % 2 else own
                got = shared.handle(tool_use(t * 1000 + i, command="create", path=path, file_text=f"{t}:{i}\n"))
                assert got["content"] == f"File created successfully at: {path}", got
                got = shared.handle({"command": "str_replace", "path": path, "old_str": f"{t}:{i}", "new_str": "done"})
                assert not got.get("is_error"), got
        except BaseException as e:  # surfaced below; a thread's assert would otherwise be lost
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[0]
    records = client.records_by_tag("memorytool")
    assert len(records) == threads_n * calls_n
    assert all(r.content == "done\n" for r in records)
    agents = {e.agent for e in client.log()}
    assert agents == {"main"} | {f"worker-{t}" for t in range(threads_n)}
    report = client.verify()
    assert report.is_intact() and report.events == 2 * threads_n * calls_n


def test_store_calls_release_the_gil(tmp_path: Path) -> None:
    """While one thread waits on durable writes, another thread keeps running Python code."""
    server = MnemoMemoryToolServer(MnemoClient(tmp_path / "db"))
    done = threading.Event()
    ticks = 0

    def writer() -> None:
        for i in range(40):
            server.handle({"command": "create", "path": f"/memories/{i}.md", "file_text": "x"})
        done.set()

    # With a 10 s switch interval a thread keeps the GIL until it releases it itself: if handle()
    # held it through each fsync'd call, this loop could only run before and after the writer.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(10.0)
    try:
        thread = threading.Thread(target=writer)
        thread.start()
        while not done.is_set():
            ticks += 1
            time.sleep(0)
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    # Held, the loop runs about once (before the first call or after the last); released, it runs
    # many times during every fsync'd call. One tick per call on average is the line between them
    # that a faster disk does not cross.
    assert ticks >= 40, ticks


# --- the SDK's tool runner -------------------------------------------------------------------


def test_adapter_with_the_sdks_command_types(tmp_path: Path) -> None:
    from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
    from anthropic.types.beta import (
        BetaMemoryTool20250818CreateCommand,
        BetaMemoryTool20250818DeleteCommand,
        BetaMemoryTool20250818InsertCommand,
        BetaMemoryTool20250818RenameCommand,
        BetaMemoryTool20250818StrReplaceCommand,
        BetaMemoryTool20250818ViewCommand,
    )
    from mnemo.anthropic import MnemoMemoryTool

    client = MnemoClient(tmp_path / "db", agent_id="agent-1")
    tool = MnemoMemoryTool(client)
    assert isinstance(tool, BetaAbstractMemoryTool)
    assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}
    assert tool.server.profile == "python-sdk"

    p = "/memories/notes.md"
    assert tool.execute(BetaMemoryTool20250818CreateCommand(command="create", path=p, file_text="a\nb\n")) == (
        f"File created successfully at: {p}"
    )
    assert tool.execute(BetaMemoryTool20250818ViewCommand(command="view", path=p)) == (
        f"Here's the content of {p} with line numbers:\n     1\ta\n     2\tb\n     3\t"
    )
    assert tool.str_replace(BetaMemoryTool20250818StrReplaceCommand(command="str_replace", path=p, old_str="b", new_str="c")) == (
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\ta\n     2\tc\n     3\t"
    )
    assert tool.insert(BetaMemoryTool20250818InsertCommand(command="insert", path=p, insert_line=2, insert_text="d")) == (
        f"The file {p} has been edited."
    )
    assert tool.rename(BetaMemoryTool20250818RenameCommand(command="rename", old_path=p, new_path="/memories/n.md")) == (
        f"Successfully renamed {p} to /memories/n.md"
    )
    with pytest.raises(ToolError) as error:
        tool.view(BetaMemoryTool20250818ViewCommand(command="view", path=p))
    assert str(error.value) == f"The path {p} does not exist. Please provide a valid path."
    assert tool.delete(BetaMemoryTool20250818DeleteCommand(command="delete", path="/memories/n.md")) == (
        "Successfully deleted /memories/n.md"
    )
    with pytest.raises(ToolError) as error:
        tool.call({"command": "view", "path": "/memories/../x"})
    assert error.value.content == "Path /memories/../x would escape /memories directory"
    assert MnemoMemoryTool(server=MnemoMemoryToolServer(client)).server.profile == "spec"
    with pytest.raises(TypeError):
        MnemoMemoryTool()
    assert client.verify().events == 8


def test_adapter_answers_like_the_sdks_filesystem_tool(tmp_path: Path) -> None:
    """The adapter's default profile gives the model what BetaLocalFilesystemMemoryTool gives."""
    from anthropic.lib.tools import ToolError
    from anthropic.tools.memory import BetaLocalFilesystemMemoryTool
    from mnemo.anthropic import MnemoMemoryTool

    inputs: List[Dict[str, Any]] = [
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/a/x.md", "file_text": "one\ntwo\nthree\n"},
        {"command": "create", "path": "/memories/a/x.md", "file_text": "again"},
        {"command": "view", "path": "/memories/a/x.md", "view_range": [2, 3]},
        {"command": "str_replace", "path": "/memories/a/x.md", "old_str": "two", "new_str": "2"},
        {"command": "str_replace", "path": "/memories/a/x.md", "old_str": "nope", "new_str": "x"},
        {"command": "insert", "path": "/memories/a/x.md", "insert_line": 1, "insert_text": "1.5\n"},
        {"command": "insert", "path": "/memories/a/x.md", "insert_line": 99, "insert_text": "x"},
        {"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"},
        {"command": "view", "path": "/memories"},
        {"command": "delete", "path": "/memories/b/x.md"},
        {"command": "delete", "path": "/memories/b/x.md"},
        {"command": "view", "path": "/memories/missing"},
    ]

    def outcome(tool: Any, input: Dict[str, Any]) -> Tuple[str, bool]:
        try:
            return tool.call(input), False
        except ToolError as e:
            return str(e.content), True

    sdk = BetaLocalFilesystemMemoryTool(base_path=str(tmp_path / "sdk"))
    ours = MnemoMemoryTool(MnemoClient(tmp_path / "db"))
    for input in inputs:
        want = outcome(sdk, input)
        if input == {"command": "delete", "path": "/memories/b/x.md"}:
            # The SDK leaves the empty directory; Mnemo's directories go with their last file.
            for d in sorted((tmp_path / "sdk" / "memories").glob("**/*"), reverse=True):
                if d.is_dir() and not any(d.iterdir()):
                    d.rmdir()
        assert outcome(ours, input) == want, input


def runner_transport(captured: List[Dict[str, Any]], blocks: List[Dict[str, Any]]) -> Any:
    """A fake Messages API: the first request gets `blocks` as tool_use, the next a final answer."""
    # The HTTP library this SDK is built on: newer SDKs moved from httpx to httpx2, and an older
    # SDK refuses an httpx2 client even when httpx2 is installed beside it.
    import anthropic._base_client as base

    httpx = getattr(base, "httpx2", None) or base.httpx

    def reply(request: Any) -> Any:
        body = json.loads(request.content)
        captured.append(body)
        content: List[Dict[str, Any]]
        if len(captured) == 1:
            content, stop = blocks, "tool_use"
        else:
            content, stop = [{"type": "text", "text": "Noted: you prefer tea."}], "end_turn"
        return httpx.Response(200, json={
            "id": f"msg_{len(captured)}", "type": "message", "role": "assistant", "model": body["model"],
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        })

    return httpx.Client(transport=httpx.MockTransport(reply))


def test_the_sdk_tool_runner_end_to_end(tmp_path: Path) -> None:
    from anthropic import Anthropic
    from mnemo.anthropic import MnemoMemoryTool

    captured: List[Dict[str, Any]] = []
    blocks = [
        tool_use(1, command="view", path="/memories"),
        tool_use(2, command="create", path="/memories/preferences.md", file_text="- prefers tea\n"),
        tool_use(3, command="view", path="/memories/../../etc/passwd"),
    ]
    api = Anthropic(api_key="test-key", base_url="http://api.test", http_client=runner_transport(captured, blocks))
    client = MnemoClient(tmp_path / "db", agent_id="agent-1")
    memory = MnemoMemoryTool(client)
    runner = api.beta.messages.tool_runner(
        model="claude-opus-4-8", max_tokens=1024, tools=[memory],
        messages=[{"role": "user", "content": "I prefer tea. Please remember that."}],
    )
    final = runner.until_done()

    assert [getattr(block, "text", None) for block in final.content] == ["Noted: you prefer tea."]
    assert captured[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    assert captured[1]["messages"][-1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01",
         "content": "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n4K\t/memories"},
        {"type": "tool_result", "tool_use_id": "toolu_02",
         "content": "File created successfully at: /memories/preferences.md"},
        {"type": "tool_result", "tool_use_id": "toolu_03",
         "content": "Path /memories/../../etc/passwd would escape /memories directory", "is_error": True},
    ]}
    assert client.record("/memories/preferences.md").content == "- prefers tea\n"  # type: ignore[union-attr]
    report = client.verify()
    assert report.is_intact() and report.events == 3


def test_async_adapter(tmp_path: Path) -> None:
    from anthropic.lib.tools import BetaAsyncAbstractMemoryTool, ToolError
    from mnemo.anthropic import AsyncMnemoMemoryTool

    tool = AsyncMnemoMemoryTool(MnemoClient(tmp_path / "db"), profile="spec")
    assert isinstance(tool, BetaAsyncAbstractMemoryTool)

    async def session() -> List[str]:
        created = await asyncio.gather(*[
            tool.call({"command": "create", "path": f"/memories/{i}.md", "file_text": "x"}) for i in range(5)
        ])
        with pytest.raises(ToolError):
            await tool.call({"command": "delete", "path": "/memories"})
        return list(created)

    assert sorted(asyncio.run(session())) == [f"File created successfully at: /memories/{i}.md" for i in range(5)]
    assert tool.server.client.verify().events == 6


def test_the_core_never_imports_anthropic_and_the_adapter_names_the_extra() -> None:
    script = (
        "import sys, tempfile, os\n"
        "import mnemo\n"
        "d = tempfile.mkdtemp()\n"
        "s = mnemo.MnemoMemoryToolServer(mnemo.MnemoClient(os.path.join(d, 'db')))\n"
        "s.handle({'command': 'view', 'path': '/memories'})\n"
        "assert 'anthropic' not in sys.modules, 'the core imported anthropic'\n"
        "sys.modules['anthropic'] = None  # as if the extra were not installed\n"
        "try:\n"
        "    from mnemo import MnemoMemoryTool\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 0, out.stderr
    # The advice must work from a clone (the name on the public registries is another project's)
    # and name the SDK versions the adapter works with.
    assert "pip install './python[anthropic-memory-tool]'" in out.stdout
    assert "'anthropic>=0.84,<3'" in out.stdout
    assert "mnemo-db" not in out.stdout

"""Through any node of a fleet: two `mnemo serve --fleet` nodes on loopback share a `file://`
bucket, a store is made through node a (which holds it), and both Mnemo's own client and the
official SDK's memory-stores client talk to node b, which forwards every call to a."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple

import anthropic
import pytest

import mnemo
from mnemo import MnemoClient

from conftest import serve_bin


class Node(NamedTuple):
    id: str
    url: str
    token: str
    proc: "subprocess.Popen[bytes]"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(root: Path, bucket: str, node_id: str) -> Node:
    data = root / node_id
    proc = subprocess.Popen(
        [serve_bin(), "serve", "--data", str(data), "--fleet", bucket, "--node-id", node_id,
         "--listen", f"127.0.0.1:{free_port()}", "--lease-ttl", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    server_file = data / "mnemo-server.json"
    deadline = time.monotonic() + 20
    while True:
        try:
            info = json.loads(server_file.read_text())
            if info["pid"] == proc.pid:
                return Node(node_id, info["url"], info["token"], proc)
        except (OSError, ValueError, KeyError):
            pass
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
        assert time.monotonic() < deadline, f"node {node_id} wrote no server file"
        time.sleep(0.05)


def call(node: Node, method: str, route: str, body: Any = None) -> Dict[str, Any]:
    request = urllib.request.Request(
        node.url + route,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + node.token},
        method=method,
    )
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read())


def holder(node: Node, store: str) -> str:
    listed = call(node, "GET", "/v1/stores?details=true")["stores"]
    return next(s["holder"]["node"] for s in listed if s["name"] == store)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[List[Node]]:
    bucket = f"file://{tmp_path}/bucket"
    nodes: List[Node] = []
    try:
        for node_id in ["a", "b"]:
            nodes.append(start_node(tmp_path, bucket, node_id))
        yield nodes
    finally:
        for node in nodes:
            node.proc.terminate()
            node.proc.wait(timeout=20)


def test_mnemos_client_works_through_a_node_that_does_not_hold_the_store(fleet: List[Node]) -> None:
    a, b = fleet
    assert a.token == b.token, "the operator token is the fleet's"
    call(a, "POST", "/v1/stores", {"name": "notes"})
    remote = MnemoClient.connect(b.url, b.token, agent_id="planner", store="notes")
    block = {"type": "tool_use", "id": "toolu_1", "name": "memory",
             "input": {"command": "create", "path": "/memories/plan.md", "file_text": "ship it\n"}}
    assert remote.handle(block)["content"] == "File created successfully at: /memories/plan.md"
    # The same id and input again: the retry is answered from the record, on the holder.
    assert remote.handle(block)["content"] == "File created successfully at: /memories/plan.md"
    record = remote.record("/memories/plan.md")
    assert record is not None and record.content == "ship it\n"
    assert remote.with_agent("reviewer").handle({"command": "view", "path": "/memories"})["content"].startswith("Here")
    report = remote.verify()
    assert report["status"] == "intact"
    assert remote.head().seq == report["events"]
    assert holder(b, "notes") == "a", "b forwarded every call: a still holds the store"
    # A store that is not the fleet's is refused through b as on one server.
    with pytest.raises(mnemo.ServerError, match="404"):
        MnemoClient.connect(b.url, b.token, store="missing").head()


def test_the_official_sdk_works_through_a_node_that_does_not_hold_the_store(fleet: List[Node]) -> None:
    a, b = fleet
    through_a = anthropic.Anthropic(api_key=a.token, base_url=a.url, max_retries=0)
    made = through_a.beta.memory_stores.create(name="user 1042", metadata={"user": "1042"})
    store_name = made.id.removeprefix("memstore_")
    sdk = anthropic.Anthropic(api_key=b.token, base_url=b.url, max_retries=0)
    stores = sdk.beta.memory_stores
    assert stores.retrieve(made.id).name == "user 1042"
    memory = stores.memories.create(made.id, path="/notes/plan.md", content="ship it\n")
    assert stores.memories.retrieve(memory.id, memory_store_id=made.id, view="full").content == "ship it\n"
    changed = stores.memories.update(memory.id, memory_store_id=made.id, content="shipped\n")
    assert changed.id == memory.id
    assert [m.path for m in stores.memories.list(made.id) if m.type == "memory"] == ["/notes/plan.md"]
    # The list through b is the fleet's, in pages, though b holds none of its stores.
    through_a.beta.memory_stores.create(name="user 7")
    listed = [s.name for s in stores.list(limit=1)]
    assert sorted(listed) == ["user 1042", "user 7"]
    assert stores.update(made.id, description="through b").description == "through b"
    assert stores.archive(made.id).archived_at is not None
    assert [s.name for s in stores.list()] == ["user 7"]
    assert holder(b, store_name) == "a", "b forwarded every call: a still holds the store"
    # Deleted through b (a holds it): no node serves or lists it any more.
    stores.delete(made.id)
    for client in (through_a, sdk):
        with pytest.raises(anthropic.NotFoundError):
            client.beta.memory_stores.retrieve(made.id)
        assert [s.name for s in client.beta.memory_stores.list(include_archived=True)] == ["user 7"]

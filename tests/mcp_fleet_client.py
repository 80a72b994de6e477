#!/usr/bin/env python3
"""MCP through any node of a fleet, with the official Python SDK as client.

Three `mnemo serve --fleet` nodes share a `file://` bucket on loopback; the store `notes` is made
through node a (which holds it), and every MCP client talks to another node, which forwards:

  1. a session through node b (the initialize handshake, then calls): the tool, its answers;
  2. the session's standalone stream (GET with Mcp-Session-Id): its head (200, text/event-stream)
     reaches the client at once through the forwarding node, not when the stream ends;
  3. a session that outlives its store's move: opened through node c, the store's holder is
     drained (the store goes to b or c), and the same session's next call succeeds on the new
     holder, which takes the session up from the bucket;
  4. a session is its opener's on every node: an agent token of the store naming the operator's
     session on the new holder is answered 404 (the owner comes from the bucket), the operator's
     own request in it is served;
  5. an agent's 32 sessions (the most a principal holds) are taken up when the store moves again
     (to c), and one more opened there closes the oldest of them;
  6. a session-less client (protocol 2026-07-28) through node b;
  7. the files every call made are in the store, read through each node.

Usage: mcp_fleet_client.py --mnemo PATH
Exit status: 0 when every check passed, 1 when one failed, 2 on a harness error.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import logging
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_client import MCP_VERSION, TIMEOUT, Checks, text_of

SERVER_FILE = "mnemo-server.json"
SESSION_HEADER = "mcp-session-id"
STORE = "notes"
ACCEPT = {"Accept": "application/json, text/event-stream"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """A `mnemo serve --data DIR --fleet URL` node and what its server file says."""

    def __init__(self, mnemo: str, root: Path, bucket: str, node_id: str) -> None:
        self.id = node_id
        self.dir = root / node_id
        listen = f"127.0.0.1:{free_port()}"
        self.proc = subprocess.Popen(
            [mnemo, "serve", "--data", str(self.dir), "--fleet", bucket, "--node-id", node_id,
             "--listen", listen, "--lease-ttl", "2"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                info = json.loads((self.dir / SERVER_FILE).read_text())
                if info["pid"] == self.proc.pid:
                    break
            except (OSError, ValueError, KeyError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"harness: node {node_id} did not start: {self.proc.stderr.read()!r}")
            time.sleep(0.02)
        self.base = info["url"]
        self.token = info["token"]
        self.mcp = f"{self.base}/v1/stores/{STORE}/mcp"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
        return self.proc.returncode


def http_client(token: Optional[str], agent: Optional[str] = None) -> httpx2.AsyncClient:
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if agent is not None:
        headers["X-Mnemo-Agent"] = agent
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(TIMEOUT))


def create(path: str, text: str) -> Dict[str, Any]:
    return {"command": "create", "path": path, "file_text": text}


async def initialize(http: httpx2.AsyncClient, url: str) -> Optional[str]:
    """A raw initialize handshake: the session id the server gave, once it is initialized."""
    opened = await http.post(
        url,
        headers=ACCEPT,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "mcp_fleet_client", "version": "1"},
            },
        },
    )
    session = opened.headers.get(SESSION_HEADER)
    if opened.status_code != 200 or session is None:
        print(f"initialize: {opened.status_code} {opened.text!r}", flush=True)
        return None
    done = await http.post(
        url,
        headers={**ACCEPT, SESSION_HEADER: session, "MCP-Protocol-Version": "2025-06-18"},
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
    )
    return session if done.status_code in (200, 202) else None


async def ping(http: httpx2.AsyncClient, url: str, session: str) -> httpx2.Response:
    return await http.post(
        url,
        headers={**ACCEPT, SESSION_HEADER: session, "MCP-Protocol-Version": "2025-06-18"},
        json={"jsonrpc": "2.0", "id": 7, "method": "ping"},
    )


async def through_a_non_holder(c: Checks, via: Node) -> None:
    async with http_client(via.token, "alice") as http:
        transport = streamable_http_client(via.mcp, http_client=http)
        async with Client(transport, mode="legacy", read_timeout_seconds=TIMEOUT) as client:
            c.equal([t.name for t in (await client.list_tools()).tools], ["memory"], "through b: the tool")
            result = await client.call_tool("memory", create("/memories/b.md", "through b\n"))
            c.equal(
                (text_of(result), bool(result.is_error)),
                ("File created successfully at: /memories/b.md", False),
                "through b: a session's call writes",
            )
            result = await client.call_tool("memory", {"command": "view", "path": "/memories/b.md"})
            c.equal(
                text_of(result),
                "Here's the content of /memories/b.md with line numbers:\n     1\tthrough b\n     2\t",
                "through b: a session's call reads",
            )


async def stream_head(c: Checks, via: Node) -> None:
    async with http_client(via.token) as http:
        session = await initialize(http, via.mcp)
        if not c.check(session is not None, "through b: a raw session is initialized"):
            return
        headers = {SESSION_HEADER: session, "Accept": "text/event-stream", "MCP-Protocol-Version": "2025-06-18"}

        async def head() -> httpx2.Response:
            async with http.stream("GET", via.mcp, headers=headers) as response:
                return response

        started = time.monotonic()
        try:
            response = await asyncio.wait_for(head(), 5)
            c.equal(response.status_code, 200, "through b: the session's stream is opened")
            c.check(
                response.headers.get("content-type", "").startswith("text/event-stream"),
                "through b: the stream is server-sent events",
                dict(response.headers),
            )
            print(f"the stream's head came through b in {time.monotonic() - started:.2f} s", flush=True)
        except asyncio.TimeoutError:
            c.check(False, "through b: the stream's head comes before the stream ends (within 5 s)")
        closed = await http.delete(via.mcp, headers={SESSION_HEADER: session, "MCP-Protocol-Version": "2025-06-18"})
        c.check(closed.status_code in (200, 202, 204), "through b: the session is closed", closed.status_code)


def holder(nodes: List[Node]) -> Optional[str]:
    """The node the store's lease names, as a node's stores listing shows it."""
    listed = httpx2.get(
        f"{nodes[-1].base}/v1/stores?details=true",
        headers={"Authorization": f"Bearer {nodes[-1].token}"},
        timeout=TIMEOUT,
    ).json()
    for store in listed["stores"]:
        if store["name"] == STORE:
            return (store.get("holder") or {}).get("node")
    return None


async def across_a_move(c: Checks, nodes: List[Node]) -> Optional[str]:
    a, b, via = nodes
    before = holder(nodes)
    c.equal(before, "a", "the store's holder is the node it was made through")
    async with http_client(via.token) as admin:
        made = await admin.post(f"{b.base}/v1/stores/{STORE}/tokens", json={"agent": "zed"})
        c.equal(made.status_code, 200, f"an agent token is issued through b: {made.text}")
        zed = made.json().get("token")
        # An operator session opened before the move and not used again until after it.
        idle = await initialize(admin, via.mcp)
        c.check(idle is not None, "an operator session is opened through c")
    async with http_client(via.token, "carol") as http:
        transport = streamable_http_client(via.mcp, http_client=http)
        async with Client(transport, mode="legacy", read_timeout_seconds=TIMEOUT) as client:
            result = await client.call_tool("memory", create("/memories/before-move.md", "before\n"))
            c.equal(text_of(result), "File created successfully at: /memories/before-move.md", "before the move")
            drained = httpx2.post(
                f"{a.base}/v1/fleet/drain",
                headers={"Authorization": f"Bearer {a.token}"},
                json={},
                timeout=TIMEOUT,
            )
            c.equal(drained.status_code, 200, f"the holder is drained: {drained.text}")
            after = holder(nodes)
            print(f"the store moved from {before} to {after}", flush=True)
            c.check(after in ("b", "c"), "the store moved to another node", after)
            try:
                result = await client.call_tool("memory", create("/memories/after-move.md", "after\n"))
                got = (text_of(result), bool(result.is_error))
            except Exception as e:  # the SDK surfaces a 404 for the session as an error
                got = repr(e)
            c.equal(
                got,
                ("File created successfully at: /memories/after-move.md", False),
                "the same session's call after its store moved is served by the new holder",
            )
    async with http_client(zed) as stranger:
        response = await ping(stranger, via.mcp, idle or "")
        c.equal(response.status_code, 404, "an agent token naming the operator's session after the move: 404")
    async with http_client(via.token) as admin:
        response = await ping(admin, via.mcp, idle or "")
        c.equal(response.status_code, 200, f"the operator's own session after the move: served ({response.text!r})")
    return zed


MAX_SESSIONS = 32


async def sessions_bounded_across_a_move(c: Checks, nodes: List[Node], zed: str) -> None:
    """A principal holds at most MAX_SESSIONS sessions on a node, those taken up from the bucket
    included: one more opened there closes its oldest."""
    _, b, via = nodes
    async with http_client(zed) as http:
        opened = [await initialize(http, via.mcp) for _ in range(MAX_SESSIONS)]
        c.check(all(opened), "an agent opens its sessions through c")
        drained = httpx2.post(
            f"{b.base}/v1/fleet/drain", headers={"Authorization": f"Bearer {b.token}"}, json={}, timeout=TIMEOUT
        )
        c.equal(drained.status_code, 200, f"the store's new holder is drained in turn: {drained.text}")
        c.equal(holder(nodes), "c", "the store moved to c")
        taken_up = [(await ping(http, via.mcp, session or "")).status_code for session in opened]
        c.equal(taken_up, [200] * MAX_SESSIONS, "every session of the agent is taken up on c")
        newest = await initialize(http, via.mcp)
        c.check(newest is not None, "the agent opens one more session on c")
        first = await ping(http, via.mcp, opened[0] or "")
        c.equal(first.status_code, 404, "its oldest session (taken up) is closed: a principal holds at most 32")
        last = await ping(http, via.mcp, opened[-1] or "")
        c.equal(last.status_code, 200, "its other sessions go on")


async def sessionless(c: Checks, via: Node) -> None:
    async with http_client(via.token, "erin") as http:
        transport = streamable_http_client(via.mcp, http_client=http)
        async with Client(transport, mode="2026-07-28", read_timeout_seconds=TIMEOUT) as client:
            result = await client.call_tool("memory", create("/memories/sessionless.md", "no session\n"))
            c.equal(
                (text_of(result), bool(result.is_error)),
                ("File created successfully at: /memories/sessionless.md", False),
                "session-less through b",
            )


def files_everywhere(c: Checks, nodes: List[Node]) -> None:
    want = ["after-move.md", "b.md", "before-move.md", "sessionless.md"]
    for node in nodes[1:]:
        reply = httpx2.post(
            f"{node.base}/v1/stores/{STORE}/memory",
            headers={"Authorization": f"Bearer {node.token}"},
            json={"command": "view", "path": "/memories"},
            timeout=TIMEOUT,
        )
        listed = sorted(name for name in want if f"/memories/{name}" in reply.text)
        c.equal(listed, want, f"every call's file, read through {node.id}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mnemo", required=True, help="the mnemo binary")
    opts = parser.parse_args()
    installed = importlib.metadata.version("mcp")
    if installed != MCP_VERSION:
        print(f"harness: mcp=={MCP_VERSION} expected, {installed} installed", file=sys.stderr)
        return 2
    logging.getLogger("mcp.client.streamable_http").setLevel(logging.ERROR)
    started = time.monotonic()
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="mnemo-mcp-fleet-") as tmp:
        root = Path(tmp)
        bucket = f"file://{root}/bucket"
        nodes: List[Node] = []
        try:
            for node_id in ["a", "b", "c"]:
                nodes.append(Node(opts.mnemo, root, bucket, node_id))
            made = httpx2.post(
                f"{nodes[0].base}/v1/stores",
                headers={"Authorization": f"Bearer {nodes[0].token}"},
                json={"name": STORE},
                timeout=TIMEOUT,
            )
            if made.status_code != 201:
                raise SystemExit(f"harness: the store could not be made: {made.status_code} {made.text}")
            asyncio.run(through_a_non_holder(c, nodes[1]))
            asyncio.run(stream_head(c, nodes[1]))
            zed = asyncio.run(across_a_move(c, nodes))
            asyncio.run(sessions_bounded_across_a_move(c, nodes, zed or ""))
            asyncio.run(sessionless(c, nodes[1]))
            files_everywhere(c, nodes)
        finally:
            codes = [(node.id, node.stop()) for node in nodes]
        c.equal([code for _, code in codes], [0] * len(codes), "every node exits 0 on SIGTERM")
    print(f"mcp_fleet_client: {time.monotonic() - started:.1f} s")
    print(f"{c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""`mnemo serve`'s MCP endpoint (streamable HTTP at /mcp) with the official Python SDK as client.

The server is started on a fresh store; the client reads the URL and the operator's bearer token
from the server file the server writes in the store directory, as a local client would. Then:

  1. two sessions at once (the initialize handshake, so each request carries Mcp-Session-Id), one
     acting as agent alice and one as bob (X-Mnemo-Agent): alice runs tests/mcp_client.py's
     session of the six commands with its exact texts, bob the same session under the hidden
     directory /memories/.bob, interleaved; then the resources (list, read);
  2. a session whose X-Mnemo-Agent header changes between two calls: each call is recorded under
     the agent its own request named, so identity never comes from the session;
  3. a session-less client (protocol 2026-07-28: no handshake, no Mcp-Session-Id on any request):
     the tool, a call and the resources;
  4. a client without the token, and one with a wrong token: refused (HTTP 401);
  5. an agent token (made with the operator's token, POST /v1/tokens): a session with it is
     recorded under its agent, one claiming another agent is refused (403); the token revoked
     while the session is open: the session's next call fails, a raw request gets 401;
  6. after SIGTERM: the server exits 0 and removes its file, `mnemo verify` is intact, and
     `mnemo log` attributes every call to the agent that made it.

Usage: mcp_http_client.py --mnemo PATH (a mnemo built with --features serve)
Exit status: 0 when every check passed, 1 when one failed, 2 on a harness error.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import logging
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_client import FINAL_FILES, FINAL_URIS, MCP_VERSION, ROOT, SESSION, TIMEOUT, Checks, text_of

SERVER_FILE = "mnemo-server.json"
SESSION_HEADER = "mcp-session-id"


def bob_session() -> List[Tuple[Dict[str, Any], str, bool]]:
    """SESSION moved under /memories/.bob (hidden, so alice's listings do not show it), without the
    calls whose text depends on the root itself."""
    moved = []
    for args, text, is_error in SESSION:
        flat = json.dumps(args)
        if f'"{ROOT}"' in flat or ".." in flat:
            continue
        moved.append(
            (
                json.loads(flat.replace(f"{ROOT}/", f"{ROOT}/.bob/")),
                text.replace(f"{ROOT}/", f"{ROOT}/.bob/"),
                is_error,
            )
        )
    return moved


class Server:
    """A `mnemo serve` process and what its server file says."""

    def __init__(self, mnemo: str, db: Path) -> None:
        self.db = db
        self.proc = subprocess.Popen(
            [mnemo, "serve", "--db", str(db), "--durability", "buffered", "--agent", "default"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                info = json.loads((db / SERVER_FILE).read_text())
                if info["pid"] == self.proc.pid:
                    break
            except (OSError, ValueError, KeyError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"harness: mnemo serve did not start: {self.proc.stderr.read()!r}")
            time.sleep(0.02)
        self.url = info["url"] + "/mcp"
        self.token = info["token"]

    def stop(self) -> Tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        _, stderr = self.proc.communicate(timeout=TIMEOUT)
        return self.proc.returncode, stderr.decode(errors="replace")


class Recorder:
    """Remembers whether each MCP request carried a session id."""

    def __init__(self) -> None:
        self.with_session = 0
        self.without_session = 0

    async def __call__(self, request: httpx2.Request) -> None:
        if SESSION_HEADER in request.headers:
            self.with_session += 1
        else:
            self.without_session += 1


def http_client(token: Optional[str], agent: Optional[str], recorder: Optional[Recorder] = None) -> httpx2.AsyncClient:
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if agent is not None:
        headers["X-Mnemo-Agent"] = agent
    hooks = {"request": [recorder]} if recorder is not None else {}
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(TIMEOUT), event_hooks=hooks)


async def run_session(
    c: Checks, server: Server, agent: str, calls: List[Tuple[Dict[str, Any], str, bool]], recorder: Recorder
) -> None:
    async with http_client(server.token, agent, recorder) as http:
        transport = streamable_http_client(server.url, http_client=http)
        async with Client(transport, mode="legacy", read_timeout_seconds=TIMEOUT) as client:
            info = client.server_info
            c.check(info is not None and info.name == "mnemo", f"{agent}: server info names mnemo", info)
            tools = (await client.list_tools()).tools
            c.equal([t.name for t in tools], ["memory"], f"{agent}: exactly one tool, memory")
            for args, want_text, want_error in calls:
                result = await client.call_tool("memory", args)
                c.equal(text_of(result), want_text, f"{agent}: text of {json.dumps(args)}")
                c.equal(bool(result.is_error), want_error, f"{agent}: isError of {json.dumps(args)}")
                await asyncio.sleep(0)


async def concurrent_sessions(c: Checks, server: Server) -> None:
    alice, bob = Recorder(), Recorder()
    await asyncio.gather(
        run_session(c, server, "alice", SESSION, alice),
        run_session(c, server, "bob", bob_session(), bob),
    )
    for name, recorder in [("alice", alice), ("bob", bob)]:
        c.check(recorder.with_session > len(SESSION) // 2, f"{name}'s requests carry a session id", vars(recorder))

    async with http_client(server.token, "alice") as http:
        transport = streamable_http_client(server.url, http_client=http)
        async with Client(transport, mode="legacy", read_timeout_seconds=TIMEOUT) as client:
            resources = (await client.list_resources()).resources
            listed = {r.uri for r in resources}
            want = set(FINAL_URIS) | {uri.replace(f"{ROOT}/", f"{ROOT}/.bob/") for uri in FINAL_URIS}
            c.equal(listed, want, "resources list both agents' memory files")
            for uri, (path, mime) in FINAL_URIS.items():
                contents = (await client.read_resource(uri)).contents
                c.equal([(x.text, x.mime_type) for x in contents], [(FINAL_FILES[path], mime)], f"read {uri}")


async def agent_per_request(c: Checks, server: Server) -> None:
    recorder = Recorder()
    async with http_client(server.token, "carol", recorder) as http:
        transport = streamable_http_client(server.url, http_client=http)
        async with Client(transport, mode="legacy", read_timeout_seconds=TIMEOUT) as client:
            await client.call_tool("memory", {"command": "view", "path": ROOT})
            http.headers["X-Mnemo-Agent"] = "dave"
            await client.call_tool("memory", {"command": "view", "path": ROOT})
    c.check(recorder.with_session >= 2, "the switching session keeps its session id", vars(recorder))


async def sessionless(c: Checks, server: Server) -> None:
    recorder = Recorder()
    async with http_client(server.token, "erin", recorder) as http:
        transport = streamable_http_client(server.url, http_client=http)
        async with Client(transport, mode="2026-07-28", read_timeout_seconds=TIMEOUT) as client:
            print(f"session-less client speaks protocol {client.protocol_version}", flush=True)
            c.equal([t.name for t in (await client.list_tools()).tools], ["memory"], "session-less: the tool")
            result = await client.call_tool("memory", {"command": "view", "path": "/memories/people/ana.md"})
            c.equal(
                (text_of(result), bool(result.is_error)),
                (
                    "Here's the content of /memories/people/ana.md with line numbers:\n"
                    "     1\t# Notes\n     2\t- lives in Lisbon\n     3\t- likes green tea\n     4\t",
                    False,
                ),
                "session-less: a call sees the sessions' memory",
            )
            uris = {r.uri for r in (await client.list_resources()).resources}
            c.check(set(FINAL_URIS) <= uris, "session-less: the resources", uris)
    c.equal(recorder.with_session, 0, "no session-less request carries a session id")
    c.check(recorder.without_session >= 3, "the session-less requests reached the server", vars(recorder))


async def refused(c: Checks, server: Server) -> None:
    for label, token in [("no token", None), ("a wrong token", "0" * 64)]:
        try:
            async with http_client(token, "mallory") as http:
                transport = streamable_http_client(server.url, http_client=http)
                async with Client(transport, mode="legacy", read_timeout_seconds=TIMEOUT) as client:
                    await client.call_tool("memory", {"command": "create", "path": "/memories/m.md", "file_text": "x"})
            c.check(False, f"a client with {label} is refused")
        except Exception as e:  # the SDK surfaces the 401 as a generic error (-32603)
            print(f"a client with {label}: {e!r}", flush=True)
        # Raw, to see the status and the challenge.
        async with http_client(token, "mallory") as http:
            response = await http.post(
                server.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Accept": "application/json, text/event-stream"},
            )
        c.equal(response.status_code, 401, f"{label}: HTTP 401")
        c.check(response.headers.get("www-authenticate", "").startswith("Bearer"), f"{label}: WWW-Authenticate: Bearer")


AGENT = "frank"


async def agent_token(c: Checks, server: Server) -> None:
    base = server.url.removesuffix("/mcp")
    async with http_client(server.token, None) as admin:
        made = await admin.post(f"{base}/v1/tokens", json={"agent": AGENT, "label": "mcp client"})
        c.equal(made.status_code, 200, f"the operator makes an agent token: {made.text}")
        token = made.json()["token"]
        token_id = made.json()["id"]
        steps: List[str] = []
        try:
            async with http_client(token, None) as http:
                transport = streamable_http_client(server.url, http_client=http)
                async with Client(transport, mode="legacy", read_timeout_seconds=TIMEOUT) as client:
                    result = await client.call_tool(
                        "memory", {"command": "create", "path": f"{ROOT}/{AGENT}.md", "file_text": "mine\n"}
                    )
                    c.equal(
                        (text_of(result), bool(result.is_error)),
                        (f"File created successfully at: {ROOT}/{AGENT}.md", False),
                        "an agent token's session writes",
                    )
                    revoked = await admin.delete(f"{base}/v1/tokens/{token_id}")
                    c.equal(revoked.status_code, 200, f"the operator revokes the token: {revoked.text}")
                    steps.append("revoked")
                    await client.call_tool("memory", {"command": "view", "path": ROOT})
                    steps.append("called after the revoke")
        except Exception as e:  # the SDK surfaces the 401 as an error
            print(f"after the revoke: {e!r}", flush=True)
        c.equal(steps, ["revoked"], "the session's next call after the revoke is refused")
        async with http_client(token, None) as http:
            response = await http.post(
                server.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Accept": "application/json, text/event-stream"},
            )
        c.equal(response.status_code, 401, "a revoked token: HTTP 401")
        second = await admin.post(f"{base}/v1/tokens", json={"agent": AGENT})
        async with http_client(second.json()["token"], "mallory") as http:
            response = await http.post(
                server.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Accept": "application/json, text/event-stream"},
            )
        c.equal(response.status_code, 403, "an agent token claiming another agent: HTTP 403")


def audit(c: Checks, mnemo: str, db: Path) -> None:
    verify = subprocess.run([mnemo, "verify", "--db", str(db), "--json"], capture_output=True, timeout=60)
    c.equal(verify.returncode, 0, "mnemo verify exits 0")
    report = json.loads(verify.stdout or b"{}")
    c.equal((report.get("status"), report.get("violations")), ("intact", []), "the store is intact")
    log = subprocess.run([mnemo, "log", "--db", str(db), "--json"], capture_output=True, timeout=60)
    events = [json.loads(line) for line in log.stdout.decode().splitlines()]
    agents = Counter(e["agent"] for e in events)
    want = Counter(
        {"alice": len(SESSION), "bob": len(bob_session()), "carol": 1, "dave": 1, "erin": 1, AGENT: 1, "operator": 3}
    )
    c.equal(agents, want, "every call is recorded under the agent its request named, and nothing else")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mnemo", required=True, help="the mnemo binary, built with --features serve")
    opts = parser.parse_args()
    installed = importlib.metadata.version("mcp")
    if installed != MCP_VERSION:
        print(f"harness: mcp=={MCP_VERSION} expected, {installed} installed", file=sys.stderr)
        return 2
    # rmcp answers a session's DELETE with 202 Accepted, which the SDK logs as a failed termination.
    logging.getLogger("mcp.client.streamable_http").setLevel(logging.ERROR)
    started = time.monotonic()
    c = Checks()
    with tempfile.TemporaryDirectory(prefix="mnemo-mcp-http-") as tmp:
        db = Path(tmp) / "memory.mnemo.db"
        server = Server(opts.mnemo, db)
        print(f"server: {server.url}", flush=True)
        try:
            asyncio.run(concurrent_sessions(c, server))
            asyncio.run(agent_per_request(c, server))
            asyncio.run(sessionless(c, server))
            asyncio.run(refused(c, server))
            asyncio.run(agent_token(c, server))
        finally:
            code, stderr = server.stop()
        c.equal(code, 0, "mnemo serve exits 0 on SIGTERM")
        c.check(not (db / SERVER_FILE).exists(), "the server file is removed on exit")
        c.check(server.token not in stderr, "the token is never logged")
        c.check("refused 401" in stderr, "refused requests are logged", stderr)
        audit(c, opts.mnemo, db)
    print(f"mcp_http_client: {time.monotonic() - started:.1f} s")
    print(f"{c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())

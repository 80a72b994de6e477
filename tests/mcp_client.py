#!/usr/bin/env python3
"""End-to-end test of `mnemo mcp` with an independent MCP client: the official Python SDK.

The server is started exactly as README.md's "MCP server" section registers it: the JSON config
block there is read from the README, and only two things are put in: the built binary for the
command `mnemo` and a fresh store for the `--db` path. Then:

  1. a session with the SDK's `Client` over stdio, negotiated with the `initialize` handshake:
     server info and instructions, the one tool `memory` and its schema, a session of the six
     commands (and error cases) whose results must equal the spec profile's exact text, the
     resources (list, read, an unknown URI) and an unknown tool;
  2. every call of that session replayed through `mnemo tool` on a second store: the MCP text and
     error flag must equal the memory tool's, byte for byte;
  3. a second session on the same store with the SDK's default negotiation (discovery first);
  4. a raw pipe to the server that sends malformed requests (lines that are not JSON, JSON that is
     not a request, unknown methods, bad params) and checks the JSON-RPC errors, then a valid call;
  5. `mnemo verify` (exit 0, intact) and `mnemo log`: one event per memory call, each attributed to
     the config's `--agent`, and none for resource reads or malformed requests.

Usage: mcp_client.py --mnemo PATH [--readme PATH]
Exit status: 0 when every check passed, 1 when one failed, 2 on a harness error.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from mcp import Client, MCPError, StdioServerParameters

MCP_VERSION = "2.3.0"
ROOT = "/memories"
TIMEOUT = 20.0

LISTING_HEAD = (
    "Here're the files and directories up to 2 levels deep in /memories, "
    "excluding hidden items and node_modules:\n4K\t/memories"
)

# (arguments, exact result text, is_error): a memory session in the spec profile.
SESSION: List[Tuple[Dict[str, Any], str, bool]] = [
    ({"command": "view", "path": ROOT}, LISTING_HEAD, False),
    (
        {"command": "create", "path": "/memories/notes.md", "file_text": "# Notes\n- likes tea\n"},
        "File created successfully at: /memories/notes.md",
        False,
    ),
    (
        {"command": "view", "path": "/memories/notes.md"},
        "Here's the content of /memories/notes.md with line numbers:\n"
        "     1\t# Notes\n     2\t- likes tea\n     3\t",
        False,
    ),
    (
        {
            "command": "str_replace",
            "path": "/memories/notes.md",
            "old_str": "likes tea",
            "new_str": "likes green tea",
        },
        "The memory file has been edited.\n     1\t# Notes\n     2\t- likes green tea\n     3\t",
        False,
    ),
    (
        {
            "command": "insert",
            "path": "/memories/notes.md",
            "insert_line": 1,
            "insert_text": "- lives in Lisbon\n",
        },
        "The file /memories/notes.md has been edited.",
        False,
    ),
    (
        {"command": "view", "path": "/memories/notes.md", "view_range": [2, 3]},
        "Here's the content of /memories/notes.md with line numbers:\n"
        "     2\t- lives in Lisbon\n     3\t- likes green tea",
        False,
    ),
    (
        {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/people/ana.md"},
        "Successfully renamed /memories/notes.md to /memories/people/ana.md",
        False,
    ),
    (
        {"command": "create", "path": "/memories/scratch.txt", "file_text": "temporary\n"},
        "File created successfully at: /memories/scratch.txt",
        False,
    ),
    ({"command": "delete", "path": "/memories/scratch.txt"}, "Successfully deleted /memories/scratch.txt", False),
    (
        {"command": "create", "path": "/memories/to do.txt", "file_text": "buy milk\n"},
        "File created successfully at: /memories/to do.txt",
        False,
    ),
    (
        {"command": "view", "path": ROOT},
        LISTING_HEAD + "\n4K\t/memories/people/\n44B\t/memories/people/ana.md\n9B\t/memories/to do.txt",
        False,
    ),
    # Error results: MCP tool errors (isError), each still one event in the log.
    (
        {"command": "view", "path": "/memories/missing.md"},
        "The path /memories/missing.md does not exist. Please provide a valid path.",
        True,
    ),
    (
        {"command": "view", "path": "/memories/../etc/passwd"},
        "Path /memories/../etc/passwd would escape /memories directory",
        True,
    ),
    (
        {"command": "str_replace", "path": "/memories/people/ana.md", "old_str": "likes coffee", "new_str": "x"},
        "No replacement was performed, old_str `likes coffee` did not appear verbatim in /memories/people/ana.md.",
        True,
    ),
    (
        {"command": "insert", "path": "/memories/people/ana.md", "insert_line": 99, "insert_text": "x\n"},
        "Error: Invalid `insert_line` parameter: 99. It should be within the range of lines of the file: [0, 3]",
        True,
    ),
    (
        {"command": "frobnicate", "path": ROOT},
        'Error: Unknown command "frobnicate"; use one of: view, create, str_replace, insert, delete, rename',
        True,
    ),
    (
        {},
        'Error: The input has no "command" field; use one of: view, create, str_replace, insert, delete, '
        'rename. A valid input looks like {"command": "view", "path": "/memories", "view_range": [1, 20]}',
        True,
    ),
]

FINAL_FILES = {
    "/memories/people/ana.md": "# Notes\n- lives in Lisbon\n- likes green tea\n",
    "/memories/to do.txt": "buy milk\n",
}
FINAL_URIS = {
    "memory:///memories/people/ana.md": ("/memories/people/ana.md", "text/markdown"),
    "memory:///memories/to%20do.txt": ("/memories/to do.txt", "text/plain"),
}


class Checks:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, ok: bool, what: str, detail: Any = None) -> bool:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL: {what}" + (f"\n      {detail!r}" if detail is not None else ""), flush=True)
        return ok

    def equal(self, got: Any, want: Any, what: str) -> bool:
        return self.check(got == want, what, {"got": got, "want": want})


def readme_config(readme: Path) -> Dict[str, Any]:
    """The JSON block that follows the README's note naming this test."""
    text = readme.read_text(encoding="utf-8")
    at = text.find("tests/mcp_client.py")
    match = re.search(r"```json\n(.*?)\n```", text[at:], re.S) if at >= 0 else None
    if match is None:
        raise SystemExit("harness: README.md has no JSON config block after the note naming tests/mcp_client.py")
    return json.loads(match.group(1))


def launch(config: Dict[str, Any], mnemo: str, db: Path) -> Tuple[List[str], str]:
    """The server command line from the config (binary and store put in), and its agent id."""
    entry = config["mcpServers"]["memory"]
    if entry["command"] != "mnemo" or entry["args"][0] != "mcp" or "--db" not in entry["args"]:
        raise SystemExit(f"harness: unexpected config entry {entry!r}")
    args = list(entry["args"])
    args[args.index("--db") + 1] = str(db)
    agent = args[args.index("--agent") + 1] if "--agent" in args else "mcp"
    return [mnemo, *args], agent


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", None) == "text")


async def first_session(c: Checks, argv: List[str]) -> List[Tuple[Dict[str, Any], str, bool]]:
    """Initialize handshake, tool listing, the six commands, resources. Returns what was answered."""
    answered: List[Tuple[Dict[str, Any], str, bool]] = []
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with Client(params, mode="legacy", read_timeout_seconds=TIMEOUT) as client:
        info = client.server_info
        c.check(info is not None and info.name == "mnemo", "server info names mnemo", info)
        instructions = client.instructions or ""
        c.check(
            'command "view" and path "/memories"' in instructions and "Before doing anything else" in instructions,
            "instructions tell the model to view /memories first",
            instructions,
        )
        caps = client.server_capabilities
        c.check(caps.tools is not None and caps.resources is not None, "tools and resources capabilities", caps)

        tools = (await client.list_tools()).tools
        c.equal([t.name for t in tools], ["memory"], "exactly one tool, memory")
        schema = tools[0].input_schema if tools else {}
        props = schema.get("properties", {})
        c.equal(
            props.get("command", {}).get("enum"),
            ["view", "create", "str_replace", "insert", "delete", "rename"],
            "the command enum is the six commands",
        )
        c.equal(schema.get("required"), ["command"], "only command is required")
        fields = {"command", "path", "view_range", "file_text", "old_str", "new_str",
                  "insert_line", "insert_text", "old_path", "new_path"}
        c.equal(set(props), fields, "the schema has every command's fields")
        c.check(
            all(len(p.get("description", "")) > 20 for p in props.values()),
            "every field has a description",
            props,
        )

        for args, want_text, want_error in SESSION:
            result = await client.call_tool("memory", args)
            got = text_of(result)
            answered.append((args, got, bool(result.is_error)))
            c.equal(got, want_text, f"text of {json.dumps(args)}")
            c.equal(bool(result.is_error), want_error, f"isError of {json.dumps(args)}")

        resources = (await client.list_resources()).resources
        listed = {r.uri: (r.title, r.mime_type, r.size) for r in resources}
        want = {uri: (path, mime, len(FINAL_FILES[path].encode())) for uri, (path, mime) in FINAL_URIS.items()}
        c.equal(listed, want, "resources list the memory files (uri, title, mime type, size)")
        for uri, (path, mime) in FINAL_URIS.items():
            contents = (await client.read_resource(uri)).contents
            c.equal([(x.uri, x.text, x.mime_type) for x in contents], [(uri, FINAL_FILES[path], mime)], f"read {uri}")

        for bad_uri in ["memory:///memories/nope.md", "memory:///etc/passwd", "file:///memories/people/ana.md"]:
            try:
                await client.read_resource(bad_uri)
                c.check(False, f"reading {bad_uri} is an error")
            except MCPError as e:
                c.equal(e.code, -32002, f"reading {bad_uri} is resource-not-found")

        try:
            await client.call_tool("shell", {"command": "ls"})
            c.check(False, "an unknown tool is a protocol error")
        except MCPError as e:
            c.equal(e.code, -32602, "an unknown tool is invalid params")
            c.check("memory" in e.message, "the unknown-tool error names the memory tool", e.message)
    return answered


def same_as_memory_tool(c: Checks, mnemo: str, answered: List[Tuple[Dict[str, Any], str, bool]], agent: str) -> None:
    """Every MCP answer equals `mnemo tool`'s for the same input on a fresh store."""
    with tempfile.TemporaryDirectory(prefix="mnemo-mcp-twin-") as tmp:
        lines = "".join(json.dumps(args) + "\n" for args, _, _ in answered)
        out = subprocess.run(
            [mnemo, "tool", "--db", str(Path(tmp) / "store"), "--agent", agent],
            input=lines.encode(),
            capture_output=True,
            timeout=60,
        )
        c.equal(out.returncode, 0, "mnemo tool ran the same session")
        results = [json.loads(line) for line in out.stdout.decode().splitlines()]
        c.equal(len(results), len(answered), "mnemo tool answered every call")
        for (args, text, is_error), result in zip(answered, results):
            c.equal((text, is_error), (result["content"], bool(result.get("is_error"))),
                    f"MCP and mnemo tool agree on {json.dumps(args)}")


async def second_session(c: Checks, argv: List[str]) -> None:
    """The SDK's default negotiation (discovery, then the handshake if needed) on the same store."""
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with Client(params, read_timeout_seconds=TIMEOUT) as client:
        print(f"second session negotiated protocol {client.protocol_version}", flush=True)
        c.equal([t.name for t in (await client.list_tools()).tools], ["memory"], "second session lists memory")
        result = await client.call_tool("memory", {"command": "view", "path": "/memories/people/ana.md"})
        c.equal(
            (text_of(result), bool(result.is_error)),
            (
                "Here's the content of /memories/people/ana.md with line numbers:\n"
                "     1\t# Notes\n     2\t- lives in Lisbon\n     3\t- likes green tea\n     4\t",
                False,
            ),
            "second session sees the first session's memory",
        )
        uris = sorted(r.uri for r in (await client.list_resources()).resources)
        c.equal(uris, sorted(FINAL_URIS), "second session lists the same resources")


def raw_session(c: Checks, argv: List[str]) -> None:
    """Malformed requests over a plain pipe: JSON-RPC errors, and the session goes on."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    replies: "queue.Queue[Optional[Dict[str, Any]]]" = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            replies.put(json.loads(line))
        replies.put(None)

    threading.Thread(target=read, daemon=True).start()

    def send(*lines: Union[str, bytes]) -> None:
        assert proc.stdin is not None
        for line in lines:
            proc.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        proc.stdin.flush()

    def reply(want_id: Any) -> Optional[Dict[str, Any]]:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                msg = replies.get(timeout=deadline - time.monotonic())
            except queue.Empty:
                break
            if msg is None:
                break
            got.append(msg)
            if msg.get("id") == want_id:
                return msg
        c.check(False, f"a reply with id {want_id!r}", got)
        return None

    def request(id_: int, method: str, params: Any = None) -> str:
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            msg["params"] = params
        return json.dumps(msg)

    got: List[Dict[str, Any]] = []
    send(request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "raw-pipe", "version": "0"}}))
    init = reply(1)
    c.check(init is not None and "result" in init, "raw initialize succeeds", init)
    send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    # Not JSON at all (a bad object, bytes that are not UTF-8, garbage, a cut-off request, an
    # unclosed array): exactly one parse error each, with a null id and a message that says what
    # a message looks like; a blank line is no message. Then a valid request is still answered.
    not_json: List[Union[str, bytes]] = [
        "{not json",
        b"\xff\xfe{\"jsonrpc\": \"2.0\"}",
        "this is not json",
        '{"jsonrpc":"2.0","id":90,"method":"tools/call","params":{"name":"memory"',
        "[1, 2",
    ]
    before = len(got)
    send(*not_json, "", request(2, "ping"))
    pong = reply(2)
    c.check(pong is not None and pong.get("result") == {}, "a ping after the non-JSON lines is answered", pong)
    parse_errors = got[before:-1]
    c.equal(len(parse_errors), len(not_json), "one reply per non-JSON line, none for a blank line")
    for line, answer in zip(not_json, parse_errors):
        error = answer.get("error", {})
        c.equal(error.get("code"), -32700, f"{line!r} is a parse error")
        c.check("id" in answer and answer["id"] is None, f"the parse error for {line!r} has id null", answer)
        c.check('"jsonrpc":"2.0"' in error.get("message", ""), f"the parse error for {line!r} shows a valid message", answer)
    # JSON that is no JSON-RPC message: Invalid Request, with a null id.
    send('{"foo": 1}')
    invalid = reply(None)
    c.equal((invalid or {}).get("error", {}).get("code"), -32600, "a non-request JSON object is Invalid Request")
    malformed = [
        (3, "no/such/method", None, -32601),
        (4, "tools/call", {"arguments": {"command": "view", "path": ROOT}}, -32602),  # no name
        (5, "tools/call", {"name": "memory", "arguments": "view /memories"}, -32602),  # not an object
        (6, "tools/call", None, -32602),  # no params at all
        (7, "resources/read", {"uri": 42}, -32602),
        (8, "tools/call", {"name": "shell", "arguments": {}}, -32602),  # unknown tool
        (9, "resources/read", {"uri": "memory:///memories/../../etc/passwd"}, -32002),
    ]
    for id_, method, params, code in malformed:
        send(request(id_, method, params))
        answer = reply(id_) or {}
        c.equal(answer.get("error", {}).get("code"), code, f"{method} {json.dumps(params)} is error {code}")
        c.check(len(answer.get("error", {}).get("message", "")) > 0, f"error {code} has a message", answer)

    # The session still serves a valid call, and answered each line above exactly once.
    send(request(10, "tools/call", {"name": "memory", "arguments": {"command": "view", "path": ROOT}}))
    ok = reply(10) or {}
    content = ok.get("result", {}).get("content", [{}])
    c.equal(content[0].get("text", "").split("\n")[0], LISTING_HEAD.split("\n")[0], "a valid call after the malformed ones works")
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        code = proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = None
    c.equal(code, 0, "the server exits 0 when the client closes stdin")
    while True:
        try:
            msg = replies.get(timeout=1)
        except queue.Empty:
            break
        if msg is None:
            break
        got.append(msg)
    ids = sorted(str(m.get("id")) for m in got)
    want = ["1", "2", "None", "3", "4", "5", "6", "7", "8", "9", "10"] + ["None"] * len(not_json)
    c.equal(ids, sorted(want), "one reply per request and per non-JSON line")
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    c.check("panicked" not in stderr, "the server did not panic", stderr)


def audit(c: Checks, mnemo: str, db: Path, agent: str, memory_calls: List[Dict[str, Any]]) -> None:
    """The store verifies, and holds one event per memory call, attributed to the agent."""
    verify = subprocess.run([mnemo, "verify", "--db", str(db), "--json"], capture_output=True, timeout=60)
    c.equal(verify.returncode, 0, "mnemo verify exits 0")
    report = json.loads(verify.stdout or b"{}")
    c.equal((report.get("status"), report.get("violations")), ("intact", []), "the store is intact")
    c.equal(report.get("events"), len(memory_calls), "one event per memory call (none for reads of resources)")
    log = subprocess.run([mnemo, "log", "--db", str(db), "--json"], capture_output=True, timeout=60)
    c.equal(log.returncode, 0, "mnemo log exits 0")
    events = [json.loads(line) for line in log.stdout.decode().splitlines()]
    c.equal({e["agent"] for e in events}, {agent}, f"every event is attributed to {agent}")
    c.equal({e["tool_use_id"] for e in events}, {None}, "MCP calls carry no tool_use id")
    known = {"view", "create", "str_replace", "insert", "delete", "rename"}
    want = [call.get("command") if call.get("command") in known else "rejected" for call in memory_calls]
    c.equal([e["command"] for e in events], want, "the log lists the calls in order")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mnemo", required=True, help="the mnemo binary, built with --features mcp")
    parser.add_argument("--readme", default=str(Path(__file__).resolve().parent.parent / "README.md"))
    opts = parser.parse_args()
    installed = importlib.metadata.version("mcp")
    if installed != MCP_VERSION:
        print(f"harness: mcp=={MCP_VERSION} expected, {installed} installed", file=sys.stderr)
        return 2

    started = time.monotonic()
    c = Checks()
    config = readme_config(Path(opts.readme))
    with tempfile.TemporaryDirectory(prefix="mnemo-mcp-") as tmp:
        db = Path(tmp) / "memory.mnemo.db"
        argv, agent = launch(config, opts.mnemo, db)
        print(f"server: {' '.join(argv)}", flush=True)
        answered = asyncio.run(first_session(c, argv))
        same_as_memory_tool(c, opts.mnemo, answered, agent)
        asyncio.run(second_session(c, argv))
        raw_session(c, argv)
        calls = [args for args, _, _ in SESSION]
        calls.append({"command": "view", "path": "/memories/people/ana.md"})  # second session
        calls.append({"command": "view", "path": ROOT})  # raw session
        audit(c, opts.mnemo, db, agent, calls)
    print(f"mcp_client: {time.monotonic() - started:.1f} s")
    print(f"{c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The memory-stores API of `mnemo serve --data`, driven by the official Python SDK.

Starts a data server on loopback in a temporary directory, then calls every route of
`client.beta.memory_stores` that the server answers (stores: create, retrieve, update, list,
archive, delete; memories: list, retrieve) with `anthropic` 2.16.0 or 2.17.0 (`--sdk`), asserting
that the SDK parses each answer into its typed objects and that the values are the store's:
memories written through the memory tool's own route, 250 of them paged through, a rename that
keeps a memory's id and moves its version, SHA-256 digests computed here, and the errors the SDK
raises (a path conflict naming the memory in the way, the sharing rules' refusals naming their
request). On 2.17.0, the SDK's write-through of memory-file writes (`SessionMemoryStores.write_file`)
against a real server: a dropped answer, a stale edit and a stopped server included.
"""

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import anthropic
import anyio
from types import SimpleNamespace
from anthropic.types.beta import BetaManagedAgentsMemoryStore
from anthropic.types.beta.memory_stores import (
    BetaManagedAgentsMemory,
    BetaManagedAgentsMemoryPrefix,
)

METHODS = []


def tried(name):
    METHODS.append(name)


def start(mnemo, data, *extra):
    server = subprocess.Popen(
        [mnemo, "serve", "--data", data, "--listen", "127.0.0.1:0", "--max-open-stores", "4", *extra],
        stdout=subprocess.DEVNULL,
        stderr=sys.stderr,
    )
    path = os.path.join(data, "mnemo-server.json")
    for _ in range(600):
        if os.path.exists(path):
            try:
                with open(path) as f:
                    return server, json.load(f)
            except json.JSONDecodeError:
                pass
        if server.poll() is not None:
            sys.exit(f"the server exited with {server.returncode}")
        time.sleep(0.05)
    server.kill()
    sys.exit("the server wrote no server file in 30 s")


def tool_call(url, token, store, command):
    """One memory-tool call through the store's own route, as an agent's host makes it."""
    request = urllib.request.Request(
        f"{url}/v1/stores/{store}/memory",
        data=json.dumps(command).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        answer = json.loads(response.read())
    assert not answer.get("is_error"), answer
    return answer


def admin(url, token, route, body):
    """One operator call to a store's own admin route."""
    request = urllib.request.Request(
        f"{url}{route}", data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


def admin_get(url, token, route):
    request = urllib.request.Request(f"{url}{route}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


def raw(url, route, headers):
    """A GET whose error is returned, not raised: (status, headers, body)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{url}{route}", headers=headers)) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def expect(error, call):
    try:
        call()
    except error as e:
        body = e.body if isinstance(e.body, dict) else {}
        assert body.get("type") == "error", body
        assert isinstance(body.get("error", {}).get("message"), str), body
        # The request is named as the hosted API names it, the SDK reading the header.
        assert (e.request_id or "").startswith("req_"), (e.request_id, body)
        assert body.get("request_id") == e.request_id, (e.request_id, body)
        return body["error"]["type"]
    raise AssertionError(f"expected {error.__name__}")


def path_conflict(call):
    """The error object of the 409 `memory_path_conflict_error` that `call` raises."""
    assert expect(anthropic.ConflictError, call) == "memory_path_conflict_error"
    try:
        call()
    except anthropic.ConflictError as e:
        error = e.body["error"]
        # The API's paths, never the memory tool's.
        assert "/memories" not in error["message"], error
        return error
    raise AssertionError("expected ConflictError")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mnemo", required=True)
    parser.add_argument("--sdk", default="2.16.0", choices=["2.16.0", "2.17.0"])
    args = parser.parse_args()
    assert anthropic.__version__ == args.sdk, (anthropic.__version__, args.sdk)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        server, file = start(args.mnemo, data)
        try:
            run(file["url"], file["token"])
            anyio.run(sync_both_ways, file["url"], file["token"], os.path.join(tmp, "session"))
        finally:
            server.terminate()
            server.wait(timeout=30)
        refusals_name_their_request(args.mnemo, os.path.join(tmp, "shared"))
        if args.sdk == "2.17.0":
            anyio.run(write_through, args.mnemo, os.path.join(tmp, "write-through"),
                      os.path.join(tmp, "write-through-session"))
        # The cap on memories a store holds (--max-memories; 2,000 by default, as hosted).
        capped, file = start(args.mnemo, os.path.join(tmp, "capped"), "--max-memories", "2")
        try:
            client = anthropic.Anthropic(api_key=file["token"], base_url=file["url"], max_retries=0)
            store = client.beta.memory_stores.create(name="small")
            for i in range(2):
                client.beta.memory_stores.memories.create(store.id, path=f"/m{i}.md", content="x")
            assert expect(anthropic.BadRequestError, lambda: client.beta.memory_stores.memories.create(
                store.id, path="/m2.md", content="x")) == "invalid_request_error"
        finally:
            capped.terminate()
            capped.wait(timeout=30)
        # The cap on versions a store holds (--max-versions; 250,000 by default, as hosted):
        # creates and updates are refused at it, a delete never is (a full store can forget).
        capped, file = start(args.mnemo, os.path.join(tmp, "versions"), "--max-versions", "3")
        try:
            client = anthropic.Anthropic(api_key=file["token"], base_url=file["url"], max_retries=0)
            store = client.beta.memory_stores.create(name="few versions")
            memories = client.beta.memory_stores.memories
            first = memories.create(store.id, path="/a.md", content="1")
            memories.update(first.id, memory_store_id=store.id, content="2")
            memories.create(store.id, path="/b.md", content="x")
            assert expect(anthropic.BadRequestError, lambda: memories.create(
                store.id, path="/c.md", content="x")) == "invalid_request_error"
            assert expect(anthropic.BadRequestError, lambda: memories.update(
                first.id, memory_store_id=store.id, content="3")) == "invalid_request_error"
            memories.delete(first.id, memory_store_id=store.id)
            listed = list(client.beta.memory_stores.memory_versions.list(store.id))
            assert [v.operation for v in listed] == ["deleted", "created", "modified", "created"], listed
        finally:
            capped.terminate()
            capped.wait(timeout=30)
    print(f"memory_stores_sdk: ok ({len(METHODS)} SDK calls of {len(set(METHODS))} kinds: "
          + ", ".join(sorted(set(METHODS))) + ")")


def run(url, token):
    client = anthropic.Anthropic(api_key=token, base_url=url, max_retries=0)
    stores = client.beta.memory_stores

    # Stores: create, retrieve, update, list.
    made = stores.create(name="Notes of user 1042", description="what the user prefers",
                         metadata={"user": "1042", "tier": "free"})
    tried("memory_stores.create")
    assert isinstance(made, BetaManagedAgentsMemoryStore), type(made)
    assert made.id.startswith("memstore_") and made.type == "memory_store", made
    assert made.name == "Notes of user 1042" and made.metadata == {"user": "1042", "tier": "free"}
    assert made.archived_at is None and made.created_at.tzinfo is not None
    got = stores.retrieve(made.id)
    tried("memory_stores.retrieve")
    assert got == made, (got, made)
    changed = stores.update(made.id, name="User 1042", metadata={"tier": "pro", "user": None})
    tried("memory_stores.update")
    assert changed.name == "User 1042" and changed.metadata == {"tier": "pro"}, changed
    assert changed.description == "what the user prefers" and changed.updated_at >= made.updated_at
    others = [stores.create(name=f"store {i}") for i in range(3)]
    listed = list(stores.list(limit=2))
    tried("memory_stores.list")
    ids = [s.id for s in listed]
    assert sorted(ids) == sorted([made.id] + [o.id for o in others]), ids
    assert len(set(ids)) == len(ids) and ids == sorted(ids), ids
    assert all(isinstance(s, BetaManagedAgentsMemoryStore) for s in listed)

    # Memories, written through the memory tool's own route of that store.
    name = made.id[len("memstore_"):]
    contents = {}
    for i in range(250):
        path = f"/notes/{i // 50}/n{i:03}.md"
        text = f"note {i}\n" + "é" * (i % 7)
        tool_call(url, token, name, {"command": "create", "path": "/memories" + path, "file_text": text})
        contents[path] = text
    tool_call(url, token, name, {"command": "create", "path": "/memories/top.md", "file_text": "top\n"})
    contents["/top.md"] = "top\n"

    memories = client.beta.memory_stores.memories
    seen = list(memories.list(made.id, limit=100))
    tried("memories.list")
    assert all(isinstance(m, BetaManagedAgentsMemory) for m in seen)
    assert [m.path for m in seen] == sorted(contents), [m.path for m in seen][:5]
    for m in seen:
        text = contents[m.path]
        assert m.content is None, m
        assert m.content_sha256 == hashlib.sha256(text.encode()).hexdigest(), m
        assert m.content_size_bytes == len(text.encode()), m
        assert m.memory_store_id == made.id and m.id.startswith("mem_"), m
        assert m.memory_version_id.startswith("memver_"), m
    assert len({m.id for m in seen}) == len(seen)

    page = memories.list(made.id, limit=100, view="full")
    assert len(page.data) == 20 and page.next_page, len(page.data)
    assert all(m.content == contents[m.path] for m in page.data)
    full = list(memories.list(made.id, view="full", path_prefix="/notes/4/"))
    assert [m.path for m in full] == sorted(p for p in contents if p.startswith("/notes/4/"))

    top = list(memories.list(made.id, depth=1))
    assert [(type(i).__name__, i.path) for i in top] == [
        ("BetaManagedAgentsMemoryPrefix", "/notes/"), ("BetaManagedAgentsMemory", "/top.md")], top
    assert isinstance(top[0], BetaManagedAgentsMemoryPrefix) and top[0].type == "memory_prefix"
    two = list(memories.list(made.id, depth=1, path_prefix="/notes/"))
    assert [i.path for i in two] == [f"/notes/{k}/" for k in range(5)], two

    one = memories.retrieve(seen[0].id, memory_store_id=made.id)
    tried("memories.retrieve")
    assert one.content == contents[one.path] and one.id == seen[0].id, one
    basic = memories.retrieve(seen[0].id, memory_store_id=made.id, view="basic")
    assert basic.content is None and basic.content_sha256 == one.content_sha256

    # A rename through the memory tool keeps the memory's id and makes a new version.
    tool_call(url, token, name, {"command": "rename", "old_path": "/memories/notes/0",
                                 "new_path": "/memories/archive/0"})
    moved = memories.retrieve(seen[0].id, memory_store_id=made.id)
    assert moved.path == "/archive/0/n000.md" and moved.id == one.id, moved
    assert moved.memory_version_id != one.memory_version_id, moved
    assert moved.content_sha256 == one.content_sha256 and moved.created_at == one.created_at

    # Writes through the API: create, update (content, path, both; with and without the
    # precondition), delete; each one event that the memory tool then sees.
    created = memories.create(made.id, path="/api/a.md", content="first\n")
    tried("memories.create")
    assert isinstance(created, BetaManagedAgentsMemory) and created.content is None, created
    assert created.content_sha256 == hashlib.sha256(b"first\n").hexdigest(), created
    seen_by_tool = tool_call(url, token, name, {"command": "view", "path": "/memories/api/a.md"})
    assert "first" in seen_by_tool["content"], seen_by_tool
    full_created = memories.create(made.id, path="/api/empty.md", content="", view="full")
    assert full_created.content == "" and full_created.content_size_bytes == 0, full_created
    # A path conflict names the memory in the way, as the SDK's error object does.
    error = path_conflict(lambda: memories.create(made.id, path="/api/a.md", content="again"))
    assert (error["conflicting_memory_id"], error["conflicting_path"]) == (created.id, "/api/a.md"), error
    assert "/api/a.md" in error["message"], error
    error = path_conflict(lambda: memories.create(made.id, path="/api/a.md/b.md", content="x"))
    assert (error["conflicting_memory_id"], error["conflicting_path"]) == (created.id, "/api/a.md"), error
    error = path_conflict(lambda: memories.create(made.id, path="/api", content="x"))
    assert (error["conflicting_memory_id"], error["conflicting_path"]) == (created.id, "/api/a.md"), error
    assert "/api holds" in error["message"], error
    for bad in ["api/x.md", "/api//x.md", "/api/../x.md", "/e\u0301.md", "/a\u200bb.md", "/" + "/".join(["d"] * 21)]:
        assert expect(anthropic.BadRequestError,
                      lambda: memories.create(made.id, path=bad, content="x")) == "invalid_request_error", bad
    assert expect(anthropic.BadRequestError,
                  lambda: memories.create(made.id, path="/big.md", content="x" * 102_401)) == "invalid_request_error"

    updated = memories.update(created.id, memory_store_id=made.id, content="second\n",
                              precondition={"type": "content_sha256", "content_sha256": created.content_sha256})
    tried("memories.update")
    assert updated.id == created.id and updated.path == "/api/a.md", updated
    assert updated.content_sha256 == hashlib.sha256(b"second\n").hexdigest(), updated
    assert updated.memory_version_id != created.memory_version_id, updated
    assert expect(anthropic.ConflictError, lambda: memories.update(
        created.id, memory_store_id=made.id, content="lost",
        precondition={"type": "content_sha256", "content_sha256": created.content_sha256})) == "memory_precondition_failed_error"
    assert memories.retrieve(created.id, memory_store_id=made.id).content == "second\n"
    moved_both = memories.update(created.id, memory_store_id=made.id, path="/api/b.md", content="third\n", view="full")
    assert moved_both.path == "/api/b.md" and moved_both.content == "third\n" and moved_both.id == created.id, moved_both
    error = path_conflict(lambda: memories.update(created.id, memory_store_id=made.id, path="/api/empty.md"))
    assert (error["conflicting_memory_id"], error["conflicting_path"]) == (full_created.id, "/api/empty.md"), error
    same = memories.update(created.id, memory_store_id=made.id, content="third\n")
    assert same.memory_version_id == moved_both.memory_version_id, (same, moved_both)
    # The memory tool's edit is seen by the API, and the API's by the memory tool.
    tool_call(url, token, name, {"command": "str_replace", "path": "/memories/api/b.md",
                                 "old_str": "third", "new_str": "fourth"})
    assert memories.retrieve(created.id, memory_store_id=made.id).content == "fourth\n"

    assert expect(anthropic.ConflictError, lambda: memories.delete(
        created.id, memory_store_id=made.id, expected_content_sha256="0" * 64)) == "memory_precondition_failed_error"
    deleted = memories.delete(created.id, memory_store_id=made.id,
                              expected_content_sha256=hashlib.sha256(b"fourth\n").hexdigest())
    tried("memories.delete")
    assert deleted.type == "memory_deleted" and deleted.id == created.id, deleted
    assert expect(anthropic.NotFoundError,
                  lambda: memories.retrieve(created.id, memory_store_id=made.id)) == "not_found_error"
    assert expect(anthropic.NotFoundError,
                  lambda: memories.delete(created.id, memory_store_id=made.id)) == "not_found_error"
    gone_for_tool = urllib.request.urlopen(urllib.request.Request(
        f"{url}/v1/stores/{name}/memory",
        data=json.dumps({"command": "view", "path": "/memories/api/b.md"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"}))
    assert json.loads(gone_for_tool.read()).get("is_error") is True

    # Idempotency-Key: a retried request is a retry of the call it repeats (logged as one, and
    # changing nothing); the same key for another request is refused.
    key = {"Idempotency-Key": "retry-1"}
    first = memories.create(made.id, path="/api/once.md", content="once\n", extra_headers=key)
    again = memories.create(made.id, path="/api/once.md", content="once\n", extra_headers=key)
    assert again.id == first.id and again.memory_version_id == first.memory_version_id, (first, again)
    assert expect(anthropic.ConflictError, lambda: memories.create(
        made.id, path="/api/other.md", content="x", extra_headers=key)) == "conflict_error"
    dkey = {"Idempotency-Key": "delete-1"}
    assert memories.delete(first.id, memory_store_id=made.id, extra_headers=dkey).id == first.id
    assert memories.delete(first.id, memory_store_id=made.id, extra_headers=dkey).id == first.id
    assert expect(anthropic.NotFoundError,
                  lambda: memories.delete(first.id, memory_store_id=made.id)) == "not_found_error"
    # The create retried after its memory was deleted: the memory is not there (404, no retry).
    assert expect(anthropic.NotFoundError, lambda: memories.create(
        made.id, path="/api/once.md", content="once\n", extra_headers=key)) == "not_found_error"
    # A segment over the memory tool's 255 bytes is refused: the tool could not touch it.
    assert expect(anthropic.BadRequestError, lambda: memories.create(
        made.id, path="/" + "b" * 256 + ".md", content="x")) == "invalid_request_error"
    # Query strings that do not read get the envelope; a 401 names the scheme.
    for route in [f"/v1/memory_stores/{made.id}/memories?limit=-1", "/v1/memory_stores?include_archived=maybe",
                  f"/v1/memory_stores/{made.id}/memory_versions?limit=abc"]:
        status, _, body = raw(url, route, {"x-api-key": token})
        assert status == 400 and json.loads(body)["error"]["type"] == "invalid_request_error", (route, body)
    status, headers, _ = raw(url, "/v1/memory_stores", {"x-api-key": "nope"})
    assert status == 401 and headers.get("www-authenticate", headers.get("WWW-Authenticate", "")).startswith("Bearer"), headers

    # Versions: every event that created, changed or deleted a memory, newest first, with its
    # actor; the API's writes as the api_actor they were made as, the memory tool's as sessions.
    versions = client.beta.memory_stores.memory_versions
    lineage = list(versions.list(made.id, memory_id=created.id))
    tried("memory_versions.list")
    assert [v.operation for v in lineage] == ["deleted", "modified", "modified", "modified", "created"], lineage
    assert [v.created_by.type for v in lineage] == ["api_actor", "session_actor", "api_actor", "api_actor", "api_actor"], lineage
    assert lineage[0].content_sha256 is None and lineage[0].path == "/api/b.md", lineage[0]
    assert lineage[-1].content_sha256 == created.content_sha256 and lineage[-1].id == created.memory_version_id
    assert lineage[2].path == "/api/b.md" and lineage[3].path == "/api/a.md", lineage
    assert all(v.memory_id == created.id and v.memory_store_id == made.id for v in lineage)
    assert all(v.content is None for v in lineage)
    full_lineage = list(versions.list(made.id, memory_id=created.id, view="full"))
    assert [v.content for v in full_lineage] == [None, "fourth\n", "third\n", "second\n", "first\n"], full_lineage
    one_version = versions.retrieve(lineage[3].id, memory_store_id=made.id)
    tried("memory_versions.retrieve")
    assert one_version.content == "second\n" and one_version.operation == "modified", one_version
    every = list(versions.list(made.id, limit=7))
    assert len(every) == len({v.id for v in every}) and len(every) >= 250 + 1 + 5 + 2, len(every)
    keys = [(int(v.id.split("_")[1]), int(v.id.split("_")[2])) for v in every]
    assert keys == sorted(keys, reverse=True), keys[:5]
    created_only = list(versions.list(made.id, operation="created"))
    assert all(v.operation == "created" for v in created_only) and len(created_only) == 254, len(created_only)
    by_api = list(versions.list(made.id, api_key_id="operator"))
    assert all(v.created_by.type == "api_actor" for v in by_api) and len(by_api) == 7, by_api
    assert expect(anthropic.NotFoundError,
                  lambda: versions.retrieve("memver_1_999", memory_store_id=made.id)) == "not_found_error"
    assert expect(anthropic.BadRequestError,
                  lambda: list(versions.list(made.id, operation="renamed"))) == "invalid_request_error"

    # Redaction, as the hosted API does it: the current version of a live memory is refused
    # (409); a version a memory has moved past is redacted, and stays a version (retrieved and
    # listed, its content, path and digest null), while the later ones keep theirs.
    live_one = memories.retrieve(seen[1].id, memory_store_id=made.id)
    assert expect(anthropic.ConflictError,
                  lambda: versions.redact(live_one.memory_version_id, memory_store_id=made.id)) == "conflict_error"
    kept = memories.create(made.id, path="/redact/kept.md", content="first, with a secret\n")
    sha = kept.content_sha256
    for content in ["second\n", "third\n"]:
        sha = memories.update(kept.id, memory_store_id=made.id, content=content,
                              precondition={"type": "content_sha256", "content_sha256": sha}).content_sha256
    kept_lineage = list(versions.list(made.id, memory_id=kept.id))
    assert [v.operation for v in kept_lineage] == ["modified", "modified", "created"], kept_lineage
    assert expect(anthropic.ConflictError, lambda: versions.redact(
        kept_lineage[0].id, memory_store_id=made.id)) == "conflict_error"
    def redacted_ok(version):
        assert version.redacted_at is not None and version.redacted_by is not None, version
        assert version.redacted_by.type == "api_actor" and version.redacted_by.api_key_id == "operator", version
        assert version.content is None and version.path is None, version
        assert version.content_sha256 is None and version.content_size_bytes is None, version
    for old in [kept_lineage[2], kept_lineage[1]]:
        redacted_ok(versions.redact(old.id, memory_store_id=made.id))
        tried("memory_versions.redact")
        redacted_ok(versions.retrieve(old.id, memory_store_id=made.id, view="full"))
    after = list(versions.list(made.id, memory_id=kept.id, view="full"))
    assert [v.id for v in after] == [v.id for v in kept_lineage], after
    redacted_ok(after[1]), redacted_ok(after[2])
    assert after[0].content == "third\n" and after[0].content_sha256 == sha, after[0]
    assert memories.retrieve(kept.id, memory_store_id=made.id).content == "third\n"
    memories.update(kept.id, memory_store_id=made.id, content="fourth\n",
                    precondition={"type": "content_sha256", "content_sha256": sha})
    # A deleted memory's versions, newest first: it never comes back, and each stays listed.
    for version in lineage:
        redacted_ok(versions.redact(version.id, memory_store_id=made.id))
        assert expect(anthropic.NotFoundError,
                      lambda: memories.retrieve(created.id, memory_store_id=made.id)) == "not_found_error"
    gone = list(versions.list(made.id, memory_id=created.id))
    assert [v.id for v in gone] == [v.id for v in lineage], gone
    for version in gone:
        redacted_ok(version)

    # Every write is a chained event: the store verifies intact, each answer re-derived.
    verify = urllib.request.urlopen(urllib.request.Request(
        f"{url}/v1/stores/{name}/verify", headers={"Authorization": f"Bearer {token}"}))
    report = json.loads(verify.read())
    assert report["status"] == "intact", report

    # Errors, as the SDK raises them.
    assert expect(anthropic.NotFoundError, lambda: stores.retrieve("memstore_nope")) == "not_found_error"
    assert expect(anthropic.NotFoundError, lambda: stores.retrieve("not-an-id")) == "not_found_error"
    assert expect(anthropic.NotFoundError,
                  lambda: memories.retrieve("mem_999999", memory_store_id=made.id)) == "not_found_error"
    assert expect(anthropic.BadRequestError,
                  lambda: memories.list(made.id, path_prefix="notes")) == "invalid_request_error"
    assert expect(anthropic.BadRequestError, lambda: stores.list(limit=101)) == "invalid_request_error"
    assert expect(anthropic.BadRequestError, lambda: stores.create(name="")) == "invalid_request_error"
    assert expect(anthropic.BadRequestError,
                  lambda: stores.create(name="x", metadata={f"k{i}": "v" for i in range(17)})) == "invalid_request_error"
    stranger = anthropic.Anthropic(api_key="mnemo_not-a-token", base_url=url, max_retries=0)
    assert expect(anthropic.AuthenticationError,
                  lambda: stranger.beta.memory_stores.list()) == "authentication_error"
    # A token the store did not issue may be another store's: the store answers as if it did not
    # exist, as every route of a --data server does.
    for call in [lambda: stranger.beta.memory_stores.memories.list(made.id),
                 lambda: stranger.beta.memory_stores.memories.retrieve(seen[0].id, memory_store_id=made.id),
                 lambda: stranger.beta.memory_stores.memories.create(made.id, path="/x.md", content="x"),
                 lambda: stranger.beta.memory_stores.memories.update(seen[0].id, memory_store_id=made.id, content="x"),
                 lambda: stranger.beta.memory_stores.memories.delete(seen[0].id, memory_store_id=made.id),
                 lambda: stranger.beta.memory_stores.memory_versions.list(made.id),
                 lambda: stranger.beta.memory_stores.memory_versions.retrieve(lineage[1].id, memory_store_id=made.id),
                 lambda: stranger.beta.memory_stores.memory_versions.redact(lineage[1].id, memory_store_id=made.id),
                 lambda: stranger.beta.memory_stores.retrieve(made.id)]:
        assert expect(anthropic.NotFoundError, call) == "not_found_error"
    for call in [lambda: stranger.beta.memory_stores.create(name="x"),
                 lambda: stranger.beta.memory_stores.update(made.id, name="x"),
                 lambda: stranger.beta.memory_stores.archive(made.id),
                 lambda: stranger.beta.memory_stores.delete(made.id)]:
        assert expect(anthropic.AuthenticationError, call) == "authentication_error"

    # An agent token of one store: the memory-stores API as that agent, in that store only, and
    # within its grants; no other store, no store administration, no redaction.
    other_name = others[2].id[len("memstore_"):]
    issued = admin(url, token, f"/v1/stores/{other_name}/tokens", {"agent": "helper"})
    helper = anthropic.Anthropic(api_key=issued["token"], base_url=url, max_retries=0)
    mine = helper.beta.memory_stores.memories.create(others[2].id, path="/pub/a.md", content="shared\n")
    assert mine.content_sha256 == hashlib.sha256(b"shared\n").hexdigest()
    by_helper = list(helper.beta.memory_stores.memory_versions.list(others[2].id))
    assert [(v.created_by.type, v.created_by.api_key_id) for v in by_helper] == [("api_actor", "helper")], by_helper
    assert helper.beta.memory_stores.retrieve(others[2].id).id == others[2].id
    assert expect(anthropic.NotFoundError, lambda: helper.beta.memory_stores.retrieve(made.id)) == "not_found_error"
    assert expect(anthropic.NotFoundError, lambda: list(helper.beta.memory_stores.memories.list(made.id))) == "not_found_error"
    assert expect(anthropic.AuthenticationError, lambda: helper.beta.memory_stores.list()) == "authentication_error"
    assert expect(anthropic.PermissionDeniedError, lambda: helper.beta.memory_stores.memory_versions.redact(
        by_helper[0].id, memory_store_id=others[2].id)) == "permission_error"
    # Under grants: it reads and writes what they cover, and sees nothing else.
    memories.create(others[2].id, path="/private/b.md", content="secret\n")
    admin(url, token, f"/v1/stores/{other_name}/acl", {"action": "grant", "agent": "helper", "prefix": "/memories/pub", "access": "read-write"})
    admin(url, token, f"/v1/stores/{other_name}/acl", {"action": "revoke", "agent": "*", "prefix": "/"})
    seen_by_helper = [m.path for m in helper.beta.memory_stores.memories.list(others[2].id)]
    assert seen_by_helper == ["/pub/a.md"], seen_by_helper
    helper_versions = [v.path for v in helper.beta.memory_stores.memory_versions.list(others[2].id)]
    assert helper_versions == ["/pub/a.md"], helper_versions
    assert expect(anthropic.PermissionDeniedError, lambda: helper.beta.memory_stores.memories.create(
        others[2].id, path="/private/c.md", content="x")) == "permission_error"
    try:
        helper.beta.memory_stores.memories.create(others[2].id, path="/private/c.md", content="x")
    except anthropic.PermissionDeniedError as e:
        # The API's path, not the memory tool's /memories/private/c.md.
        message = e.body["error"]["message"]
        assert "/private/c.md" in message and "/memories" not in message, message
    private = [m for m in memories.list(others[2].id) if m.path == "/private/b.md"][0]
    head = admin_get(url, token, f"/v1/stores/{other_name}/head")
    # A memory it may not read is not there for it: no path in an error, no event logged.
    for call in [lambda: helper.beta.memory_stores.memories.retrieve(private.id, memory_store_id=others[2].id),
                 lambda: helper.beta.memory_stores.memories.update(private.id, memory_store_id=others[2].id),
                 lambda: helper.beta.memory_stores.memories.update(private.id, memory_store_id=others[2].id, content="x"),
                 lambda: helper.beta.memory_stores.memories.delete(private.id, memory_store_id=others[2].id)]:
        try:
            call()
            raise AssertionError("expected NotFoundError")
        except anthropic.NotFoundError as e:
            assert "private" not in str(e.body), e.body
    assert admin_get(url, token, f"/v1/stores/{other_name}/head") == head
    # A path it may write that goes through a memory it may not read: the conflict names neither
    # that memory's id nor its path, only the path asked for.
    admin(url, token, f"/v1/stores/{other_name}/acl",
          {"action": "grant", "agent": "helper", "prefix": "/memories/private/b.md/x", "access": "read-write"})
    error = path_conflict(lambda: helper.beta.memory_stores.memories.create(
        others[2].id, path="/private/b.md/x/y.md", content="x"))
    assert (error["conflicting_memory_id"], error["conflicting_path"]) == ("", "/private/b.md/x/y.md"), error
    assert private.id not in json.dumps(error) and "may not read" in error["message"], error

    # Archive: for good, hidden from the default listing, closed to changes, still readable.
    archived = stores.archive(others[0].id)
    tried("memory_stores.archive")
    assert archived.archived_at is not None, archived
    assert others[0].id not in [s.id for s in stores.list()]
    assert others[0].id in [s.id for s in stores.list(include_archived=True)]
    assert expect(anthropic.BadRequestError, lambda: stores.update(others[0].id, name="again")) == "invalid_request_error"
    assert expect(anthropic.BadRequestError, lambda: stores.archive(others[0].id)) == "invalid_request_error"
    assert list(memories.list(others[0].id)) == []
    # Whoever holds no token of it learns nothing of it, archived or not.
    assert expect(anthropic.NotFoundError, lambda: stranger.beta.memory_stores.memories.create(
        others[0].id, path="/x.md", content="x")) == "not_found_error"
    assert expect(anthropic.BadRequestError,
                  lambda: memories.create(others[0].id, path="/x.md", content="x")) == "invalid_request_error"
    later = stores.list(created_at_gte=made.created_at, include_archived=True)
    assert made.id in [s.id for s in later]

    # Delete.
    gone = stores.delete(others[1].id)
    tried("memory_stores.delete")
    assert gone.type == "memory_store_deleted" and gone.id == others[1].id, gone
    assert expect(anthropic.NotFoundError, lambda: stores.retrieve(others[1].id)) == "not_found_error"


def refusals_name_their_request(mnemo, data):
    """The sharing rules' own refusals on the memory-stores routes (a principal over its share of
    requests in flight, a body too slow) carry a request id as every other answer of the API
    does: the header the SDK reads and `request_id` in the error body, in the API's envelope."""
    server, file = start(mnemo, data, "--max-requests-per-principal", "1", "--body-grace", "3")
    try:
        url = file["url"]
        host, port = url.removeprefix("http://").rsplit(":", 1)
        # The operator's one place is held by a request whose body is not coming.
        held = socket.create_connection((host, int(port)))
        held.sendall((f"POST /v1/memory_stores HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {file['token']}\r\n"
                      "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n").encode())
        client = anthropic.Anthropic(api_key=file["token"], base_url=url, max_retries=0)
        # Until the server has read that head, a request of the operator still gets through.
        for _ in range(20):
            try:
                client.beta.memory_stores.list()
                time.sleep(0.1)
            except anthropic.RateLimitError:
                break
        assert expect(anthropic.RateLimitError, lambda: client.beta.memory_stores.list()) == "rate_limit_error"
        # The body never came: cut off with 408 once the grace is over.
        held.settimeout(30)
        answer = b""
        while chunk := held.recv(65536):
            answer += chunk
        held.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        assert lines[0].startswith("HTTP/1.1 408"), lines
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        body = json.loads(body)
        assert body["type"] == "error" and body["error"]["type"] == "timeout_error", body
        assert headers.get("request-id", "").startswith("req_"), headers
        assert body.get("request_id") == headers["request-id"], (headers, body)
        tried("refusals name their request")
    finally:
        server.terminate()
        server.wait(timeout=30)


class DroppingProxy:
    """A TCP proxy on loopback in front of the server, which can drop an answer: the request
    reaches the server and is answered, but its client sees the connection close instead, as
    when a network fails after the write."""

    def __init__(self, url):
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.lock = threading.Lock()
        self.to_drop = 0
        self.dropped = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def drop_next_answer(self):
        with self.lock:
            self.to_drop += 1

    def close(self):
        self.listener.close()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)

        def forward():
            try:
                while data := client.recv(65536):
                    upstream.sendall(data)
            except OSError:
                pass
            finally:
                try:
                    upstream.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

        threading.Thread(target=forward, daemon=True).start()
        try:
            while data := upstream.recv(65536):
                with self.lock:
                    drop = self.to_drop > 0
                    if drop:
                        self.to_drop -= 1
                        self.dropped += 1
                if drop:
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()


def mnemo_cli(mnemo, *args):
    done = subprocess.run([mnemo, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


async def write_through(mnemo, data, workdir):
    """anthropic 2.17.0's `SessionMemoryStores.write_file`, which saves each memory-file write
    through the memory-stores API before it writes the file, against a real server: a write, an
    edit, a stale edit and a path in the way (each reaching the model as "not saved", naming the
    API's paths), a create whose answer was dropped and that the SDK retried (saved once), and the
    server gone ("not confirmed"); then the store verifies intact and the memory tool reads what
    the folder holds."""
    from anthropic.lib.tools._memories import NOT_CONFIRMED, NOT_SAVED, MemoryWriteError, SessionMemoryStores

    server, file = start(mnemo, data)
    url, token = file["url"], file["token"]
    proxy = DroppingProxy(url)
    client = None
    try:
        # Through the proxy, naming the server as its Host (the server answers no other).
        client = anthropic.AsyncAnthropic(api_key=token, base_url=proxy.url, max_retries=2,
                                          default_headers={"Host": url.removeprefix("http://")})
        store = await client.beta.memory_stores.create(name="written through")
        name = store.id[len("memstore_"):]
        await client.beta.memory_stores.memories.create(store.id, path="/seed.md", content="seed\n")
        mount = Path(workdir) / "mnt" / "notes"
        session = SimpleNamespace(resources=[SimpleNamespace(
            type="memory_store", memory_store_id=store.id, mount_path=str(mount), access="read_write",
            name="notes")])
        synced = SessionMemoryStores(client, workdir=workdir)
        await synced.download(session)
        lock = anyio.Lock()

        async def remote():
            return {m.path: m.content async for m in client.beta.memory_stores.memories.list(store.id, view="full")}

        async def versions_of(path):
            memory = [m async for m in client.beta.memory_stores.memories.list(store.id) if m.path == path][0]
            return [v.operation async for v in client.beta.memory_stores.memory_versions.list(
                store.id, memory_id=memory.id)]

        async def refused(path, content, replacing):
            try:
                await synced.write_file(mount / path, content, replacing, lock=lock)
            except MemoryWriteError as e:
                return str(e)
            raise AssertionError(f"the write of {path} was not refused")

        # A write: saved, then the file written.
        assert await synced.write_file(mount / "plan.md", "step 1\n", None, lock=lock) is True
        tried("SessionMemoryStores.write_file")
        assert (mount / "plan.md").read_text() == "step 1\n"
        assert (await remote())["/plan.md"] == "step 1\n"
        # An edit: an update under the digest last synced.
        assert await synced.write_file(mount / "plan.md", "step 1\nstep 2\n", "step 1\n", lock=lock) is True
        assert (await remote())["/plan.md"] == "step 1\nstep 2\n"
        assert await versions_of("/plan.md") == ["modified", "created"]

        # A stale edit: the memory tool changed the memory meanwhile; the precondition refuses
        # the update (409), which reaches the model as not saved, and the file is not written.
        tool_call(url, token, name, {"command": "str_replace", "path": "/memories/plan.md",
                                     "old_str": "step 2", "new_str": "step two"})
        why = await refused("plan.md", "step 1\nstep 3\n", "step 1\nstep 2\n")
        assert why.startswith(NOT_SAVED) and "content_sha256" in why, why
        assert (await remote())["/plan.md"] == "step 1\nstep two\n"
        assert (mount / "plan.md").read_text() == "step 1\nstep two\n", "the refusal's sync pulled the change"

        # A memory in the way of the path: not saved, and the model is told the API's path.
        tool_call(url, token, name, {"command": "create", "path": "/memories/box", "file_text": "a file\n"})
        why = await refused("box/inner.md", "x\n", None)
        assert why.startswith(NOT_SAVED) and "/box" in why and "/memories" not in why, why

        # A create whose answer is dropped after the server saved it: the SDK retries it, the
        # retry meets the memory it made (409), and a fresh listing shows the same digest: saved
        # once, and the write goes through.
        proxy.drop_next_answer()
        assert await synced.write_file(mount / "retried.md", "once\n", None, lock=lock) is True
        assert proxy.dropped == 1, proxy.dropped
        assert (mount / "retried.md").read_text() == "once\n"
        assert (await remote())["/retried.md"] == "once\n"
        assert await versions_of("/retried.md") == ["created"]

        # The server gone: the write is not confirmed, and the file is not written.
        expected = await remote()
        server.terminate()
        server.wait(timeout=30)
        why = await refused("late.md", "late\n", None)
        assert why.startswith(NOT_CONFIRMED), why
        assert not (mount / "late.md").exists()

        # The store verifies intact, and the memory tool reads what the folder holds.
        report = json.loads(mnemo_cli(mnemo, "verify", "--json", "--db", os.path.join(data, name)))
        assert report["status"] == "intact", report
        on_disk = {"/" + p.relative_to(mount).as_posix(): p.read_text() for p in mount.rglob("*")
                   if p.is_file() and p.name != ".anthropic-memory-store"}
        assert on_disk == expected, (on_disk, expected)
        for path, text in expected.items():
            assert mnemo_cli(mnemo, "cat", "--db", os.path.join(data, name), "/memories" + path) == text, path
        await synced.dispose()
    finally:
        if client is not None:
            await client.close()
        proxy.close()
        if server.poll() is None:
            server.terminate()
            server.wait(timeout=30)


async def sync_both_ways(url, token, workdir):
    """The SDK's own sync helper for self-hosted sandboxes (`SessionMemoryStores`) keeps a
    folder and a Mnemo store in step: it downloads the store, then its last sync uploads local
    creates and edits, deletes what was deleted locally, and pulls what changed on the server;
    the store verifies intact after, and the memory tool sees the files."""
    from anthropic.lib.tools._memories import SessionMemoryStores

    client = anthropic.AsyncAnthropic(api_key=token, base_url=url, max_retries=0)
    store = await client.beta.memory_stores.create(name="a session's notes")
    name = store.id[len("memstore_"):]
    for path, text in [("/keep.md", "kept\n"), ("/edit.md", "before\n"), ("/gone.md", "bye\n"),
                       ("/remote.md", "old\n"), ("/deep/a.md", "deep\n")]:
        await client.beta.memory_stores.memories.create(store.id, path=path, content=text)
    mount = os.path.join(workdir, "mnt", "notes")
    session = SimpleNamespace(resources=[SimpleNamespace(
        type="memory_store", memory_store_id=store.id, mount_path=mount, access="read_write", name="notes")])
    synced = SessionMemoryStores(client, workdir=workdir)
    await synced.download(session)
    tried("SessionMemoryStores.download")
    on_disk = {os.path.relpath(os.path.join(d, f), mount): open(os.path.join(d, f)).read()
               for d, _, files in os.walk(mount) for f in files if f != ".anthropic-memory-store"}
    assert on_disk == {"keep.md": "kept\n", "edit.md": "before\n", "gone.md": "bye\n",
                       "remote.md": "old\n", "deep/a.md": "deep\n"}, on_disk

    # Local: an edit, a new file, a delete. Server: the memory tool edits another file.
    with open(os.path.join(mount, "edit.md"), "w") as f:
        f.write("after\n")
    with open(os.path.join(mount, "new.md"), "w") as f:
        f.write("made here\n")
    os.remove(os.path.join(mount, "gone.md"))
    tool_call(url, token, name, {"command": "str_replace", "path": "/memories/remote.md",
                                 "old_str": "old", "new_str": "new"})
    await synced.finish()
    tried("SessionMemoryStores.finish")

    remote = {m.path: m.content async for m in client.beta.memory_stores.memories.list(store.id, view="full")}
    assert remote == {"/keep.md": "kept\n", "/edit.md": "after\n", "/new.md": "made here\n",
                      "/remote.md": "new\n", "/deep/a.md": "deep\n"}, remote
    with open(os.path.join(mount, "remote.md")) as f:
        assert f.read() == "new\n"
    seen = tool_call(url, token, name, {"command": "view", "path": "/memories/new.md"})
    assert "made here" in seen["content"], seen
    verify = urllib.request.urlopen(urllib.request.Request(
        f"{url}/v1/stores/{name}/verify", headers={"Authorization": f"Bearer {token}"}))
    report = json.loads(verify.read())
    assert report["status"] == "intact", report
    await synced.dispose()
    await client.close()


if __name__ == "__main__":
    main()

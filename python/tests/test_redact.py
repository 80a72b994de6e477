"""mnemo.redact erases what was chosen for real: no byte of it is left in the store's directory,
the rest of the history verifies and names what was erased, and a dry run changes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import mnemo
from mnemo import MnemoClient, MnemoMemoryToolServer

MARKER = "QZXPYMARKERXZQ"


def holding(directory: Path, needle: bytes) -> list[str]:
    return [str(p) for p in directory.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_redact_by_text_leaves_no_byte_and_the_rest_verifies(tmp_path: Path) -> None:
    db = tmp_path / "store.mnemo.db"
    with MnemoClient(db_path=str(db), agent_id="agent-1") as client:
        server = MnemoMemoryToolServer(client)
        server.handle({"command": "create", "path": "/memories/secret.md", "file_text": f"pin {MARKER}\n"})
        server.handle({"command": "view", "path": "/memories/secret.md"})
        server.handle({"command": "create", "path": "/memories/keep.md", "file_text": "keep\n"})
    assert holding(db, MARKER.encode())
    before = sorted(str(p) for p in db.rglob("*"))
    planned = mnemo.redact(db, "asked to be forgotten", texts=[MARKER], dry_run=True)
    assert planned["seqs"] == [1, 2] and planned["seq"] is None
    assert sorted(str(p) for p in db.rglob("*")) == before
    done = mnemo.redact(db, "asked to be forgotten", texts=[MARKER])
    assert done["seqs"] == [1, 2] and done["seq"] == 4
    assert holding(db, MARKER.encode()) == []
    with MnemoClient(db_path=str(db), agent_id="agent-1") as client:
        report = client.verify()
        assert report and report.status == "intact", report
        assert report.redacted == [(1, 4), (2, 4)]
        assert [r.path for r in client.records_by_tag("memorytool")] == ["/memories/keep.md"]
        assert [e.command for e in client.log()][-1] == "redact"


def test_redact_says_what_a_valid_call_looks_like(tmp_path: Path) -> None:
    db = tmp_path / "store.mnemo.db"
    with MnemoClient(db_path=str(db), agent_id="agent-1") as client:
        MnemoMemoryToolServer(client).handle({"command": "create", "path": "/memories/a.md", "file_text": "a\n"})
    with pytest.raises(mnemo.InvalidArgumentError, match="--seq N"):
        mnemo.redact(db, "r")
    with pytest.raises(mnemo.InvalidArgumentError, match="there is no event 9"):
        mnemo.redact(db, "r", seqs=[9])
    with pytest.raises(ValueError, match="seqs are event numbers.*got -1"):
        mnemo.redact(db, "r", seqs=[-1])


def test_a_client_redacts_the_store_it_holds_and_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "store.mnemo.db"
    with MnemoClient(db_path=str(db), agent_id="dpo") as client:
        server = MnemoMemoryToolServer(client.with_agent("model"))
        server.handle({"command": "create", "path": "/memories/secret.md", "file_text": f"pin {MARKER}\n"})
        server.handle({"command": "create", "path": "/memories/keep.md", "file_text": "keep\n"})
        planned = client.redact("asked", paths=["/memories/secret.md"], dry_run=True)
        assert planned == {"seqs": [1], "kept": [], "live": [], "paths": ["/memories/secret.md"], "unsearched": [], "seq": None}
        done = client.redact("asked", paths=["/memories/secret.md"])
        assert done == {"seqs": [1], "kept": [], "live": [], "paths": ["/memories/secret.md"], "unsearched": [], "seq": 3}
        assert holding(db, MARKER.encode()) == []
        # The same handles go on, with the store opened again under them.
        after = server.handle({"command": "view", "path": "/memories"})
        assert "is_error" not in after and "secret.md" not in after["content"]
        assert client.log()[2].agent == "dpo"
        # mnemo.redact of a store open in this process goes through the open handle.
        server.handle({"command": "create", "path": "/memories/x.md", "file_text": "x\n"})
        assert mnemo.redact(db, "again", paths=["/memories/x.md"], operator="dpo")["seq"] == 6
        report = client.verify()
        assert report and report.redacted == [(1, 3), (5, 6)], report


def test_delete_erases_under_the_setting(tmp_path: Path) -> None:
    db = tmp_path / "store.mnemo.db"
    with MnemoClient(db_path=str(db), agent_id="ops") as client:
        assert client.settings() == {"delete": "keep"}
        with pytest.raises(mnemo.InvalidArgumentError, match="give keep or erase"):
            client.configure("delete", "later")
        client.configure("delete", "erase")
        assert client.settings() == {"delete": "erase"}
        server = MnemoMemoryToolServer(client.with_agent("model"))
        server.handle({"command": "create", "path": "/memories/secret.md", "file_text": f"pin {MARKER}\n"})
        server.handle({"command": "create", "path": "/memories/keep.md", "file_text": "keep\n"})
        done = server.handle({"command": "delete", "path": "/memories/secret.md"})
        assert done["content"] == "Successfully deleted /memories/secret.md"
        assert holding(db, MARKER.encode()) == []
        report = client.verify()
        assert report and report.redacted, report
        assert [r.path for r in client.records_by_tag("memorytool")] == ["/memories/keep.md"]

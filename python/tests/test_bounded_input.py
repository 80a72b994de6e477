"""Bounded input through the Python package: a call's JSON text is bounded while it is made, a
refused call is logged as a digest, and keys that collide are refused instead of the last winning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from mnemo import MnemoClient, MnemoMemoryToolServer


def server(tmp_path: Path, **options: Any) -> MnemoMemoryToolServer:
    tmp_path.mkdir(parents=True, exist_ok=True)
    client = MnemoClient(db_path=str(tmp_path / "store.mnemo.db"), agent_id="agent-1", durability="buffered")
    return MnemoMemoryToolServer(client, **options)


def test_max_request_bytes_defaults_to_64_mib_and_is_an_option(tmp_path: Path) -> None:
    assert server(tmp_path / "a").max_request_bytes == 64 * 1024 * 1024
    assert server(tmp_path / "b", max_request_bytes=1000).max_request_bytes == 1000


def test_a_call_over_the_limit_is_refused_with_its_id_and_the_session_goes_on(tmp_path: Path) -> None:
    s = server(tmp_path, max_request_bytes=1000)
    block = {"type": "tool_use", "id": "toolu_big", "name": "memory",
             "input": {"command": "create", "path": "/memories/a.txt", "file_text": "x" * 5000}}
    result = s.handle(block)
    assert result["tool_use_id"] == "toolu_big" and result["is_error"] is True
    assert result["content"].startswith("Error: This call is over the limit of 1000 bytes for one request")
    assert "max_request_bytes" in result["content"]
    ok = s.handle({"command": "create", "path": "/memories/a.txt", "file_text": "small"})
    assert ok["content"] == "File created successfully at: /memories/a.txt"
    assert s.client.verify().is_intact()


def test_a_structure_sharing_one_list_many_times_stops_at_the_limit(tmp_path: Path) -> None:
    # 2**60 leaves as JSON: converting it whole would never end; the bound stops it at once.
    nested: List[Any] = ["leaf"]
    for _ in range(60):
        nested = [nested, nested]
    s = server(tmp_path)
    result = s.handle({"command": "view", "path": "/memories", "extra": nested})
    assert result["is_error"] is True and "over the limit of 67108864 bytes" in result["content"]
    assert s.client.verify().is_intact()


def test_keys_with_the_same_str_are_a_duplicate_key(tmp_path: Path) -> None:
    s = server(tmp_path)
    s.handle({"command": "create", "path": "/memories/a", "file_text": "keep"})
    weird: Dict[Any, Any] = {"command": "view", "path": "/memories/a", 1: "x", "1": "y"}
    result = s.handle(weird)
    assert result["is_error"] is True
    assert result["content"].startswith('Error: The input names the key "1" more than once in one object')
    assert s.client.verify().is_intact()


def test_bidi_and_zero_width_names_are_refused(tmp_path: Path) -> None:
    for profile in ("spec", "python-sdk"):
        s = server(tmp_path / profile, profile=profile)
        for name in ("a\u202etxt.exe", "zero\u200bwidth", "\ufeffbom", "soft\u00adhyphen"):
            result = s.handle({"command": "create", "path": f"/memories/{name}", "file_text": "x"})
            assert result["is_error"] is True, (profile, name)
            assert "contains the invisible character U+" in result["content"], result["content"]

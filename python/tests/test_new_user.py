"""What a new user meets first: arguments out of range are a ValueError that says what is valid,
paths are normalised as the CLI does, a verify report is falsy when the log is not intact and says
what it holds, and the SDK adapter shows what it is made of.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemo import MnemoClient, MnemoMemoryToolServer


def client(tmp_path: Path) -> MnemoClient:
    return MnemoClient(db_path=str(tmp_path / "store.mnemo.db"), agent_id="agent-1", durability="buffered")


@pytest.mark.parametrize("option", ["max_file_bytes", "view_max_chars", "max_request_bytes"])
def test_a_negative_limit_is_a_value_error_that_names_it(tmp_path: Path, option: str) -> None:
    c = client(tmp_path)
    with pytest.raises(ValueError) as raised:
        MnemoMemoryToolServer(c, **{option: -1})
    message = str(raised.value)
    assert message.startswith(f"{option} is ") and "a whole number from 0 to 18446744073709551615, got -1" in message
    with pytest.raises(ValueError, match=f"{option} is .* got 18446744073709551616"):
        MnemoMemoryToolServer(c, **{option: 2**64})
    with pytest.raises(TypeError, match=f"{option} is .* got a str"):
        MnemoMemoryToolServer(c, **{option: "10"})
    assert getattr(MnemoMemoryToolServer(c, **{option: 10}), option) == 10


def test_records_at_a_negative_seq_is_a_value_error(tmp_path: Path) -> None:
    c = client(tmp_path)
    MnemoMemoryToolServer(c).handle({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    with pytest.raises(ValueError, match=r"seq is the event after which to show the files .* got -1"):
        c.records_at(-1)
    assert [r.path for r in c.records_at(1)] == ["/memories/a.md"]
    assert c.records_at(0) == []


def test_show_diff_and_log_take_no_negative_seq_or_count(tmp_path: Path) -> None:
    c = client(tmp_path)
    MnemoMemoryToolServer(c).handle({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    for call, name in [
        (lambda: c.show(-1), "seq"),
        (lambda: c.diff(-1, 1), "start"),
        (lambda: c.diff(0, -2), "end"),
        (lambda: c.log(from_seq=-1), "from_seq"),
        (lambda: c.log(limit=-1), "limit"),
    ]:
        with pytest.raises(ValueError, match=f"{name} is .* got -"):
            call()
    assert c.show(1)["seq"] == 1
    assert [f["path"] for f in c.diff(0, 1)] == ["/memories/a.md"]
    assert [e.seq for e in c.log(from_seq=1, limit=1)] == [1]
    assert [e.seq for e in c.log()] == [1]


def test_record_normalises_the_path_as_the_cli_does(tmp_path: Path) -> None:
    c = client(tmp_path)
    MnemoMemoryToolServer(c).handle({"command": "create", "path": "/memories/x", "file_text": "hi"})
    for path in ("/memories/x", "//memories/x", "/memories//x", "/memories/./x"):
        record = c.record(path)
        assert record is not None and record.path == "/memories/x" and record.content == "hi", path
    assert c.record("/memories/nothing") is None


def test_a_verify_report_is_truthy_only_when_intact_and_lists_its_violations(tmp_path: Path) -> None:
    c = client(tmp_path)
    empty = c.verify()
    assert bool(empty) and empty.is_intact() and "violations=[]" in repr(empty)
    MnemoMemoryToolServer(c).handle({"command": "create", "path": "/memories/a.md", "file_text": "x"})
    report = c.verify()
    assert report and repr(report).endswith("violations=[])")
    assert repr(report).startswith('VerifyReport(status="intact", events=1, checkpoint="1:')


def test_a_report_has_its_own_truth_value(tmp_path: Path) -> None:
    # A report with a violation cannot be made from Python: every damage Python can do to the
    # files makes the open refuse the store (tests/cli.rs and tests/tamper.rs cover violations).
    # So: the class defines truthiness itself (an object without __bool__ is always true), and
    # it is is_intact().
    report = client(tmp_path).verify()
    assert "__bool__" in type(report).__dict__
    assert bool(report) is report.is_intact() is True


def test_the_sdk_adapter_shows_its_server(tmp_path: Path) -> None:
    pytest.importorskip("anthropic")
    from mnemo.anthropic import MnemoMemoryTool

    tool = MnemoMemoryTool(client(tmp_path))
    assert repr(tool) == (
        'MnemoMemoryTool(server=MnemoMemoryToolServer(agent_id="agent-1", root="/memories", '
        'profile="python-sdk", managed_agents_beta=False))'
    )

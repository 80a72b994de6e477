"""MnemoClient.trace follows where a write's content went, and MnemoClient.revert puts files
back by appending ordinary calls: a dry run by default (nothing written), conflicts refused until
forced, the store verifying after.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemo import InvalidArgumentError, MnemoClient, MnemoMemoryToolServer


def test_a_bad_write_is_traced_then_reverted_and_the_store_verifies(tmp_path: Path) -> None:
    db = tmp_path / "store.mnemo.db"
    with MnemoClient(db_path=str(db), agent_id="intake") as intake:
        tool = MnemoMemoryToolServer(intake)
        tool.handle({"command": "create", "path": "/memories/acme.md", "file_text": "plan: basic\n"})
        tool.handle({"command": "insert", "path": "/memories/acme.md", "insert_line": 1, "insert_text": "refund: always\n"})
        support = intake.with_agent("support")
        MnemoMemoryToolServer(support).handle({"command": "view", "path": "/memories/acme.md"})

        traced = intake.trace(2)
        assert traced["exact"] is True, traced
        seen = [(e["seq"], e["agent"], e["shown"]) for e in traced["events"]]
        assert seen == [(3, "support", True)], traced
        assert [f["path"] for f in traced["live"]] == ["/memories/acme.md"], traced

        operator = intake.with_agent("alice")
        head = operator.head().seq
        plan = operator.revert(to=1, path="/memories")
        assert plan["undone"] == [2] and plan["conflicts"] == [], plan
        assert operator.head().seq == head, "a dry run writes nothing"
        done = operator.revert(to=1, path="/memories", dry_run=False)
        assert done["record"] == head + 1, done
        after = operator.trace(2)
        assert after["live"] == [], after
        report = operator.verify()
        assert report and report.status == "intact", report
        with pytest.raises(InvalidArgumentError):
            operator.revert(to=1, agent="intake")

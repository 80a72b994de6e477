"""What PyPI shows of the installed package: its own README as the description, and both license
files of the repository in its metadata."""

from importlib import metadata


def test_the_package_carries_its_readme_and_both_licenses() -> None:
    meta = metadata.metadata("mnemo-db")
    assert meta["License-Expression"] == "MIT OR Apache-2.0"
    assert sorted(meta.get_all("License-File") or []) == ["LICENSE-APACHE", "LICENSE-MIT"]
    assert meta["Description-Content-Type"].startswith("text/markdown")
    assert str(meta.get_payload()).startswith("# mnemo-db\n")
    shipped = {f.name for f in metadata.files("mnemo-db") or []}
    assert {"LICENSE-APACHE", "LICENSE-MIT"} <= shipped, sorted(shipped)

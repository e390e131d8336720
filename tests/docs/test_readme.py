"""The README is the front door: short, and its links into the site work where it is read (GitHub)."""
import re

from .examples import ROOT

README = ROOT / "README.md"


def test_the_readme_is_under_12_kb():
    assert len(README.read_bytes()) < 12 * 1024


def test_the_readmes_relative_links_point_at_files_that_exist():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text(encoding="utf8"))
    relative = [target for target in targets if "://" not in target]
    assert any(target.startswith("docs/") and target.endswith(".md") for target in relative)
    assert [target for target in relative if not (ROOT / target).exists()] == []

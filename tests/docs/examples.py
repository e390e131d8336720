"""The examples of the documentation (docs/*.md and README.md): fenced code blocks and their markers.

Every ``python``, ``bash``, ``console`` and ``sh`` block is an example that runs in the tests
(test_examples.py), unless an HTML comment on the line before it says otherwise:

* ``<!-- test: not-run: REASON -->``: not run here, and why (a GPU, a Ray cluster, half an hour of
  training, a corpus that is not in the repository);
* ``<!-- test: prints -->``: a Python block whose trailing ``# ...`` comment lines are exactly what
  it prints;
* ``<!-- test: needs: PATH -->``: runs only where PATH (relative to the repository) exists, e.g. a
  pipeline trained by a project command, and is skipped saying so elsewhere;
* ``<!-- test: needs-cpu: FEATURE -->``: runs only on a CPU with FEATURE (``bfloat16``: AVX512-BF16
  or AMX-BF16, as ``optimize`` detects them), and is skipped saying so elsewhere (the page says
  what such a CPU does instead);
* ``<!-- test: background: URL -->``: a shell block that keeps running (a server): it is started,
  the page's later blocks run once URL answers, and it is stopped at the end of the page.

Markers stack, one comment a line (``needs: PATH`` above ``needs-cpu: bfloat16``: both must hold).

The Python blocks of one page share their names, in order, as a reader who pastes them does.
Other blocks (ini, json, text) are shown, not run.
"""
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[2]
RUN_LANGUAGES = {"python", "bash", "console", "sh"}
MARKERS = ("not-run", "prints", "needs", "needs-cpu", "background")
FENCE = re.compile(
    r"^(?P<markers>(?:<!-- test: [^\n]*? -->\n)*)(?P<indent>[ ]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ ]*$",
    re.S | re.M,
)


@dataclass
class Example:
    page: str
    line: int
    lang: str
    body: str
    markers: Dict[str, str] = field(default_factory=dict)  # each marker and its argument

    @property
    def runs(self) -> bool:
        return self.lang in RUN_LANGUAGES and "not-run" not in self.markers

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def expected_output(self) -> List[str]:
        """The trailing ``# ...`` lines of a ``prints`` block, without the ``# ``."""
        lines = self.body.rstrip("\n").splitlines()
        expected = []
        while lines and lines[-1].startswith("#"):
            expected.insert(0, lines.pop()[2:])
        return expected


def pages() -> List[Path]:
    return [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def examples(page: Path) -> List[Example]:
    text = page.read_text(encoding="utf8")
    found = []
    for match in FENCE.finditer(text):
        body = "\n".join(line[len(match.group("indent")):] for line in match.group("body").splitlines())
        line = text.count("\n", 0, match.start("lang")) + 1
        where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page  # a model card is elsewhere
        found.append(Example(str(where), line, match.group("lang"), body, _markers(match.group("markers"))))
    return found


def _markers(lines: str) -> Dict[str, str]:
    markers = {}
    for text in re.findall(r"<!-- test: ([^\n]*?) -->", lines):
        name, _, argument = text.partition(":")
        markers[name.strip()] = argument.strip()
    return markers

"""CI sets up as the README tells a new user to: the README's two commands, in a fresh virtual environment."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_setup_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf8")
    section = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]


def ci_commands():
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def test_readme_has_two_setup_commands():
    commands = readme_setup_commands()
    assert len(commands) == 2
    assert commands[0].startswith("bash scripts/install.sh") and "spacy project run demo" in commands[0]
    assert commands[1].startswith("python -m pytest tests")


# What CI does after the README's commands: build the documentation site, strict, into a temporary directory.
DOCS_BUILD = ['DOCS_SITE=$(mktemp -d)', 'mkdocs build --strict -d "$DOCS_SITE"', 'rm -rf "$DOCS_SITE"']


def test_ci_runs_the_readme_commands_in_a_fresh_virtual_environment():
    ci = ci_commands()
    readme = readme_setup_commands()
    assert ci[-len(DOCS_BUILD):] == DOCS_BUILD  # then only the site's strict build
    ci = ci[: -len(DOCS_BUILD)]
    assert ci[-2:] == readme  # the README's commands, in order
    before = ci[: -len(readme)]
    assert any(re.fullmatch(r"python3? -m venv (\S+)", line) for line in before)
    assert any(line.startswith(". ") and line.endswith("/bin/activate") for line in before)


def test_scripts_call_pip_through_the_interpreter():
    # `pip` alone may be another environment's; `python -m pip` is the active interpreter's.
    for path in [ROOT / "scripts" / "install.sh", ROOT / ".ci" / "run"]:
        for line in path.read_text(encoding="utf8").splitlines():
            if line.strip().startswith("#"):
                continue
            assert not re.search(r"(^|[;&|(]\s*)pip3?\s", line.strip()), f"{path.name}: {line}"

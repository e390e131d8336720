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


# What CI does after the README's commands: the slow tests (the README's test command with --slow,
# only those), then build the documentation site, strict, into a temporary directory.
DOCS_BUILD = ['DOCS_SITE=$(mktemp -d)', 'mkdocs build --strict -d "$DOCS_SITE"', 'rm -rf "$DOCS_SITE"']


def test_ci_runs_the_readme_commands_in_a_fresh_virtual_environment_then_the_slow_tests():
    ci = ci_commands()
    readme = readme_setup_commands()
    assert ci[-len(DOCS_BUILD):] == DOCS_BUILD  # then only the site's strict build
    ci = ci[: -len(DOCS_BUILD)]
    assert ci[-1] == readme[1] + " --slow -m slow"  # the tests the README's command skips, and only those
    ci = ci[:-1]
    assert ci[-2:] == readme  # the README's commands, in order
    before = ci[: -len(readme)]
    assert any(re.fullmatch(r"python3? -m venv (\S+)", line) for line in before)
    assert any(line.startswith(". ") and line.endswith("/bin/activate") for line in before)


def test_the_readme_test_command_skips_the_slow_tests_and_says_how_to_run_them():
    """The README's test command on a slow test: it does not run, and its skip says --slow; the
    README and the install page tell how to run the slow tests."""
    import subprocess
    import sys

    command = readme_setup_commands()[1].split()
    assert command[:3] == ["python", "-m", "pytest"] and "--slow" not in command and "-m" not in command[3:]
    slow_test = "tests/docs/test_examples.py::test_the_model_cards_examples_run_with_its_wheel_installed"
    result = subprocess.run([sys.executable, "-m", "pytest", slow_test, *command[4:], "-rs", "-p", "no:cacheprovider"],
                            capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:]
    assert re.search(r"\b1 skipped\b", result.stdout) and " passed" not in result.stdout
    assert "run with --slow" in result.stdout
    for page in ("README.md", "docs/install.md"):
        assert "python -m pytest tests -q --slow -m slow" in (ROOT / page).read_text(encoding="utf8"), page


def test_scripts_call_pip_through_the_interpreter():
    # `pip` alone may be another environment's; `python -m pip` is the active interpreter's.
    for path in [ROOT / "scripts" / "install.sh", ROOT / ".ci" / "run"]:
        for line in path.read_text(encoding="utf8").splitlines():
            if line.strip().startswith("#"):
                continue
            assert not re.search(r"(^|[;&|(]\s*)pip3?\s", line.strip()), f"{path.name}: {line}"


def test_the_python_the_readme_asks_for_is_the_package_s_floor():
    """README and docs/install.md name the Python that setup.py's python_requires allows, no older."""
    floor = re.search(r'python_requires=">=(3\.\d+)"', (ROOT / "setup.py").read_text(encoding="utf8")).group(1)
    for page in ("README.md", "docs/install.md"):
        assert f"On a fresh machine with Python {floor}+," in (ROOT / page).read_text(encoding="utf8"), page

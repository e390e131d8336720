"""Our tasks through a real Label Studio: a project with the config ``label-studio-config`` prints,
the tasks ``export label-studio`` writes imported with their predictions, each accepted as an
annotation, the project exported, and the export converted back: the same entities, discontinuous
ones included.

Label Studio is an application with its own virtual environment (``scripts/label_studio_venv.sh``
makes ``.venv-label-studio``; ``$W2NER_LABEL_STUDIO_VENV`` names another). Without it the test is
skipped. The server listens on 127.0.0.1 only, with its data in the test's temporary directory.
"""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import spacy

from spacy_w2ner import get_entities

from ..conftest import TRAIN_DATA, cli, docbin_docs

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("W2NER_LABEL_STUDIO_VENV", ROOT / ".venv-label-studio"))
TOKEN = "w2ner0test0token0000000000000000000000aa"
SAMPLE = ROOT / "tests" / "fixtures" / "pubtator" / "tmVar-sample.txt"
DISCONTINUOUS = (
    "<collection><source>t</source><date/><key/><document><id>d1</id><passage><offset>0</offset>"
    "<text>She had pain in her knees and ankles.</text>"
    '<annotation id="T1"><infon key="type">ADR</infon><location offset="8" length="11"/><location offset="30" length="6"/>'
    "<text>pain in her ankles</text></annotation>"
    '<annotation id="T2"><infon key="type">ADR</infon><location offset="8" length="17"/><text>pain in her knees</text></annotation>'
    "</passage></document></collection>"
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_command(port: int):
    """How the test starts Label Studio: bound to 127.0.0.1 (its --internal-host), never every interface."""
    return [
        str(VENV / "bin" / "label-studio"), "start", "--internal-host", "127.0.0.1", "--host", f"http://127.0.0.1:{port}", "--port", str(port),
        "--no-browser", "--username", "w2ner@example.com", "--password", "w2ner-test-password", "--user-token", TOKEN,
        "--enable-legacy-api-token",
    ]  # fmt: skip


FAKE_PYTHON = """#!/usr/bin/env bash
# python3 -m venv DIR: a venv whose pip 'installs' a label-studio that, run at all, records it and serves forever
mkdir -p "$3/bin"
cat > "$3/bin/pip" <<'PIP'
#!/usr/bin/env bash
here="$(dirname "$0")"
if [ "$1" = install ]; then printf '#!/usr/bin/env bash\\ntouch "%s/started"; sleep 600\\n' "$here" > "$here/label-studio"; chmod +x "$here/label-studio"; fi
if [ "$1" = show ]; then printf 'Name: label-studio\\nVersion: 1.23.2\\nSummary: x\\n'; fi
PIP
chmod +x "$3/bin/pip"
"""


def test_the_install_script_checks_the_install_without_starting_a_server(tmp_path):
    """scripts/label_studio_venv.sh returns (label-studio --version used to start a server on
    0.0.0.0:8080 and never return), printing the version pip installed."""
    import shutil

    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "label_studio_venv.sh", tmp_path / "scripts")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").write_text(FAKE_PYTHON)
    (tmp_path / "bin" / "python3").chmod(0o755)
    environment = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(tmp_path / "scripts" / "label_studio_venv.sh")], env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Name: label-studio", "Version: 1.23.2"]
    assert (tmp_path / ".venv-label-studio" / "bin" / "label-studio").exists()
    assert not (tmp_path / ".venv-label-studio" / "bin" / "started").exists()
    assert server_command(8080)[2:4] == ["--internal-host", "127.0.0.1"]


@pytest.fixture
def label_studio(tmp_path):
    """The URL of a fresh Label Studio on 127.0.0.1, stopped after the test."""
    if not (VENV / "bin" / "label-studio").exists():
        pytest.skip(f"no Label Studio at {VENV} (scripts/label_studio_venv.sh installs it)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = server_command(port)
    environment = {**os.environ, "LABEL_STUDIO_BASE_DATA_DIR": str(tmp_path / "ls-data")}
    log = open(tmp_path / "label-studio.log", "w")
    server = subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, (tmp_path / "label-studio.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=60):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"Label Studio did not answer in 240 s: {(tmp_path / 'label-studio.log').read_text()[-2000:]}")
                time.sleep(2)
        yield url
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)


@pytest.mark.slow
def test_tasks_through_a_real_label_studio_come_back_with_the_same_entities(tmp_path, label_studio, saved_model):
    (tmp_path / "d.xml").write_text(DISCONTINUOUS, encoding="utf8")
    cli("convert", "bioc", tmp_path / "d.xml", tmp_path)
    cli("convert", "pubtator", SAMPLE, tmp_path)
    for name in ("d", "tmVar-sample"):
        cli("export", "label-studio", tmp_path / f"{name}.spacy", tmp_path / f"{name}.tasks.json", "--model-version", "gold")
    tasks = [task for name in ("d", "tmVar-sample") for task in json.loads((tmp_path / f"{name}.tasks.json").read_text(encoding="utf8"))]
    (tmp_path / "tasks.json").write_text(json.dumps(tasks, ensure_ascii=False), encoding="utf8")
    labels = sorted({r["value"]["labels"][0] for task in tasks for r in task["predictions"][0]["result"] if r["type"] == "labels"})
    from spacy_w2ner.formats import label_studio_config

    (tmp_path / "config.xml").write_text(label_studio_config(labels), encoding="utf8")
    script = Path(__file__).with_name("label_studio_round_trip.py")
    subprocess.run(
        [str(VENV / "bin" / "python"), str(script), label_studio, TOKEN, str(tmp_path / "config.xml"), str(tmp_path / "tasks.json"), str(tmp_path / "export.json")],
        check=True, timeout=300,
    )  # fmt: skip
    expected = [[(e.label, e.tokens) for e in get_entities(doc)] for name in ("d", "tmVar-sample") for doc in docbin_docs(tmp_path / f"{name}.spacy")]
    for use in ("annotations", "predictions"):
        cli("convert", "label-studio", tmp_path / "export.json", tmp_path / use, "--use", use)
        found = [[(e.label, e.tokens) for e in get_entities(doc)] for doc in docbin_docs(tmp_path / use / "export.spacy")]
        assert found == expected
    assert any(len(e.fragments) > 1 for e in get_entities(docbin_docs(tmp_path / "annotations" / "export.spacy")[0]))
    if os.environ.get("W2NER_SAVE_LABEL_STUDIO_EXPORT"):
        Path(os.environ["W2NER_SAVE_LABEL_STUDIO_EXPORT"]).write_bytes((tmp_path / "export.json").read_bytes())


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
EMOJI_TEXT = "😀😀 " + TRAIN_DATA[0][0] + " 👨‍👩‍👧 " + TRAIN_DATA[1][0]  # two emoji, then a family: 2 + 5 code points


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_the_label_studio_editor_highlights_each_predicted_region_s_own_text_after_emoji(tmp_path, label_studio, saved_model):
    """annotate's Label Studio tasks, imported into a real Label Studio and opened in its editor in a
    browser: each region highlights its own text after characters outside the Basic Multilingual
    Plane (the editor counts code points; UTF-16 offsets highlighted 'pitor I' for 'Lipitor')."""
    playwright = pytest.importorskip("playwright.sync_api")
    from spacy_w2ner.formats import label_studio_config

    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"id": "e1", "text": EMOJI_TEXT}, ensure_ascii=False) + "\n", encoding="utf8")
    cli("annotate", saved_model, source, tmp_path / "tasks.json", "--output-format", "label-studio", "--no-progress")
    tasks = json.loads((tmp_path / "tasks.json").read_text(encoding="utf8"))
    regions = {r["id"]: r["value"]["text"] for r in tasks[0]["predictions"][0]["result"] if r["type"] == "labels"}
    assert len(regions) >= 3
    labels = sorted(spacy.load(saved_model).get_pipe("w2ner").labels)

    def api(method, path, body=None):
        data = None if body is None else json.dumps(body).encode("utf8")
        headers = {"Authorization": f"Token {TOKEN}", **({"Content-Type": "application/json"} if data else {})}
        with urllib.request.urlopen(urllib.request.Request(label_studio + path, data=data, headers=headers, method=method), timeout=120) as answer:
            return json.loads(answer.read() or b"null")

    project = api("POST", "/api/projects", {"title": "offsets", "label_config": label_studio_config(labels)})["id"]
    api("POST", f"/api/projects/{project}/import", tasks)
    listed = api("GET", f"/api/tasks?project={project}")
    task = (listed["tasks"] if isinstance(listed, dict) else listed)[0]["id"]
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{label_studio}/user/login/")
        page.fill("input[name=email]", "w2ner@example.com")
        page.fill("input[name=password]", "w2ner-test-password")
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")
        page.goto(f"{label_studio}/projects/{project}/data?task={task}")
        page.wait_for_selector("span.htx-highlight", timeout=120_000)
        page.screenshot(path=str(tmp_path / "editor.png"))
        highlighted = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('span.htx-highlight')].map(span =>
                   [[...span.classList].find(c => c.startsWith('htx-highlight-')).slice(14), span.textContent]))"""
        )  # the editor's class per region: htx-highlight-<region id>-<its number>
        browser.close()
    assert {region_id.rsplit("-", 1)[0]: text for region_id, text in highlighted.items()} == regions

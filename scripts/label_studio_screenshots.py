"""Screenshots of Label Studio with the backend's pre-annotations, from a real run, for the docs.

    python scripts/label_studio_screenshots.py MODEL [--texts texts.txt] [--out docs/] [--retrain]
    python scripts/label_studio_screenshots.py --sample-model DIR --retrain   # the docs' screenshots

``--sample-model DIR`` trains there first (unless it is there) a small CNN pipeline on the
English sentences of the bundled sample corpus (600 steps of 16 sentences, a minute or two) and
uses it as MODEL.

Starts Label Studio (``.venv-label-studio``, scripts/label_studio_venv.sh; data in a temporary
directory, on 127.0.0.1, allowed to call a backend on this machine) and ``python -m spacy_w2ner
label-studio-backend MODEL`` beside it; makes a project with ``label-studio-config``'s config,
imports the texts (a line each; default: five sentences of the bundled sample corpus), connects the backend
and retrieves its predictions through Label Studio's API, then photographs in headless Chromium
(Debian's ``chromium``, driven by Playwright, a new profile): the project's Model settings with
the connected backend (``label-studio-model.png``), the Data Manager sorted by the prediction
score, lowest first (``label-studio-tasks.png``), and the task with a discontinuous entity in the
labeling view, its regions and the ``fragment`` relation (``label-studio-task.png``). With
``--retrain`` the predictions are then accepted as annotations, the webhooks start a run, and once
its model serves the Data Manager is photographed again with the new model's predictions
(``label-studio-retrained.png``). Prints what it did as JSON.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "w2ner0docs0token00000000000000000000000aa"
USER, PASSWORD = "w2ner@example.com", "w2ner-docs-password"
TEXTS = [  # sentences of the bundled sample corpus (corpora/sample, CC0: synthetic)
    "Olga Mensah reported itching on scalp and chest after taking lisinopril for a week .",
    "Took lisinopril for arthritis and woke up with right and left foot pain .",
    "Within a day of starting omeprazole I had numbness and burning in elbows and jaw .",
    "Tingling and aches in the right leg started within hours of the tramadol injection .",
    "He was referred to University of Atlanta Hospital for assessment of cramps in lower back and arms .",
]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def api(url, method, path, body=None):
    data = None if body is None else json.dumps(body).encode("utf8")
    headers = {"Authorization": f"Token {TOKEN}", **({"Content-Type": "application/json"} if data else {})}
    with urllib.request.urlopen(urllib.request.Request(url + path, data=data, headers=headers, method=method), timeout=600) as answer:
        text = answer.read()
    return json.loads(text) if text else None


def wait(url: str, what: str, process, log: Path, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while True:
        if process.poll() is not None:
            sys.exit(f"{what} exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=30):
                return
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(f"{what} did not answer {url} in {seconds:.0f} s: {log.read_text()[-2000:]}")
            time.sleep(2)


def start(command, log: Path, env=None):
    return subprocess.Popen(command, stdout=open(log, "ab"), stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, start_new_session=True)


def short_training(model: str, work: Path, steps: int = 40) -> Path:
    """The model's own training config, ``steps`` steps long (an evaluation every half)."""
    from spacy import util

    config = util.load_config(Path(model) / "config.cfg", interpolate=False)
    config["training"].update({"max_steps": steps, "eval_frequency": steps // 2, "patience": 0})
    config.to_disk(work / "train.cfg")
    return work / "train.cfg"


def servers(model: str, work: Path, venv: Path, retrain: bool):
    """Label Studio and the backend, started; their URLs and processes."""
    ls_port, backend_port = free_port(), free_port()
    ls_url, backend_url = f"http://127.0.0.1:{ls_port}", f"http://127.0.0.1:{backend_port}"
    label_studio = start([str(venv / "bin" / "label-studio"), "start", "--internal-host", "127.0.0.1", "--host", ls_url, "--port", str(ls_port),
                          "--no-browser", "--username", USER, "--password", PASSWORD, "--user-token", TOKEN, "--enable-legacy-api-token"],
                         work / "label-studio.log", {"LABEL_STUDIO_BASE_DATA_DIR": str(work / "ls-data"), "ML_BLOCK_LOCAL_IP": "false",
                                                     "SSRF_PROTECTION_ENABLED": "false"})  # fmt: skip
    options = ["--retrain-every", "5" if retrain else "0", "--label-studio-url", ls_url, "--train-config", str(short_training(model, work))]
    backend = start([sys.executable, "-m", "spacy_w2ner", "label-studio-backend", model, "--port", str(backend_port), "--runs", str(work / "runs"), *options],
                    work / "backend.log", {"LABEL_STUDIO_API_KEY": TOKEN})  # fmt: skip
    wait(f"{ls_url}/health", "Label Studio", label_studio, work / "label-studio.log")
    wait(f"{backend_url}/health", "the backend", backend, work / "backend.log")
    return ls_url, backend_url, [label_studio, backend]


def project_with_predictions(ls_url: str, backend_url: str, model: str, texts):
    import spacy

    from spacy_w2ner.formats import label_studio_config

    labels = list(spacy.load(model, exclude=["transformer"]).get_pipe("w2ner").labels)
    project = api(ls_url, "POST", "/api/projects", {"title": "Adverse drug events", "label_config": label_studio_config(labels)})["id"]
    api(ls_url, "POST", f"/api/projects/{project}/import", [{"text": text} for text in texts])
    api(ls_url, "POST", "/api/ml", {"url": backend_url, "project": project, "title": "spacy-w2ner"})
    retrieve(ls_url, project)
    use_version(ls_url, backend_url, project)
    return project


def use_version(ls_url: str, backend_url: str, project: int) -> None:
    """The project's model version (Settings > Annotation, pre-labelling): the backend's, whose
    predictions pre-label tasks and whose scores the Data Manager's Prediction score column shows."""
    with urllib.request.urlopen(f"{backend_url}/health", timeout=60) as answer:
        version = json.loads(answer.read())["model_version"]
    api(ls_url, "PATCH", f"/api/projects/{project}", {"model_version": version})


def retrieve(ls_url: str, project: int) -> None:
    api(ls_url, "POST", f"/api/dm/actions?id=retrieve_tasks_predictions&project={project}", {"selectedItems": {"all": True, "excluded": []}})


def predictions(ls_url: str, project: int):
    found = {}
    for prediction in api(ls_url, "GET", f"/api/predictions?project={project}"):
        found.setdefault(prediction["task"], []).append(prediction)
    return found


def sorted_view(ls_url: str, project: int) -> None:
    """The Data Manager's tab: prediction score ascending, the columns a reader needs."""
    views = api(ls_url, "GET", f"/api/dm/views?project={project}")
    data = {"title": "Most doubtful first", "ordering": ["tasks:predictions_score"],
            "hiddenColumns": {"explore": ["tasks:inner_id", "tasks:annotations_results", "tasks:annotations_ids", "tasks:predictions_results",
                                          "tasks:file_upload", "tasks:storage_filename", "tasks:created_at", "tasks:updated_at", "tasks:updated_by",
                                          "tasks:avg_lead_time", "tasks:draft_exists", "tasks:cancelled_annotations", "tasks:total_predictions",
                                          "tasks:annotators", "tasks:completed_at", "tasks:total_annotations"],
                              "labeling": []}}  # fmt: skip
    if views:
        api(ls_url, "PATCH", f"/api/dm/views/{views[0]['id']}", {"project": project, "data": data})
    else:
        api(ls_url, "POST", "/api/dm/views", {"project": project, "data": data})


def photograph(ls_url: str, project: int, task: int, out: Path, names, profile: Path) -> list:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    taken = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(str(profile), executable_path=chromium, args=FLAGS, headless=True,
                                                               viewport={"width": 1280, "height": 760})  # fmt: skip
        page = browser.new_page()
        page.set_default_timeout(300_000)  # a busy machine: Label Studio's pages take their time
        page.goto(f"{ls_url}/user/login/")
        page.wait_for_load_state("networkidle")
        if page.locator("input[name=email]").count():  # not logged in yet (the profile keeps the session)
            page.fill("input[name=email]", USER)
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_load_state("networkidle")
        for name, path in names:
            page.goto(ls_url + path.format(project=project, task=task))
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(4000)
            page.screenshot(path=str(out / name))
            taken.append(str(out / name))
        browser.close()
    return taken


def sample_pipeline(path: Path, steps: int = 600) -> Path:
    """A small CNN w2ner pipeline trained on corpora/sample's English sentences (CC0)."""
    import random

    import spacy
    from spacy.training import Example

    from spacy_w2ner.formats import read_corpus

    if (path / "meta.json").exists():
        return path
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    small = {"lstm_size": 64, "conv_size": 32, "biaffine_size": 64, "ffnn_size": 64, "tok2vec": {"embed": {"width": 64}, "encode": {"width": 64, "depth": 2}}}
    nlp.add_pipe("w2ner", config={"model": small})
    docs = [doc for doc in read_corpus("w2ner-json", ROOT / "corpora" / "sample" / "train.json", nlp) if doc.text.isascii()]
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in docs]
    optimizer = nlp.initialize(lambda: examples)
    chooser = random.Random(0)
    for _ in range(steps):
        nlp.update(chooser.sample(examples, 16), sgd=optimizer, drop=0.1)
    nlp.to_disk(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", help="The pipeline that pre-annotates (or --sample-model)")
    parser.add_argument("--sample-model", help="Train a small pipeline on the sample corpus here (if not there) and use it")
    parser.add_argument("--texts", help="A text file, a task a line (default: five sentences of corpora/sample)")
    parser.add_argument("--out", default=str(ROOT / "docs"))
    parser.add_argument("--venv", default=str(ROOT / ".venv-label-studio"))
    parser.add_argument("--retrain", action="store_true")
    args = parser.parse_args()
    if args.sample_model:
        args.model = str(sample_pipeline(Path(args.sample_model)))
    if not args.model:
        parser.error("give MODEL or --sample-model DIR")
    texts = Path(args.texts).read_text(encoding="utf8").splitlines() if args.texts else TEXTS
    work = Path(tempfile.mkdtemp(prefix="w2ner-ls-screens-"))
    out = Path(args.out)
    ls_url, backend_url, processes = servers(args.model, work, Path(args.venv), args.retrain)
    try:
        project = project_with_predictions(ls_url, backend_url, args.model, texts)
        sorted_view(ls_url, project)
        found = predictions(ls_url, project)
        joined = [task for task, items in sorted(found.items()) if any(r["type"] == "relation" for r in items[0]["result"])]
        task = joined[0] if joined else min(found)
        shots = [("label-studio-model.png", "/projects/{project}/settings/ml"), ("label-studio-tasks.png", "/projects/{project}/data"),
                 ("label-studio-task.png", "/projects/{project}/data?task={task}")]  # fmt: skip
        taken = photograph(ls_url, project, task, out, shots, work / "profile")
        report = {"work": str(work), "project": project, "task_with_fragments": task, "tasks": len(found),
                  "model_version": found[task][0]["model_version"], "screenshots": taken,
                  "scores": {t: p[0]["score"] for t, p in sorted(found.items())}}  # fmt: skip
        if args.retrain:
            report.update(retrained(ls_url, backend_url, project, found, work, out))
        print(json.dumps(report, indent=1))
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=120)


def retrained(ls_url: str, backend_url: str, project: int, found, work: Path, out: Path):
    """Accept the predictions as annotations, wait for the run's model to serve, predict again, photograph."""
    for task, items in sorted(found.items()):
        api(ls_url, "POST", f"/api/tasks/{task}/annotations", {"result": items[0]["result"], "lead_time": 3.0})
    status_path = work / "runs" / "run-0001" / "status.json"
    deadline = time.monotonic() + 3600
    while not (status_path.exists() and json.loads(status_path.read_text())["status"] not in ("training", "trained")):
        if time.monotonic() > deadline:
            sys.exit(f"the run did not end in an hour: {(work / 'backend.log').read_text()[-2000:]}")
        time.sleep(5)
    status = json.loads(status_path.read_text())
    retrieve(ls_url, project)
    use_version(ls_url, backend_url, project)
    taken = photograph(ls_url, project, min(found), out, [("label-studio-retrained.png", "/projects/{project}/data")], work / "profile")
    return {"run": status, "retrained_screenshots": taken}


if __name__ == "__main__":
    main()

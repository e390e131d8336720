"""The backend in a real Label Studio (1.23, its own virtual environment: scripts/label_studio_venv.sh;
the server started as tests/formats/test_label_studio_server.py starts it, on 127.0.0.1): a
project with ``label-studio-config``'s config, the backend connected through Label Studio's API,
tasks imported, Label Studio's predictions from the backend (a discontinuous entity's
``fragment`` relation among them), annotations submitted through the API, the webhooks Label
Studio sends starting a run, and the run's model (a newer ``model_version``) predicting after it.

Label Studio refuses loopback addresses for ML backends and webhooks unless told
(``ML_BLOCK_LOCAL_IP``, ``SSRF_PROTECTION_ENABLED``): the backend here runs beside it, as in the
docs' walkthrough. Slow (minutes); skipped without that environment or the [label-studio] extra.
"""
import json
import urllib.request

import pytest
import spacy

from spacy_w2ner.formats import label_studio_config

from ..formats.test_label_studio_server import TOKEN, label_studio  # noqa: F401  (the fixture)
from .helpers import TEXTS, request, running_backend, small_train_config, tasks, wait_for

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
LOCAL = {"ML_BLOCK_LOCAL_IP": "false", "SSRF_PROTECTION_ENABLED": "false"}


@pytest.fixture
def local_label_studio(monkeypatch, request):
    """Label Studio that may call a backend on this machine."""
    for name, value in LOCAL.items():
        monkeypatch.setenv(name, value)
    return request.getfixturevalue("label_studio")


def api(url: str, method: str, path: str, body=None):
    """Label Studio's REST API with the test's token; the JSON answer."""
    data = None if body is None else json.dumps(body).encode("utf8")
    headers = {"Authorization": f"Token {TOKEN}", **({"Content-Type": "application/json"} if data else {})}
    with urllib.request.urlopen(urllib.request.Request(url + path, data=data, headers=headers, method=method), timeout=300) as answer:
        text = answer.read()
    return json.loads(text) if text else None


def predictions_of(url: str, project: int):
    """Label Studio's predictions of the project's tasks: {task id: [prediction, ...]}."""
    found = {}
    for prediction in api(url, "GET", f"/api/predictions?project={project}"):
        found.setdefault(prediction["task"], []).append(prediction)
    return found


def retrieve_predictions(url: str, project: int) -> None:
    """The Data Manager's 'Retrieve Predictions' on every task (Label Studio asks the backend)."""
    api(url, "POST", f"/api/dm/actions?id=retrieve_tasks_predictions&project={project}", {"selectedItems": {"all": True, "excluded": []}})


@pytest.mark.slow
def test_label_studio_shows_the_backends_predictions_and_the_corrections_train_a_newer_model(tmp_path, local_label_studio, saved_model):
    url = local_label_studio
    labels = list(spacy.load(saved_model).get_pipe("w2ner").labels)
    config = small_train_config(saved_model, tmp_path / "small.cfg", steps=8, every=4)
    options = ("--retrain-every", len(TEXTS), "--train-config", config, "--label-studio-url", url)
    runs = tmp_path / "runs"
    with running_backend(saved_model, runs, *options, env={"LABEL_STUDIO_API_KEY": TOKEN}) as (backend, _):
        project = api(url, "POST", "/api/projects", {"title": "spacy-w2ner loop", "label_config": label_studio_config(labels)})["id"]
        api(url, "POST", f"/api/projects/{project}/import", [{"text": text} for text in TEXTS])
        connection = api(url, "POST", "/api/ml", {"url": backend, "project": project, "title": "spacy-w2ner"})
        assert api(url, "GET", f"/api/ml/{connection['id']}")["readable_state"] == "Connected"
        retrieve_predictions(url, project)
        found = predictions_of(url, project)
        task_ids = sorted(found)
        assert len(task_ids) == len(TEXTS) and all(p[0]["model_version"] == "en_pipeline-0.0.0" for p in found.values())
        direct = request(backend, "/predict", {"tasks": tasks(), "label_config": label_studio_config(labels)})[1]["results"]
        assert [found[task][0]["result"] for task in task_ids] == [prediction["result"] for prediction in direct]
        first = found[task_ids[0]][0]  # She had pain in her knees and ankles: one entity in two regions
        fragments = [r for r in first["result"] if r["type"] == "relation"]
        assert fragments and fragments[0]["labels"] == ["fragment"]
        assert {r["id"] for r in first["result"] if r["type"] == "labels"} >= {fragments[0]["from_id"], fragments[0]["to_id"]}
        assert [found[task][0]["score"] for task in task_ids] == [prediction["score"] for prediction in direct]

        for task in task_ids:  # the annotator accepts each pre-annotation: Label Studio's webhooks reach the backend
            api(url, "POST", f"/api/tasks/{task}/annotations", {"result": found[task][0]["result"], "lead_time": 2.0})
        run = runs / "run-0001"
        status = wait_for(lambda: (run / "status.json").exists() and json.loads((run / "status.json").read_text())["status"] not in ("training", "trained")
                          and json.loads((run / "status.json").read_text()), "the run the webhooks started", 900)  # fmt: skip
        assert status["status"] == "promoted", status
        assert status["counts"]["train"] + status["counts"]["dev"] == len(TEXTS)
        assert "from Label Studio's API" in runs.with_name("runs.log").read_text()
        retrieve_predictions(url, project)
        newer = predictions_of(url, project)
        assert all({p["model_version"] for p in newer[task]} == {"en_pipeline-0.0.0", "en_pipeline-0.0.0+run-0001"} for task in task_ids)
        assert api(url, "GET", f"/api/ml/{connection['id']}")["model_version"] == "en_pipeline-0.0.0+run-0001"

"""The backend alone, as Label Studio talks to it: started as a process on a loopback port, good and
bad requests, concurrent ones; /predict's regions are annotate --output-format label-studio's.
Skipped without the [label-studio] extra (FastAPI, uvicorn)."""
import json
import threading

import pytest

from spacy_w2ner.formats import label_studio_config

from ..conftest import cli, write
from .helpers import TEXTS, request, running_backend, tasks

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def backend(saved_model, tmp_path_factory):
    """A backend that never trains (--retrain-every 0), and its runs directory."""
    runs = tmp_path_factory.mktemp("backend") / "runs"
    with running_backend(saved_model, runs, "--retrain-every", 0, "--max-tasks", 20, "--max-text-chars", 500) as (url, _):
        yield url, runs


@pytest.fixture(scope="module")
def config(saved_model):
    import spacy

    return label_studio_config(list(spacy.load(saved_model).get_pipe("w2ner").labels))


def predict(url, config, task_list, **extra):
    return request(url, "/predict", {"tasks": task_list, "project": "3.1700000000", "label_config": config, "params": {"context": None}, **extra})


def test_health_and_setup_name_the_model_version(backend, config):
    url, _ = backend
    status, health = request(url, "/health")
    assert status == 200 and health["status"] == "UP" and health["model_class"] == "SpacyW2NERBackend"
    assert health["model_version"] == "en_pipeline-0.0.0"  # annotate's model_version for this pipeline
    status, setup = request(url, "/setup", {"project": "3.1700000000", "schema": config, "hostname": "http://127.0.0.1:8080",
                                            "access_token": "not-read", "extra_params": None})  # fmt: skip
    assert (status, setup) == (200, {"model_version": "en_pipeline-0.0.0"})


def test_predict_gives_annotates_regions_for_the_same_model_and_texts(backend, config, saved_model, tmp_path):
    url, _ = backend
    status, answer = predict(url, config, tasks())
    assert status == 200 and answer["model_version"] == "en_pipeline-0.0.0"
    source = write(tmp_path, "in.jsonl", "".join(json.dumps({"id": k, "text": text}) + "\n" for k, text in enumerate(TEXTS)))
    cli("annotate", saved_model, source, tmp_path / "out.json", "--output-format", "label-studio", "--no-progress")
    written = json.loads((tmp_path / "out.json").read_text(encoding="utf8"))
    assert len(answer["results"]) == len(written) == len(TEXTS)
    for prediction, task in zip(answer["results"], written):
        assert prediction["result"] == task["predictions"][0]["result"]
        assert prediction["model_version"] == task["predictions"][0]["model_version"]
    relations = [r for r in answer["results"][0]["result"] if r["type"] == "relation"]
    assert relations and all(r["labels"] == ["fragment"] for r in relations)  # pain in her ... ankles
    emoji = answer["results"][-1]["result"]  # after the emoji: code points, as Python counts (11 in UTF-16)
    assert {(r["value"]["start"], r["value"]["text"]) for r in emoji if r["type"] == "labels"} >= {(10, "pain in her knees")}


def test_the_task_score_is_the_lowest_entity_score_and_1_without_entities(backend, config):
    url, _ = backend
    _, answer = predict(url, config, tasks(["She had pain in her knees and ankles .", "The the the ."]))
    first, empty = answer["results"]
    assert first["score"] == min(r["score"] for r in first["result"] if r["type"] == "labels")
    assert empty["result"] == [] and empty["score"] == 1.0


def test_the_labeling_configs_names_and_text_key_are_used(backend):
    url, _ = backend
    config = ('<View><Labels name="ner" toName="note"><Label value="SYM"/></Labels>'
              '<Text name="note" value="$body"/></View>')  # fmt: skip
    status, answer = request(url, "/predict", {"tasks": [{"id": 7, "data": {"body": TEXTS[0]}}], "label_config": config})
    assert status == 200
    regions = [r for r in answer["results"][0]["result"] if r["type"] == "labels"]
    assert regions and {(r["from_name"], r["to_name"]) for r in regions} == {("ner", "note")}


def test_a_task_that_cannot_be_predicted_gets_an_error_naming_it_and_the_others_their_predictions(backend, config):
    url, _ = backend
    bad = [{"id": 11, "data": {}}, {"id": 12, "data": {"text": "   "}}, "text", {"id": 14}, {"id": 15, "data": {"text": "x" * 501}}]
    status, answer = predict(url, config, [tasks()[0], *bad, tasks()[1]])
    assert status == 200
    results = answer["results"]
    assert "result" in results[0] and "result" in results[-1]
    assert [r["error"] for r in results[1:-1]] == [
        "task 11: no 'data.text': expected the document's text",
        "task 12: empty 'data.text': no document",
        "task #3: a task is an object with 'data', got str",
        "task 14: no 'data' object",
        "task 15: 501 characters, more than --max-text-chars=500",
    ]


@pytest.mark.parametrize(
    "raw, status, error",
    [
        (b"{not json", 400, "the body is not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
        (b"\xff\xfe", 400, "the body is not valid UTF-8 (invalid start byte at byte 0)"),
        (b"[1, 2]", 422, "the body must be a JSON object, got a list"),
        (b'{"tasks": "x"}', 422, "'tasks' must be a list of task objects, got a string"),
        (b'{"tasks": [], "label_config": 3}', 422, "'label_config' must be the labeling config's XML, got an integer"),
        (b'{"tasks": [], "label_config": "<View"}', 422, "the labeling config is not XML (unclosed token: line 1, column 0)"),
        (b'{"tasks": [], "label_config": "<View><Text name=\\"t\\" value=\\"$t\\"/></View>"}', 422,
         "the labeling config has no <Labels> control over a <Text> object with value=\"$key\" (python -m spacy_w2ner label-studio-config MODEL prints one)"),
        (b'{"tasks": [], "label_config": "<View><Labels name=\\"l\\" toName=\\"t\\"/><Text name=\\"t\\" value=\\"$u\\" valueType=\\"url\\"/></View>"}', 422,
         "the <Text> object 't' reads its text from a URL (valueType=\"url\"); the backend reads the text in the task's data: leave valueType out"),
        (json.dumps({"tasks": [{"data": {"text": "a"}}] * 21}).encode(), 413, "21 tasks, more than --max-tasks=20; send fewer at once"),
    ],
)  # fmt: skip
def test_a_bad_request_gets_a_4xx_naming_the_problem_and_the_backend_goes_on(backend, raw, status, error):
    url, _ = backend
    assert request(url, "/predict", raw=raw) == (status, {"error": error})
    assert request(url, "/health")[0] == 200


def test_webhooks_are_acknowledged_as_label_studio_ml_does(backend):
    url, runs = backend
    assert request(url, "/webhook", {"action": "PROJECT_UPDATED", "project": {"id": 3}}) == (200, {"status": "Unknown event"})
    assert request(url, "/webhook", {"project": {"id": 3}}) == (422, {"error": "a webhook needs 'action' (Label Studio's event name), got null"})
    event = {"action": "ANNOTATION_CREATED", "project": {"id": 3}, "annotation": {"id": 1, "task": 1, "result": []}, "task": tasks()[0]}
    assert request(url, "/webhook", event) == (201, {"status": "ok", "result": {"changes_since_last_run": 1, "run_requested": False}})
    status, answer = request(url, "/webhook", {**event, "project": {"id": 4}})
    assert status == 200 and answer == {"status": "ignored", "result": "this backend learns from project 3; ANNOTATION_CREATED of project 4 is not used (one backend per project)"}
    kept = [json.loads(line) for line in (runs / "events.jsonl").read_text(encoding="utf8").splitlines()]
    assert [e["action"] for e in kept] == ["ANNOTATION_CREATED"]


def test_concurrent_predicts_each_get_their_own_answer(backend, config):
    url, _ = backend
    expected = {k: predict(url, config, tasks([text], k))[1]["results"] for k, text in enumerate(TEXTS)}
    found, failures = {}, []

    def client(k: int) -> None:
        for repeat in range(3):
            status, answer = predict(url, config, tasks([TEXTS[k]], k))
            if status != 200:
                failures.append((k, status, answer))
            found[(k, repeat)] = answer["results"]

    threads = [threading.Thread(target=client, args=(k,)) for k in range(len(TEXTS))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert all(found[(k, repeat)] == expected[k] for k in range(len(TEXTS)) for repeat in range(3))

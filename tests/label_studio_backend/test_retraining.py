"""Learning from corrections: the events kept and replayed, the dev share held out, the config
that trains on from the serving model, the gate that keeps a worse model out, a failed run, Label
Studio's export; and a backend killed while it trains, restarted, resuming the run and serving its
model. Skipped without the [label-studio] extra."""
import json
import os
import signal
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from spacy import util

from spacy_w2ner.label_studio_backend import BackendOptions, create_backend
from spacy_w2ner.label_studio_backend import retraining
from spacy_w2ner.label_studio_backend.corrections import Corrections, GatherError, export_tasks, run_docs
from spacy_w2ner.label_studio_backend.predictions import Names

from .helpers import TEXTS, annotation_events, request, running_backend, small_train_config, tasks, wait_for

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


def created(annotation_id, task_id, text, result, when="2026-01-01T00:00:00Z", action="ANNOTATION_CREATED"):
    return {"action": action, "project": {"id": 1}, "annotation": {"id": annotation_id, "task": task_id, "result": result, "updated_at": when},
            "task": {"id": task_id, "data": {"text": text}}}  # fmt: skip


def region(start, end, text, label="SYM", region_id="a"):
    return {"id": region_id, "from_name": "label", "to_name": "text", "type": "labels", "value": {"start": start, "end": end, "text": text, "labels": [label]}}


def test_the_kept_events_replay_into_each_tasks_annotations_still_there(tmp_path):
    corrections = Corrections(tmp_path)
    text = "She had pain in her knees ."
    assert corrections.record("ANNOTATION_CREATED", created(1, 10, text, [region(8, 12, "pain")])) == 1
    assert corrections.record("ANNOTATION_CREATED", created(2, 11, text, [])) == 1
    assert corrections.record("ANNOTATION_UPDATED", created(1, 10, text, [region(8, 25, "pain in her knees")], "2026-01-02T00:00:00Z", "ANNOTATION_UPDATED")) == 1
    assert corrections.record("ANNOTATIONS_DELETED", {"annotations": [{"id": 2}], "project": {"id": 1}}) == 1
    assert corrections.record("PROJECT_UPDATED", {"project": {"id": 1}}) == 0
    with open(tmp_path / "events.jsonl", "ab") as file:
        file.write(b'{"action": "ANNOTATION_CREATED", "annot')  # a line cut by a kill
    found = Corrections(tmp_path).tasks()
    assert [(t["id"], [a["id"] for a in t["annotations"]]) for t in found] == [(10, [1])]
    assert found[0]["annotations"][0]["result"][0]["value"]["text"] == "pain in her knees"


def test_the_dev_share_is_every_nth_task_first_seen_and_a_task_keeps_its_side(tmp_path, saved_model):
    import spacy

    nlp = spacy.blank("en")
    exported = [{"id": k, "data": {"text": f"Note {k} : pain ."}, "annotations": [{"id": k, "result": [region(len(f"Note {k} : "), len(f"Note {k} : pain"), "pain")]}]} for k in range(12)]
    (tmp_path / "a.json").write_text(json.dumps(exported[:10]))
    train, dev, counts = run_docs(tmp_path / "a.json", nlp, ["SYM"], "w2ner", tmp_path / "split.json", 0.2)
    assert (counts["train"], counts["dev"]) == (8, 2)
    assert [doc.text for doc in dev] == ["Note 4 : pain .", "Note 9 : pain ."]
    (tmp_path / "b.json").write_text(json.dumps(exported[::-1]))  # more tasks, in another order
    _, dev, _ = run_docs(tmp_path / "b.json", nlp, ["SYM"], "w2ner", tmp_path / "split.json", 0.2)
    assert sorted(doc.text for doc in dev) == ["Note 4 : pain .", "Note 9 : pain ."]  # tasks 10, 11: 10th, 11th seen
    _, _, counts = run_docs(tmp_path / "a.json", nlp, ["DRUG"], "w2ner", tmp_path / "split.json", 0.2)
    assert counts["entities of labels the model does not have (left out)"] == 10


def test_the_runs_config_sources_every_component_from_the_serving_model(saved_model, tmp_path):
    base = util.load_config(Path(saved_model) / "config.cfg", interpolate=False)
    config = retraining.training_config(base, str(saved_model), ["w2ner"], tmp_path / "t.spacy", tmp_path / "d.spacy")
    assert dict(config["components"]) == {"w2ner": {"source": str(saved_model)}}
    assert config["paths"]["train"] == str(tmp_path / "t.spacy")
    assert config["corpora"]["train"]["@readers"] == "spacy.Corpus.v1" and config["corpora"]["dev"]["path"] == "${paths.dev}"
    assert "factory" in base["components"]["w2ner"]  # the base config is left as it was


def prepared_backend(model, tmp_path, train_config=None, retrain_every=3):
    options = BackendOptions(runs=str(tmp_path / "runs"), retrain_every=retrain_every, train_config=train_config and str(train_config))
    backend = create_backend(str(model), options)
    answers = backend.serving.predict(tasks(), Names(), 64, 10_000)["results"]
    for event in annotation_events(answers):
        backend.retrainer.changed(backend.corrections.record(event["action"], event), 1)
    return backend


def test_a_model_worse_on_dev_never_serves_and_one_as_good_does(saved_model, tmp_path, monkeypatch):
    backend = prepared_backend(saved_model, tmp_path)
    retrainer = backend.retrainer
    run = retrainer.directory / "run-0001"
    (run / "train").mkdir(parents=True)
    subprocess.run(["cp", "-r", str(saved_model), str(run / "train" / "model-best")], check=True)
    (run / "dev.spacy").write_bytes(b"")
    retrainer._set_status(run, status="trained", counts={"train": 4, "dev": 1})
    scores = {"model-best": 0.5}
    monkeypatch.setattr(retraining, "dev_f", lambda model, *rest: scores.get(Path(model).name, 0.8))
    retrainer._carry_on(run)
    status = json.loads((run / "status.json").read_text())
    assert (status["status"], status["dev_f"], status["serving_dev_f"], status["model_version"]) == ("kept", 0.5, 0.8, None)
    assert backend.serving.version == "en_pipeline-0.0.0" and backend.serving.path == str(saved_model)
    scores["model-best"] = 0.8
    retrainer._set_status(run, status="trained")
    retrainer._carry_on(run)
    assert json.loads((run / "status.json").read_text())["status"] == "promoted"
    assert backend.serving.version == "en_pipeline-0.0.0+run-0001" and backend.serving.path == str(run / "train" / "model-best")
    assert json.loads((retrainer.directory / "state.json").read_text())["serving"]["version"] == "en_pipeline-0.0.0+run-0001"


def test_a_failed_run_is_logged_and_the_serving_model_stays(saved_model, tmp_path, caplog):
    config = small_train_config(saved_model, tmp_path / "bad.cfg")
    text = config.read_text().replace('dev_corpus = "corpora.dev"', 'dev_corpus = "corpora.nowhere"')
    config.write_text(text)
    backend = prepared_backend(saved_model, tmp_path, config)
    run = backend.retrainer._new_run()
    assert run is not None and json.loads((run / "status.json").read_text())["counts"] == {
        "entities of labels the model does not have (left out)": 0, "train": 4, "dev": 1}
    backend.retrainer._carry_on(run)
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "failed" and status["error"] == "train exited with 1" and any("nowhere" in line for line in status["log_tail"])
    assert backend.serving.version == "en_pipeline-0.0.0"
    assert "run-0001 failed: train exited with 1; the serving model (en_pipeline-0.0.0) stays" in caplog.text


class FakeLabelStudio(BaseHTTPRequestHandler):
    tasks = [{"id": 1, "data": {"text": "x"}, "annotations": []}]
    seen = []

    def do_GET(self):
        FakeLabelStudio.seen.append((self.path, self.headers.get("Authorization")))
        good = self.headers.get("Authorization") == "Token sekret-key"
        self.send_response(200 if good else 401)
        self.end_headers()
        self.wfile.write(json.dumps(self.tasks if good else {"detail": "no"}).encode())

    def log_message(self, *args):
        pass


def test_a_run_can_gather_the_projects_export_through_label_studios_api(tmp_path):
    server = HTTPServer(("127.0.0.1", 0), FakeLabelStudio)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        assert export_tasks(url, 7, "sekret-key") == FakeLabelStudio.tasks
        assert FakeLabelStudio.seen[-1] == ("/api/projects/7/export?exportType=JSON&download_all_tasks=false", "Token sekret-key")
        with pytest.raises(GatherError) as refused:
            export_tasks(url + "/", 7, "wrong-key")
        assert str(refused.value) == (f"{url}/api/projects/7/export?exportType=JSON&download_all_tasks=false: Label Studio answered "
                                      "401 Unauthorized (is $LABEL_STUDIO_API_KEY a key of this Label Studio?)")  # fmt: skip
    finally:
        server.shutdown()


def training_processes(pid: int) -> list:
    """The process ids of ``pid``'s children that run ``spacy_w2ner train`` (Linux's /proc)."""
    found = [int(child) for task in Path(f"/proc/{pid}/task").iterdir() for child in (task / "children").read_text().split()]
    return [child for child in found if b"spacy_w2ner\0train\0" in Path(f"/proc/{child}/cmdline").read_bytes()]


def test_a_backend_killed_while_it_trains_resumes_the_run_when_restarted(saved_model, tmp_path):
    config = small_train_config(saved_model, tmp_path / "small.cfg", steps=40, every=4)
    runs = tmp_path / "runs"
    options = ("--retrain-every", len(TEXTS), "--train-config", config)
    run = runs / "run-0001"
    with running_backend(saved_model, runs, *options) as (url, process):
        _, answer = request(url, "/predict", {"tasks": tasks()})
        for event in annotation_events(answer["results"]):
            assert request(url, "/webhook", event)[0] == 201
        wait_for(lambda: list((run / "train" / "checkpoints").glob("step-*")), "the run's first checkpoint", every=0.02)
        (trainer,) = training_processes(process.pid)
        os.kill(trainer, signal.SIGSTOP)  # frozen mid-run, however fast this machine trains 40 steps
        assert "stopped after step" not in (run / "train.log").read_text() and not json.loads((run / "train" / "run.json").read_text())["finished"]
        process.send_signal(signal.SIGKILL)
        process.wait()
        os.kill(trainer, signal.SIGCONT)  # it wakes to the SIGTERM its parent's death sent
    wait_for(lambda: "stopped after step" in (run / "train.log").read_text(), "the training process to stop (SIGTERM when the backend died)", 300)
    assert json.loads((run / "status.json").read_text())["status"] == "training"
    with running_backend(saved_model, runs, *options) as (url, _):
        wait_for(lambda: json.loads((run / "status.json").read_text())["status"] not in ("training", "trained"), "the resumed run to end")
        status = json.loads((run / "status.json").read_text())
        log = (run / "train.log").read_text()
        assert "Resuming from" in log and json.loads((run / "train" / "run.json").read_text())["resumes"] == 1
        assert json.loads((run / "train" / "run.json").read_text())["finished"]
        assert status["status"] == "promoted" and status["dev_f"] >= status["serving_dev_f"], status  # it learnt what it predicted
        assert request(url, "/health")[1]["model_version"] == "en_pipeline-0.0.0+run-0001"
        _, answer = request(url, "/predict", {"tasks": tasks()[:1]})
        assert answer["results"][0]["model_version"] == "en_pipeline-0.0.0+run-0001"

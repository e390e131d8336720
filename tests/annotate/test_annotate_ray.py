"""Annotation on Ray Data (spacy_w2ner.annotate.ray): the same records as the single-machine
path, and every record once when a worker is killed mid-run. Skipped without Ray
(pip install 'spacy-w2ner[ray]'); starts a local Ray with 2 CPUs and no dashboard, its actors
writing their process ids where the test finds them ($SPACY_W2NER_ACTOR_PIDS)."""
import json
import os
import signal
from pathlib import Path

import pytest

from spacy_w2ner.annotate import annotate

from ..conftest import TRAIN_DATA, write

ray = pytest.importorskip("ray", reason="the Ray engine needs the [ray] extra")
pytestmark = [pytest.mark.slow, pytest.mark.ray]  # starting Ray and its actors takes a while

TEXTS = [text for text, _ in TRAIN_DATA]


@pytest.fixture(scope="module")
def actor_pids(tmp_path_factory):
    return tmp_path_factory.mktemp("actor-pids")


@pytest.fixture(scope="module")
def local_ray(actor_pids):
    from spacy_w2ner.annotate.ray import ACTOR_PIDS_ENV, start_ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {ACTOR_PIDS_ENV: str(actor_pids)}})  # every worker's environment
    start_ray()  # connected: the engine's settings (ordered results)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def model(saved_model):
    return saved_model


def lines_of(path):
    return Path(path).read_text(encoding="utf8").splitlines()


def test_the_ray_engine_writes_the_records_of_the_local_path(tmp_path, model, local_ray):
    from spacy_w2ner.annotate.ray import annotate_with_ray

    rows = [json.dumps({"id": f"d{i}", "text": TEXTS[i % 4] + f" {i}", "batch": i // 7}) for i in range(40)]
    rows[5] = "{broken"
    rows[12] = json.dumps({"id": "empty", "text": ""})
    source = write(tmp_path, "docs.jsonl", "\n".join(rows) + "\n")
    local = annotate(model, source, tmp_path / "local.jsonl", progress=False)
    distributed = annotate_with_ray(model, source, tmp_path / "ray.jsonl", workers=2, progress=False,
                                    documents_per_task=9, batch_size=4)
    assert lines_of(tmp_path / "ray.jsonl") == lines_of(tmp_path / "local.jsonl")
    assert lines_of(tmp_path / "ray.jsonl.errors.jsonl") == lines_of(tmp_path / "local.jsonl.errors.jsonl")
    assert distributed.as_dict()["entities_per_label"] == local.as_dict()["entities_per_label"]
    assert (distributed.read, distributed.written, distributed.skipped) == (40, 38, 2)


def test_annotate_dataset_composes_with_rays_readers(tmp_path, model, local_ray):
    from spacy_w2ner.annotate.ray import annotate_dataset

    rows = [{"id": i, "text": TEXTS[i % 4], "site": "forum"} for i in range(12)] + [{"id": 99, "text": None, "site": "x"}]
    source = write(tmp_path, "docs.jsonl", "\n".join(json.dumps(row) for row in rows) + "\n")
    annotate(model, source, tmp_path / "local.jsonl", progress=False)
    local = {r["id"]: r for r in map(json.loads, lines_of(tmp_path / "local.jsonl"))}
    ds = annotate_dataset(ray.data.read_json(str(source)), model, workers=2, batch_size=5)
    records = {r["id"]: r for r in ds.take_all()}
    assert records[99]["problem"] == "no 'text': expected the document's text" and records[99]["entities"] == []
    for i in range(12):
        assert records[i]["meta"] == {"site": "forum"} and records[i]["problem"] is None
        got = [(e["label"], list(e["fragments"]), list(e["tokens"]), e["discontinuous"]) for e in records[i]["entities"]]
        expected = [(e["label"], e["fragments"], e["tokens"], e["discontinuous"]) for e in local[i]["entities"]]
        assert [(label, [list(f) for f in fragments], tokens, disc) for label, fragments, tokens, disc in got] == expected
        assert [e["score"] for e in records[i]["entities"]] == pytest.approx([e["score"] for e in local[i]["entities"]], abs=1e-6)
    ds.write_json(str(tmp_path / "out"))  # Ray's own writer takes the records
    written = [json.loads(line) for path in sorted((tmp_path / "out").glob("*.json")) for line in lines_of(path)]
    assert sorted(r["id"] for r in written) == sorted(records)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_worker_killed_mid_run_leaves_every_record_once(tmp_path, model, local_ray, actor_pids):
    from spacy_w2ner.annotate.ray import annotate_dataset

    n = 3000  # long enough that the actors are busy when one is killed
    ds = ray.data.from_items([{"id": i, "text": TEXTS[i % 4]} for i in range(n)], override_num_blocks=60)
    seen = []
    killed = None
    for row in annotate_dataset(ds, model, workers=2, batch_size=5).iter_rows():
        seen.append(row["id"])
        if len(seen) == 20 and killed is None:
            pids = [int(path.read_text()) for path in sorted(actor_pids.glob("RowAnnotator-*.pid"))]
            running = [pid for pid in pids if alive(pid)]
            assert running, f"no annotating actor wrote its process id: {sorted(p.name for p in actor_pids.iterdir())}"
            killed = running[0]
            os.kill(killed, signal.SIGKILL)  # Ray restarts the actor and retries its batch
    assert killed is not None and not alive(killed)
    restarted = {int(path.read_text()) for path in actor_pids.glob("RowAnnotator-*.pid")} - set(pids)
    assert restarted, "Ray did not start an actor in place of the killed one"
    assert sorted(seen) == list(range(n))  # every record once

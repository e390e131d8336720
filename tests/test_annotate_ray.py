"""Annotation on Ray Data (spacy_w2ner.annotate_ray): the same records as the single-machine
path, and every record once when a worker is killed mid-run. Skipped without Ray
(pip install 'spacy-w2ner[ray]'); starts a local Ray with 2 CPUs and no dashboard."""
import json
import os
import signal
from pathlib import Path

import pytest

from spacy_w2ner.annotate import annotate

from .conftest import TRAIN_DATA, write

ray = pytest.importorskip("ray", reason="the Ray engine needs the [ray] extra")
pytestmark = pytest.mark.slow  # starting Ray and its actors takes a while

TEXTS = [text for text, _ in TRAIN_DATA]


@pytest.fixture(scope="module")
def local_ray():
    from spacy_w2ner.annotate_ray import start_ray

    start_ray(num_cpus=2)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def model(saved_model):
    return saved_model


def lines_of(path):
    return Path(path).read_text(encoding="utf8").splitlines()


def test_the_ray_engine_writes_the_records_of_the_local_path(tmp_path, model, local_ray):
    from spacy_w2ner.annotate_ray import annotate_with_ray

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
    from spacy_w2ner.annotate_ray import annotate_dataset

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


def _worker_pids():
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"MapWorker(MapBatches(RowAnnotator" in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_a_worker_killed_mid_run_leaves_every_record_once(tmp_path, model, local_ray):
    from spacy_w2ner.annotate_ray import annotate_dataset

    n = 3000  # long enough that the actors are busy when one is killed
    ds = ray.data.from_items([{"id": i, "text": TEXTS[i % 4]} for i in range(n)], override_num_blocks=60)
    seen = []
    killed = False
    for row in annotate_dataset(ds, model, workers=2, batch_size=5).iter_rows():
        seen.append(row["id"])
        if len(seen) == 20 and not killed:
            pids = _worker_pids()
            assert pids, "no annotating worker found"
            os.kill(pids[0], signal.SIGKILL)  # Ray restarts the actor and retries its batch
            killed = pids[0]
    assert killed
    assert killed not in _worker_pids()
    assert sorted(seen) == list(range(n))  # every record once

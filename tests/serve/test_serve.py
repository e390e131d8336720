"""The HTTP service (spacy_w2ner.serve): started as a process, talked to over a socket with a real
HTTP client. Records equal annotate's; bad requests get a 4xx naming the problem and the server
keeps serving; limits, timeouts, a full queue, a client that leaves, the API key; the page in a
real browser. Skipped without the [serve] extra (FastAPI, uvicorn) or httpx2 (the [test] extra)."""
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from ..conftest import TRAIN_DATA, write

httpx2 = pytest.importorskip("httpx2")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.serve

TEXTS = [text for text, _ in TRAIN_DATA]
ODD = "  Café note:\n\nShe had pain in her knees and ankles .\n\t New York University is in New York .  "


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def running_server(model, *options, env=None):
    """``python -m spacy_w2ner serve MODEL`` on a free port, until it is ready; stopped after."""
    port = free_port()
    command = [sys.executable, "-m", "spacy_w2ner", "serve", str(model), "--port", str(port), *map(str, options)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, **(env or {})})  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    try:
        while True:
            if process.poll() is not None:
                raise AssertionError(f"the server exited: {process.stdout.read()}")
            try:
                if httpx2.get(f"{url}/ready", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not get ready"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="module")
def model(saved_model):
    return saved_model


@pytest.fixture(scope="module")
def server(model):
    with running_server(model, "--max-documents", 8, "--max-text-chars", 2000, "--max-body-bytes", 12000) as url:
        yield url


def post(url, body, **kwargs):
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
    return httpx2.post(f"{url}/annotate", content=content, headers=headers, timeout=60, **kwargs)


def test_health_ready_metadata_and_openapi(server):
    assert httpx2.get(f"{server}/health").json() == {"status": "alive"}
    assert httpx2.get(f"{server}/ready").json() == {"ready": True}
    meta = httpx2.get(f"{server}/metadata").json()
    assert sorted(meta["labels"]) == ["DRUG", "LOC", "ORG", "SYM"] and meta["spans_key"] == "w2ner"
    assert meta["limits"]["max_documents"] == 8 and meta["engine"] == "local"
    assert meta["pipeline"]["components"] == ["tok2vec", "w2ner"] or "w2ner" in meta["pipeline"]["components"]
    schema = httpx2.get(f"{server}/openapi.json").json()
    body = schema["paths"]["/annotate"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "anyOf" in body and "Document" in schema["components"]["schemas"]
    assert httpx2.get(f"{server}/docs").status_code == 200


def test_records_are_annotates_records(server, model, tmp_path):
    from spacy_w2ner.annotate import annotate, validate_record

    texts = TEXTS + [ODD]
    source = write(tmp_path, "docs.jsonl", "\n".join(json.dumps({"id": i, "text": t, "site": "x"}) for i, t in enumerate(texts)))
    annotate(model, source, tmp_path / "out.jsonl", progress=False)
    expected = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf8").splitlines()]
    answer = post(server, [{"id": i, "text": t, "meta": {"site": "x"}} for i, t in enumerate(texts)])
    assert answer.status_code == 200
    records = answer.json()
    assert [r["entities"] for r in records] == [r["entities"] for r in expected]  # the same entities, to the byte
    assert any(e["discontinuous"] for r in records for e in r["entities"])
    for record in records:
        validate_record(record)
        assert record["source"] is None and record["meta"] == {"site": "x"}
    one = post(server, {"text": texts[0], "id": "n1"})
    assert one.json() == {**records[0], "id": "n1", "meta": {}}  # one document in, one record out


def test_threshold_per_request(server):
    everything = post(server, {"text": TEXTS[0]}).json()["entities"]
    assert everything
    scores = sorted({e["score"] for e in everything})
    for cut in [(a + b) / 2 for a, b in zip(scores, scores[1:])] + [scores[-1] + 1e-4]:  # between two scores
        kept = post(server, {"text": TEXTS[0]}, params={"threshold": cut}).json()["entities"]
        assert kept == [e for e in everything if e["score"] >= cut]
    refused = post(server, {"text": TEXTS[0]}, params={"threshold": 1.5})
    assert refused.status_code == 422 and "threshold must be between 0.0" in refused.json()["error"]


BAD_REQUESTS = [
    (b"{not json", {}, 400, "not valid JSON"),
    (b'{"text": "caf\xe9"}', {}, 400, "not valid UTF-8"),
    (json.dumps({"text": "a"}), {"Content-Type": "text/plain"}, 415, "Content-Type: application/json"),
    (json.dumps({"id": 1}), {}, 422, "no 'text'"),
    (json.dumps({"text": 5}), {}, 422, "an int as 'text'"),
    (json.dumps({"text": "   "}), {}, 422, "empty 'text'"),
    (json.dumps({"text": "a", "lang": "en"}), {}, 422, "unknown field(s) 'lang'"),
    (json.dumps({"text": "a", "meta": [1]}), {}, 422, "'meta' must be a JSON object"),
    (json.dumps([]), {}, 422, "an empty list"),
    (json.dumps(["a"]), {}, 422, "document 0: expected a JSON object"),
    (json.dumps([{"text": "a"}, {"text": None}]), {}, 422, "document 1: no 'text'"),
    (json.dumps("text"), {}, 422, "got a string"),
    (json.dumps([{"text": "a"}] * 9), {}, 413, "9 documents, more than the limit of 8"),
    (json.dumps({"text": "a" * 2001}), {}, 413, "2001 characters, more than the limit of 2000"),
    (json.dumps([{"text": "a " * 900}] * 8), {}, 413, "more than the limit of 12000"),
    ('{"text": "pain \\ud800 knees"}', {}, 422, "'text' holds a lone surrogate ('\\ud800' at character 5)"),
    ('{"text": "pain", "meta": {"x": NaN}}', {}, 400, "not valid JSON (NaN is not a JSON number)"),
    ('{"text": "pain", "id": 1e400}', {}, 400, "not valid JSON (1e400 is beyond a number's range)"),
]


@pytest.mark.parametrize("body,headers,status,message", BAD_REQUESTS)
def test_bad_requests_get_a_4xx_naming_the_problem_and_the_server_keeps_serving(server, body, headers, status, message):
    answer = post(server, body, headers=headers)
    assert answer.status_code == status, answer.text
    assert message in answer.json()["error"]
    assert "Traceback" not in answer.text
    assert post(server, {"text": TEXTS[1]}).status_code == 200


def test_other_routes_and_methods_answer_json_errors(server):
    assert httpx2.get(f"{server}/annotate").status_code == 405
    missing = httpx2.get(f"{server}/nothing")
    assert missing.status_code == 404 and missing.json() == {"error": "Not Found"}


def test_concurrent_requests_are_batched_and_all_answered(server):
    before = httpx2.get(f"{server}/metadata").json()["batches_run"]

    async def many():
        async with httpx2.AsyncClient(timeout=60) as client:
            calls = [client.post(f"{server}/annotate", json={"text": TEXTS[k % 4], "id": k}) for k in range(40)]
            return await asyncio.gather(*calls)

    answers = asyncio.run(many())
    assert [a.status_code for a in answers] == [200] * 40
    assert [a.json()["id"] for a in answers] == list(range(40))
    batches = httpx2.get(f"{server}/metadata").json()["batches_run"] - before
    assert batches < 40  # requests shared nlp.pipe calls


def test_a_full_queue_is_503_and_a_slow_answer_504_and_nothing_half_answered(model):
    with running_server(model, "--max-queue", 3, "--timeout-s", 0.05, "--max-batch-size", 1) as url:
        full = post(url, [{"text": t} for t in TEXTS])
        assert full.status_code == 503 and "limit is 3" in full.json()["error"] and full.headers["retry-after"] == "1"
        slow = post(url, [{"text": ODD * 10}, {"text": ODD * 10}, {"text": ODD * 10}])
        assert slow.status_code == 504 and "nothing of the request is returned" in slow.json()["error"]
        drawing = httpx2.post(f"{url}/render", json={"text": ODD * 10, "grid": True}, timeout=60)
        assert drawing.status_code == 504 and "not drawn within 0.05 s" in drawing.json()["error"]
        assert httpx2.get(f"{url}/health").status_code == 200


def test_a_client_that_leaves_frees_its_slot(model):
    n_docs = 2000  # one a batch: tens of seconds of work, the client leaves as the first batches run
    with running_server(model, "--max-batch-size", 1, "--max-documents", n_docs) as url:
        before = httpx2.get(f"{url}/metadata").json()["batches_run"]
        body = json.dumps([{"text": ODD * 4} for _ in range(n_docs)]).encode()
        with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as sock:
            sock.sendall(b"POST /annotate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)  # fmt: skip
            deadline = time.monotonic() + 60
            while httpx2.get(f"{url}/metadata").json()["batches_run"] == before and time.monotonic() < deadline:
                time.sleep(0.02)  # until it is being answered
        deadline = time.monotonic() + 60
        while httpx2.get(f"{url}/metadata").json()["documents_waiting"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert httpx2.get(f"{url}/metadata").json()["documents_waiting"] == 0
        ran = httpx2.get(f"{url}/metadata").json()["batches_run"] - before
        assert 0 < ran < n_docs // 2, ran  # the documents of the gone request were dropped, not all annotated
        assert post(url, {"text": TEXTS[0]}).status_code == 200


def test_an_api_key_guards_everything_but_health(model):
    with running_server(model, env={"SPACY_W2NER_API_KEY": "s3cret"}) as url:
        assert post(url, {"text": "a"}).status_code == 401
        wrong = post(url, {"text": "a"}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and "Bearer" in wrong.json()["error"]
        assert post(url, {"text": TEXTS[0]}, headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert httpx2.get(f"{url}/metadata").status_code == 401
        assert httpx2.get(f"{url}/health").status_code == 200 and httpx2.get(f"{url}/ready").status_code == 200


def test_render_draws_escaped_text_and_grids(server):
    answer = httpx2.post(f"{server}/render", json={"text": "<script>alert(1)</script> " + TEXTS[0], "grid": True}, timeout=60)
    assert answer.status_code == 200
    drawn = answer.json()
    assert "<script>alert" not in drawn["html"] and "&lt;script&gt;" in drawn["html"]
    assert drawn["grids"] and all(grid.count("<svg") == 1 for grid in drawn["grids"])
    assert drawn["record"]["entities"]
    assert httpx2.post(f"{server}/render", json={"grid": True}).status_code == 422
    unsentenced = httpx2.post(f"{server}/render", json={"text": "pain " * 390, "grid": True}, timeout=60)  # one sentence
    assert unsentenced.status_code == 413 and "more than the page draws (40,000)" in unsentenced.json()["error"]
    assert httpx2.post(f"{server}/render", json={"text": "pain " * 390}, timeout=60).status_code == 200  # without the grids


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_the_page_in_a_browser_draws_the_entities_of_a_typed_text(server, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    text = "She had pain in her knees and ankles . <b>Aspirin</b> caused severe headaches and nausea ."
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(server)
        page.wait_for_function("document.getElementById('pipeline').textContent.includes('labels')")
        page.fill("#text", text)
        page.check("#grid")
        page.click("#submit")
        page.wait_for_selector("#records tbody tr")
        rows = page.locator("#records tbody tr")
        labels = [rows.nth(k).locator("td").nth(1).inner_text() for k in range(rows.count())]
        texts = [rows.nth(k).locator("td").nth(2).inner_text() for k in range(rows.count())]
        assert "pain in her ankles" in texts and "SYM" in labels  # the discontinuous entity
        discontinuous = [rows.nth(k).locator("td").nth(6).inner_text() for k in range(rows.count())]
        assert "yes" in discontinuous
        drawing = page.inner_text("#drawing")
        assert "Aspirin</b" in drawing and page.locator("#drawing b").count() == 0  # shown as text, not markup
        assert page.locator("#grids svg").count() >= 1
        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
        browser.close()
    shot = tmp_path / "page.png"
    assert shot.stat().st_size > 20000
    keep = os.environ.get("W2NER_SCREENSHOTS")
    if keep:
        shutil.copy(shot, Path(keep) / "serve-page.png")


@pytest.mark.slow
@pytest.mark.ray
def test_the_ray_engine_serves_the_same_app_and_records(model, server):
    pytest.importorskip("ray.serve")
    texts = TEXTS + [ODD]
    local = post(server, [{"text": t} for t in texts]).json()
    env = {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    with running_server(model, "--engine", "ray", "--replicas", 2, "--cpus-per-replica", 0.5, env=env) as url:
        assert httpx2.get(f"{url}/metadata").json()["engine"] == "ray"
        answers = [post(url, [{"text": t} for t in texts]) for _ in range(4)]  # the router spreads them
        assert all(a.status_code == 200 and a.json() == local for a in answers)
        refused = post(url, [])
        assert refused.status_code == 422 and "empty list" in refused.json()["error"]

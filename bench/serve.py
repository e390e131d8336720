"""The HTTP service under load: requests/s, documents/s, latency, memory, against annotate.

    python bench/serve.py MODEL ../shared/corpora/cadec/w2ner-json/test.json \
        [--clients 1 8 32] [--requests 2000] [--soak 10000] [--ray] --output bench/results/cpu-serve.json

One run, one machine, so the figures are ratios of each other:

* ``annotate``: the documents (CADEC test sentences) through ``spacy_w2ner.annotate`` in this
  process: documents/s, and each record (the reference for the service's answers);
* ``nlp()``: the latency of one sentence through the pipeline, alone (p50);
* the local engine (``python -m spacy_w2ner serve``, a process of its own) at each number of
  concurrent clients, each client sending one-sentence requests one after another:
  requests/s, documents/s, p50/p99 latency, the server's peak resident memory; every answer is
  checked against annotate's record for its sentence (entities equal) and its id;
* the soak: ``--soak`` requests at the most clients, with the server's resident memory sampled
  (flat or not) and every answer accounted for (failed, lost, duplicated);
* ``--ray``: Ray Serve with 2 replicas, the same load as the most clients.

``--documents-per-request K`` sends lists of K sentences a request (a client sending a note's
sentences together), where the model's speed shows through the HTTP round trips.
``--request-path-only`` measures the service without the model: the same server, whose pipeline
is replaced by its tokenizer (``STUB_SERVER``: records with no entities), so the figures are what
HTTP, JSON, batching and the client cost on these CPUs, the ceiling any model's service meets.

The clients (httpx, asyncio) run in this process, on the same CPUs as the server.
"""
import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

from plots import plot_after_run  # noqa: E402  (bench/ is on sys.path)

ROOT = Path(__file__).resolve().parents[1]


def sentences(corpus: Path) -> List[str]:
    return [" ".join(record["sentence"]) for record in json.loads(corpus.read_text(encoding="utf8")) if record["sentence"]]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (Ray's replicas are children of the server)."""
    total = 0
    for process in [pid] + children(pid):
        try:
            for line in Path(f"/proc/{process}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def children(pid: int) -> List[int]:
    found = []
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    except OSError:
        return found
    for child in map(int, out):
        found += [child] + children(child)
    return found


class MemorySampler(threading.Thread):
    def __init__(self, pid: int, every: float = 0.5):
        super().__init__(daemon=True)
        self.pid, self.every, self.samples, self.stop = pid, every, [], threading.Event()

    def run(self):
        start = time.monotonic()
        while not self.stop.wait(self.every):
            self.samples.append((round(time.monotonic() - start, 1), round(rss_mb(self.pid), 1)))


# The service with its pipeline replaced by the tokenizer: each request's documents get records
# with no entities, through the same app, batcher and model thread.
STUB_SERVER = r"""
import runpy, sys
from spacy_w2ner.serve import runner

def records(self, payloads):
    docs = [self.nlp.make_doc(document["text"]) for document, _ in payloads]
    return [runner.make_record(document["id"], None, document["meta"], doc, self.spans_key, threshold)
            for (document, threshold), doc in zip(payloads, docs)]

runner.PipelineRunner.records = records
sys.argv = ["spacy_w2ner", *sys.argv[1:]]
runpy.run_module("spacy_w2ner", run_name="__main__")
"""


def start_server(model: str, *options: str, stub: bool = False):
    import httpx

    port = free_port()
    program = ["-c", STUB_SERVER] if stub else ["-m", "spacy_w2ner"]
    command = [sys.executable, *program, "serve", model, "--port", str(port), *options]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"the server ({' '.join(options)}) did not get ready")


async def load(url: str, texts: List[str], clients: int, requests: int, per_request: int = 1) -> Dict:
    """``clients`` concurrent clients, ``requests`` requests in all, each one sentence (a document)
    or a list of ``per_request`` of them; a document's id is its number over all requests."""
    import httpx

    latencies, answers, failures = [], {}, []
    next_request = iter(range(requests))

    def body(k: int):
        ids = range(k * per_request, (k + 1) * per_request)
        documents = [{"text": texts[i % len(texts)], "id": i} for i in ids]
        return documents if per_request > 1 else documents[0]

    async def client(http):
        for k in next_request:
            start = time.perf_counter()
            try:
                answer = await http.post(f"{url}/annotate", json=body(k))
            except httpx.HTTPError as err:
                failures.append({"request": k, "error": repr(err)})
                continue
            latencies.append(time.perf_counter() - start)
            if answer.status_code != 200:
                failures.append({"request": k, "status": answer.status_code, "error": answer.text[:200]})
                continue
            records = answer.json()
            for record in records if per_request > 1 else [records]:
                answers.setdefault(record["id"], []).append(record)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=300, limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        seconds = time.perf_counter() - start
    latencies.sort()
    return {
        "clients": clients, "requests": requests, "documents_per_request": per_request,
        "documents": requests * per_request, "seconds": round(seconds, 2),
        "requests_per_s": round(requests / seconds, 1), "documents_per_s": round(requests * per_request / seconds, 1),
        "latency_p50_ms": round(1000 * latencies[len(latencies) // 2], 1) if latencies else None,
        "latency_p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1) if latencies else None,
        "failed": len(failures), "failures": failures[:5],
        "_answers": answers,
    }  # fmt: skip


def check_answers(result: Dict, texts: List[str], expected: Optional[List[Dict]]) -> None:
    """Every document answered once, with its id, and annotate's entities for its sentence: the same
    labels, texts, fragments and tokens, scores within float32 noise (a sentence's scores move in
    the 7th digit with what it is batched with, in annotate too: batch 64 against batch 8 or one
    at a time, 30 of 100 CADEC sentences differ there). ``expected`` None: ids only (no model)."""
    answers = result.pop("_answers")
    lost = [k for k in range(result["documents"]) if k not in answers]
    duplicated = [k for k, records in answers.items() if len(records) > 1]
    differing, worst = 0, 0.0
    for k, records in answers.items() if expected is not None else ():
        got, want = records[0]["entities"], expected[k % len(texts)]["entities"]
        if [_without_score(e) for e in got] != [_without_score(e) for e in want]:
            differing += 1
        else:
            worst = max([worst] + [abs(a["score"] - b["score"]) for a, b in zip(got, want)])
    result.update(lost=len(lost), duplicated=len(duplicated), entities_differ_from_annotate=differing,
                  scores_max_difference=round(worst, 7))  # fmt: skip


def _without_score(entity: Dict) -> Dict:
    return {key: value for key, value in entity.items() if key != "score"}


def bench_annotate(model: str, texts: List[str]) -> Dict:
    from spacy_w2ner.annotate import annotate

    with tempfile.TemporaryDirectory() as tmp:
        source, output = Path(tmp) / "docs.jsonl", Path(tmp) / "out.jsonl"
        source.write_text("".join(json.dumps({"id": k, "text": t}) + "\n" for k, t in enumerate(texts)), encoding="utf8")
        annotate(model, source, output, progress=False)  # warm-up (and the records)
        Path(str(output)).unlink()
        start = time.perf_counter()
        annotate(model, source, output, progress=False)
        seconds = time.perf_counter() - start
        records = [json.loads(line) for line in output.read_text(encoding="utf8").splitlines()]
    return {"documents": len(texts), "seconds": round(seconds, 2), "documents_per_s": round(len(texts) / seconds, 1),
            "_records": records}  # fmt: skip


def bench_nlp_latency(model: str, texts: List[str], n: int = 200) -> Dict:
    import spacy

    nlp = spacy.load(model)
    nlp(texts[0])
    times = []
    for text in texts[:n]:
        start = time.perf_counter()
        nlp(text)
        times.append(time.perf_counter() - start)
    times.sort()
    return {"sentences": len(times), "latency_p50_ms": round(1000 * times[len(times) // 2], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("corpus", type=Path, help="W2NER JSON (CADEC test)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--requests", type=int, default=2000, help="requests per number of clients")
    parser.add_argument("--soak", type=int, default=10000, help="requests of the soak at the most clients (0: none)")
    parser.add_argument("--ray", action="store_true", help="also Ray Serve with 2 replicas")
    parser.add_argument("--documents-per-request", type=int, default=1, help="sentences a request (a list when more than 1)")
    parser.add_argument("--server-options", nargs="+", default=[], metavar="OPTION",
                        help="more options for the local server, e.g. --server-options=--max-batch-size=256")
    parser.add_argument("--request-path-only", action="store_true",
                        help="the service without the model (its pipeline replaced by the tokenizer): the request path's ceiling")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()

    texts = sentences(args.corpus)
    results: Dict = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
                     "model": args.model, "documents": len(texts)}  # fmt: skip
    reference = bench_annotate(args.model, texts)
    expected = reference.pop("_records")
    results["annotate"] = reference
    results["nlp_alone"] = bench_nlp_latency(args.model, texts)
    print(json.dumps({"annotate": reference, "nlp_alone": results["nlp_alone"]}), flush=True)

    per_request = args.documents_per_request
    results["documents_per_request"], results["request_path_only"] = per_request, args.request_path_only
    if args.request_path_only:
        expected = None  # the stub finds no entities: answers are checked for their ids only
    results["server_options"] = args.server_options
    process, url = start_server(args.model, *args.server_options, stub=args.request_path_only)
    try:
        sampler = MemorySampler(process.pid)
        sampler.start()
        results["local"] = []
        for clients in args.clients:
            requests = args.requests if clients > 1 else min(args.requests, 500)
            result = asyncio.run(load(url, texts, clients, requests, per_request))
            check_answers(result, texts, expected)
            result["vs_annotate_documents_per_s"] = round(result["documents_per_s"] / reference["documents_per_s"], 3)
            results["local"].append(result)
            print(json.dumps(result), flush=True)
        if args.soak:
            before = len(sampler.samples)
            soak = asyncio.run(load(url, texts, max(args.clients), args.soak, per_request))
            check_answers(soak, texts, expected)
            trend = [mb for _, mb in sampler.samples[before:]]
            tenth = max(1, len(trend) // 10)
            soak["server_rss_mb"] = {"first_tenth_mean": round(statistics.mean(trend[:tenth]), 1),
                                     "last_tenth_mean": round(statistics.mean(trend[-tenth:]), 1),
                                     "max": max(trend)}  # fmt: skip
            results["soak"] = soak
            print(json.dumps(soak), flush=True)
        sampler.stop.set()
        results["local_server_peak_rss_mb"] = max((mb for _, mb in sampler.samples), default=round(rss_mb(process.pid), 1))
        results["local_server_rss_trend"] = sampler.samples[:: max(1, len(sampler.samples) // 60)]
    finally:
        process.terminate()
        process.wait(timeout=30)
    single = results["local"][0]
    results["single_request_p50_vs_nlp"] = round(single["latency_p50_ms"] / results["nlp_alone"]["latency_p50_ms"], 2)

    if args.ray:
        process, url = start_server(args.model, "--engine", "ray", "--replicas", "2", "--cpus-per-replica", "1")
        try:
            result = asyncio.run(load(url, texts, max(args.clients), args.requests, per_request))
            check_answers(result, texts, expected)
            local = next(r for r in results["local"] if r["clients"] == max(args.clients))
            result["vs_local_documents_per_s"] = round(result["documents_per_s"] / local["documents_per_s"], 3)
            result["server_rss_mb"] = round(rss_mb(process.pid), 1)
            results["ray_serve_2_replicas"] = result
            print(json.dumps(result), flush=True)
        finally:
            process.terminate()
            process.wait(timeout=60)
    print(json.dumps({k: v for k, v in results.items() if k != "local_server_rss_trend"}, indent=1))
    if args.output:
        args.output.write_text(json.dumps(results, indent=1) + "\n", encoding="utf8")
        plot_after_run("serve", serve=args.output, output=args.output.parent / "serve-load.png")


if __name__ == "__main__":
    main()

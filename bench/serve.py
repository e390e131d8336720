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
from typing import Dict, List

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


def start_server(model: str, *options: str):
    import httpx

    port = free_port()
    command = [sys.executable, "-m", "spacy_w2ner", "serve", model, "--port", str(port), *options]
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


async def load(url: str, texts: List[str], clients: int, requests: int) -> Dict:
    """``clients`` concurrent clients, ``requests`` one-sentence requests in all (ids = their number)."""
    import httpx

    latencies, answers, failures = [], {}, []
    next_request = iter(range(requests))

    async def client(http):
        for k in next_request:
            start = time.perf_counter()
            try:
                answer = await http.post(f"{url}/annotate", json={"text": texts[k % len(texts)], "id": k})
            except httpx.HTTPError as err:
                failures.append({"request": k, "error": repr(err)})
                continue
            latencies.append(time.perf_counter() - start)
            if answer.status_code != 200:
                failures.append({"request": k, "status": answer.status_code, "error": answer.text[:200]})
                continue
            record = answer.json()
            answers.setdefault(record["id"], []).append(record)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=300, limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        seconds = time.perf_counter() - start
    latencies.sort()
    return {
        "clients": clients, "requests": requests, "seconds": round(seconds, 2),
        "requests_per_s": round(requests / seconds, 1), "documents_per_s": round(requests / seconds, 1),
        "latency_p50_ms": round(1000 * latencies[len(latencies) // 2], 1) if latencies else None,
        "latency_p99_ms": round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1) if latencies else None,
        "failed": len(failures), "failures": failures[:5],
        "_answers": answers,
    }  # fmt: skip


def check_answers(result: Dict, texts: List[str], expected: List[Dict]) -> None:
    """Every request answered once, with its id, and annotate's entities for its sentence: the same
    labels, texts, fragments and tokens, scores within float32 noise (a sentence's scores move in
    the 7th digit with what it is batched with, in annotate too: batch 64 against batch 8 or one
    at a time, 30 of 100 CADEC sentences differ there)."""
    answers = result.pop("_answers")
    lost = [k for k in range(result["requests"]) if k not in answers]
    duplicated = [k for k, records in answers.items() if len(records) > 1]
    differing, worst = 0, 0.0
    for k, records in answers.items():
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

    process, url = start_server(args.model)
    try:
        sampler = MemorySampler(process.pid)
        sampler.start()
        results["local"] = []
        for clients in args.clients:
            result = asyncio.run(load(url, texts, clients, args.requests if clients > 1 else min(args.requests, 500)))
            check_answers(result, texts, expected)
            result["vs_annotate_documents_per_s"] = round(result["documents_per_s"] / reference["documents_per_s"], 3)
            results["local"].append(result)
            print(json.dumps(result), flush=True)
        if args.soak:
            before = len(sampler.samples)
            soak = asyncio.run(load(url, texts, max(args.clients), args.soak))
            check_answers(soak, texts, expected)
            trend = [mb for _, mb in sampler.samples[before:]]
            tenth = max(1, len(trend) // 10)
            soak["server_rss_mb"] = {"first_tenth_mean": round(statistics.mean(trend[:tenth]), 1),
                                     "last_tenth_mean": round(statistics.mean(trend[-tenth:]), 1),
                                     "max": max(trend)}  # fmt: skip
            results["soak"] = soak
            print(json.dumps(soak), flush=True)
        sampler.stop.set()
        results["local_server_peak_rss_mb"] = max(mb for _, mb in sampler.samples)
        results["local_server_rss_trend"] = sampler.samples[:: max(1, len(sampler.samples) // 60)]
    finally:
        process.terminate()
        process.wait(timeout=30)
    single = results["local"][0]
    results["single_request_p50_vs_nlp"] = round(single["latency_p50_ms"] / results["nlp_alone"]["latency_p50_ms"], 2)

    if args.ray:
        process, url = start_server(args.model, "--engine", "ray", "--replicas", "2", "--cpus-per-replica", "1")
        try:
            result = asyncio.run(load(url, texts, max(args.clients), args.requests))
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

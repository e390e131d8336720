"""What training will grid, said at initialization (issue 48, item 3)."""
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from spacy_w2ner import set_entities
from spacy_w2ner.model.training_plan import TrainingPlan

from ..conftest import SMALL_W2NER_CONFIG, make_examples

WORDS = "She had pain in her knees and ankles .".split()


def _long_example(nlp, sentences: int, with_boundaries: bool) -> Example:
    words = WORDS * sentences
    starts = [i % len(WORDS) == 0 for i in range(len(words))]
    reference = Doc(nlp.vocab, words=words, sent_starts=starts if with_boundaries else None)
    set_entities(reference, [("SYM", (2, 3, 4, 5), None)])
    return Example(Doc(nlp.vocab, words=words), reference)


def _nlp(**model):
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config={**SMALL_W2NER_CONFIG, "model": {**SMALL_W2NER_CONFIG["model"], **model}})
    return nlp


def test_the_plan_counts_segments_windows_and_the_largest_grid_batch(capsys, caplog):
    nlp = _nlp(max_window=32, window_overlap=8, max_grid_cells=256)
    examples = make_examples(nlp) + [_long_example(nlp, 20, False), _long_example(nlp, 20, True)]
    with caplog.at_level("INFO", logger="spacy"):
        nlp.initialize(lambda: examples)
    plan = nlp.get_pipe("w2ner").training_plan
    assert plan.documents == 6 and plan.longest_document == 180
    assert plan.longest_segment == 32 and plan.windowed_documents == 1
    assert plan.segments == 4 + 8 + 20  # 4 sentences, 8 windows of the unsegmented note, 20 sentences
    assert plan.largest_batch_cells == 32 * 32
    assert plan.bytes_per_cell > 1000 and plan.step_bytes > plan.largest_batch_cells * plan.bytes_per_cell
    assert capsys.readouterr().out == ""  # nlp.initialize() prints nothing; `train` prints the plan
    said = " ".join(record.getMessage() for record in caplog.records)
    assert "w2ner: 6 training documents" in said and "1 documents over 32 tokens without sentence boundaries" in said


def test_a_plan_that_cannot_fit_stops_initialization_naming_the_setting(monkeypatch):
    import spacy_w2ner.model.training_plan as training_plan

    nlp = _nlp(max_window=32, window_overlap=8, max_grid_cells=512)
    monkeypatch.setattr(training_plan, "available_memory_bytes", lambda device: 1024.0)
    with pytest.raises(ValueError, match=r"more than the 0 MB available: lower \[components.w2ner.model.max_window\]"):
        nlp.initialize(lambda: [_long_example(nlp, 20, False)])
    nlp = _nlp(max_grid_cells=4096)
    with pytest.raises(ValueError, match=r"lower \[components.w2ner.model.max_grid_cells\] \(4,096\)"):
        nlp.initialize(lambda: [_long_example(nlp, 20, True)] * 30)


def test_largest_batch_cells_is_max_grid_cells_or_the_longest_segment():
    plan = TrainingPlan(max_window=256, window_overlap=64, max_grid_cells=32768, segments=1000, longest_segment=40)
    assert plan.largest_batch_cells == 32768
    plan.longest_segment = 256
    assert plan.largest_batch_cells == 65536
    plan.segments, plan.longest_segment = 3, 20
    assert plan.largest_batch_cells == 3 * 400

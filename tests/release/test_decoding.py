"""``tune-thresholds``: every setting scored from one pass of the network, the dev-best chosen, and
a copy of the pipeline that predicts what the chooser scored."""
import json

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example

from spacy_w2ner.model.types import LinkThresholds
from spacy_w2ner.release.thresholds import (
    SettingScores,
    choose,
    threshold_settings,
    tune_thresholds,
    words_only,
)

from ..conftest import SMALL_W2NER_CONFIG, cli, make_examples, train

# Half-trained on TRAIN_DATA: its arg-max finds no entity, some thresholds find several.
STEPS = 45


@pytest.fixture(scope="module")
def half_trained(tmp_path_factory):
    """(pipeline directory, dev .spacy of TRAIN_DATA's gold docs)."""
    nlp = spacy.blank("en")
    nlp.add_pipe("w2ner", config=SMALL_W2NER_CONFIG)
    examples = make_examples(nlp)
    train(nlp, examples, STEPS)
    directory = tmp_path_factory.mktemp("thresholds")
    nlp.to_disk(directory / "model")
    DocBin(docs=[example.reference for example in examples], store_user_data=True).to_disk(directory / "dev.spacy")
    return directory / "model", directory / "dev.spacy"


def pipeline_scores(model, dev):
    """The dev figures of the pipeline at ``model``, as it predicts (percent)."""
    nlp = spacy.load(model)
    gold = list(DocBin().from_disk(dev).get_docs(nlp.vocab))
    predicted = list(nlp.pipe(words_only(nlp, gold)))
    scores = nlp.get_pipe("w2ner").score([Example(doc, reference) for doc, reference in zip(predicted, gold)])
    return {name: round(100 * scores[f"w2ner_{name}"], 4) for name in ("p", "r", "f", "discontinuous_f")}


def figures(setting: SettingScores):
    return {name: getattr(setting, name) for name in ("p", "r", "f", "discontinuous_f")}


def test_the_dev_best_setting_is_chosen_and_the_copy_predicts_what_was_scored(half_trained, tmp_path):
    model, dev = half_trained
    report = tune_thresholds(model, dev, tmp_path / "tuned", nnw=[None, 0.1, 0.3, 0.5], thw=[None, 0.2, 0.5])
    assert len(report.settings) == 12 and report.settings[0].thresholds == LinkThresholds()
    assert report.chosen.f == max(s.f for s in report.settings)
    assert report.chosen.f > report.argmax.f  # thresholds find what the arg-max misses on this model
    assert figures(report.argmax) == pipeline_scores(model, dev)
    assert figures(report.chosen) == pipeline_scores(tmp_path / "tuned", dev)
    tuned = spacy.load(tmp_path / "tuned")
    assert tuned.get_pipe("w2ner").link_thresholds == report.chosen.thresholds
    record = json.loads((tmp_path / "tuned" / "meta.json").read_text())["spacy_w2ner"]["link_thresholds"]
    assert record["nnw_threshold"] == report.chosen.nnw_threshold and record["dev"]["f"] == report.chosen.f
    assert record["chosen_on"] == str(dev)


def test_every_setting_scored_is_what_the_pipeline_predicts_with_it(half_trained):
    model, dev = half_trained
    report = tune_thresholds(model, dev, nnw=[0.2, 0.6], thw=[0.3])
    for setting in report.settings[1:]:
        nlp = spacy.load(model, config={"components": {"w2ner": {"nnw_threshold": setting.nnw_threshold,
                                                                   "thw_threshold": setting.thw_threshold}}})  # fmt: skip
        predicted = list(nlp.pipe(words_only(nlp, list(DocBin().from_disk(dev).get_docs(nlp.vocab)))))
        gold = list(DocBin().from_disk(dev).get_docs(nlp.vocab))
        scores = nlp.get_pipe("w2ner").score([Example(p, g) for p, g in zip(predicted, gold)])
        assert setting.f == round(100 * scores["w2ner_f"], 4)


def scored(nnw, thw, f, discontinuous_f):
    return SettingScores(nnw, thw, 0.0, 0.0, f, discontinuous_f, 0.0)


def test_choosing_by_discontinuous_f_never_lowers_the_argmax_f():
    settings = [scored(None, None, 70.0, 40.0), scored(0.3, None, 69.9, 55.0), scored(0.4, None, 70.0, 45.0),
                scored(0.5, None, 71.0, 42.0)]  # fmt: skip
    assert choose(settings, "discontinuous_f").nnw_threshold == 0.4
    assert choose(settings, "f").nnw_threshold == 0.5
    assert choose(settings[:1] + [scored(0.2, 0.2, 70.0, 40.0)], "f").thresholds == LinkThresholds()  # ties keep the arg-max
    with pytest.raises(ValueError, match="metric must be one of f, discontinuous_f"):
        choose(settings, "precision")


def test_settings_start_with_the_argmax_once_and_bad_values_are_named():
    assert threshold_settings([None, 0.3], [None, 0.5]) == [
        LinkThresholds(), LinkThresholds(None, 0.5), LinkThresholds(0.3, None), LinkThresholds(0.3, 0.5)
    ]
    assert threshold_settings([0.3], [0.5]) == [LinkThresholds(), LinkThresholds(0.3, 0.5)]
    with pytest.raises(ValueError, match="thw_threshold must be null"):
        threshold_settings([0.3], [0.0])


def test_an_existing_output_is_refused_before_any_work(half_trained, tmp_path):
    model, dev = half_trained
    (tmp_path / "taken").mkdir()
    with pytest.raises(ValueError, match="exists: give a new directory"):
        tune_thresholds(model, dev, tmp_path / "taken")
    assert list((tmp_path / "taken").iterdir()) == []


def test_the_command_prints_the_choice_and_writes_the_scores_and_the_copy(half_trained, tmp_path):
    model, dev = half_trained
    result = cli("tune-thresholds", model, dev, "--nnw", "argmax,0.1", "--thw", "argmax,0.2",
                 "--scores", tmp_path / "scores.json", "--output", tmp_path / "tuned")  # fmt: skip
    written = json.loads((tmp_path / "scores.json").read_text())
    assert [(s["nnw_threshold"], s["thw_threshold"]) for s in written["settings"]] == [
        (None, None), (None, 0.2), (0.1, None), (0.1, 0.2)
    ]
    chosen = written["chosen"]
    assert f"--components.w2ner.nnw_threshold {json.dumps(chosen['nnw_threshold'])}" in result.stdout
    assert spacy.load(tmp_path / "tuned").get_pipe("w2ner").link_thresholds == LinkThresholds(
        chosen["nnw_threshold"], chosen["thw_threshold"]
    )
    cli("tune-thresholds", model, dev, "--nnw", "0.1,lots", code=2)

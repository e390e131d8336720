"""``tune-decoding``: every setting scored from one pass of the network, the dev-best chosen, and
a copy of the pipeline that predicts what the chooser scored."""
import json

import pytest
import spacy
from spacy.tokens import DocBin
from spacy.training import Example

from spacy_w2ner.release.decoding import (
    DecodingSetting,
    SettingScores,
    choose,
    decoding_settings,
    tune_decoding,
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


def pipeline_scores(model, dev, config=None):
    """The dev figures of the pipeline at ``model`` (with ``config`` overrides), as it predicts (percent)."""
    nlp = spacy.load(model, config=config or {})
    gold = list(DocBin().from_disk(dev).get_docs(nlp.vocab))
    predicted = list(nlp.pipe(words_only(nlp, gold)))
    scores = nlp.get_pipe("w2ner").score([Example(doc, reference) for doc, reference in zip(predicted, gold)])
    return {name: round(100 * scores[f"w2ner_{name}"], 4) for name in ("p", "r", "f", "discontinuous_f")}


def figures(setting: SettingScores):
    return {name: getattr(setting, name) for name in ("p", "r", "f", "discontinuous_f")}


def test_the_dev_best_setting_is_chosen_and_the_copy_predicts_what_was_scored(half_trained, tmp_path):
    model, dev = half_trained
    report = tune_decoding(model, dev, tmp_path / "tuned", nnw=[None, 0.1, 0.3, 0.5], thw=[None, 0.2, 0.5])
    assert len(report.settings) == 24 and report.settings[0].setting == DecodingSetting()
    assert report.chosen.f == max(s.f for s in report.settings)
    assert report.chosen.f > report.default.f  # thresholds find what the arg-max misses on this model
    assert figures(report.default) == pipeline_scores(model, dev)
    assert figures(report.chosen) == pipeline_scores(tmp_path / "tuned", dev)
    tuned = spacy.load(tmp_path / "tuned").get_pipe("w2ner")
    chosen = report.chosen.setting
    assert (tuned.link_thresholds.nnw, tuned.link_thresholds.thw, tuned.best_path_only) == (
        chosen.nnw_threshold, chosen.thw_threshold, chosen.best_path_only
    )
    record = json.loads((tmp_path / "tuned" / "meta.json").read_text())["spacy_w2ner"]["decoding"]
    assert record["nnw_threshold"] == chosen.nnw_threshold and record["dev"]["f"] == report.chosen.f
    assert record["chosen_on"] == str(dev)


def test_every_setting_scored_is_what_the_pipeline_predicts_with_it(half_trained):
    model, dev = half_trained
    report = tune_decoding(model, dev, nnw=[0.2, 0.6], thw=[0.3])
    assert len(report.settings) == 5
    for setting in report.settings[1:]:
        config = {"components": {"w2ner": {"nnw_threshold": setting.nnw_threshold, "thw_threshold": setting.thw_threshold,
                                           "best_path_only": setting.best_path_only}}}  # fmt: skip
        assert figures(setting) == pipeline_scores(model, dev, config)


def scored(nnw, thw, f, discontinuous_f):
    return SettingScores(nnw, thw, False, 0.0, 0.0, f, discontinuous_f, 0.0)


def test_choosing_by_discontinuous_f_never_lowers_the_default_f():
    settings = [scored(None, None, 70.0, 40.0), scored(0.3, None, 69.9, 55.0), scored(0.4, None, 70.0, 45.0),
                scored(0.5, None, 71.0, 42.0)]  # fmt: skip
    assert choose(settings, "discontinuous_f").nnw_threshold == 0.4
    assert choose(settings, "f").nnw_threshold == 0.5
    assert choose(settings[:1] + [scored(0.2, 0.2, 70.0, 40.0)], "f").setting == DecodingSetting()  # ties keep the default
    with pytest.raises(ValueError, match="metric must be one of f, discontinuous_f"):
        choose(settings, "precision")


def test_settings_start_with_the_default_once_and_bad_values_are_named():
    assert decoding_settings([None, 0.3], [None, 0.5], [False]) == [
        DecodingSetting(), DecodingSetting(None, 0.5), DecodingSetting(0.3, None), DecodingSetting(0.3, 0.5)
    ]
    assert decoding_settings([0.3], [0.5], [True]) == [DecodingSetting(), DecodingSetting(0.3, 0.5, True)]
    assert len(decoding_settings()) == 200
    with pytest.raises(ValueError, match="thw_threshold must be null"):
        decoding_settings([0.3], [0.0])


def test_an_existing_output_is_refused_before_any_work(half_trained, tmp_path):
    model, dev = half_trained
    (tmp_path / "taken").mkdir()
    with pytest.raises(ValueError, match="exists: give a new directory"):
        tune_decoding(model, dev, tmp_path / "taken")
    assert list((tmp_path / "taken").iterdir()) == []


def test_the_command_prints_the_choice_and_writes_the_scores_and_the_copy(half_trained, tmp_path):
    model, dev = half_trained
    result = cli("tune-decoding", model, dev, "--nnw", "argmax,0.1", "--thw", "argmax,0.2", "--best-path-only", "true",
                 "--scores", tmp_path / "scores.json", "--output", tmp_path / "tuned")  # fmt: skip
    written = json.loads((tmp_path / "scores.json").read_text())
    assert [(s["nnw_threshold"], s["thw_threshold"], s["best_path_only"]) for s in written["settings"]] == [
        (None, None, False), (None, None, True), (None, 0.2, True), (0.1, None, True), (0.1, 0.2, True)
    ]
    chosen = written["chosen"]
    assert f"--components.w2ner.nnw_threshold {json.dumps(chosen['nnw_threshold'])}" in result.stdout
    assert f"--components.w2ner.best_path_only {json.dumps(chosen['best_path_only'])}" in result.stdout
    tuned = spacy.load(tmp_path / "tuned").get_pipe("w2ner")
    assert tuned.link_thresholds.nnw == chosen["nnw_threshold"] and tuned.best_path_only == chosen["best_path_only"]
    cli("tune-decoding", model, dev, "--nnw", "0.1,lots", code=2)
    cli("tune-decoding", model, dev, "--best-path-only", "yes", code=2)


def test_gold_under_another_key_a_directory_that_is_no_pipeline_and_a_directory_for_scores_are_named(half_trained, tmp_path):
    """Each a one-line error before the tuning runs; gold under another key scored every setting 0
    and "chose" one."""
    model, dev = half_trained
    docs = list(DocBin().from_disk(dev).get_docs(spacy.blank("en").vocab))
    for doc in docs:
        doc.spans["sc"] = doc.spans.pop("w2ner")
    DocBin(docs=docs, store_user_data=True).to_disk(tmp_path / "sc.spacy")
    with pytest.raises(ValueError, match=r"sc.spacy: no doc has doc.spans\['w2ner'\]; they have 'sc', and 'w2ner' writes"):
        tune_decoding(model, tmp_path / "sc.spacy")
    (tmp_path / "empty").mkdir()
    for args, says in [((model, tmp_path / "sc.spacy"), "no doc has doc.spans['w2ner']"),
                       ((tmp_path / "empty", dev), "[E053] Could not read meta.json"),
                       ((model, dev, "--scores", tmp_path / "empty"), "is a directory: give the JSON file's path")]:  # fmt: skip
        result = cli("tune-decoding", *args, code=1)
        assert result.stderr.startswith("error: ") and says in result.stderr and len(result.stderr.strip().splitlines()) == 1


"""spacy_w2ner.ConsoleLogger.v1: spaCy's table, and between its rows a line of progress at most every
``every_seconds``, whether or not the output is a terminal."""
import io

import spacy

from spacy_w2ner.training.progress import Progress


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_line_when_a_minute_passed_without_a_row_none_otherwise():
    out, clock = io.StringIO(), Clock()
    progress = Progress(max_steps=300, eval_frequency=100, every_seconds=60, stream=out, clock=clock)

    def steps(n, seconds_each=2.0):
        for _ in range(n):
            clock.now += seconds_each
            progress.step(None)

    progress.step({"step": 0})  # spaCy's first call: the row at step 0
    steps(30)  # a minute: a line
    assert out.getvalue() == "  ... step 30 of 300, 30.0 steps a minute; the next row at step 100, in about 2 min\n"
    steps(20)  # 40 seconds since the line: none
    assert out.getvalue().count("\n") == 1
    steps(49)
    assert out.getvalue().splitlines()[1:] == [
        "  ... step 60 of 300, 30.0 steps a minute; the next row at step 100, in about 1 min",
        "  ... step 90 of 300, 30.0 steps a minute; the next row at step 100, in under a minute",
    ]
    clock.now += 2
    progress.step({"step": 100})  # a row: the next minute counts from it
    steps(29)
    assert out.getvalue().count("\n") == 3
    steps(1, 4.0)
    assert out.getvalue().splitlines()[-1] == "  ... step 130 of 300, 29.0 steps a minute; the next row at step 200, in about 2 min"


def test_a_resumed_run_counts_from_the_step_it_resumes_at_and_its_rate_from_then():
    out, clock = io.StringIO(), Clock()
    progress = Progress(max_steps=300, eval_frequency=100, every_seconds=60, stream=out, clock=clock)
    clock.now += 600  # loading and replaying: no step logged
    progress.resume(150)
    for _ in range(30):
        clock.now += 2.0
        progress.step(None)
    assert out.getvalue() == "  ... step 179 of 300, 30.0 steps a minute; the next row at step 200, in under a minute\n"


def test_spacy_train_with_the_logger_prints_its_table_and_lines_to_a_pipe(tmp_path):
    from spacy.training.loggers import console_logger_v3  # noqa: F401  (spaCy's, which it wraps)

    nlp = spacy.blank("en")
    nlp.config["training"]["max_steps"] = 5
    nlp.config["training"]["eval_frequency"] = 100
    setup = spacy.util.registry.loggers.get("spacy_w2ner.ConsoleLogger.v1")(every_seconds=0)
    stdout, stderr = io.StringIO(), io.StringIO()
    log_step, finalize = setup(nlp, stdout, stderr)
    log_step({"step": 0, "epoch": 0, "losses": {}, "other_scores": {}, "score": 0.0})
    for _ in range(4):
        log_step(None)
    finalize()
    assert "E    #" in stdout.getvalue()  # spaCy's table
    assert stderr.getvalue().splitlines()[-1].startswith("  ... step 4 of 5,") and "the next row at step 5" in stderr.getvalue()

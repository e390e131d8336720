"""What the training tests share: the sample corpus as .spacy files, converted once."""
import pytest

from .helpers import sample_corpus


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    """The sample corpus's train and dev splits as .spacy files."""
    return sample_corpus(tmp_path_factory.mktemp("corpus"))

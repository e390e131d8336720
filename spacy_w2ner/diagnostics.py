"""Why gold or predicted entities were not used, counted per component and warned about once.

Training and prediction meet entities they cannot use (misaligned, unlearnable, conflicting,
truncated decoding, documents without sentences). Each cause is warned about the first time it
occurs, with what to do, and counted: ``nlp.get_pipe(name).warning_counts[cause]`` is the
running total.
"""
import warnings
from collections import Counter
from typing import Dict

# Why a gold or predicted entity was not used, and what to do about it (warned once per cause).
CAUSES = {
    "misaligned": (
        "gold entities could not be aligned to the predicted tokenization and were left out "
        "of the loss"
    ),
    "unlearnable": (
        "gold entities cross a sentence boundary, are longer than max_window, or (in a sentence "
        "cut into windows) span more than window_overlap + 1 tokens where every window cuts "
        "them: no grid holds them whole, so they cannot be learned. Check the sentence "
        "boundaries, or raise max_window (or window_overlap)"
    ),
    "joined_sentences": (
        "sentence boundaries fell inside gold entities: the sentences around each were trained "
        "as one grid, so no entity is cut (it is counted, not an error; many of them mean the "
        "sentence boundaries do not suit the entities)"
    ),
    "thw_conflict": (
        "gold entities share their first and last word with an entity of another label; "
        "one tail-to-head cell holds one label (the first entity's), so they are left out "
        "of the loss"
    ),
    "no_sentences": (
        "documents longer than max_window={max_window} tokens have no sentence boundaries: they "
        "are gridded in overlapping windows that cross sentences, so an entity may span two "
        "sentences, and prediction is slower. Set sentence boundaries before w2ner, e.g. "
        "nlp.add_pipe('sentencizer', before='{name}') (the project's pipelines have one)"
    ),
    "truncated": (
        "tail-head grid cells were not fully read: they had more than max_paths_per_edge "
        "entity paths, or their sentence more than 16 paths per word. Only the first paths "
        "were kept; a grid like this comes from an undertrained model"
    ),
}


class OnceWarnings:
    """Counts of the causes in ``CAUSES`` for one component; the first of each is warned about."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()

    def count(self, name: str, cause: str, count: int, **details) -> None:
        """Add ``count`` occurrences of ``cause`` in component ``name``; warn the first time,
        pointing at the running total."""
        if count <= 0:
            return
        first = self.counts[cause] == 0
        self.counts[cause] += count
        if first:
            text = CAUSES[cause].format(name=name, **details)
            warnings.warn(
                f"[{name}] {count} {text}. Shown once: the running total is "
                f"nlp.get_pipe({name!r}).warning_counts[{cause!r}]."
            )

    def count_all(self, name: str, counts: Dict[str, int]) -> None:
        """``count`` each cause of ``counts``, in order."""
        for cause, count in counts.items():
            self.count(name, cause, count)

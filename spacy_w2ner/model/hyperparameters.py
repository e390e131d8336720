"""Checks of the grid network's settings, run when the architecture is built.

A bad setting (an odd ``lstm_size``, an empty ``dilations``, a dropout of 1) would
otherwise surface deep inside torch at ``initialize``, or as a silently broken model;
checked here, a bad config fails when the pipeline is created, with the setting named.
"""
from typing import Any, Dict, Optional

from ..nn.triplet import MINING
from .types import CellWeights, TripletSettings

SIZES = ("lstm_size", "dist_emb_size", "region_emb_size", "conv_size", "biaffine_size", "ffnn_size")
DROPOUTS = ("input_dropout", "conv_dropout", "output_dropout")


def validate_hyperparameters(hyper: Dict[str, Any]) -> None:
    """ValueError naming the first setting of the grid network that cannot work."""
    for name in SIZES:
        check_positive_int(name, hyper[name])
    if hyper["lstm_size"] % 2:
        raise ValueError(f"lstm_size must be even (two LSTM directions), got {hyper['lstm_size']}")
    dilations = hyper["dilations"]
    if not dilations or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dilations):
        raise ValueError(f"dilations must be a non-empty list of positive ints, got {dilations}")
    for name in DROPOUTS:
        value = hyper[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")


def check_positive_int(name: str, value: Any) -> None:
    """ValueError naming the setting unless ``value`` is an int of at least 1 (a bool is not)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def grid_padding_setting(value: Any) -> Optional[float]:
    """``max_grid_padding``, checked: null, or a number of at least 1 (a batch's padded cells over
    its segments' own), else ValueError."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 1:
        raise ValueError(f"max_grid_padding must be null or a number of at least 1 (padded cells over the segments' own), got {value!r}")
    return float(value)


def triplet_settings(weight: Any, window: Any, margin: Any, mining: Any) -> TripletSettings:
    """The triplet loss's settings, checked: ValueError naming the first that cannot work."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
        raise ValueError(f"triplet_weight must be a number >= 0 (0: no triplet loss), got {weight!r}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ValueError(f"triplet_window must be an int >= 0 (0: the whole grid), got {window!r}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or margin <= 0:
        raise ValueError(f"triplet_margin must be a positive number, got {margin!r}")
    if mining not in MINING:
        raise ValueError(f"triplet_mining must be one of {', '.join(MINING)}, got {mining!r}")
    return TripletSettings(float(weight), window, float(margin), mining)


def cell_weights(gap_link_weight: Any) -> CellWeights:
    """The cross-entropy's cell weights, checked: ValueError unless a positive number (1: every
    cell alike)."""
    if isinstance(gap_link_weight, bool) or not isinstance(gap_link_weight, (int, float)) or gap_link_weight <= 0:
        raise ValueError(f"gap_link_weight must be a positive number (1: weighted like every cell), got {gap_link_weight!r}")
    return CellWeights(float(gap_link_weight))

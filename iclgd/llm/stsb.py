"""The STS Benchmark (English), read from the CSVs that ``scripts/fetch_llm_assets.py`` unpacks.

STS-B (Cer et al., 2017) pairs two sentences with a similarity score in ``[0, 5]``, the average of
human ratings. The files are the benchmark's own tab-separated ``sts-{train,dev,test}.csv`` (5,749 /
1,500 / 1,379 pairs): genre, file, year, id, score, sentence 1, sentence 2 and, on some lines, two
source columns that are ignored. Sentences contain quotes, so the files are read without quoting.
"""

from __future__ import annotations

import csv
import os
from typing import NamedTuple

import numpy as np

from .assets import STSB_DIR, asset_path

__all__ = ["SPLITS", "STSB", "load_stsb", "read_stsb"]

SPLITS = ("train", "dev", "test")
SIZES = {"train": 5749, "dev": 1500, "test": 1379}


class STSB(NamedTuple):
    """One split of STS-B: ``n`` sentence pairs and their scores."""

    sentence1: list[str]
    sentence2: list[str]
    score: np.ndarray  # (n,) float32 in [0, 5]
    genre: list[str]

    def __len__(self) -> int:  # the number of pairs, not of fields
        return len(self.score)

    def take(self, idx) -> STSB:
        """The pairs at the integer indices ``idx`` (a sub-split)."""
        idx = np.asarray(idx)
        if idx.dtype.kind not in "iu" or idx.ndim != 1:
            raise TypeError(
                f"idx must be a 1-D integer array, got {idx.dtype} of shape {idx.shape}"
            )
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise ValueError(f"idx must lie in [0, {len(self)}), got values up to {idx.max()}")
        pick = lambda xs: [xs[i] for i in idx]
        return STSB(pick(self.sentence1), pick(self.sentence2), self.score[idx], pick(self.genre))


def read_stsb(path: str | os.PathLike) -> STSB:
    """Read one STS-B CSV file (tab-separated, no quoting).

    Raises:
        ValueError: a line with fewer than 7 fields or a score outside ``[0, 5]`` (the line number
            is named).
    """
    s1, s2, scores, genres = [], [], [], []
    with open(path, encoding="utf-8", newline="") as f:
        for n, row in enumerate(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE), start=1):
            if len(row) < 7:
                raise ValueError(
                    f"{path}:{n}: expected at least 7 tab-separated fields, got {len(row)}"
                )
            try:
                score = float(row[4])
            except ValueError:
                raise ValueError(f"{path}:{n}: the score {row[4]!r} is not a number") from None
            if not 0.0 <= score <= 5.0:
                raise ValueError(f"{path}:{n}: the score {score} is outside [0, 5]")
            genres.append(row[0])
            scores.append(score)
            s1.append(row[5])
            s2.append(row[6])
    return STSB(s1, s2, np.asarray(scores, np.float32), genres)


def load_stsb(split: str, cache: str | os.PathLike | None = None) -> STSB:
    """The STS-B split ``"train"``, ``"dev"`` or ``"test"`` from the asset cache.

    Raises:
        ValueError: an unknown split, or a file whose number of pairs is not the benchmark's.
        iclgd.llm.AssetsMissingError: the data were not fetched (the message names the script).
    """
    if not isinstance(split, str):
        raise TypeError(f"split must be one of {SPLITS}, got {split!r}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    data = read_stsb(asset_path(f"{STSB_DIR}/sts-{split}.csv", cache))
    if len(data) != SIZES[split]:
        raise ValueError(f"STS-B {split} must have {SIZES[split]} pairs, got {len(data)}")
    return data

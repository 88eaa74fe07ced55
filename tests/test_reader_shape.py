"""The book's shape for a reader (CONTRIBUTING.md, "The shape of a part and of a chapter"): each
part opens with its argument, its claims table is short, and no page regrows past its budget of
visible words (``scripts/reader_load.py``: words outside collapsed blocks, a math span or a role
counting as one)."""

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("reader_load", REPO / "scripts" / "reader_load.py")
rl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rl)

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
    "book/part3/gdpp.ipynb": 810,
    "book/part3/gdpp_public.ipynb": 1500,
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

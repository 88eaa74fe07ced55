"""The errata page is generated from the claims tables and must list every corrected row."""

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("make_errata", REPO / "scripts" / "make_errata.py")
errata = importlib.util.module_from_spec(spec)
spec.loader.exec_module(errata)


def test_generated_pages_are_up_to_date():
    for path, text in errata.outputs().items():
        assert path.read_text() == text, f"{path} is out of date: run python scripts/make_errata.py"


def test_verdicts():
    assert errata.verdict("reproduced (exactly)") == "reproduced"
    assert errata.verdict("corrected (factor 2)") == "corrected"
    assert errata.verdict("not reproduced (holds only near $N=m$)") == "not reproduced"
    assert errata.verdict("inconclusive (at 1.5B, no significant difference)") == "inconclusive"
    assert errata.verdict("corrected") == "corrected"


@pytest.mark.parametrize(
    "status",
    [
        "partly reproduced (ci)",
        "vacuous",
        "new (exact)",
        "made exact",
        "reproduced, attained",
        "typos",
        "Reproduced",
        "reproduced ()",
        "reproduced(exactly)",
        "",
    ],
)
def test_a_status_is_one_of_four_verdicts(status):
    """Anything but the four verdicts, each with an optional note, is refused."""
    row = ["claim", status, "exact", "{ref}`x`", "sympy"]
    assert "is not one of" in errata.status_problem(row)
    with pytest.raises(ValueError, match="is not one of"):
        errata.verdict(status)


def test_every_claims_table_uses_the_four_verdicts():
    counts = dict.fromkeys(errata.VERDICTS, 0)
    for part in errata.parts():
        for row in errata.claims_table(part)[1]:  # raises on a bad status cell
            counts[errata.verdict(row[1])] += 1
    assert counts["reproduced"] and counts["corrected"], counts


def test_every_corrected_row_is_on_the_errata_page():
    page = errata.OUT.read_text()
    n = 0
    for part in errata.parts():
        _, rows = errata.claims_table(part)
        for claim, status, scale, _, _ in rows:
            if errata.listed(status):
                here = part.parent.name
                shown = errata.relocate(errata.shown(status), here)
                cell = f"{errata.relocate(claim, here)} | {shown}"
                mark = "↳ " if errata.tag(status)[0] == "from" else ""
                assert f"| {mark}{cell} · *{scale}* |" in page, claim
                n += 1
    assert n >= 20  # the three tables hold at least this many corrections


def _page(tmp_path, main_rows, minor_rows=()):
    head = "| claim of {cite:t}`k` | status | scale | where | evidence |\n"
    head += "| --- | --- | --- | --- | --- |\n"
    text = "# Part\n\n## Claims table\n\n" + head + "".join(f"| {r} |\n" for r in main_rows)
    if minor_rows:
        text += ":::{dropdown} Typos and slips\n" + head
        text += "".join(f"| {r} |\n" for r in minor_rows) + ":::\n"
    page = tmp_path / "part9" / "index.md"
    page.parent.mkdir(exist_ok=True)
    page.write_text(text + "\n## Beyond the paper\n\n- x\n")
    return page


@pytest.mark.parametrize(
    ("status", "verdict", "tag", "minor", "shown"),
    [
        ("corrected [root: p1-moments]", "corrected", ("root", "p1-moments"), None, "corrected"),
        (
            "corrected (eq. 29) [from: p1-moments]",
            "corrected",
            ("from", "p1-moments"),
            None,
            "corrected (eq. 29)",
        ),
        (
            "corrected (typo: $\\bar z$)",
            "corrected",
            (None, None),
            "typo",
            "corrected (typo: $\\bar z$)",
        ),
        (
            "reproduced (slip; the conclusion holds)",
            "reproduced",
            (None, None),
            "slip",
            "reproduced (slip; the conclusion holds)",
        ),
        ("corrected (slipped)", "corrected", (None, None), None, "corrected (slipped)"),
        ("not reproduced", "not reproduced", (None, None), None, "not reproduced"),
    ],
)
def test_status_grammar_notes_and_root_cause_tags(status, verdict, tag, minor, shown):
    assert errata.status_problem(["c", status, "exact", "x", "y"]) is None
    assert errata.verdict(status) == verdict
    assert errata.tag(status) == tag and errata.minor(status) == minor
    assert errata.shown(status) == shown


@pytest.mark.parametrize(
    "status",
    [
        "corrected [root: moments]",
        "corrected [root: p1-Moments]",
        "corrected [cause: p1-x]",
        "corrected [root: p1-x] (note)",
        "corrected[root: p1-x]",
    ],
)
def test_a_malformed_tag_is_refused(status):
    assert "is not one of" in errata.status_problem(["c", status, "exact", "x", "y"])


def test_root_causes_group_rows_and_typos_go_apart(tmp_path):
    page = _page(
        tmp_path,
        [
            "Eq. 27 | corrected [root: p9-a] | exact | x | e1",
            "Eq. 25 | corrected (the gradient) [from: p9-a] | exact | x | e2",
            "Thm 2 | corrected | exact | x | e3",
            "Lemma | reproduced | exact | x | e4",
            "Eq. 29 | reproduced (its limit holds) [from: p9-a] | exact | x | e5",
        ],
        [
            "Eq. 7 | corrected (slip: factor $C$) | exact | x | e6",
            "Eq. 9 | reproduced (typo; reads as eq. 8) | exact | x | e7",
        ],
    )
    cite, rows = errata.claims_table(page)
    assert cite == "k" and len(rows) == 7  # both tables of the section
    errors, minors = errata.grouped(errata.errata_rows(page)[1])
    assert [(r[0], [s[0] for s in subs]) for r, subs in errors] == [
        ("Eq. 27", ["Eq. 25", "Eq. 29"]),
        ("Thm 2", []),
    ]
    assert [r[0] for r in minors] == ["Eq. 7", "Eq. 9"]
    assert errata.counts(page) == (2, 2)
    assert "Lemma" not in [r[0] for r in errata.errata_rows(page)[1]]


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        (["a | corrected [from: p9-x] | exact | x | e"], "without their root"),
        (
            [
                "a | corrected [root: p9-x] | exact | x | e",
                "b | corrected [root: p9-x] | exact | x | e",
            ],
            "named twice",
        ),
        (["a | reproduced [root: p9-x] | exact | x | e"], "must be corrected or not reproduced"),
        (["a | corrected (typo: x) [root: p9-x] | exact | x | e"], "not a typo or slip"),
    ],
)
def test_root_cause_tags_are_checked(tmp_path, rows, match):
    with pytest.raises(ValueError, match=match):
        errata.claims_table(_page(tmp_path, rows))


def test_two_papers_in_one_claims_section_are_refused(tmp_path):
    page = _page(tmp_path, ["a | corrected | exact | x | e"])
    page.write_text(
        page.read_text()
        .replace(":::", "")
        .replace(
            "## Beyond",
            "| claim of {cite:t}`other` | status | scale | where | evidence |\n"
            "| --- | --- | --- | --- | --- |\n| b | reproduced | exact | x | e |\n\n## Beyond",
        )
    )
    with pytest.raises(ValueError, match="cite k and other"):
        errata.claims_table(page)


def test_split_row_keeps_pipes_in_math_and_code():
    row = r"| $\lVert x\rVert$ and $|a|$ | `a | b` | x | y |"
    assert errata.split_row(row) == [r"$\lVert x\rVert$ and $|a|$", "`a | b`", "x", "y"]


def test_relocate_links_for_the_book_root():
    cell = "{doc}`gdpp`, {doc}`../shared_setting`, {glue:text}`baselines.ipynb::k:s`"
    assert errata.relocate(cell, "part3") == (
        "{doc}`part3/gdpp`, {doc}`shared_setting`, {glue:text}`part3/baselines.ipynb::k:s`"
    )
    paper = "{paper-glue}`gdpp.ipynb::k`, {paper-glue}`../risk_ladder.ipynb::r`"
    assert errata.relocate(paper, "part3") == (
        "{paper-glue}`part3/gdpp.ipynb::k`, {paper-glue}`risk_ladder.ipynb::r`"
    )
    titled = "{doc}`status page <../status>`, {doc}`the GD++ chapter <gdpp>`"
    assert errata.relocate(titled, "part3") == (
        "{doc}`status page <status>`, {doc}`the GD++ chapter <part3/gdpp>`"
    )


def test_claims_table_errors(tmp_path):
    bad = tmp_path / "index.md"
    bad.write_text("# Part\n\nno table\n")
    with pytest.raises(ValueError, match="Claims table"):
        errata.claims_table(bad)


@pytest.mark.parametrize(
    ("scale", "evidence", "problem"),
    [
        ("exact", "sympy", None),
        ("exact + paper", "{paper-glue}`a.ipynb::x`", None),
        ("paper", "{paper-glue}`a.ipynb::x`", None),
        ("ci (paper-scale run pending)", "{glue:text}`a.ipynb::x`", None),
        ("paper", "{glue:text}`a.ipynb::x`", "cites no paper-scale number"),
        ("ci", "{glue:text}`a.ipynb::x`", "must say why"),
        ("ci scale", "x", "is not exact, paper or ci"),
        ("", "x", "is not exact, paper or ci"),
        ("exact +", "x", "is not exact, paper or ci"),
    ],
)
def test_scale_column(scale, evidence, problem):
    found = errata.scale_problem(["claim", "reproduced", scale, "{ref}`x`", evidence])
    assert (found is None) if problem is None else (problem in found), found


def test_every_claims_table_has_a_valid_scale_column():
    for part in errata.parts():
        for row in errata.claims_table(part)[1]:  # raises on a bad scale cell
            assert errata.scale_problem(row) is None
    assert "on ci only" in errata.OVERVIEW.read_text()


def test_errata_rows_are_the_corrected_and_not_reproduced_claims():
    n_errata = sum(len(errata.errata_rows(p)[1]) for p in errata.parts())
    n_verdict = sum(
        errata.verdict(r[1]) in ("corrected", "not reproduced")
        for p in errata.parts()
        for r in errata.claims_table(p)[1]
    )
    assert n_errata == n_verdict


def test_generated_pages_live_in_one_folder_and_are_included():
    """Every file a script writes for the book is under book/_generated/; the pages of the table of
    contents that show one include it (the errata page keeps its URL, book/errata.html)."""
    gen = REPO / "book" / "_generated"
    for path in (errata.OUT, errata.OVERVIEW, errata.STATUS):
        assert path.parent == gen and path.is_file(), path
    assert "```{include} _generated/errata.md" in (REPO / "book" / "errata.md").read_text()
    assert "```{include} _generated/overview.md" in (REPO / "book" / "intro.md").read_text()
    stray = [p.name for ext in ("md", "json") for p in (REPO / "book").glob(f"_*.{ext}")]
    assert not stray, f"generated files outside book/_generated/: {stray}"

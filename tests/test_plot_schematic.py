"""Tests of iclgd.plot.schematic and scripts/make_schematics.py: the part pages' schematics.

Each schematic is a matplotlib Figure of the page's width with text of at least 10 pt; the
committed SVGs are what the script draws (``--check``), byte for byte and the same on a second
drawing; each part page shows its own.
"""

import importlib.util
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from iclgd import plot  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ms = _script("make_schematics")
rl = _script("reader_load")  # its word count: a math span is one word

FUNCS = [plot.part1_schematic, plot.part2_schematic, plot.part3_schematic]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("func", FUNCS, ids=lambda f: f.__name__)
def test_each_schematic_is_a_figure_of_the_page_width_with_readable_text(func):
    fig = func()
    assert isinstance(fig, Figure)
    width, height = fig.get_size_inches()
    assert width == plot.MAX_WIDTH and 3 <= height <= 4.5, (width, height)
    texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_text()]
    assert len(texts) >= 20  # a drawing with its labels, not an empty canvas
    assert min(t.get_fontsize() for t in texts) >= 10
    # every label inside the figure (nothing cut off at an edge)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    for t in texts:
        b = t.get_window_extent(renderer)
        assert box.x0 <= b.x0 and b.x1 <= box.x1 and box.y0 <= b.y0 and b.y1 <= box.y1, (
            t.get_text(),
            b,
        )


def test_the_committed_svgs_are_up_to_date(capsys):
    assert ms.check() == 0, capsys.readouterr().err
    assert sorted(p.name for p in ms.OUT.glob("*.svg")) == sorted(ms.SCHEMATICS)


def test_the_drawing_is_reproducible_and_the_check_can_fail(tmp_path, monkeypatch, capsys):
    a, b = ms.render(tmp_path / "a"), ms.render(tmp_path / "b")
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    svg = a[0].read_text(encoding="utf8")
    assert "<dc:date>" not in svg and re.search(r"<dc:description>.*sha256", svg)
    stale = tmp_path / "stale"
    stale.mkdir()
    for p in a:
        (stale / p.name).write_bytes(p.read_bytes())
    monkeypatch.setattr(ms, "OUT", stale)
    monkeypatch.setattr(ms, "REPO", tmp_path)
    assert ms.check() == 0
    (stale / "part2.svg").write_text(svg.replace("#d6e6f5", "#d6e6f6"), encoding="utf8")
    assert ms.check() == 1
    assert "part2.svg is out of date" in capsys.readouterr().err


@pytest.mark.parametrize("part", [1, 2, 3])
def test_each_part_page_shows_its_schematic(part):
    text = (REPO / "book" / f"part{part}" / "index.md").read_text(encoding="utf8")
    pattern = rf"```{{figure}} \.\./_generated/schematics/part{part}\.svg\n(.*?)\n```"
    m = re.search(pattern, text, re.S)
    assert m, f"book/part{part}/index.md shows no schematic"
    options = dict(re.findall(r"^:(\w+): (.*)$", m[1], re.M))
    assert options.get("name") == f"fig-p{part}-schematic" and options.get("alt")
    caption = re.sub(r"^:.*$", "", m[1], flags=re.M)
    assert rl.words(caption) <= 40, caption  # what to see first (issue 52 item 3)
    assert text.index(m[0]) < text.index("\n## Claims table")  # in the part's argument

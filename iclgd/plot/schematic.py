"""The part pages' schematics: each part's prompt and what its model computes from it.

Drawn with labelled grids (a matrix as one cell per block of entries), boxes, arrows and
mathtext, in the book's notation (``book/notation.md`` and the part pages).
``scripts/make_schematics.py`` writes them to ``book/_generated/schematics/part{1,2,3}.svg``, which
the part pages show with a ``{figure}`` directive.

Each is drawn black on a transparent background with light fills: the book's dark mode inverts
a figure's lightness (``book/_static/iclgd.css``), so there the page's colour shows through, the
text turns light and the fills dark. The figures are :data:`~iclgd.plot.MAX_WIDTH` = 8 in wide,
shown at the width of the text column (about 100 %), with text of at least 10 pt (13 px; at
least 9 px down to a column of 550 px).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from .core import DPI, MAX_WIDTH, style

__all__ = ["part1_schematic", "part2_schematic", "part3_schematic"]

_TEXT = 11.0  # pt: cell labels and formulas
_NOTE = 10.0  # pt: notes beside the drawing, the smallest text
_INK = "black"
_EDGE = "#333333"
_CONTEXT = "#d6e6f5"  # the context columns (light blue)
_QUERY = "#fde3c8"  # the query column (light orange)
_KEY = "#f7b46a"  # the entry the part turns on (the guess y_q, a prediction): stronger orange
_ZERO = "#e8e8e8"  # entries fixed at 0 (light grey)
_BOX = "#f2f2f2"  # a computation's box

Cell = tuple[float, float, float, float]  # (left, bottom, width, height), in inches


def _canvas(height: float) -> tuple[Figure, Axes]:
    """A figure :data:`MAX_WIDTH` x ``height`` inches, one axes over it in inches, axis off."""
    fig = plt.figure(figsize=(MAX_WIDTH, height), dpi=DPI)
    fig.set_layout_engine("none")
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set(xlim=(0, MAX_WIDTH), ylim=(0, height))
    ax.set_axis_off()
    return fig, ax


def _text(ax: Axes, x: float, y: float, s: str, size: float = _TEXT, **kw):
    """``s`` at ``(x, y)`` inches, centred unless ``ha`` / ``va`` say otherwise."""
    kw = {"ha": "center", "va": "center", **kw}
    return ax.text(x, y, s, size=size, color=_INK, **kw)


def _grid(
    ax: Axes,
    x0: float,
    top: float,
    widths: Sequence[float],
    heights: Sequence[float],
    labels: Sequence[Sequence[str | None]],
    fills: Sequence[Sequence[str]],
    size: float = _TEXT,
) -> list[list[Cell]]:
    """A matrix as a grid from ``(x0, top)`` down: row ``r`` of height ``heights[r]``, column
    ``c`` of width ``widths[c]``, cell ``(r, c)`` filled ``fills[r][c]`` and labelled
    ``labels[r][c]`` (``None``: blank). Returns the cells, rows of ``len(widths)``."""
    cells, y = [], top
    for r, h in enumerate(heights):
        y -= h
        row, x = [], x0
        for c, w in enumerate(widths):
            ax.add_patch(Rectangle((x, y), w, h, fc=fills[r][c], ec=_EDGE, lw=1.0))
            if labels[r][c] is not None:
                _text(ax, x + w / 2, y + h / 2, labels[r][c], size)
            row.append((x, y, w, h))
            x += w
        cells.append(row)
    return cells


def _outline(ax: Axes, cell: Cell):
    """A thick frame around one cell: the entry the figure points at."""
    x, y, w, h = cell
    ax.add_patch(Rectangle((x, y), w, h, fc="none", ec=_INK, lw=2.2, zorder=3))


def _box(ax: Axes, x: float, y: float, w: float, h: float):
    """A rounded box with lower-left corner ``(x, y)``."""
    style_ = "round,pad=0,rounding_size=0.08"
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=style_, fc=_BOX, ec=_EDGE, lw=1.0))


def _arrow(ax: Axes, start, end, rad: float = 0.0, lw: float = 1.4):
    """An arrow from ``start`` to ``end`` (inches), bent by ``rad`` (``arc3``)."""
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>,head_length=6,head_width=3.5",
            connectionstyle=f"arc3,rad={rad}",
            color=_INK,
            lw=lw,
            shrinkA=0,
            shrinkB=0,
            zorder=4,
        )
    )


def _bracket(ax: Axes, x0: float, x1: float, y: float, s: str, below: bool = True):
    """A bracket from ``x0`` to ``x1`` at height ``y``, its ends towards the grid, ``s`` on the
    other side (under it when ``below``, over it otherwise)."""
    sign = 1 if below else -1
    ax.plot([x0, x0, x1, x1], [y + 0.06 * sign, y, y, y + 0.06 * sign], color=_INK, lw=0.9)
    _text(ax, (x0 + x1) / 2, y - 0.08 * sign, s, _NOTE, va="top" if below else "bottom")


def _rows(ax: Axes, x: float, top: float, heights: Sequence[float], names: Sequence[str]):
    """Brackets left of a grid at ``x``, one per block of rows (``heights``), named ``names``."""
    for h, name in zip(heights, names):
        y0, y1 = top - h, top
        ax.plot([x + 0.06, x, x, x + 0.06], [y0, y0, y1, y1], color=_INK, lw=0.9)
        _text(ax, x - 0.07, (y0 + y1) / 2, name, _NOTE, ha="right")
        top -= h


# ----------------------------------------------------------------------------------------------
# Part I


def part1_schematic() -> Figure:
    """Part I: the prompt matrix with its initial guess, one layer of heads, the read-out.

    Left, the embedding matrix ``E = [X^T, x_q; y^T, y_q]`` of shape (d+1, C+1): the C context
    columns ``(x_i, y_i)`` and the query column ``(x_q, y_q)``, the initial guess ``y_q`` in the
    bottom-right cell (0 in plain LSA, ``w^T x_q`` with ``w`` trained in y_q-LSA). Right,
    ``E + sum_h head_h(E)``, of the same shape, whose bottom-right entry is the prediction
    ``f(E)``. Below, the guess's two cases and one head's formula.

    Returns:
        The figure (8 x 3.7 in).
    """
    with style():
        fig, ax = _canvas(3.7)
        widths, heights = [0.58] * 5, [0.95, 0.45]
        top, x_in, x_out = 2.75, 0.85, 4.95
        xs = [
            r"$\mathbf{x}_1$",
            r"$\mathbf{x}_2$",
            r"$\cdots$",
            r"$\mathbf{x}_C$",
            r"$\mathbf{x}_q$",
        ]
        ys = ["$y_1$", "$y_2$", r"$\cdots$", "$y_C$", "$y_q$"]
        fills = [[_CONTEXT] * 4 + [_QUERY], [_CONTEXT] * 4 + [_KEY]]
        cells = _grid(ax, x_in, top, widths, heights, [xs, ys], fills)
        _outline(ax, cells[1][4])
        right, bottom = x_in + sum(widths), top - sum(heights)
        _bracket(ax, x_in, right - widths[0] - 0.03, top + 0.08, "$C$ context columns", False)
        _bracket(ax, right - widths[0] + 0.03, right, top + 0.08, "query", below=False)
        _text(
            ax,
            (x_in + right) / 2,
            top + 0.45,
            r"prompt $\mathbf{E} \in \mathbb{R}^{(d+1)\times(C+1)}$",
            va="bottom",
        )
        _rows(ax, x_in - 0.1, top, heights, ["$d$", "$1$"])

        # the layer
        y_mid, x_mid = top - sum(heights) / 2, (right + x_out) / 2
        _arrow(ax, (right + 0.15, y_mid), (x_out - 0.15, y_mid))
        _text(ax, x_mid, y_mid + 0.1, r"$+\sum_{h=1}^{H}\mathrm{head}_h(\mathbf{E})$", va="bottom")
        _text(ax, x_mid, y_mid - 0.1, "one layer", _NOTE, va="top")

        # its output: only the bottom-right entry is read
        labels = [[None] * 5, [None] * 4 + [r"$f(\mathbf{E})$"]]
        out = _grid(
            ax, x_out, top, widths, heights, labels, [["white"] * 5, ["white"] * 4 + [_KEY]], _NOTE
        )
        _outline(ax, out[1][4])
        _text(
            ax,
            x_out + sum(widths) / 2,
            top + 0.45,
            r"$\mathbf{E} + \sum_{h}\mathrm{head}_h(\mathbf{E})$",
            va="bottom",
        )
        _text(
            ax,
            x_out + sum(widths),
            bottom - 0.1,
            "prediction $f(\\mathbf{E})$: the bottom-right entry,\n"
            "$y_q$ plus a correction read from the context",
            _NOTE,
            ha="right",
            va="top",
            linespacing=1.6,
        )

        # the initial guess, and one head
        gx, gy, gw, _ = cells[1][4]
        _arrow(ax, (gx + gw / 2, 1.08), (gx + gw / 2, gy - 0.02), lw=1.1)
        _text(
            ax,
            0.3,
            0.95,
            r"initial guess $y_q$:  LSA $y_q = 0$;  $y_q$-LSA $y_q = \mathbf{w}^\top\mathbf{x}_q$,"
            r" $\mathbf{w}$ trained",
            _NOTE,
            ha="left",
        )
        _text(
            ax,
            0.3,
            0.6,
            r"$y_q$-LSA with $\mathbf{w} = \mathbf{w}_\star$ and eq. 7's weights: one GD step"
            r" from $\mathbf{w}_\star$",
            _NOTE,
            ha="left",
        )
        _text(
            ax,
            0.3,
            0.25,
            r"$\mathrm{head}_h(\mathbf{E}) = \dfrac{1}{C}\,\mathbf{W}^P_h\mathbf{W}^V_h\mathbf{E}\,"
            r"\mathbf{W}^M(\mathbf{E}^\top(\mathbf{W}^K_h)^\top\mathbf{W}^Q_h\mathbf{E})$,  "
            r"$\mathbf{W}^M = \mathrm{diag}(\mathbf{I}_C, 0)$: only context columns are summed",
            ha="left",
        )
    return fig


# ----------------------------------------------------------------------------------------------
# Part II


def part2_schematic() -> Figure:
    """Part II: the representation-based prompt, the softmax heads, the trained limit.

    Top left, the prompt ``E = (E^P, E^Q)`` of shape (d+1, K): the N prompt tokens
    ``v_1, ..., v_N`` with their labels ``y``, the other K - N tokens with label 0. Right, one
    layer of H softmax heads (eq. 8), linear in the prompt labels. Bottom, the trained model's
    output ``y*`` (Theorem 2), a row of K labels: the prompt labels copied, the others predicted by
    ridge regression on the basis functions ``f`` (eq. 20).

    Returns:
        The figure (8 x 3.9 in).
    """
    H = 3.9
    with style():
        fig, ax = _canvas(H)
        widths, heights = [0.5, 0.45, 0.5, 0.68, 0.45, 0.5], [0.8, 0.45]
        top, x0 = 3.2, 0.95
        tokens = ["$v_1$", r"$\cdots$", "$v_N$", "$v_{N+1}$", r"$\cdots$", "$v_K$"]
        labels = ["$y_1$", r"$\cdots$", "$y_N$", "$0$", r"$\cdots$", "$0$"]
        fills = [[_CONTEXT] * 3 + [_QUERY] * 3, [_CONTEXT] * 3 + [_ZERO] * 3]
        _grid(ax, x0, top, widths, heights, [tokens, labels], fills)
        mid, right = x0 + sum(widths[:3]), x0 + sum(widths)
        y_mid = top - sum(heights) / 2
        _bracket(ax, x0, mid - 0.03, top + 0.08, "$E^P$: $N$ prompt tokens", below=False)
        _bracket(ax, mid + 0.03, right, top + 0.08, "$E^Q$: the other $K-N$", below=False)
        _rows(ax, x0 - 0.1, top, heights, ["$d$", "$1$"])
        _text(ax, x0 - 0.36, y_mid, "$E =$", ha="right")
        _text(
            ax,
            0.1,
            H - 0.2,
            r"task: $y_k = \lambda^\top(f(v_k) + \epsilon_k)$, $f: \mathbb{R}^d \to \mathbb{R}^m$"
            r" fixed, $\lambda$ drawn per task",
            _NOTE,
            ha="left",
        )

        # the model
        bx, by, bw, bh = 4.6, 1.95, 3.3, 1.3
        _box(ax, bx, by, bw, bh)
        _arrow(ax, (right + 0.12, y_mid), (bx - 0.08, y_mid))
        _text(ax, bx + bw / 2, by + bh - 0.2, "one layer, $H$ softmax heads")
        _text(
            ax,
            bx + bw / 2,
            by + bh / 2 - 0.05,
            r"$\widehat{y}_k = \langle \mathbf{y},\, \sum_{h=1}^{H} w_{h,k}\,"
            r"\mathrm{softmax}(V^\top Q_h v_k)\rangle$",
        )
        _text(
            ax,
            bx + bw / 2,
            by + 0.2,
            r"$\widehat{\mathbf{y}} = \mathbf{y}^\top\widehat{A}(\theta)$: linear in the labels",
            _NOTE,
        )

        # the trained limit: K predictions under the prompt's columns
        o_top, o_h = 1.1, 0.45
        out = _grid(ax, x0, o_top, widths[:3], [o_h], [labels[:3]], [[_CONTEXT] * 3])
        _, qy, _, _ = out[0][0]
        ridge = _grid(
            ax, mid, o_top, [right - mid], [o_h], [[r"$f(v_k)^\top\widehat{\lambda}$"]], [[_KEY]]
        )
        _outline(ax, ridge[0][0])
        _text(ax, x0 - 0.1, qy + o_h / 2, r"$\widehat{\mathbf{y}}^\star =$", ha="right")
        _arrow(ax, (bx + 0.6, by - 0.05), (right + 0.1, o_top - 0.2), rad=-0.25)
        _text(ax, bx + 0.75, by - 0.3, "trained (Theorem 2)", _NOTE, ha="left")
        _bracket(ax, x0, mid - 0.03, qy - 0.08, "labels copied")
        _bracket(ax, mid + 0.03, right, qy - 0.08, "ridge on $f$")
        _text(
            ax,
            bx - 0.1,
            0.45,
            r"$\widehat{\lambda} = \mathrm{argmin}_{\lambda}\,\dfrac{1}{2N}\,\sum_{i=1}^{N}"
            r"(y_i - \lambda^\top f(v_i))^2 + \dfrac{m\tau}{2N}\|\lambda\|^2$  (eq. 20)",
            ha="left",
        )
    return fig


# ----------------------------------------------------------------------------------------------
# Part III


def part3_schematic() -> Figure:
    """Part III: the prompt with its query label 0, L layers, each one preconditioned GD step.

    Top left, the prompt ``Z_0`` of shape (d+1, n+1): n examples ``(x^(i), y^(i))`` and the query
    ``x^(n+1)`` with label 0. Top right, one layer (eq. 4) and the sparse weights of eq. 9. Bottom,
    the forward pass ``Z_0 -> ... -> Z_L`` beside the preconditioned GD iterates
    ``w_0 = 0 -> ... -> w_L`` (Lemma 2): after layer l the prediction ``-[Z_l]_{d+1,n+1}`` is
    ``<x^(n+1), w_l>``.

    Returns:
        The figure (8 x 3.9 in).
    """
    with style():
        fig, ax = _canvas(3.9)
        widths, heights = [0.58, 0.58, 0.45, 0.58, 0.7], [0.8, 0.45]
        top, x0 = 3.45, 0.55
        xs = ["$x^{(1)}$", "$x^{(2)}$", r"$\cdots$", "$x^{(n)}$", "$x^{(n+1)}$"]
        ys = ["$y^{(1)}$", "$y^{(2)}$", r"$\cdots$", "$y^{(n)}$", "$0$"]
        fills = [[_CONTEXT] * 4 + [_QUERY], [_CONTEXT] * 4 + [_ZERO]]
        cells = _grid(ax, x0, top, widths, heights, [xs, ys], fills)
        _outline(ax, cells[1][4])
        right, bottom = x0 + sum(widths), top - sum(heights)
        _rows(ax, x0 - 0.1, top, heights, ["$d$", "$1$"])
        _text(
            ax,
            (x0 + right) / 2,
            top + 0.12,
            r"prompt $Z_0 \in \mathbb{R}^{(d+1)\times(n+1)}$",
            va="bottom",
        )
        _bracket(ax, x0, right - widths[-1] - 0.03, bottom - 0.08, "$n$ examples")
        _bracket(ax, right - widths[-1] + 0.03, right, bottom - 0.08, "query")

        # one layer, and eq. 9's sparse weights as block grids (d x d, then the last row/column)
        lx = 3.95
        _text(
            ax,
            lx,
            top - 0.1,
            r"layer $\ell$:  $Z_{\ell+1} = Z_\ell + \dfrac{1}{n}\,P_\ell Z_\ell M"
            r"(Z_\ell^\top Q_\ell Z_\ell)$",
            ha="left",
        )
        _text(
            ax,
            lx,
            top - 0.5,
            r"$M = \mathrm{diag}(I_n, 0)$: the sum runs over the $n$ examples",
            _NOTE,
            ha="left",
        )
        gy, bw, bh = top - 0.82, [0.5, 0.3], [0.4, 0.26]
        ym = gy - sum(bh) / 2
        _text(ax, lx, ym, r"eq. 9:  $P_\ell =$", ha="left")
        _grid(
            ax, lx + 1.1, gy, bw, bh, [["$0$"] * 2, ["$0$", "$1$"]], [[_ZERO] * 2, [_ZERO, "white"]]
        )
        _text(ax, lx + 2.1, ym, r"$Q_\ell =$", ha="left")
        _grid(
            ax,
            lx + 2.65,
            gy,
            bw,
            bh,
            [[r"$A_\ell$", "$0$"], ["$0$"] * 2],
            [["white", _ZERO], [_ZERO] * 2],
        )
        _text(
            ax,
            lx + 2.65 + sum(bw) / 2,
            gy - sum(bh) - 0.1,
            r"$A_\ell = A_\ell^\top$",
            _NOTE,
            va="top",
        )

        # the forward pass beside the GD iterates, linked after every layer (dashed)
        zy, wy = 1.55, 0.88
        at = [0.5, 1.85, 3.2, 4.3]
        zs = ["$Z_0$", "$Z_1$", r"$\cdots$", "$Z_L$"]
        ws = ["$w_0 = 0$", "$w_1$", r"$\cdots$", "$w_L$"]
        steps = ["layer 0", None, "layer $L-1$"]
        for i, x in enumerate(at):
            _text(ax, x, zy, zs[i])
            _text(ax, x, wy, ws[i])
            if zs[i] != r"$\cdots$":
                ax.plot([x, x], [zy - 0.17, wy + 0.17], color=_INK, lw=0.9, ls=(0, (3, 2)))
            if i + 1 < len(at):
                a, b = x + (0.45 if i == 0 else 0.25), at[i + 1] - 0.25
                _arrow(ax, (a, zy), (b, zy))
                _arrow(ax, (a, wy), (b, wy))
                if steps[i]:
                    _text(ax, (a + b) / 2, zy + 0.08, steps[i], _NOTE, va="bottom")
        px = at[-1] + 0.35
        _text(ax, px, zy, "prediction $-[Z_L]_{d+1,n+1}$", ha="left")
        _text(
            ax,
            px,
            (zy + wy) / 2,
            r"dashed: $-[Z_\ell]_{d+1,n+1} = \langle x^{(n+1)}, w_\ell\rangle$",
            _NOTE,
            ha="left",
        )
        _text(ax, px, wy, r"$w_{\ell+1} = w_\ell + A_\ell\nabla R(w_\ell)$", ha="left")
        _text(
            ax,
            0.2,
            0.32,
            r"Lemma 2 (eq. 9): each layer is one step of gradient descent on "
            r"$R(w) = \dfrac{1}{2n}\,\sum_{i=1}^{n}(w^\top x^{(i)} - y^{(i)})^2$, "
            r"preconditioned by $-A_\ell$",
            _NOTE,
            ha="left",
        )
    return fig

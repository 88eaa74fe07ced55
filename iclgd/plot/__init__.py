"""Every figure of the iclgd book: one function per figure, each returning a matplotlib Figure.

The notebooks compute; this module draws. Each function takes plain data (NumPy arrays, floats,
dicts keyed by the swept value) and returns a :class:`matplotlib.figure.Figure` created through
pyplot, so that in a notebook it is shown at the end of the cell like any pyplot figure (assign
it, ``fig = iclgd.plot.fig2_heads(...)``, rather than leaving it as the cell's last expression,
which would show it twice). Nothing is shown or closed here.

Readability at the book's page width (an HTML column of about 800-850 px):

* every figure is at most :data:`MAX_WIDTH` = 8 inches wide at :data:`DPI` = 100, so it is shown
  at about 100 %;
* tick labels are 10 pt, axis labels and titles 11 pt, legends 9.5 pt;
* crowded legends sit outside the axes (below or to the right), never on the data;
* three panels are laid out on a grid (one panel spanning a row), not in one long row.

The style is applied inside each function (:func:`style`), never globally on import. The one
setting made on import is a display format: under IPython (a notebook, Colab, the book's
execution) the inline backend draws PNGs at twice their pixel density ("retina"), shown at the
same size, so that figures stay sharp on high-resolution screens and phones.

Index (notebook -> function):

* ``shared_setting``: Fig. 1 -> :func:`fig1_prior_mean`.
* ``part1/multihead_theory``: optimum against H -> :func:`heads_optimum`; the gap to one GD step
  against C and ‖w*‖² -> :func:`gd_gap`.
* ``part1/multihead_experiments``: Fig. 2 -> :func:`fig2_heads`, Fig. 3 -> :func:`fig3_prior_mean`,
  Fig. 4 -> :func:`fig4_initial_guess`.
* ``part1/yq_lsa``: Fig. 5 -> :func:`fig5_yq_training`, Fig. 5(b) -> :func:`fig5b_yq_vs_gd`.
* ``part1/sts_b``: Fig. 6 -> :func:`fig6_refinement`, its paired differences ->
  :func:`fig6_paired_differences`.
* ``part2/inference``: Fig. 2(a) -> :func:`fig2a_inference`, Fig. 3 -> :func:`fig3_gap`.
* ``part2/deep``: Fig. 2(b) -> :func:`deep_losses`, Fig. 5 -> :func:`heads_budget`.
* ``risk_ladder``: every model's risk on one task -> :func:`risk_ladder`.
* the part pages (``part1/index`` ... ``part3/index``), their schematics (drawn to SVG by
  ``scripts/make_schematics.py``) -> :func:`part1_schematic`, :func:`part2_schematic`,
  :func:`part3_schematic`.
"""

from .core import DPI, MAX_WIDTH, PALETTE, STYLE, log_ticks, retina_inline, smooth, style
from .ladder import risk_ladder
from .llm import fig6_paired_differences, fig6_refinement
from .multihead import fig2_heads, fig3_prior_mean, fig4_initial_guess, gd_gap, heads_optimum
from .pgd import (
    gd_baselines,
    multilayer_scalars,
    single_layer_regulariser,
    training_dists,
    weight_heatmaps,
)
from .representation import fig2a_inference, fig3_gap, heads_sweep, lemma5_check, theorem1_rate
from .schematic import part1_schematic, part2_schematic, part3_schematic
from .setting import fig1_prior_mean
from .transformer import deep_losses, heads_budget
from .yq_lsa import fig5_yq_training, fig5b_yq_vs_gd

__all__ = [
    "retina_inline",
    "DPI",
    "MAX_WIDTH",
    "PALETTE",
    "STYLE",
    "fig1_prior_mean",
    "fig6_refinement",
    "fig6_paired_differences",
    "fig2a_inference",
    "fig3_gap",
    "fig2_heads",
    "fig3_prior_mean",
    "fig4_initial_guess",
    "fig5_yq_training",
    "fig5b_yq_vs_gd",
    "gd_gap",
    "heads_optimum",
    "log_ticks",
    "multilayer_scalars",
    "single_layer_regulariser",
    "smooth",
    "style",
    "training_dists",
    "weight_heatmaps",
    "gd_baselines",
    "lemma5_check",
    "theorem1_rate",
    "heads_sweep",
    "deep_losses",
    "heads_budget",
    "risk_ladder",
    "part1_schematic",
    "part2_schematic",
    "part3_schematic",
]

retina_inline()

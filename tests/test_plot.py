"""Tests of iclgd.plot: every book figure on small synthetic data.

Each figure function is checked for its layout (number of panels, width <= 8.5 in at 100 dpi,
tick labels >= 10 pt, log axes where intended, legends off the data) and for its content (the
number of curves and markers per panel, and that the drawn values are the data passed in).
"""

import matplotlib

matplotlib.use("Agg")

import jax.numpy as jnp
import matplotlib
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402

import iclgd
from iclgd import plot  # noqa: E402

RNG = np.random.default_rng(0)
D = C = 10
GD = D * (D + 1) / (C + D + 1)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _curve(n, start=40.0, end=GD, tau=50.0):
    t = np.arange(n)
    return (end + (start - end) * np.exp(-t / tau)) * (1 + 0.02 * RNG.normal(size=n))


def _labelled(ax):
    """Lines of ax with a legend label (axhline/axvline included, helper lines excluded)."""
    return [ln for ln in ax.lines if not ln.get_label().startswith("_")]


def _check_layout(fig, n_axes):
    """Common checks: panels, width, dpi, tick label sizes, legends outside every axes."""
    assert len(fig.axes) == n_axes
    width, _ = fig.get_size_inches()
    assert width <= 8.5 and fig.dpi == plot.DPI
    assert plt.fignum_exists(fig.number)  # returned open, not shown or closed
    fig.canvas.draw()
    for ax in fig.axes:
        for lab in ax.get_xticklabels() + ax.get_yticklabels():
            if lab.get_text():
                assert lab.get_fontsize() >= 10, (ax.get_title(), lab.get_text())
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + fig.legends
    assert legends, "every figure has a legend"
    for leg in legends:
        box = leg.get_window_extent(renderer).shrunk(0.98, 0.98)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), "legend covers a panel"
    # the tight bounding box (what the notebook shows) is also within the page width
    tight = fig.get_tightbbox(renderer)
    assert tight.width <= 8.5


# ------------------------------------------------------------------------------------------------
# helpers


def test_smooth_is_a_moving_average():
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    values, steps = plot.smooth(x, 2)
    np.testing.assert_allclose(values, [1.5, 3.0, 6.0, 12.0])
    np.testing.assert_array_equal(steps, [2, 3, 4, 5])
    values, steps = plot.smooth(x, 3)
    np.testing.assert_allclose(values, [7 / 3, 14 / 3, 28 / 3])
    np.testing.assert_array_equal(steps, [3, 4, 5])
    values, steps = plot.smooth(x, 1)
    np.testing.assert_allclose(values, x)
    np.testing.assert_array_equal(steps, [1, 2, 3, 4, 5])
    # a window longer than the series: the mean of everything, at the last step
    values, steps = plot.smooth(x, 50)
    np.testing.assert_allclose(values, [31 / 5])
    np.testing.assert_array_equal(steps, [5])
    # default window 50 on a long series, against a hand loop
    y = RNG.normal(size=120)
    values, steps = plot.smooth(y)
    assert values.shape == steps.shape == (71,)
    np.testing.assert_allclose(values, [y[k : k + 50].mean() for k in range(71)])
    assert steps[0] == 50 and steps[-1] == 120


@pytest.mark.parametrize("w", [0, -3, 2.5, True])
def test_smooth_rejects_bad_windows(w):
    with pytest.raises(ValueError, match="w must be"):
        plot.smooth(np.ones(10), w)


def test_smooth_rejects_non_vectors():
    with pytest.raises(ValueError, match="1-D"):
        plot.smooth(np.ones((3, 3)))


def test_log_ticks_plain_numbers():
    fig, ax = plt.subplots()
    ax.set_yscale("log")
    ax.set_ylim(4.8, 50)
    ticks = plot.log_ticks(ax)
    assert ticks == [5, 6, 8, 10, 15, 20, 30, 40, 50]
    assert ax.get_ylim() == pytest.approx((4.8, 50))  # limits kept
    fmt = ax.yaxis.get_major_formatter()
    assert [fmt(t, i) for i, t in enumerate(ticks[:4])] == ["5", "6", "8", "10"]
    assert ax.yaxis.get_minor_formatter()(7, 0) == ""
    # a wide range is thinned to at most 9 ticks
    ax.set_ylim(0.01, 1000)
    ticks = plot.log_ticks(ax)
    assert len(ticks) <= 9 and ticks[0] == pytest.approx(0.01) and ticks[-1] == 1000
    assert plot.log_ticks(ax, [1, 3, 10], axis="x") == [1, 3, 10]
    assert list(ax.get_xticks()) == [1, 3, 10]
    with pytest.raises(ValueError):
        plot.log_ticks(ax, axis="z")


def test_style_is_scoped():
    before = dict(matplotlib.rcParams)
    with plot.style() as rc:
        assert matplotlib.rcParams["xtick.labelsize"] == rc["xtick.labelsize"] >= 10
        assert not matplotlib.rcParams["text.usetex"]
    assert dict(matplotlib.rcParams) == before
    plot.fig5b_yq_vs_gd(_metrics([0.0]))
    assert dict(matplotlib.rcParams) == before  # the figure functions leave rcParams alone


# ------------------------------------------------------------------------------------------------
# shared_setting


def test_fig1_prior_mean():
    losses = {"w* = 0": _curve(300), "w* = (2, ..., 2)": _curve(300, end=8.0)}
    evaluation = {"w* = 0": (5.3, 0.02), "w* = (2, ..., 2)": (8.0, 0.05)}
    fig = plot.fig1_prior_mean(losses, evaluation, GD, d=D, C=C, scale="ci")
    _check_layout(fig, 1)
    (ax,) = fig.axes
    assert ax.get_yscale() == "log"
    lines = _labelled(ax)
    assert len(lines) == 3  # two smoothed curves and the GD line
    curve = lines[0]
    y, x = plot.smooth(losses["w* = 0"])
    np.testing.assert_allclose(curve.get_ydata(), y)
    assert curve.get_xdata()[-1] == 300
    assert lines[2].get_ydata()[0] == pytest.approx(GD)
    assert len(ax.containers) == 2  # evaluation points with error bars
    for cont, (ev, se) in zip(ax.containers, evaluation.values(), strict=True):
        np.testing.assert_allclose(np.asarray(cont.lines[0].get_ydata(), float), [ev])
        segs = [s for c in cont.lines[2] for s in c.get_segments()]
        np.testing.assert_allclose(segs[0][:, 1], [ev - 2 * se, ev + 2 * se])
    assert "ci scale" in ax.get_title()
    assert len(ax.get_legend().texts) == 4


def test_fig1_rejects_mismatched_runs():
    with pytest.raises(ValueError, match="same runs"):
        plot.fig1_prior_mean({"a": _curve(100)}, {"b": (1.0, 0.1)}, GD, d=D, C=C, scale="ci")


# ------------------------------------------------------------------------------------------------
# part1/multihead_theory


def test_heads_optimum():
    heads = np.arange(1, 6)
    risk = np.array([8.5, 7.2, 6.1, 6.1, 6.1])
    exact = heads >= 3
    fig = plot.heads_optimum(heads, risk, exact, 6.1, 0.9, d=3, C=10, w_star=2 * np.ones(3))
    _check_layout(fig, 1)
    (ax,) = fig.axes
    assert len(ax.lines) == 6  # connecting line, open, filled, floor, GD, H = d
    open_, filled = ax.lines[1], ax.lines[2]
    np.testing.assert_array_equal(open_.get_xdata(), [1, 2])
    assert open_.get_markerfacecolor() == "none"
    np.testing.assert_array_equal(filled.get_xdata(), [3, 4, 5])
    assert ax.lines[5].get_xdata()[0] == 3  # the vertical line at H = d
    assert "(2, 2, 2)" in ax.get_title()
    assert list(ax.get_xticks()) == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="same length"):
        plot.heads_optimum(heads, risk[:3], exact, 6.1, 0.9, d=3, C=10, w_star=np.ones(3))


def test_gd_gap():
    Cs = np.array([10.0, 20.0, 40.0, 1000.0])
    risk_gd = D * (D + 1) / (Cs + D + 1)
    risk_lsa = risk_gd + 2 * 10 / (Cs * D + 2)
    s2 = np.array([0.0, 1.0, 4.0, 10.0, 40.0])
    gaps = {3: (s2, 2 * s2 / (20 * 3 + 2)), 10: (s2, 2 * s2 / (20 * 10 + 2))}
    fig = plot.gd_gap(Cs, risk_lsa, risk_gd, d=D, w2=10.0, gaps=gaps, gaps_C=20)
    _check_layout(fig, 3)
    ax_a, ax_b, ax_c = fig.axes
    assert (ax_a.get_xscale(), ax_a.get_yscale()) == ("log", "log")
    assert ax_b.get_xscale() == "log" and ax_c.get_xscale() == "linear"
    assert len(ax_a.lines) == 4  # gap points, formula, GD risk, LSA risk
    np.testing.assert_allclose(ax_a.lines[0].get_ydata(), risk_lsa - risk_gd)
    formula = ax_a.lines[1]
    np.testing.assert_allclose(
        formula.get_ydata(), 2 * 10 / (formula.get_xdata() * D + 2), rtol=1e-12
    )
    assert len(ax_b.lines) == 2  # ratio and its limit
    np.testing.assert_allclose(ax_b.lines[0].get_ydata(), risk_lsa / risk_gd)
    assert ax_b.lines[1].get_ydata()[0] == pytest.approx(1 + 2 * 10 / (D**2 * (D + 1)))
    assert len(ax_c.lines) == 4  # points and formula line for each d
    # three panels on a grid: (a) spans the top row, (b) and (c) share the bottom row
    pa, pb, pc = (ax.get_position() for ax in fig.axes)
    assert pa.y0 > pb.y1 and abs(pb.y0 - pc.y0) < 1e-6 and pa.width > 1.5 * pb.width


# ------------------------------------------------------------------------------------------------
# part1/multihead_experiments


def _fig2_data(sd=True):
    heads = np.array([1, 2, 3, 5, 8, 9, 10, 11, 12])
    floor = GD + 80 / 102
    opt = {H: floor + max(0, 10 - H) * 0.9 for H in range(1, 13)}
    rs = np.array([opt[H] * 1.02 for H in heads])
    re = np.array([opt[H] * 1.001 for H in heads])
    rc = np.array([opt[H] * 1.01 for H in heads])
    ls = {H: _curve(200, end=opt[H]) for H in heads}
    le = {H: _curve(500, end=opt[H]) for H in heads}
    kw = dict(floor=floor, gd_risk=GD, d=D, scale="paper")
    if sd:
        kw["risk_sampled_sd"] = 0.02 * np.ones(heads.size)
    return (heads, opt, rs, re, rc, ls, le), kw


def test_fig2_heads():
    args, kw = _fig2_data()
    heads, opt, rs, re, rc, ls, le = args
    fig = plot.fig2_heads(*args, **kw)
    _check_layout(fig, 3)
    ax_a, ax_b, ax_c = fig.axes
    assert ax_a.get_yscale() == "log" and ax_b.get_yscale() == "log"
    assert ax_c.get_yscale() == "linear"
    # (a): default curves H = 1, 2, 5, d, d + 1, each sampled (solid) and exact (dotted)
    solid = [ln for ln in ax_a.lines if ln.get_linestyle() == "-"]
    dotted = [ln for ln in ax_a.lines if ln.get_linestyle() == ":"]
    assert len(solid) == len(dotted) == 5 and len(ax_a.lines) == 12  # + optimum and GD
    assert [ln.get_label() for ln in solid] == [f"$H = {H}$" for H in (1, 2, 5, 10, 11)]
    np.testing.assert_allclose(dotted[0].get_ydata(), le[1])
    # (b): optimum over H = 1..12, sampled points with 2 sd bars, exact twins
    np.testing.assert_array_equal(ax_b.lines[0].get_xdata(), np.arange(1, 13))
    (cont,) = ax_b.containers
    assert cont.has_yerr
    np.testing.assert_allclose(cont.lines[0].get_ydata(), rs)
    twins = [ln for ln in ax_b.lines if ln.get_marker() == "x"]
    assert len(twins) == 1 and np.allclose(twins[0].get_ydata(), re)
    assert "paper scale" in ax_b.get_title()
    # (c): the zoom H >= d - 2 with optimum, sampled, checkpoint, end and the line at H = d
    assert len(ax_c.lines) == 5
    np.testing.assert_array_equal(ax_c.lines[0].get_xdata(), [8, 9, 10, 11, 12])
    np.testing.assert_allclose(ax_c.lines[2].get_ydata(), rc[4:])
    (leg,) = fig.legends
    texts = [t.get_text() for t in leg.texts]
    assert len(texts) == 5 and "trained, 2000 exact-gradient steps" in texts
    assert "trained, 200 sampled steps (exact risk)" in texts  # steps read from the losses
    assert "trained, 500 exact-gradient steps" in texts


def test_fig2_one_seed_no_bars_and_custom_show():
    args, kw = _fig2_data(sd=False)
    fig = plot.fig2_heads(*args, **kw, show=[1, 12], ylim=(4.0, 60.0))
    ax_a, ax_b, _ = fig.axes
    assert len(ax_a.lines) == 2 * 2 + 2
    assert ax_a.get_ylim() == pytest.approx((4.0, 60.0))
    (cont,) = ax_b.containers
    assert not cont.has_yerr
    assert not any(isinstance(c, LineCollection) for c in ax_b.collections)


def test_fig3_prior_mean():
    w2 = np.array([0.0, 10.0, 40.0])
    fine = np.linspace(0, 90, 13)
    losses = {w: _curve(150, end=GD + w / 51) for w in w2}
    fig = plot.fig3_prior_mean(
        w2,
        losses,
        fine,
        GD + fine / 51,
        GD + w2 / 51 + 0.1,
        GD + w2 / 51,
        gd_risk=GD,
        H=11,
        d=D,
        C=C,
        risk_sampled_sd=np.array([0.01, 0.02, 0.03]),
        scale="ci",
    )
    _check_layout(fig, 2)
    ax_a, ax_b = fig.axes
    assert ax_a.get_yscale() == "log" and ax_b.get_yscale() == "linear"
    assert len(_labelled(ax_a)) == 3 + 1  # one curve per |w*|^2 and GD
    assert len(_labelled(ax_b)) == 3  # optimum, GD, exact twins
    assert len(ax_b.containers) == 1 and ax_b.containers[0].has_yerr
    np.testing.assert_allclose(ax_b.lines[0].get_ydata(), GD + fine / 51)
    assert "1/51" in ax_b.get_title() and "ci scale" in ax_b.get_title()
    # panels side by side, each with its legend below
    assert ax_a.get_position().x1 < ax_b.get_position().x0
    leg = ax_b.get_legend()
    texts = [t.get_text() for t in leg.texts]
    assert texts.index("trained, 150 sampled steps (exact risk)") < texts.index(
        "trained, 5000 exact-gradient steps"
    )


def test_fig4_initial_guess():
    s = np.array([0.0, 10.0, 40.0])
    fine = np.linspace(0, 90, 7)
    bias = {v: _curve(120, end=GD + v / 51) for v in s}
    guess = {v: _curve(120, end=GD + v / 51 + 0.1) for v in s}
    fig = plot.fig4_initial_guess(
        s,
        bias,
        guess,
        fine,
        GD + fine / 51,
        GD + fine / 51,
        GD + s / 51 + 0.1,
        GD + s / 51 + 0.2,
        GD + s / 51,
        GD + s / 51,
        gd_risk=GD,
        H=11,
        d=D,
        C=C,
        scale="ci",
    )
    _check_layout(fig, 3)
    ax_a, ax_b, ax_c = fig.axes
    assert ax_a.get_yscale() == "log"
    labels = [ln.get_label() for ln in _labelled(ax_a)]
    # the y_q = 0 run (key 0 in both dicts) is drawn once
    assert labels == [
        "$c^2 = 0$",
        "$c^2 = 10$",
        "$c^2 = 40$",
        "$\\|g\\|^2 = 10$",
        "$\\|g\\|^2 = 40$",
        "one GD step from 0",
    ]
    for ax in (ax_b, ax_c):
        assert len(_labelled(ax)) == 3 and len(ax.containers) == 1
    assert ax_c.get_shared_y_axes().joined(ax_b, ax_c)
    np.testing.assert_allclose(ax_c.containers[0].lines[0].get_ydata(), GD + s / 51 + 0.2)
    (leg,) = fig.legends
    assert len(leg.texts) == 4


# ------------------------------------------------------------------------------------------------
# part1/yq_lsa


def test_fig5_yq_training():
    sampled = {0.0: (_curve(200), GD * 1.01), 2.5: (_curve(200), GD * 1.02)}
    exact = {s2: _curve(300, end=GD) for s2 in (0.0, 2.5, 10.0, 40.0)}
    fig = plot.fig5_yq_training(sampled, exact, GD, scale="ci")
    _check_layout(fig, 2)
    ax1, ax2 = fig.axes
    assert ax1.get_yscale() == ax2.get_yscale() == "log"
    assert ax1.get_shared_y_axes().joined(ax1, ax2)
    assert len(ax1.lines) == 2 * 2 + 1  # curve and end point per prior, GD
    assert len(ax2.lines) == 4 + 1
    dots = [ln for ln in ax1.lines if ln.get_marker() == "o"]
    assert [ln.get_ydata()[0] for ln in dots] == pytest.approx([GD * 1.01, GD * 1.02])
    assert all(ln.get_xdata()[0] == 200 for ln in dots)
    # colours by |w*|^2, the same in both panels
    assert ax1.lines[0].get_color() == ax2.lines[0].get_color() == plot.PALETTE[0]
    assert ax1.lines[2].get_color() == ax2.lines[1].get_color() == plot.PALETTE[1]
    (leg,) = fig.legends
    assert len(leg.texts) == 4 + 2
    assert "200 steps" in ax1.get_title() and "300 steps" in ax2.get_title()


def _metrics(priors, n=500):
    out = {}
    for s2 in priors:
        out[s2] = {
            "pred_diff": np.abs(RNG.normal(0, 0.05, n)),
            "pred_scale": 2.0,
            "grad_diff": np.abs(RNG.normal(0, 0.05, n)),
            "grad_scale": 3.0,
            "cos": 1 - 10 ** RNG.normal(-4, 0.5, n),
            "cos_ref": 1 - 10 ** RNG.normal(-1.5, 0.5, n),
        }
    return out


def test_fig5b_yq_vs_gd():
    metrics = _metrics([0.0, 2.5, 10.0])
    fig = plot.fig5b_yq_vs_gd(metrics, colors={0.0: "k", 2.5: "b", 10.0: "g"})
    _check_layout(fig, 3)
    ax_a, ax_b, ax_c = fig.axes
    assert ax_c.get_xscale() == "log" and ax_a.get_xscale() == "linear"
    assert len(ax_a.patches) == len(ax_b.patches) == 3  # one step histogram per prior
    assert len(ax_c.patches) == 6  # trained vs GD (outline) and GD vs truth (filled)
    # (a) is the histogram of the relative prediction difference
    counts, _ = np.histogram(metrics[0.0]["pred_diff"] / 2.0, bins=60)
    heights = ax_a.patches[0].get_xy()[:, 1]
    assert heights.max() == counts.max()
    (leg,) = fig.legends
    assert len(leg.texts) == 3 + 2
    with pytest.raises(ValueError, match="lacks"):
        plot.fig5b_yq_vs_gd({0.0: {"cos": np.ones(3)}})
    with pytest.raises(ValueError, match="no entry"):
        plot.fig5b_yq_vs_gd(metrics, colors={0.0: "k"})


def test_page_layout_helpers_are_private():
    """iclgd.plot's public names are its figures and the few page constants and helpers of
    core.__all__; the layout helpers that only the figure functions call start with ``_``."""
    import inspect

    from iclgd.plot import core

    defined = {
        name
        for name, obj in vars(core).items()
        if not name.startswith("_")
        and (getattr(obj, "__module__", None) == core.__name__ or name.isupper())
    }
    assert defined == set(core.__all__), defined ^ set(core.__all__)
    assert set(core.__all__) <= set(plot.__all__)
    for name in plot.__all__:
        assert not name.startswith("_") and hasattr(plot, name), name
        obj = getattr(plot, name)
        assert not inspect.isfunction(obj) or obj.__module__.startswith("iclgd.plot"), name


def test_lemma5_check_figure_and_bad_input():
    steps = np.arange(5) * 10
    fig = plot.lemma5_check(
        {"a": (1.0, 0.01)}, {"x": 1.0, "y": 0.5}, steps, np.logspace(0, -4, 5), np.ones(5)
    )
    assert len(fig.axes) == 2
    plt.close(fig)
    with pytest.raises(ValueError, match="positive"):
        plot.lemma5_check({"a": (1.0, 0.1)}, {"x": 1.0}, steps, np.zeros(5), np.ones(5))
    with pytest.raises(ValueError, match="same length"):
        plot.lemma5_check({"a": (1.0, 0.1)}, {"x": 1.0}, steps, np.ones(4), np.ones(5))
    with pytest.raises(ValueError, match="non-empty"):
        plot.lemma5_check({}, {"x": 1.0}, steps, np.ones(5), np.ones(5))


def test_training_figures_and_bad_input():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from iclgd import plot

    t = np.arange(10.0)
    fig = plot.theorem1_rate(t, np.exp(-t), t[5:], np.exp(-t[5:]), np.exp(-0.1 * t))
    plt.close(fig)
    with pytest.raises(ValueError, match="positive"):
        plot.theorem1_rate(t, -np.ones(10), t, np.ones(10), np.ones(10))
    fig = plot.heads_sweep({1: np.ones(5), 4: np.linspace(2, 1, 5)}, 0.5)
    assert len(fig.axes) == 1
    plt.close(fig)
    with pytest.raises(ValueError, match="non-empty"):
        plot.heads_sweep({}, 0.5)


def test_inference_figures_and_bad_input():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from iclgd.plot import representation as P

    t = np.arange(5.0)
    curves = {"in": np.linspace(2, 1, 5), "ood": np.linspace(4, 2, 5)}
    fig = P.fig2a_inference(t, np.linspace(3, 1, 5), curves, curves, 0.5)
    assert len(fig.axes) == 1
    plt.close(fig)
    with pytest.raises(ValueError, match="non-empty"):
        P.fig2a_inference(t, t + 1, {}, {}, 0.5)
    with pytest.raises(ValueError, match="same length"):
        P.fig2a_inference(t, t + 1, {"a": np.ones(3)}, {}, 0.5)
    fig = P.fig3_gap([1, 2, 3], jnp.asarray([[1.0, 0.0, 2.0], [1.5, 0.0, 1.0]]), 2)
    plt.close(fig)
    with pytest.raises(ValueError, match="shape"):
        P.fig3_gap([1, 2], np.ones((2, 3)), 2)
    with pytest.raises(ValueError, match=">= 0"):
        P.fig3_gap([1, 2], -np.ones((1, 2)), 2)


def test_figures():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from iclgd import plot

    steps = np.arange(0, 30, 10)
    fig = plot.deep_losses(
        np.linspace(3, 1, 30), steps, {"in": np.array([3.0, 2, 1])}, {"L*": 0.1, "copy": 2.0}
    )
    assert len(fig.axes) == 1
    plt.close(fig)
    with pytest.raises(ValueError, match="positive"):
        plot.deep_losses(-np.ones(30), steps, {"in": np.ones(3)}, {})
    with pytest.raises(ValueError, match="same length"):
        plot.deep_losses(np.ones(30), steps, {"in": np.ones(4)}, {})
    with pytest.raises(ValueError, match="inference must not be empty"):
        plot.deep_losses(np.ones(30), steps, {}, {})
    curves = {1: np.linspace(3, 1, 30), 4: np.linspace(3, 0.5, 30)}
    final = {"training": {1: 1.0, 4: 0.5}}
    fig = plot.heads_budget(final, curves, {1: 30, 4: 12})
    assert len(fig.axes) == 2
    plt.close(fig)
    plt.close(plot.heads_budget(final, curves))
    with pytest.raises(ValueError, match="final must not be empty"):
        plot.heads_budget({}, curves)


def test_training_figures_draw():
    R, S = 4, 2
    dist = {"a": {"blue": np.full((S, R), 0.5), "red": np.full((S, R), 0.8)}}
    fig = iclgd.plot.training_dists(np.arange(R), dist, np.ones((S, 10)), {"floor": 0.5}, loss_at=1)
    assert len([a for a in fig.axes if a.get_visible()]) == 2
    with pytest.raises(ValueError, match="must be"):
        iclgd.plot.training_dists(np.arange(R + 1), dist, np.ones((S, 10)), loss_at=0)
    with pytest.raises(ValueError, match="loss_at"):
        iclgd.plot.training_dists(np.arange(R), dist, np.ones((S, 10)), loss_at=3)
    fig = iclgd.plot.weight_heatmaps({"A": np.eye(3), "B": -np.eye(3)}, ncols=2)
    assert len(fig.axes) >= 2
    with pytest.raises(ValueError, match="at least one"):
        iclgd.plot.weight_heatmaps({})


def test_gd_baselines_figure():
    ks = [1, 2, 3]
    fig = iclgd.plot.pgd.gd_baselines(
        ks, {"a": [1.0, 0.5, 0.2], "b": [2.0, 1.5, 1.0]}, {"t": np.ones((3, 2))}, floor_label="a"
    )
    assert len(fig.axes) == 2
    with pytest.raises(ValueError, match="at least one"):
        iclgd.plot.pgd.gd_baselines(ks, {})
    with pytest.raises(ValueError, match="rows"):
        iclgd.plot.pgd.gd_baselines(ks, {"a": [1.0, 2.0]})
    with pytest.raises(ValueError, match="floor_label"):
        iclgd.plot.pgd.gd_baselines(ks, {"a": [1.0, 2.0, 3.0]}, floor_label="b")


def test_multilayer_scalars_trained_and_unconstrained_apart():
    Ls, a = [1, 2], [np.array([-0.8]), np.array([-1.5, -0.4])]
    fig = iclgd.plot.multilayer_scalars(
        Ls, [1.1, 0.4], a, [np.nan, 0.4], 5, 20, risks_unconstrained=[1.1, np.nan]
    )
    labels = [ln.get_label() for ln in fig.axes[0].get_lines()]
    assert labels == [
        "exact optimum on $S$",
        "exact optimum, unconstrained $A_l$",
        "trained, unconstrained $A_l$",
    ]
    trained = fig.axes[0].get_lines()[2].get_ydata()
    assert np.isnan(trained[0]) and trained[1] == 0.4  # no trained marker where none was trained
    plt.close(fig)
    plt.close(iclgd.plot.multilayer_scalars(Ls, [1.1, 0.4], a, [np.nan, 0.4], 5, 20))
    with pytest.raises(ValueError, match="risks_unconstrained must have the shape of Ls"):
        iclgd.plot.multilayer_scalars(Ls, [1.1, 0.4], a, [1.0, 0.4], 5, 20, risks_unconstrained=[1])


def test_retina_inline_only_under_ipython():
    """Outside IPython nothing changes; in a shell, a figure's PNG has twice the pixels of its
    display width (which its metadata carries)."""
    import base64

    from IPython.core.interactiveshell import InteractiveShell

    assert plot.retina_inline() is False
    shell = InteractiveShell.instance()
    try:
        assert plot.retina_inline() is True
        with plot.style():
            fig, ax = plt.subplots(figsize=(4, 2))
            ax.plot([0, 1], [0, 1])
        data, meta = shell.display_formatter.format(fig)
        png = data["image/png"]
        raw = png if isinstance(png, bytes) else base64.b64decode(png)
        width_px = int.from_bytes(raw[16:20], "big")  # the PNG header's IHDR width
        assert abs(meta["image/png"]["width"] * 2 - width_px) <= 1  # (odd widths round down)
        plt.close(fig)
    finally:
        InteractiveShell.clear_instance()

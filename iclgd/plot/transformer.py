"""Figures of Part II's deeper-transformer chapter (``book/part2/deep``): Fig. 2(b), training and
inference losses of the 4-layer transformer, and Fig. 5, the number of heads under a budget."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure

from .core import _as_array, _finish, _new_figure, _nonempty, _same_len, log_ticks, smooth, style

__all__ = ["deep_losses", "heads_budget"]


def _positive(name: str, x: np.ndarray) -> None:
    if np.any(~np.isfinite(x)) or np.any(x <= 0):
        raise ValueError(f"{name} must be finite and positive (it is drawn on a log scale)")


def deep_losses(
    train,
    record_steps,
    inference: Mapping[str, np.ndarray],
    lines: Mapping[str, float],
    window: int = 10,
) -> Figure:
    """Fig. 2(b): the training loss (moving average over ``window`` steps) and the inference losses
    ``(1/K) ||y_hat - y_star||^2`` at the recorded steps, with horizontal reference lines (log
    scale).

    Args:
        train: ``(T,)`` training loss at each step.
        record_steps: ``(R,)`` steps at which the inference losses were recorded.
        inference: label -> ``(R,)`` inference loss.
        lines: label -> value of a reference line (e.g. ``L*``, a baseline).
        window: moving-average window of the training loss, ``>= 1``.
    """
    _nonempty(inference=inference)
    train, record_steps = _as_array("train", train), _as_array("record_steps", record_steps)
    if not inference:
        raise ValueError("inference must be a non-empty mapping label -> (R,) losses")
    _positive("train", train)
    curves = {k: _as_array(f"inference[{k!r}]", c) for k, c in inference.items()}
    for k, c in curves.items():
        _same_len(record_steps=record_steps, **{"inference": c})
        _positive(f"inference[{k!r}]", c)
    _positive("lines", np.array([float(x) for x in lines.values()] or [1.0]))
    values, at = smooth(train, window)
    with style():
        fig = _new_figure(7.0, 3.8)
        ax = fig.subplots()
        ax.semilogy(at, values, color="k", label="training loss (eq. 9)")
        for i, (label, c) in enumerate(curves.items()):
            ax.semilogy(record_steps, c, "o-", ms=3.5, color=f"C{i}", label=label)
        for j, (label, val) in enumerate(lines.items()):
            ax.axhline(float(val), color=f"C{j + len(curves)}", ls="--", lw=1.1, label=label)
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        log_ticks(ax)
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _finish(fig)


def heads_budget(
    final: Mapping[str, Mapping[int, float]],
    curves: Mapping[int, np.ndarray],
    cut: Mapping[int, int] | None = None,
    window: int = 10,
) -> Figure:
    """Fig. 5: (a) final losses against the number of heads ``H``; (b) the training loss curves
    (moving average over ``window`` steps), each cut where a wall-clock budget ends if ``cut`` is
    given (the rest of the curve dotted).

    Args:
        final: label -> (``H`` -> final loss), e.g. training, in-domain and out-of-domain.
        curves: ``H`` -> ``(T,)`` training loss at each step.
        cut: optional ``H`` -> the number of steps that ``H`` completes within the budget.
        window: moving-average window, ``>= 1``.
    """
    _nonempty(final=final, curves=curves)
    if not final or not curves:
        raise ValueError("final and curves must be non-empty mappings")
    with style():
        fig = _new_figure(8.0, 3.6)
        ax1, ax2 = fig.subplots(1, 2)
        for i, (label, by_h) in enumerate(final.items()):
            hs = sorted(by_h)
            vals = np.array([float(by_h[h]) for h in hs])
            _positive(f"final[{label!r}]", vals)
            ax1.loglog(hs, vals, "o-", color=f"C{i}", label=label)
        ax1.set_xticks(sorted(curves), [str(h) for h in sorted(curves)])
        ax1.minorticks_off()
        log_ticks(ax1)
        ax1.set_xlabel("number of heads H")
        ax1.set_ylabel("final loss")
        ax1.set_title("(a) final losses against H")
        ax1.legend(fontsize=8.5)
        for i, (H, loss) in enumerate(curves.items()):
            loss = _as_array(f"curves[{H}]", loss)
            _positive(f"curves[{H}]", loss)
            values, at = smooth(loss, window)
            end = len(at) if cut is None else int(np.searchsorted(at, cut[H], side="right"))
            ax2.semilogy(at[:end], values[:end], color=f"C{i}", label=f"H={H}")
            if end < len(at):
                ax2.semilogy(at[end - 1 :], values[end - 1 :], color=f"C{i}", ls=":", lw=1)
        log_ticks(ax2)
        ax2.set_xlabel("step")
        ax2.set_ylabel("training loss")
        ax2.set_title("(b) training loss" + ("" if cut is None else ", solid within the budget"))
        ax2.legend(fontsize=8.5)
    return _finish(fig)

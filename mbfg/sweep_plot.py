"""Figures of a sweep (:mod:`mbfg.sweep`): seed 001 Figure 4 and the cross-validation heat map.

matplotlib is an optional dependency (``pip install 'mbfg[plot]'``), loaded by :func:`mbfg.plots.pyplot`.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from mbfg.plots import pyplot, save

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot(result: Any, path: str | os.PathLike[str] | None = None) -> Figure:
    """One figure: per free parameter its identified value (with +-1 std bars) against the state error weight
    w, the cost per time-step against w (both log-scaled; one line per recording, h and eps, as seed 001
    Figure 4), and the cross-validation matrix as a heat map of log10(score). Returns the figure; saves it
    to ``path`` if given."""
    plt = pyplot("plotting a sweep")
    cal = result.calibrations
    ok = cal[cal["status"] == "ok"]
    names = [c[len("value:"):] for c in cal.columns if c.startswith("value:")]
    panels = len(names) + 2
    cols = min(3, panels)
    rows = math.ceil(panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    axes = axes.ravel()
    groups = list(ok.groupby(["log", "h", "eps"], dropna=False))
    for ax, name in zip(axes, names):
        for (log, h, eps), g in groups:
            g = g.sort_values("weight")
            ax.errorbar(g["weight"], g[f"value:{name}"], yerr=g[f"std:{name}"].fillna(0.0), marker="o",
                        capsize=2, label=_label(log, h, eps))
        ax.set_xscale("log")
        ax.set_xlabel("state error weight w")
        ax.set_title(name)
    ax = axes[len(names)]
    for (log, h, eps), g in groups:
        g = g.sort_values("weight")
        ax.plot(g["weight"], g["cost"], marker="o", label=_label(log, h, eps))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("state error weight w")
    ax.set_title("cost per time-step")
    if groups:
        ax.legend(fontsize="x-small")
    ax = axes[len(names) + 1]
    matrix = result.matrix()
    if matrix.size:
        data = np.log10(matrix.to_numpy(dtype=float))
        image = ax.imshow(data, aspect="auto", cmap="viridis")
        ax.set_xticks(range(matrix.shape[1]), [_short(c) for c in matrix.columns], rotation=45, ha="right",
                      fontsize="x-small")
        ax.set_yticks(range(matrix.shape[0]), [_label(i[0], i[1], i[3]) + f" w={i[2]:g}" for i in matrix.index],
                      fontsize="x-small")
        fig.colorbar(image, ax=ax, label="log10 score (diagonal: own cost)")
    ax.set_title("cross-validation")
    for ax in axes[panels:]:
        ax.set_visible(False)
    fig.tight_layout()
    save(fig, path)
    return fig


def _short(log: str) -> str:
    return os.path.basename(str(log))


def _label(log: str, h: float, eps: float) -> str:
    text = f"{_short(log)} h={float(h):g}"
    return text if math.isnan(float(eps)) else f"{text} eps={float(eps):g}"

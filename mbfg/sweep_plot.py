"""Figures of a sweep (:mod:`mbfg.sweep`): Marklund et al. (2025) Figures 4 and 6 and the cross-validation heat map.

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


#: The method parameters a sweep varies, with their axis labels: Marklund et al.'s (2025) Figure 4 plots the
#: identified parameters and the cost against w and against eps, its Figure 6 against h and eps.
METHOD_AXES = (("weight", "state error weight w"), ("eps", "global compliance eps"), ("h", "time-step h [s]"))


def plot(result: Any, path: str | os.PathLike[str] | None = None) -> Figure:
    """One figure: for each method parameter the sweep varies (w, eps, h; w alone if none varies), per
    free parameter its identified value (with +-1 std bars) and the cost per time-step against it, one
    line per recording and setting of the other method parameters (log-scaled; Marklund et al. (2025) Figures 4 and 6),
    then the cross-validation matrix as a heat map of log10(score). Returns the figure; saves it to
    ``path`` if given. Axes in that order: parameters then cost, per method parameter; the heat map last."""
    plt = pyplot("plotting a sweep")
    cal = result.calibrations
    ok = cal[cal["status"] == "ok"]
    names = [c[len("value:"):] for c in cal.columns if c.startswith("value:")]
    swept = [axis for axis in METHOD_AXES if ok[axis[0]].nunique(dropna=True) > 1] or [METHOD_AXES[0]]
    panels = len(swept) * (len(names) + 1) + 1
    cols = min(3, panels)
    rows = math.ceil(panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    flat = iter(axes.ravel())
    for column, label in swept:
        others = [c for c in ("log", "h", "weight", "eps") if c != column]
        groups = list(ok.groupby(others, dropna=False))
        for name in [*names, None]:
            ax = next(flat)
            for key, g in groups:
                g = g.sort_values(column)
                line = _label(**dict(zip(others, key)))
                if name is None:
                    ax.plot(g[column], g["cost"], marker="o", label=line)
                else:
                    ax.errorbar(g[column], g[f"value:{name}"], yerr=g[f"std:{name}"].fillna(0.0), marker="o",
                                capsize=2, label=line)
            ax.set_xscale("log")
            ax.set_xlabel(label)
            if name is None:
                ax.set_yscale("log")
                ax.set_title("cost per time-step")
                if groups:
                    ax.legend(fontsize="x-small")
            else:
                ax.set_title(name)
    ax = next(flat)
    matrix = result.matrix()
    if matrix.size:
        data = np.log10(matrix.to_numpy(dtype=float))
        image = ax.imshow(data, aspect="auto", cmap="viridis")
        ax.set_xticks(range(matrix.shape[1]), [_short(c) for c in matrix.columns], rotation=45, ha="right",
                      fontsize="x-small")
        ax.set_yticks(range(matrix.shape[0]), [_label(i[0], i[1], i[2], i[3]) for i in matrix.index],
                      fontsize="x-small")
        fig.colorbar(image, ax=ax, label="log10 score (diagonal: own cost)")
    ax.set_title("cross-validation")
    for ax in flat:
        ax.set_visible(False)
    fig.tight_layout()
    save(fig, path)
    return fig


def _short(log: str) -> str:
    return os.path.basename(str(log))


def _label(log: str, h: float | None = None, weight: float | None = None, eps: float | None = None) -> str:
    """A line's or row's name: the recording and the method parameters given (eps NaN: the model's own)."""
    text = _short(log)
    for name, value in (("h", h), ("w", weight), ("eps", eps)):
        if value is not None and not math.isnan(float(value)):
            text += f" {name}={float(value):g}"
    return text

"""The demo's summary figure: truth vs recovered w, error, status and one spectrum."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure

from .scene import Scene

__all__ = [
    "FIGURE_DPI",
    "RecoveredMaps",
    "abundance_figure",
    "demo_figure",
    "plot_abundance_figure",
    "plot_demo_figure",
]


@dataclass(frozen=True)
class RecoveredMaps:
    """What one solver recovered from the demo cube.

    Attributes:
        solver: solver name (``"jax"`` or ``"numba"``).
        w: recovered single-scattering albedo, shape ``(rows, cols, bands)``.
        status: solver status codes (``lumaxlike.Status`` values), shape
            ``(rows, cols, bands)``.
    """

    solver: str
    w: np.ndarray
    status: np.ndarray


def plot_demo_figure(
    path,
    scene: Scene,
    recovered: list[RecoveredMaps],
    status_names: Mapping[int, str],
    band: int,
    pixel: tuple[int, int],
) -> Path:
    """Save a 2 x 3 panel PNG summarising the demo.

    Panels: true w and the first solver's recovered w at ``band``, its absolute error,
    its status map, the DTM, and true vs recovered w spectra (every solver) at ``pixel``.
    Drawn on a bare `matplotlib.figure.Figure` with the Agg canvas: no pyplot,
    no global backend change.

    Args:
        path: output PNG file.
        scene: the demo scene (truth, DTM, wavelengths).
        recovered: one entry per solver, at least one.
        status_names: name of each status code, for the status legend.
        band: index of the band shown in the maps.
        pixel: ``(row, col)`` of the pixel whose spectrum is plotted.

    Returns:
        The path written.
    """
    fig = demo_figure(scene, recovered, status_names, band, pixel)
    path = Path(path)
    fig.savefig(path, dpi=FIGURE_DPI, format="png")
    return path


def demo_figure(
    scene: Scene,
    recovered: list[RecoveredMaps],
    status_names: Mapping[int, str],
    band: int,
    pixel: tuple[int, int],
) -> Figure:
    """`plot_demo_figure`'s figure, not saved (its arguments but ``path``)."""
    if not recovered:
        raise ValueError("need at least one solver's recovered maps")
    first = recovered[0]
    size = scene.config.size
    extent_m = (0.0, size * scene.config.pixel_size_m, 0.0, size * scene.config.pixel_size_m)
    wavelength = scene.wavelength_nm[band]
    row, col = pixel
    marker_xy = (
        (col + 0.5) * scene.config.pixel_size_m,
        (size - row - 0.5) * scene.config.pixel_size_m,
    )

    fig = Figure(figsize=(16.0, 9.5), layout="constrained")
    axes = fig.subplots(2, 3)

    def show_map(ax, image, title, colorbar_label, **kwargs):
        mappable = ax.imshow(image, extent=extent_m, origin="upper", **kwargs)
        ax.set_title(title)
        ax.set_xlabel("east [m]")
        ax.set_ylabel("north [m]")
        ax.plot(*marker_xy, marker="+", color="red", markersize=12, markeredgewidth=2)
        return fig.colorbar(mappable, ax=ax, label=colorbar_label, format=_colorbar_format(image))

    w_range = {"vmin": float(scene.w[..., band].min()), "vmax": float(scene.w[..., band].max())}
    show_map(
        axes[0, 0],
        scene.w[..., band],
        f"true w at {wavelength:.0f} nm",
        "w [-]",
        cmap="viridis",
        **w_range,
    )
    show_map(
        axes[0, 1],
        first.w[..., band],
        f"recovered w at {wavelength:.0f} nm ({first.solver})",
        "w [-]",
        cmap="viridis",
        **w_range,
    )
    error = np.abs(first.w[..., band] - scene.w[..., band])
    show_map(
        axes[0, 2],
        error,
        f"|recovered - true| w at {wavelength:.0f} nm ({first.solver})",
        "|w error| [-]",
        cmap="magma",
        vmin=0.0,
    )

    codes, status_index, status_style = _status_map(first.status, status_names, band)
    colorbar = show_map(
        axes[1, 0],
        status_index,
        f"solver status at {wavelength:.0f} nm ({first.solver})",
        "",
        interpolation="nearest",
        **status_style,
    )
    colorbar.set_ticks(np.arange(len(codes)), labels=[status_names[code] for code in codes])

    show_map(axes[1, 1], scene.dtm, "terrain (DTM)", "height [m]", cmap="terrain")

    ax = axes[1, 2]
    ax.plot(scene.wavelength_nm, scene.w[row, col], color="black", linewidth=2.5, label="true")
    for maps, style in zip(recovered, ("o", "x", "s", "^")):
        ax.plot(
            scene.wavelength_nm,
            maps.w[row, col],
            linestyle="none",
            marker=style,
            markerfacecolor="none",
            label=f"recovered ({maps.solver})",
        )
    ax.axvline(wavelength, color="grey", linestyle=":", linewidth=1)
    ax.set_title(f"spectrum at row {row}, column {col} (red +)")
    ax.set_xlabel("wavelength [nm]")
    ax.set_ylabel("single-scattering albedo w [-]")
    ax.legend()

    fig.suptitle(
        "lumaxlike demo: Hapke AMSA inversion of a synthetic scene "
        "mixed from USGS splib07 mineral spectra"
    )
    return fig


def _status_map(status, status_names: Mapping[int, str], band: int):
    """(the status codes on ``band``'s map, the map as indices into them, its cmap and
    norm): only the statuses that occur, each in its own colour whichever others do.

    Raises:
        ValueError: a status code (on any band) that ``status_names`` does not name.
    """
    unknown = set(np.unique(status).tolist()) - set(status_names)
    if unknown:
        raise ValueError(f"status codes {sorted(unknown)} have no name in status_names")
    codes = np.unique(status[..., band]).tolist()
    order = sorted(status_names)
    cmap = ListedColormap(
        [_STATUS_COLORS[order.index(code) % len(_STATUS_COLORS)] for code in codes]
    )
    norm = BoundaryNorm(np.arange(len(codes) + 1) - 0.5, len(codes))
    return codes, np.searchsorted(codes, status[..., band]), {"cmap": cmap, "norm": norm}


#: resolution of the demo's PNG figures [dots per inch]
FIGURE_DPI = 150


def _colorbar_format(image) -> str | None:
    """A colorbar tick format for ``image``'s values: each tick written in full
    (``1.0e-10``) when they are tiny, never as a shared offset text over the colorbar
    (which collides with the panel's title); None (matplotlib's own) otherwise."""
    finite = np.abs(np.asarray(image, dtype=np.float64))
    finite = finite[np.isfinite(finite)]
    top = float(finite.max()) if finite.size else 0.0
    return "%.1e" if 0.0 < top < 1e-2 else None


_STATUS_COLORS = (
    "#2ca02c",
    "#d62728",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#1f77b4",
)


def plot_abundance_figure(path, scene: Scene, fractions: np.ndarray, label: str) -> Path:
    """Save a PNG of true vs recovered mass fractions and their error, one column per mineral.

    Args:
        path: output PNG file.
        scene: the demo scene (true mass fractions ``scene.abundance``).
        fractions: recovered mass fractions, shape ``(rows, cols, minerals)`` (NaN where
            unsolved).
        label: how they were recovered (e.g. ``"unmix two_step, numba"``), for the titles.

    Returns:
        The path written.
    """
    fig = abundance_figure(scene, fractions, label)
    path = Path(path)
    fig.savefig(path, dpi=FIGURE_DPI, format="png")
    return path


def abundance_figure(scene: Scene, fractions: np.ndarray, label: str) -> Figure:
    """`plot_abundance_figure`'s figure, not saved (its arguments but ``path``)."""
    fractions = np.asarray(fractions)
    if fractions.shape != scene.abundance.shape:
        raise ValueError(
            f"fractions must have the shape of scene.abundance {scene.abundance.shape}, "
            f"got {fractions.shape}"
        )
    size = scene.config.size * scene.config.pixel_size_m
    minerals = len(scene.mineral_names)
    fig = Figure(figsize=(3.6 * minerals, 10.0), layout="constrained")
    axes = fig.subplots(3, minerals, squeeze=False, sharex=True, sharey=True)
    error = np.abs(fractions - scene.abundance)
    top = float(np.nanmax(error)) if np.any(np.isfinite(error)) else 1.0
    for j, name in enumerate(scene.mineral_names):
        for row, (image, title, cmap, vmax) in enumerate(
            (
                (scene.abundance[..., j], f"{name}: true", "viridis", 1.0),
                (fractions[..., j], f"{name}: recovered", "viridis", 1.0),
                (error[..., j], f"{name}: |recovered - true|", "magma", top),
            )
        ):
            ax = axes[row, j]
            mappable = ax.imshow(
                image, extent=(0.0, size, 0.0, size), origin="upper", cmap=cmap, vmin=0.0, vmax=vmax
            )
            ax.set_title(title, fontsize="medium")
            if row == 2:
                ax.set_xlabel("east [m]")
            if j == 0:
                ax.set_ylabel("north [m]")
            fig.colorbar(
                mappable,
                ax=ax,
                label="mass fraction [-]" if row < 2 else "error [-]",
                shrink=0.8,
                format=_colorbar_format(image if row == 2 else np.array([vmax])),
            )
    fig.suptitle(
        f"lumaxlike demo: mineral mass fractions of the intimate mixture, true vs recovered ({label})"
    )
    return fig

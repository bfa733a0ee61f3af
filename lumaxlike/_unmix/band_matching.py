"""Which band of the data is which band of the endmembers: matched by wavelength.

Shared by `unmix` (``wavelengths=``), `unmix_file` (the cube's wavelengths) and
`unmix_dataarray` (the ``wavelength`` coordinate): wherever both the data and the
`Endmembers` carry band centres, the bands are matched by them, never by position alone.
"""

from __future__ import annotations

import numpy as np

__all__ = ["RELATIVE_TOLERANCE", "band_order", "endmembers_on_bands"]

#: Band centres agree when they differ by at most this fraction (float32 storage and a
#: nm -> um conversion round at ~1e-7; real band spacings are ~1e-3 of the centre).
RELATIVE_TOLERANCE = 1e-6


def band_order(wavelengths_um, endmembers, what: str = "refl") -> np.ndarray | None:
    """Indices of the data's bands in the endmembers' band order, or None (nothing to match).

    Args:
        wavelengths_um: the data's band centres [um], shape (bands,), or None.
        endmembers: `Endmembers`; its ``wavelengths`` [um] may be None.
        what: the data, for messages (a file name, ``"refl"``).
    Returns:
        None when either side has no wavelengths (the bands are taken in order); else an
        int array ``order`` with ``data[..., order]`` on the endmembers' bands (the
        identity when they are in the same order).
    Raises:
        ValueError: naming `what`, when the band centres are not the endmembers' (other
            values, or another count), with the first band that differs.
    """
    if wavelengths_um is None or endmembers.wavelengths is None:
        return None
    data = np.asarray(wavelengths_um, np.float64).reshape(-1)
    library = np.asarray(endmembers.wavelengths, np.float64)
    if data.size == library.size and np.all(np.isfinite(data)):
        order = np.argsort(data, kind="stable")[
            np.argsort(np.argsort(library, kind="stable"), kind="stable")
        ]
        if np.unique(data).size == data.size and np.allclose(
            data[order], library, rtol=RELATIVE_TOLERANCE, atol=0
        ):
            return order
    sorted_data, sorted_library = np.sort(data), np.sort(library)
    common = min(data.size, library.size)
    close = np.isclose(
        sorted_data[:common], sorted_library[:common], rtol=RELATIVE_TOLERANCE, atol=0
    )
    differing = int(np.argmin(close)) if not close.all() else common
    first = (
        f"first differing band (sorted): {what} {_um(sorted_data, differing)}, endmembers "
        f"{_um(sorted_library, differing)}"
    )
    raise ValueError(
        f"{what}'s {data.size} band centres ({_span(data)}) are not the endmembers' {library.size} "
        f"({_span(library)}); {first}. Resample the library onto {what}'s bands "
        "(Endmembers.from_library(..., wavelengths=...))"
    )


def _um(values, k):
    return f"{values[k]:.6g} um" if k < values.size else "none"


def _span(values):
    return f"{np.nanmin(values):.6g}-{np.nanmax(values):.6g} um" if values.size else "none"


def endmembers_on_bands(endmembers, band_indices, file_bands: int, wavelengths_um, what: str):
    """The endmembers on the bands a run solves: ``band_indices`` of the file's
    ``file_bands`` bands (bad or thermal bands left out).

    Args:
        endmembers: `Endmembers` on the file's bands (matched by wavelength where both give
            them, as `band_order`), or already on the solved bands only.
        band_indices: 0-based indices of the solved bands among the file's, increasing.
        file_bands: the file's band count.
        wavelengths_um: the file's band centres [um], shape (file_bands,), or None.
        what: the data, for messages.

    Returns:
        `Endmembers` with one band per solved band, in the file's band order (their
        spectra, wavelengths and per-band phase functions cut to those bands); the
        given endmembers when nothing is left out or they are on the solved bands.

    Raises:
        ValueError: naming `what`, when the endmembers have neither band count, or their
            band centres are not the file's.
    """
    import dataclasses

    kept = np.asarray(band_indices, dtype=np.int64)
    if kept.size == file_bands:
        return endmembers
    if endmembers.n_bands == kept.size:
        return endmembers
    if endmembers.n_bands != file_bands:
        raise ValueError(
            f"{what} has {file_bands} bands ({kept.size} solved: bad or thermal bands left "
            f"out), the endmembers {endmembers.n_bands}: give endmembers on its bands"
        )
    order = band_order(wavelengths_um, endmembers, what)  # endmember band j is data order[j]
    select = kept if order is None else np.argsort(order)[kept]
    phase = endmembers.phase
    if isinstance(phase, np.ndarray) and phase.shape[1] > 1:  # per-band phase functions
        phase = phase[:, select]
    optical = endmembers.optical
    if optical is not None:  # optical constants on the bands (`optical_on_bands`)
        from .optical_endmembers import optical_on_bands

        optical = optical_on_bands(optical, select)
    return dataclasses.replace(
        endmembers,
        optical=optical,
        albedo=endmembers.albedo[:, select],
        wavelengths=None if endmembers.wavelengths is None else endmembers.wavelengths[select],
        phase=phase,
    )

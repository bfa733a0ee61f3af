"""The demo's endmember library file: its minerals' laboratory spectra as a CSV."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._geometry import geometry_from_angles
from .._model.forward import amsa
from .forward import demo_hapke_params
from .scene import Scene

__all__ = ["LIBRARY_GEOMETRY_DEG", "library_record", "write_mineral_library"]

#: The library's measurement geometry: incidence, emission, azimuth [deg] (a common
#: laboratory bidirectional geometry).
LIBRARY_GEOMETRY_DEG = (30.0, 0.0, 0.0)


def write_mineral_library(path, scene: Scene) -> Path:
    """Write the scene's minerals as a spectral library CSV (``lumaxlike.read_spectral_library``).

    The spectra are the reflectance factor REFF = pi r / cos i [-] each mineral's true w
    spectrum gives (the demo's Hapke parameters) at `LIBRARY_GEOMETRY_DEG`, sampled at
    the cube's band centres, plus one sample 10 nm beyond each end repeating the end
    band's value (a library must cover the bands' responses): a column
    ``wavelength (nm)``, one column per mineral.

    Returns:
        The path written.
    """
    incidence, emission, azimuth = np.radians(LIBRARY_GEOMETRY_DEG)
    geometry = geometry_from_angles(incidence, emission, azimuth)
    r = np.asarray(
        amsa(scene.endmember_w, *geometry, demo_hapke_params(), backend="numba"), np.float64
    )
    reff = np.pi * r / np.cos(incidence)
    lines = [
        "# lumaxlike demo: reflectance factor of the demo's minerals (true w spectra from USGS splib07,",
        f"# the demo's Hapke parameters), incidence {LIBRARY_GEOMETRY_DEG[0]:g} deg, emission "
        f"{LIBRARY_GEOMETRY_DEG[1]:g} deg, azimuth {LIBRARY_GEOMETRY_DEG[2]:g} deg",
        "wavelength (nm)," + ",".join(scene.mineral_names),
    ]
    wavelength_nm = np.concatenate(
        [[scene.wavelength_nm[0] - 10.0], scene.wavelength_nm, [scene.wavelength_nm[-1] + 10.0]]
    )
    reff = np.concatenate([reff[:, :1], reff, reff[:, -1:]], axis=1)
    for band, wavelength in enumerate(wavelength_nm):
        lines.append(f"{float(wavelength)!r}," + ",".join(repr(float(v)) for v in reff[:, band]))
    path = Path(path)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def library_record(path, wavelengths_um, *, fwhm_um: float) -> dict:
    """How the demo's endmembers were made, as ``lumaxlike unmix`` records it
    (``library`` of `lumaxlike.unmix_file`, the ``lumaxlike_unmix_library`` key): what
    its options ``--endmembers PATH --library-incidence 30 --library-emission 0
    --fwhm FWHM_UM`` give, so that ``lumaxlike unmix CUBE --params-from OUT`` reruns the
    unmixing.

    Args:
        path: the library file `write_mineral_library` wrote (recorded absolute).
        wavelengths_um: the cube's band centres the library was resampled to [um],
            shape ``(bands,)``.
        fwhm_um: the band width the library was resampled with [um].

    Returns:
        The JSON-able record.
    """
    incidence, emission, azimuth = LIBRARY_GEOMETRY_DEG
    return {
        "files": [str(Path(path).absolute())],
        "format": None,
        "units": "reff",
        "incidence_deg": [float(f"{incidence:g}")],
        "emission_deg": [float(f"{emission:g}")],
        "azimuth_deg": [float(f"{azimuth:g}")],
        "wavelengths_given_um": None,
        "fwhm_um": [float(fwhm_um)],
        "wavelengths_um": [float(v) for v in np.asarray(wavelengths_um).ravel()],
    }

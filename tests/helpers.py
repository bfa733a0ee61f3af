"""Shared test helpers: the solvers every inversion test runs over, random geometries."""

import numpy as np

import lumaxlike

SOLVERS = ("jax", "numba")
BACKENDS = ("jax", "numba")

FULL_PARAMS = lumaxlike.HapkeParams(
    b=0.21, c=0.45, roughness=np.radians(20.0), hs=0.06, bs0=1.0, hc=0.05, bc0=0.5
)


def random_geometry(n_pixels, rng, max_incidence_deg=80.0, max_emission_deg=70.0, max_tilt_deg=30.0):
    """Random (incidence, emission, normal) vectors, each (n_pixels, 3).

    Directions are drawn on a flat reference frame (incidence 0-80 deg, emission 0-70 deg,
    any azimuth), then the surface normal is tilted by up to `max_tilt_deg`; pixels whose
    source or observer ends below the tilted local horizon are invalid geometry.
    """
    inc = np.radians(rng.uniform(0, max_incidence_deg, n_pixels))
    emi = np.radians(rng.uniform(0, max_emission_deg, n_pixels))
    az = rng.uniform(0, 2 * np.pi, n_pixels)
    to_source = lumaxlike.direction_from_zenith_azimuth(inc, np.zeros(n_pixels))
    to_observer = lumaxlike.direction_from_zenith_azimuth(emi, az)
    tilt = np.radians(rng.uniform(0, max_tilt_deg, n_pixels))
    normal = lumaxlike.direction_from_zenith_azimuth(tilt, rng.uniform(0, 2 * np.pi, n_pixels))
    return to_source, to_observer, normal

"""The forward model's forms, backends, precisions and argument checks."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lumaxlike
from lumaxlike._model import jax_model

from .helpers import BACKENDS, FULL_PARAMS, random_geometry

# XLA compiles the same per-element code differently for different batch shapes (fusion,
# vectorised loop bodies vs remainders), so results of different *shapes* may differ in
# the last bit: measured 5.5e-16 relative. The same flat shape is bitwise identical.
ACROSS_SHAPES_RTOL = 4e-15


def _valid(source, observer, normal):
    normal = normal / np.linalg.norm(normal, axis=-1, keepdims=True)
    cos_i = np.sum(source * normal, -1) / np.linalg.norm(source, axis=-1)
    cos_e = np.sum(observer * normal, -1) / np.linalg.norm(observer, axis=-1)
    return cos_i, cos_e, (cos_i > 0) & (cos_e > 0)


@functools.cache
def _random_problem(n_pixels=600, n_bands=7, seed=3):
    rng = np.random.default_rng(seed)
    geometry = random_geometry(n_pixels, rng)
    w = rng.uniform(1e-4, 0.9999, (n_pixels, n_bands))
    return w, geometry


# ---------------------------------------------------------------------------------------
# Forms


def test_forms_agree():
    """amsa_scalar, amsa_spectrum, amsa_vector, amsa_image and the public amsa compute the
    same numbers: bitwise where the flat shape is the same, else to the last bit or so."""
    rows, cols, bands = 3, 4, 5
    rng = np.random.default_rng(1)
    source, observer, normal = (a.reshape(rows, cols, 3) for a in random_geometry(rows * cols, rng))
    w = rng.uniform(0.01, 0.99, (rows, cols, bands))
    params = FULL_PARAMS

    public = np.asarray(lumaxlike.amsa(w, source, observer, normal, params))
    flat = [a.reshape(rows * cols, -1) for a in (w, source, observer, normal)]
    vector = np.asarray(jax.jit(jax_model.amsa_vector)(*flat, params)).reshape(rows, cols, bands)
    image_flat = np.asarray(jax.jit(jax_model.amsa_image)(*(a[None] for a in flat), params))
    np.testing.assert_array_equal(public, vector)
    np.testing.assert_array_equal(image_flat.reshape(rows, cols, bands), vector)

    image = np.asarray(jax.jit(jax_model.amsa_image)(w, source, observer, normal, params))
    spectrum_fn = jax.jit(jax_model.amsa_spectrum)
    scalar_fn = jax.jit(jax_model.amsa_scalar)
    spectra = np.empty_like(w)
    scalars = np.empty_like(w)
    for r in range(rows):
        for c in range(cols):
            geometry = (source[r, c], observer[r, c], normal[r, c])
            spectra[r, c] = spectrum_fn(w[r, c], *geometry, params)
            for k in range(bands):
                scalars[r, c, k] = scalar_fn(w[r, c, k], *geometry, params)
    assert np.isnan(public).any() and not np.isnan(public).all()  # both kinds of pixel
    for other in (image, spectra, scalars):
        np.testing.assert_array_equal(np.isnan(other), np.isnan(public))
        np.testing.assert_allclose(other, public, rtol=ACROSS_SHAPES_RTOL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_shapes(backend):
    """w of shape pixels or pixels + (bands,); geometry per pixel or one (3,) for all;
    the result has w's shape and pixel-by-pixel the same values."""
    rng = np.random.default_rng(2)
    source, observer, normal = (
        a.reshape(2, 3, 3) for a in random_geometry(6, rng, max_tilt_deg=0.0)
    )
    w_bands = rng.uniform(0.1, 0.9, (2, 3, 4))
    amsa = functools.partial(lumaxlike.amsa, params=FULL_PARAMS, backend=backend)

    with_bands = np.asarray(amsa(w_bands, source, observer, normal))
    assert with_bands.shape == (2, 3, 4)
    no_bands = np.asarray(amsa(w_bands[..., 1], source, observer, normal))
    assert no_bands.shape == (2, 3)
    np.testing.assert_allclose(no_bands, with_bands[..., 1], rtol=ACROSS_SHAPES_RTOL)

    # one geometry for every pixel: every axis of w is a pixel axis
    shared = np.asarray(amsa(w_bands, source[1, 2], observer[1, 2], normal[1, 2]))
    assert shared.shape == (2, 3, 4)
    one_pixel = np.asarray(amsa(w_bands[1, 2], source[1, 2], observer[1, 2], normal[1, 2]))
    np.testing.assert_allclose(shared[1, 2], one_pixel, rtol=ACROSS_SHAPES_RTOL)
    np.testing.assert_allclose(one_pixel, with_bands[1, 2], rtol=ACROSS_SHAPES_RTOL)

    # a shared (3,) normal broadcasts against per-pixel directions
    mixed = np.asarray(amsa(w_bands, source, observer, np.array([0.0, 0.0, 1.0])))
    np.testing.assert_allclose(mixed, with_bands, rtol=ACROSS_SHAPES_RTOL)


def test_numba_agrees_with_jax():
    """float64, random geometry (some pixels invalid) and w: numba equals JAX to 1e-12
    relative, NaN at exactly the same elements."""
    w, geometry = _random_problem()
    r_jax = np.asarray(lumaxlike.amsa(w, *geometry, FULL_PARAMS, backend="jax"))
    r_numba = lumaxlike.amsa(w, *geometry, FULL_PARAMS, backend="numba")
    assert r_numba.dtype == r_jax.dtype == np.float64
    _, _, valid = _valid(*geometry)
    assert 0 < (~valid).sum() < valid.sum()
    np.testing.assert_array_equal(np.isnan(r_jax), ~valid[:, None] & np.ones_like(w, bool))
    np.testing.assert_array_equal(np.isnan(r_numba), np.isnan(r_jax))
    np.testing.assert_allclose(r_numba, r_jax, rtol=1e-12)


@pytest.mark.parametrize(
    "params",
    [
        lumaxlike.HapkeParams(b=0.3, c=-0.4),
        lumaxlike.HapkeParams(
            b=0.2, c=0.0, legendre=[1.0, 0.5, 0.2, 0.05], roughness=0.4, hs=0.1, bs0=0.8
        ),
    ],
    ids=["smooth", "legendre"],
)
def test_numba_agrees_with_jax_other_params(params):
    w, geometry = _random_problem()
    r_jax = np.asarray(lumaxlike.amsa(w, *geometry, params, backend="jax"))
    r_numba = lumaxlike.amsa(w, *geometry, params, backend="numba")
    np.testing.assert_array_equal(np.isnan(r_numba), np.isnan(r_jax))
    np.testing.assert_allclose(r_numba, r_jax, rtol=1e-12)


# ---------------------------------------------------------------------------------------
# Edge geometry, float32, invalid geometry


def _edge_geometries():
    """(name, source, observer, normal) at the geometries where codes break."""
    cases = []

    def flat(name, incidence, emission, azimuth):
        cases.append((name, *lumaxlike.geometry_from_angles(incidence, emission, azimuth)))

    for incidence in (0.0, 0.3, 1.0, np.radians(85.0)):
        flat(f"zero_phase_i{incidence:.2f}", incidence, incidence, 0.0)  # g = 0
    flat("nadir_incidence", 0.0, 0.6, 1.0)
    flat("nadir_emission", 0.6, 0.0, 1.0)
    flat("nadir_both", 0.0, 0.0, 0.0)
    flat("psi_pi_minus_1e-4", 0.5, 0.6, np.pi - 1e-4)
    flat("psi_pi_minus_1e-4_equal", 0.5, 0.5, np.pi - 1e-4)
    flat("grazing_85_85_psi_pi", np.radians(85.0), np.radians(85.0), np.pi)
    flat("grazing_89_10", np.radians(89.0), np.radians(10.0), 0.3)
    flat("phase_1e-4", 0.5, 0.5 + 1e-4, 0.0)
    # observer exactly opposite in azimuth (psi = 180 deg with exact zero y components)
    for incidence, emission in ((0.5, 0.6), (0.5, 0.5), (1.2, 0.2), (0.2, 1.2)):
        source = np.array([np.sin(incidence), 0.0, np.cos(incidence)])
        observer = np.array([-np.sin(emission), 0.0, np.cos(emission)])
        cases.append(
            (f"psi_pi_exact_{incidence}_{emission}", source, observer, np.array([0.0, 0.0, 1.0]))
        )
    # tilted normal, still valid
    cases.append(
        (
            "tilted_zero_phase",
            np.array([0.2, 0.1, 1.0]),
            np.array([0.2, 0.1, 1.0]),
            np.array([0.3, -0.2, 1.0]),
        )
    )
    return cases


EDGE_W = np.array([1e-6, 0.01, 0.5, 0.9999, 1.0])


def _edge_arrays(dtype):
    cases = _edge_geometries()
    source, observer, normal = (np.array([case[k] for case in cases], dtype) for k in (1, 2, 3))
    w = np.broadcast_to(EDGE_W.astype(dtype), (len(cases), EDGE_W.size)).copy()
    return [case[0] for case in cases], w, source, observer, normal


@pytest.mark.parametrize("backend", BACKENDS)
def test_edge_geometries_float64(backend):
    names, w, *geometry = _edge_arrays(np.float64)
    r = np.asarray(lumaxlike.amsa(w, *geometry, FULL_PARAMS, backend=backend))
    for name, row in zip(names, r):
        assert np.all(np.isfinite(row)) and np.all(row > 0), (name, row)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_edge_geometries(backend):
    """float32 in, float32 out: finite and within 1e-4 relative of float64 (evaluated on the
    same float32-rounded inputs) at g = 0, psi -> 180 deg, w = 0.9999 and w = 1, nadir."""
    names, w32, *geometry32 = _edge_arrays(np.float32)
    r32 = lumaxlike.amsa(w32, *geometry32, FULL_PARAMS, backend=backend)
    assert r32.dtype == np.float32
    r64 = np.asarray(
        lumaxlike.amsa(
            w32.astype(np.float64), *(g.astype(np.float64) for g in geometry32), FULL_PARAMS
        )
    )
    r32 = np.asarray(r32)
    for name, row32, row64 in zip(names, r32, r64):
        assert np.all(np.isfinite(row32)) and np.all(row32 > 0), (name, row32)
        np.testing.assert_allclose(row32, row64, rtol=1e-4, err_msg=name)


def test_float32_random_geometry():
    """float32 on random geometry: NaN exactly where float64 has NaN; elsewhere within 1e-4
    relative where cos i, cos e >= 0.05 (closer to the local horizon, the float32 rounding of
    the dot products alone is ~6e-8 / cos)."""
    w, geometry = _random_problem()
    geometry32 = [g.astype(np.float32) for g in geometry]
    w32 = w.astype(np.float32)
    r32 = np.asarray(lumaxlike.amsa(w32, *geometry32, FULL_PARAMS))
    assert r32.dtype == np.float32
    r64 = np.asarray(
        lumaxlike.amsa(
            w32.astype(np.float64), *(g.astype(np.float64) for g in geometry32), FULL_PARAMS
        )
    )
    np.testing.assert_array_equal(np.isnan(r32), np.isnan(r64))
    assert np.all(np.isfinite(r32[~np.isnan(r64)]))
    cos_i, cos_e, _ = _valid(*(g.astype(np.float64) for g in geometry32))
    safe = (cos_i >= 0.05) & (cos_e >= 0.05)
    np.testing.assert_allclose(r32[safe], r64[safe], rtol=1e-4)


def test_float32_near_nadir():
    """float32 with roughness a little off nadir (i < 1e-3 rad), where sin i comes from
    1 - cos^2 i in float32: within 1e-4 of float64 on the same inputs (measured 4e-5)."""
    rng = np.random.default_rng(9)
    n = 2000
    geometry32 = [
        g.astype(np.float32)
        for g in lumaxlike.geometry_from_angles(
            rng.uniform(0, 1e-3, n), rng.uniform(0, 1.4, n), rng.uniform(0, 2 * np.pi, n)
        )
    ]
    w = rng.uniform(0.01, 1.0, n).astype(np.float32)
    r32 = np.asarray(lumaxlike.amsa(w, *geometry32, FULL_PARAMS))
    r64 = np.asarray(
        lumaxlike.amsa(
            w.astype(np.float64), *(g.astype(np.float64) for g in geometry32), FULL_PARAMS
        )
    )
    assert np.all(np.isfinite(r32))
    np.testing.assert_allclose(r32, r64, rtol=1e-4)


def _principal_plane(n_pixels, seed, azimuth_offset=0.0):
    """Source and observer in the y-z plane on opposite sides of the normal (psi = 180 deg
    exactly, exact zero x components) or rotated off it by `azimuth_offset` [rad]."""
    rng = np.random.default_rng(seed)
    incidence = rng.uniform(0.05, 1.45, n_pixels)
    emission = rng.uniform(0.05, 1.45, n_pixels)
    source = np.stack([np.zeros(n_pixels), np.sin(incidence), np.cos(incidence)], -1)
    observer = np.stack(
        [
            np.sin(emission) * np.sin(azimuth_offset),
            -np.sin(emission) * np.cos(azimuth_offset),
            np.cos(emission),
        ],
        -1,
    )
    return source, observer, np.array([0.0, 0.0, 1.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_opposite_azimuth_is_the_limit(backend):
    """psi = 180 deg exactly (forward scattering in the principal plane, as on goniometers)
    gives the limit of psi -> 180 deg: r(180 deg) vs r(180 deg - 1e-6 rad) within 1e-7
    relative (r has an O(delta) kink there through psi/pi E1: measured 8.5e-9). f(psi) =
    exp(-2 tan(psi/2)) computed as sin/(1 + cos) took 1 + cos psi's rounding noise for 0 and
    was off by up to 1.6 % in r on 1.5 % of such geometries."""
    w = np.full((2000, 2), [0.3, 0.9])
    exact = np.asarray(lumaxlike.amsa(w, *_principal_plane(2000, 7), FULL_PARAMS, backend=backend))
    nearby = np.asarray(
        lumaxlike.amsa(w, *_principal_plane(2000, 7, 1e-6), FULL_PARAMS, backend=backend)
    )
    assert np.all(np.isfinite(exact))
    np.testing.assert_allclose(exact, nearby, rtol=1e-7)


def test_float32_opposite_azimuth():
    """float32 at psi = 180 deg exactly and at 180 deg - 1e-4 rad: finite, within 1e-4 of
    float64 on the same rounded inputs."""
    w = np.full((500, 2), [0.3, 0.9999], np.float32)
    for offset in (0.0, 1e-4):
        geometry32 = [g.astype(np.float32) for g in _principal_plane(500, 8, offset)]
        r32 = np.asarray(lumaxlike.amsa(w, *geometry32, FULL_PARAMS))
        r64 = np.asarray(
            lumaxlike.amsa(
                w.astype(np.float64), *(g.astype(np.float64) for g in geometry32), FULL_PARAMS
            )
        )
        assert r32.dtype == np.float32 and np.all(np.isfinite(r32))
        np.testing.assert_allclose(r32, r64, rtol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_invalid_geometry_is_nan_never_negative(backend, dtype):
    """cos i <= 0 or cos e <= 0 in the local frame of a tilted normal gives NaN; everything
    valid, down to the local horizon, is positive."""
    normal = np.array([np.sin(0.5), 0.0, np.cos(0.5)])  # tilted 0.5 rad toward +x
    horizon = np.array([-np.cos(0.5), 0.0, np.sin(0.5)])  # in the local horizontal plane
    side = np.array([0.0, 1.0, 0.0])
    # directions at elevation a above the local horizon (below it for a < 0 or a > 180 deg),
    # at local azimuths phi
    elevation = np.radians([-10.0, -1e-3, 1e-3, 1.0, 10.0, 45.0, 90.0, 135.0, 170.0, 179.0, 190.0])
    directions = np.concatenate(
        [
            np.cos(elevation)[:, None] * (np.cos(phi) * horizon + np.sin(phi) * side)
            + np.sin(elevation)[:, None] * normal
            for phi in (0.0, 1.0, 2.5)
        ]
    )
    # every pair of (source, observer) directions
    n = len(directions)
    source = np.repeat(directions, n, axis=0).astype(dtype)
    observer = np.tile(directions, (n, 1)).astype(dtype)
    w = np.full((n * n, 3), [0.05, 0.5, 0.99], dtype)
    r = np.asarray(
        lumaxlike.amsa(w, source, observer, normal.astype(dtype), FULL_PARAMS, backend=backend)
    )
    _, _, valid = _valid(source.astype(np.float64), observer.astype(np.float64), normal)
    assert (~valid).sum() > 0 and valid.sum() > 0
    assert np.all(np.isnan(r[~valid])), r[~valid]
    assert not np.any(r < 0)
    assert np.all(np.isfinite(r[valid]) & (r[valid] > 0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_source_on_the_horizon_is_nan(backend):
    """cos i = 0 exactly (source in the local horizontal plane) is invalid: NaN."""
    r = np.asarray(
        lumaxlike.amsa(
            np.array([0.5]),
            np.array([[1.0, 0.0, 0.0]]),
            np.array([[0.0, 0.3, 1.0]]),
            np.array([[0.0, 0.0, 1.0]]),
            FULL_PARAMS,
            backend=backend,
        )
    )
    assert np.isnan(r).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_w_gives_nan(backend):
    source, observer, normal = lumaxlike.geometry_from_angles(0.4, 0.7, 1.0)
    r = np.asarray(
        lumaxlike.amsa(
            np.array([np.nan, 0.5]), source, observer, normal, FULL_PARAMS, backend=backend
        )
    )
    assert np.isnan(r[0]) and np.isfinite(r[1])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_both_backends_return_numpy_in_the_input_dtype(backend, dtype):
    source, observer, normal = (
        g.astype(dtype) for g in lumaxlike.geometry_from_angles(0.4, 0.7, 1.0)
    )
    r = lumaxlike.amsa(
        np.full(3, 0.5, dtype), source, observer, normal, FULL_PARAMS, backend=backend
    )
    assert type(r) is np.ndarray and r.dtype == dtype and r.shape == (3,)
    # JAX inputs are accepted too, and give NumPy back
    r = lumaxlike.amsa(
        jnp.full((2,), 0.5, dtype),
        jnp.asarray(source),
        jnp.asarray(observer),
        jnp.asarray(normal),
        FULL_PARAMS,
        backend=backend,
    )
    assert type(r) is np.ndarray and r.shape == (2,) and r.dtype == dtype


def test_jax_backend_is_differentiable_inside_transformations():
    source, observer, normal = lumaxlike.geometry_from_angles(0.4, 0.7, 1.0)
    slope = jax.grad(lambda w: lumaxlike.amsa(w, source, observer, normal, FULL_PARAMS)[()])(0.5)
    step = 1e-6
    central = (
        lumaxlike.amsa(0.5 + step, source, observer, normal, FULL_PARAMS)
        - lumaxlike.amsa(0.5 - step, source, observer, normal, FULL_PARAMS)
    ) / (2 * step)
    np.testing.assert_allclose(
        float(slope), float(central), rtol=1e-7
    )  # central difference: O(step^2) ~ 1e-12


@pytest.mark.parametrize("argument", ["w", "to_sun", "to_sensor", "normal"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_half_precision_is_refused(argument, backend):
    call = _good_call()
    call[argument] = np.asarray(call[argument]).astype(np.float16)
    with pytest.raises(ValueError, match=rf"{argument} has dtype float16"):
        lumaxlike.amsa(**call, backend=backend)


def test_bands_are_the_last_axis_with_shared_geometry():
    source, observer, normal = lumaxlike.geometry_from_angles(0.4, 0.7, 1.0)
    spectrum = np.array([0.2, 0.5, 0.9])
    per_band = lumaxlike.amsa(spectrum, source, observer, normal, FULL_PARAMS)
    each = [float(lumaxlike.amsa(w, source, observer, normal, FULL_PARAMS)) for w in spectrum]
    np.testing.assert_array_equal(per_band, each)


# ---------------------------------------------------------------------------------------
# Bad input


def _good_call():
    source, observer, normal = lumaxlike.geometry_from_angles(np.full(4, 0.4), 0.7, 1.0)
    return {
        "w": np.full((4, 2), 0.5),
        "to_sun": source,
        "to_sensor": observer,
        "normal": normal,
        "params": FULL_PARAMS,
    }


def test_unknown_backend():
    with pytest.raises(ValueError, match="backend"):
        lumaxlike.amsa(**_good_call(), backend="torch")


@pytest.mark.parametrize("params", [None, {"b": 0.2, "c": 0.3}, (0.2, 0.3)])
def test_params_must_be_hapke_params(params):
    call = _good_call()
    call["params"] = params
    with pytest.raises(ValueError, match="params"):
        lumaxlike.amsa(**call)


@pytest.mark.parametrize(
    "field, value",
    [
        ("b", -0.1),
        ("b", 1.0),
        ("b", np.nan),
        ("c", 1.1),
        ("c", -1.5),
        ("roughness", -0.1),
        ("roughness", np.pi / 2),
        ("hs", -1e-3),
        ("bs0", -1.0),
        ("hc", -0.2),
        ("bc0", -0.5),
        ("bc0", np.nan),
    ],
)
def test_hapke_params_out_of_range(field, value):
    fields = {"b": 0.2, "c": 0.3}
    fields[field] = value
    with pytest.raises(ValueError, match=rf"HapkeParams\.{field}\b"):
        lumaxlike.HapkeParams(**fields)


@pytest.mark.parametrize("field", ["b", "c", "roughness", "hs", "bs0", "hc", "bc0"])
@pytest.mark.parametrize(
    "value", ["x", "0.2", None, np.array([0.1, 0.2]), np.inf, -np.inf, np.nan, True]
)
def test_hapke_params_refuse_what_is_not_one_finite_number(field, value):
    fields = {"b": 0.2, "c": 0.3}
    fields[field] = value
    with pytest.raises(ValueError, match=rf"HapkeParams\.{field}\b"):
        lumaxlike.HapkeParams(**fields)


@pytest.mark.parametrize(
    "legendre", [np.ones(17), np.ones((2, 3)), [], [1.0, np.nan], [1.0, np.inf], ["1", "0"]]
)
def test_hapke_params_bad_legendre(legendre):
    with pytest.raises(ValueError, match=r"HapkeParams\.legendre"):
        lumaxlike.HapkeParams(b=0.2, c=0.3, legendre=legendre)


@pytest.mark.parametrize(
    "argument, value, named",
    [
        ("to_sun", np.ones((4, 2)), "to_sun"),  # last axis not 3
        ("normal", np.ones(()), "normal"),
        ("to_sensor", np.ones((5, 3)), "to_sensor"),  # pixel shape disagrees
        ("w", np.full((5, 2), 0.5), "w"),
        ("w", np.full((4, 2, 3), 0.5), "w"),
    ],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_mismatched_shapes(argument, value, named, backend):
    call = _good_call()
    call[argument] = value
    with pytest.raises(ValueError, match=named):
        lumaxlike.amsa(**call, backend=backend)

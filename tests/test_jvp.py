"""Derivatives of the JAX model: the analytic `custom_jvp` in w, autodiff in the rest."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import lumaxlike
from lumaxlike._model import jax_model
from lumaxlike._model._backends import jax_equations
from lumaxlike._params import FIELD_NAMES

from .helpers import FULL_PARAMS, random_geometry

# (incidence, emission, azimuth) [rad] on a flat surface, plus a tilted-normal case below.
POINTS = {
    "ordinary": (0.4, 0.9, 1.1),
    "zero_phase": (0.6, 0.6, 0.0),  # incidence == emission vectors: g = 0
    "grazing": (np.radians(85.0), np.radians(85.0), 2.5),
    "grazing_zero_phase": (np.radians(85.0), np.radians(85.0), 0.0),
    "nadir_incidence": (0.0, 0.7, 0.0),
    "nadir_emission": (0.7, 0.0, 0.0),
    "forward": (1.0, 1.2, np.pi),
}
W_VALUES = (1e-6, 0.3, 0.9, 0.999)


def _geometry(name):
    source, observer, normal = lumaxlike.geometry_from_angles(*POINTS[name])
    return jnp.asarray(source), jnp.asarray(observer), jnp.asarray(normal)


# the default (double Henyey-Greenstein) model's parameters: asymmetry is the one-parameter
# phase functions' (tests/test_phase_functions.py)
DHG_FIELDS = tuple(name for name in FIELD_NAMES if name != "asymmetry")


def _params_from(theta):
    return lumaxlike.HapkeParams(**dict(zip(DHG_FIELDS, theta)))


THETA = jnp.array([float(getattr(FULL_PARAMS, name)) for name in DHG_FIELDS])


@functools.partial(jax.jit, static_argnums=())
def _r_model(w, source, observer, normal, theta):
    """r through the model's custom_jvp core."""
    return jax_model.amsa_scalar(w, source, observer, normal, _params_from(theta))


@jax.jit
def _r_autodiff(w, source, observer, normal, theta):
    """r through plain autodiff of `equations.reflectance` (no custom rule)."""
    params = _params_from(theta)
    legendre, use_legendre = params.legendre_coefficients(jnp)
    terms = jax_equations.pixel_terms(
        source, observer, normal, *params.scalars(), legendre, use_legendre
    )
    return jax_equations.reflectance(w, terms)


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("w", W_VALUES)
def test_check_grads_in_w(point, w):
    """`jax.test_util.check_grads` (fwd and rev, order 1) of r(w) at ordinary and edge points."""
    geometry = _geometry(point)
    # Central-difference step well inside (0, 1) and, near w = 1 where r'''/r' grows like
    # (1 - w)^-2, small enough for check_grads' default float64 tolerance (1e-5).
    eps = min(1e-4, w / 10, (1 - w) / 300)
    check_grads(
        lambda w_: _r_model(w_, *geometry, THETA),
        (jnp.float64(w),),
        order=1,
        modes=("fwd", "rev"),
        eps=eps,
    )


@pytest.mark.parametrize("point", ["ordinary", "zero_phase", "grazing"])
def test_check_grads_reflectance_core(point):
    """check_grads on `reflectance_core(w, terms)` in w and in the terms together."""
    terms = jax_model.pixel_terms(*_geometry(point), FULL_PARAMS)
    for w in (1e-3, 0.5, 0.99):
        check_grads(
            jax_model.reflectance_core,
            (jnp.float64(w), terms),
            order=1,
            modes=("fwd", "rev"),
            eps=1e-5,
        )


ALL_ARGS = (0, 1, 2, 3, 4)  # w, source, observer, normal, theta
# Compiled once and shared by the tests below: the model's derivative graphs compile
# slowly (a jacfwd over all 17 inputs takes ~5x a single JVP), so forward-mode Jacobians
# are assembled from one compiled JVP called with basis tangents.
JVP_MODEL = jax.jit(lambda primals, tangents: jax.jvp(_r_model, primals, tangents)[1])
JVP_AUTODIFF = jax.jit(lambda primals, tangents: jax.jvp(_r_autodiff, primals, tangents)[1])
GRAD_MODEL = jax.jit(jax.grad(_r_model, argnums=ALL_ARGS))


def _jacobian_by_jvp(jvp, primals):
    """Forward-mode derivative of r in every element of every argument (basis tangents)."""
    primals = tuple(jnp.asarray(p, jnp.float64) for p in primals)
    zeros = [jnp.zeros_like(p) for p in primals]
    jacobian = []
    for k, p in enumerate(primals):
        column = np.empty(p.shape)
        for index in np.ndindex(p.shape):
            tangents = list(zeros)
            tangents[k] = zeros[k].at[index].set(1.0)
            column[index] = jvp(primals, tuple(tangents))
        jacobian.append(column)
    return jacobian


def _edge_and_random_points():
    rng = np.random.default_rng(11)
    source, observer, normal = random_geometry(40, rng)
    valid = (np.sum(source * normal, -1) > 0) & (np.sum(observer * normal, -1) > 0)
    points = [(w, *_geometry(name)) for name in POINTS for w in W_VALUES]
    points += [
        (rng.uniform(1e-6, 0.9999), s, o, n)
        for s, o, n in zip(source[valid], observer[valid], normal[valid])
    ]
    return [
        (jnp.float64(w), jnp.asarray(s), jnp.asarray(o), jnp.asarray(n)) for w, s, o, n in points
    ]


def test_custom_rule_equals_autodiff():
    """The analytic dr/dw rule, and autodiff of the w-independent terms behind it, equal
    plain autodiff of `equations.reflectance` to 1e-12, in w, the geometry and the
    parameters, at the edge points and on random geometry; reverse mode (grad) of the
    model equals its forward mode to 1e-12."""
    for point in _edge_and_random_points():
        primals = (*point, THETA)
        model = _jacobian_by_jvp(JVP_MODEL, primals)
        autodiff = _jacobian_by_jvp(JVP_AUTODIFF, primals)
        reverse = GRAD_MODEL(*primals)
        for argnum in ALL_ARGS:
            # atol: derivatives that vanish (e.g. d/dhs at g = 0) carry rounding only
            np.testing.assert_allclose(
                model[argnum], autodiff[argnum], rtol=1e-12, atol=1e-16, err_msg=f"arg {argnum}"
            )
            np.testing.assert_allclose(
                reverse[argnum], model[argnum], rtol=1e-12, atol=1e-16, err_msg=f"arg {argnum}"
            )


def _central_difference(f, x, step):
    x = np.asarray(x, dtype=np.float64)
    out = np.empty(x.shape)
    for k in range(x.size):
        dx = np.zeros_like(x)
        dx.flat[k] = step
        out.flat[k] = (float(f(jnp.asarray(x + dx))) - float(f(jnp.asarray(x - dx)))) / (2 * step)
    return out


@pytest.mark.parametrize("point", ["ordinary", "forward"])
def test_params_derivatives_match_finite_differences(point):
    """jacfwd and grad in b, c, roughness, hs, bs0, hc, bc0 against central differences
    (float64, step 1e-6: truncation ~1e-12, rounding ~1e-10 relative)."""
    geometry = _geometry(point)
    w = jnp.float64(0.6)

    def f(theta):
        return _r_model(w, *geometry, theta)

    numeric = _central_difference(f, THETA, 1e-6)
    assert np.all(numeric != 0.0)  # every parameter matters at this geometry
    # rounding of the difference: ~1e-16 r / step absolute (matters for the small d/d bc0
    # far from opposition)
    atol = 1e-8 * float(f(THETA))
    np.testing.assert_allclose(jax.jacfwd(f)(THETA), numeric, rtol=1e-7, atol=atol)
    np.testing.assert_allclose(GRAD_MODEL(w, *geometry, THETA)[4], numeric, rtol=1e-7, atol=atol)


def test_geometry_derivatives_match_finite_differences():
    """Forward (JVP) and reverse (grad) derivatives in the three direction vectors, on a
    tilted-normal pixel."""
    args = [
        jnp.float64(0.7),
        jnp.array([0.3, -0.2, 0.9]),
        jnp.array([-0.4, 0.5, 0.8]),
        jnp.array([0.1, 0.15, 1.0]),
    ]
    forward = _jacobian_by_jvp(JVP_MODEL, (*args, THETA))
    reverse = GRAD_MODEL(*args, THETA)
    for argnum in (1, 2, 3):

        def f(vector, argnum=argnum):
            call = list(args)
            call[argnum] = vector
            return _r_model(*call, THETA)

        numeric = _central_difference(f, args[argnum], 1e-6)
        assert np.all(np.abs(numeric) > 1e-6)
        np.testing.assert_allclose(forward[argnum], numeric, rtol=1e-6, atol=1e-12)
        np.testing.assert_allclose(reverse[argnum], numeric, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("point", POINTS)
def test_derivatives_finite_at_edge_points(point):
    """No NaN leaks into gradients at g = 0, exact nadir, grazing or psi = 180 deg, in w,
    in the parameters and in the geometry (the derivative in geometry is a one-sided
    choice at the g = 0 and nadir cusps, but finite)."""
    geometry = _geometry(point)
    for w in W_VALUES:
        primals = (jnp.float64(w), *geometry, THETA)
        for grads in (GRAD_MODEL(*primals), _jacobian_by_jvp(JVP_MODEL, primals)):
            for g in grads:
                assert np.all(np.isfinite(np.asarray(g))), (point, w, grads)


def test_grad_through_public_amsa():
    """`lumaxlike.amsa` (JAX backend) can be differentiated in w: the diagonal dr/dw."""
    rng = np.random.default_rng(5)
    source, observer, normal = random_geometry(16, rng, max_tilt_deg=0.0)
    w = jnp.asarray(rng.uniform(0.1, 0.9, 16))
    r_of_w = functools.partial(
        lumaxlike.amsa, to_sun=source, to_sensor=observer, normal=normal, params=FULL_PARAMS
    )
    grad = jax.grad(lambda w_: jnp.sum(r_of_w(w_)))(w)
    expected = [
        GRAD_MODEL(w_, jnp.asarray(s), jnp.asarray(o), jnp.asarray(n), THETA)[0]
        for w_, s, o, n in zip(w, source, observer, normal)
    ]
    np.testing.assert_allclose(grad, expected, rtol=1e-13)

"""Per-endmember phase functions of an intimate mixture (Hapke 2012, ch. 10).

When the endmembers scatter with their own phase functions p_j, the mixture's is
p_mix = sum_j f_j w_j p_j / w_mix (its Legendre coefficients mix the same way), per band,
and so are the AMSA terms P(mu0e), P(mue) and P-bar, which are linear in the
coefficients. This module checks the description `Endmembers.phase` takes and computes,
per pixel, each endmember's phase terms (p(g) B_SH, P(mu0e), P(mue), P-bar) once per
chunk (`phase_table`, a numba kernel over `equations.phase_terms`); the one-step solvers
mix them at every step (`equations.mixture_reflectance_and_slope`). Closed forms are
evaluated as such (p(g) exactly, the P sums from their Legendre coefficients to n = 15,
as the model does), not through a truncated series.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._model._backends import numba_equations
from .._model.equations import N_LEGENDRE
from .._model.family import ModelKey, numba_kernel_for
from .._model.numba_cache import cached_njit
from .._model.numba_model import MODEL_MODULES, as_kernel_array
from .._model.numba_threads import run_in_blocks
from .._params import HapkeParams

__all__ = ["check_phase", "endmember_params", "phase_table", "N_PHASE_TERMS"]

N_PHASE_TERMS = 4  # p(g) B_SH, P(mu0e), P(mue), P-bar
geometry_terms = numba_equations.geometry_terms
roughness_terms = numba_equations.roughness_terms
phase_terms = numba_equations.phase_terms


def check_phase(phase, n_endmembers: int, n_bands: int):
    """`Endmembers.phase` checked and normalised.

    Returns:
        None; a tuple of n_endmembers `HapkeParams`; or a read-only float64 array of
        Legendre coefficients b_0..b_15 (zero-padded), shape (n_endmembers, 1, 16) or
        (n_endmembers, n_bands, 16).
    Raises:
        ValueError naming `Endmembers.phase` and the endmember.
    """
    if phase is None:
        return None
    if isinstance(phase, HapkeParams):
        raise ValueError(
            "Endmembers.phase must hold one phase function per endmember, got one HapkeParams"
        )
    items = list(phase) if isinstance(phase, (list, tuple)) else None
    if items is not None and any(isinstance(item, HapkeParams) for item in items):
        if len(items) != n_endmembers or not all(isinstance(item, HapkeParams) for item in items):
            raise ValueError(
                f"Endmembers.phase as HapkeParams must be a sequence of {n_endmembers} HapkeParams "
                f"(one per endmember), got {len(items)} items of types {sorted({type(i).__name__ for i in items})}"
            )
        return tuple(items)
    coefficients = np.asarray(phase)
    if coefficients.dtype.kind not in "fiu":
        raise ValueError(
            f"Endmembers.phase must be HapkeParams or numeric Legendre coefficients, got dtype {coefficients.dtype}"
        )
    coefficients = np.array(coefficients, np.float64)
    if coefficients.ndim == 2:
        coefficients = coefficients[:, None, :]
    if (
        coefficients.ndim != 3
        or coefficients.shape[0] != n_endmembers
        or coefficients.shape[1] not in (1, n_bands)
        or not 1 <= coefficients.shape[2] <= N_LEGENDRE + 1
    ):
        raise ValueError(
            f"Endmembers.phase as Legendre coefficients must have shape (n_endmembers, n_coefficients) = "
            f"({n_endmembers}, <= {N_LEGENDRE + 1}) or (n_endmembers, n_bands, n_coefficients) = "
            f"({n_endmembers}, {n_bands}, <= {N_LEGENDRE + 1}), got {np.shape(phase)}"
        )
    finite = np.isfinite(coefficients).reshape(n_endmembers, -1).all(axis=-1)
    if not np.all(finite):
        raise ValueError(f"Endmembers.phase holds NaN or inf (endmember {int(np.argmin(finite))})")
    normalised = np.abs(coefficients[..., 0] - 1.0) <= 1e-12
    if not np.all(normalised):
        j = int(np.argmin(normalised.all(axis=-1)))
        raise ValueError(
            f"Endmembers.phase: b_0 must be 1 (a normalised phase function), endmember {j} has "
            f"{coefficients[j, :, 0][~normalised[j]][0]!r}"
        )
    padded = np.zeros(coefficients.shape[:2] + (N_LEGENDRE + 1,))
    padded[..., : coefficients.shape[2]] = coefficients
    padded.flags.writeable = False
    return padded


def endmember_params(params: HapkeParams, phase, endmember: int, slot: int = 0) -> HapkeParams:
    """`params` with the phase function of one endmember (and band slot) of `check_phase`'s
    normalised `phase` in place of its own: the model of that endmember alone."""
    if isinstance(phase, tuple):
        own = phase[endmember]
        return dataclasses.replace(
            params,
            phase_function=own.phase_function,
            b=own.b,
            c=own.c,
            asymmetry=own.asymmetry,
            legendre=own.legendre,
        )
    return dataclasses.replace(params, phase_function="dhg", legendre=phase[endmember, slot])


@cached_njit(inlines=MODEL_MODULES, nogil=True, error_model="numpy")
def _phase_table_kernel(
    first, last, to_sun, to_sensor, normal, roughness, hs, bs0, shapes, legendre, use_legendre, out
):
    """out[pixel, s] = `equations.phase_terms` of phase function s (shapes[s] = b, c,
    asymmetry; legendre[s], use_legendre[s]) at pixels first to last - 1
    (`numba_threads.run_in_blocks`)."""
    n_sets = shapes.shape[0]
    for pixel in range(first, last):
        geometry = geometry_terms(to_sun[pixel], to_sensor[pixel], normal[pixel])
        cos_i, sin_i, cos_e, sin_e, cos_g, tan_half_g, cos_psi, sin2_half_psi, psi, f_psi, valid = (
            geometry
        )
        mu0e, mue, _ = roughness_terms(
            cos_i, sin_i, cos_e, sin_e, cos_psi, sin2_half_psi, psi, f_psi, roughness
        )
        for s in range(n_sets):
            phase_sh, p_mu0e, p_mue, p_bar = phase_terms(
                mu0e,
                mue,
                cos_g,
                tan_half_g,
                shapes[s, 0],
                shapes[s, 1],
                hs,
                bs0,
                shapes[s, 2],
                legendre[s],
                use_legendre[s],
            )
            out[pixel, s, 0], out[pixel, s, 1], out[pixel, s, 2], out[pixel, s, 3] = (
                phase_sh,
                p_mu0e,
                p_mue,
                p_bar,
            )


def _phase_table_kernel_for(key: ModelKey):
    return numba_kernel_for(
        _phase_table_kernel, key, ("geometry_terms", "roughness_terms", "phase_terms")
    )


def phase_table(to_sun, to_sensor, normal, params: HapkeParams, phase):
    """Every endmember's phase terms at every pixel (numba, parallel over pixels).

    Args:
        to_sun, to_sensor, normal: (pixels, 3).
        params: the mixture's `HapkeParams`: its roughness, shadow hiding and multiple
            scattering (AMSA or IMSA); its phase function is not used.
        phase: `check_phase`'s normalised per-endmember phase functions (not None).
    Returns:
        (pixels, n_endmembers, 1 or bands, 4) float64: p(g) B_SH, P(mu0e), P(mue),
        P-bar of each endmember's phase function (per band where the phase functions are).
    """
    n = to_sun.shape[0]
    if isinstance(phase, tuple):  # HapkeParams: one set per endmember, grouped by closed form
        sets = [
            (item.phase_function, (item.b, item.c, item.asymmetry), *item.legendre_coefficients(np))
            for item in phase
        ]
        n_end, n_slots = len(phase), 1
    else:
        n_end, n_slots = phase.shape[:2]
        sets = [
            ("dhg", (0.0, 0.0, 0.0), coefficients, True)
            for coefficients in phase.reshape(-1, N_LEGENDRE + 1)
        ]
    table = np.empty((n, len(sets), N_PHASE_TERMS))
    geometry = [as_kernel_array(g) for g in (to_sun, to_sensor, normal)]
    for kind in dict.fromkeys(s[0] for s in sets):
        members = [i for i, s in enumerate(sets) if s[0] == kind]
        out = np.empty((n, len(members), N_PHASE_TERMS))
        run_in_blocks(
            _phase_table_kernel_for(ModelKey(params.multiple_scattering, "hapke2002", kind)),
            n,
            *geometry,
            float(params.roughness),
            float(params.hs),
            float(params.bs0),
            np.array([sets[i][1] for i in members], np.float64),
            np.array([sets[i][2] for i in members], np.float64),
            np.array([sets[i][3] for i in members], np.bool_),
            out,
        )
        table[:, members] = out
    return table.reshape(n, n_end, n_slots, N_PHASE_TERMS)

"""Per-problem status codes shared by every solver (never exceptions inside batched code),
and the maps an inversion produces: the bottom layer, so that the writers (`_io`) and the
front ends name a result's fields and statuses without importing the solvers.
"""

import enum

__all__ = ["RESULT_FIELDS", "Status"]

RESULT_FIELDS = ("w", "status", "iterations", "residual", "sigma")
"""Maps an inversion produces, in `InversionResult` order (the fields of a result map file)."""


class Status(enum.IntEnum):
    """Outcome of one pixel-band problem, stored as int8 in `InversionResult.status`,
    `FitResult.status` and `SampleResult.status`."""

    CONVERGED = 0  #: the step fell below `tol` in every free parameter
    MAX_ITER = 1  #: `max_iter` steps without convergence; the values are the last iterate
    #: no w in (0, 1) fits: `invert`: observed r <= 0 or >= r(w -> 1); `fit`: every valid
    #: observation <= 0, an infinite residual, or w ended on its physical bound (eps or
    #: 1 - eps); `unmix`: no band with r > 0 (two-step: any band `invert` cannot fit)
    UNREACHABLE = 2
    INVALID_GEOMETRY = 3  #: source or observer at or below the local horizon (cos i or cos e <= 0)
    #: NaN or inf reflectance or geometry (`fit`: in every observation of the problem; a
    #: single non-finite observation is left out of its problem instead)
    NONFINITE_INPUT = 4
    #: (`fit`, `unmix`) converged, but the observations do not determine every free
    #: parameter: J^T J is singular to working precision there (for `unmix` also: a
    #: fraction's 1-sigma with its bounds released exceeds its range [0, 1]); the values
    #: are one of many solutions and the covariance is NaN
    UNDETERMINED = 5
    #: (`fit` only) fewer valid observations than `min_observations` (by default the
    #: number of free parameters plus one) once masked observations (NaN reflectance or
    #: geometry, outside `observation_limits`) are left out
    TOO_FEW_OBSERVATIONS = 6
    #: (file inputs) the cube marks this band bad (ENVI ``bbl`` = 0, as M3 and other
    #: spectrometer headers do): not solved, its values are NaN
    BAD_BAND = 7
    #: (`sample` only) the chains did not mix: R-hat above `max_rhat` (1.01) or
    #: effective sample size below `min_ess` in some free parameter; the posterior
    #: summaries are not to be trusted (sample longer, or look at the draws)
    NOT_MIXED = 8
    #: (`sample`) the chains mixed, but a fit started near a bound found a second
    #: mode of the posterior (a log posterior within 5 of the warm start's, e.g. at
    #: b -> 1) that no chain visited, or that the chains entered too seldom for its mass to
    #: be known (the ESS of its region below `min_ess`): the summaries describe one mode
    #: and miss the other's mass (give b and c priors, or look at the fits from the
    #: bounds). (`fit` with ``starts=``, or `shared` and its default probe start) the
    #: kept, lowest minimum converged, and another start converged to a
    #: distinct minimum with chi^2 within 4 of it; the values are the lowest minimum's
    MULTIMODAL = 9
    #: (`remove_thermal`) the temperature fit converged, but the data bound T only
    #: loosely: its 1-sigma exceeds `max_temperature_sigma` (a surface too cold for its
    #: emission to stand above the noise in the thermal window); T is then its one-sided
    #: 95 % upper limit, its sigma NaN, and nothing is removed from the reflectance
    NOT_CONSTRAINED = 10
    #: (`remove_thermal`) T as for CONVERGED, but some band's corrected w could not be
    #: solved (its r less the emission <= 0 or >= r(w -> 1), or no convergence): those
    #: bands are NaN in w, reflectance and emission, the others corrected
    BAND_FAILED = 11
    #: (`fit` with ``regions=``) a pixel left out of its region: at the region's values
    #: its cost stays far above its own lowest minimum (the region's values lie outside
    #: its own 5-sigma range) after restarts; its values, cost and iterations are its own
    #: joint fit's (the regional parameters its own), its covariance NaN. A region that
    #: converged without such pixels is EXCLUDED in `region_status`
    EXCLUDED = 12

    @classmethod
    def legend(cls) -> dict[int, str]:
        """``{code: name}`` of every status, e.g. ``{0: "CONVERGED", ..., 7: "BAD_BAND"}``.

        The one source of every status legend lumaxlike writes (GeoTIFF/ENVI
        ``status_codes`` tag, netCDF/zarr ``flag_values`` / ``flag_meanings``); use it
        for colour maps and labels too.
        """
        return {int(member): member.name for member in cls}

    @classmethod
    def flag_attrs(cls) -> dict:
        """CF flag attributes of a status variable: ``flag_values`` (int8 array, the codes)
        and ``flag_meanings`` (the lower-case names, blank-separated)."""
        import numpy as np

        legend = cls.legend()
        return {
            "flag_values": np.array(list(legend), dtype=np.int8),
            "flag_meanings": " ".join(name.lower() for name in legend.values()),
        }

    @classmethod
    def codes_text(cls, separator: str = "=") -> str:
        """The legend as one line, e.g. ``"0=converged, 1=max_iter, ..."`` (raster tags)."""
        return ", ".join(f"{code}{separator}{name.lower()}" for code, name in cls.legend().items())

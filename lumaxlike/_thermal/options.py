"""`ThermalSettings`: every option of the thermal-emission removal, declared once.

`lumaxlike.remove_thermal`, `remove_thermal_file`, `remove_thermal_dataarray` (and
``DataArray.hapke.remove_thermal``) take these by name or as ``settings=``; the command
``lumaxlike thermal`` takes each as a flag (``--window``); the run's record keeps them
(`lumaxlike._declared_options` derives all of it from the fields below). To add an
option: a field here and its test (docs/design.md, "How to add an option").

Imports nothing heavy: the command line's parser is built from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real

from .._declared_options import (
    DeclaredOptions,
    increasing_pair,
    option,
    pair_text,
    positive,
    to_pair,
)

__all__ = ["FEWEST_WINDOW_BANDS", "METHODS", "WAVELENGTH_TOLERANCE", "ThermalSettings", "within"]

METHODS = ("continuum", "given", "prior")
# [um]: band centres this close outside a window's (or prior_reference's) ends are in it
WAVELENGTH_TOLERANCE = 1e-5
# the window fit's T, a and b, and one degree of freedom
FEWEST_WINDOW_BANDS = 4


def _temperature(value):
    """T [K] for "given": a number as a float; a map (an array, `remove_thermal` only)
    kept."""
    return float(value) if getattr(value, "ndim", 0) == 0 else value


def _check_temperature(name: str, value) -> None:
    """Positive [K], a number finite; NaN in a map marks that pixel NONFINITE_INPUT."""
    import numpy as np

    values = np.asarray(value, dtype=np.float64)
    bad = (values <= 0) | np.isinf(values) | (np.isnan(values) & (values.ndim == 0))
    if np.any(bad):
        raise ValueError(f"{name} must be positive and finite [K], got {values[bad].ravel()[0]!r}")


def _ranges(value) -> tuple[tuple[float, float], ...]:
    """Wavelength ranges [um] as pairs of floats; one pair alone is one range."""
    if len(value) and isinstance(value[0], Real):
        return (to_pair(value),)
    return tuple(to_pair(limits) for limits in value)


def _check_ranges(name: str, ranges) -> None:
    for limits in ranges:
        increasing_pair("um")(name, limits)


def _count(value):
    """An integer (a NumPy one too) as an int; anything else as it is, for the check."""
    return int(value) if isinstance(value, Integral) and not isinstance(value, bool) else value


def _check_window_bands(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < FEWEST_WINDOW_BANDS:
        raise ValueError(
            # no option's name in the prose: the command line turns each into its flag
            f"{name} must be an integer of {FEWEST_WINDOW_BANDS} or more (the fit's T, a "
            f"and b, and one degree of freedom), got {value!r}"
        )


def _ranges_text(text: str) -> tuple[tuple[float, float], ...]:
    """The command line's ``2.45:2.47,2.6:2.62``."""
    return tuple(pair_text(limits.replace(":", ",")) for limits in text.split(","))


@dataclass(frozen=True)
class ThermalSettings(DeclaredOptions):
    """How the thermal emission is removed: the options of `lumaxlike.remove_thermal`,
    `lumaxlike.remove_thermal_file`, `lumaxlike.remove_thermal_dataarray` (each takes
    them by name, or as one ``settings=``) and ``lumaxlike thermal`` (a flag each:
    ``--window 2.3,2.65``). Each is declared once, below: its default, unit, check and
    record there, its meaning here (the command line's help reads it from here).

    Attributes:
        method: continuum: fit T with w linear in wavelength over the window (Clark et
            al. 2011's assumption); prior: fit T and each window band's w, held near the
            line of w over the prior reference bands continued (needs the reflectance's
            1-sigma); given: remove the emission of the temperature given.
        temperature: T [K] of every pixel, for method given only (the array function
            also takes a map of shape pixels, NaN marking a pixel NONFINITE_INPUT).
        window: (shortest, longest) wavelength [um] of the bands the temperature fit
            uses, ends widened by 1e-5 um (float32 centres stay in): at least
            min_window_bands bands, short of the 3 um hydration band.
        max_temperature_sigma: T's 1-sigma [K] above which a pixel is NOT_CONSTRAINED.
        temperature_bounds: (lowest, highest) T [K] of the fit.
        prior_sigma: method prior: the 1-sigma of each window band's w about the prior.
        prior_reference: method prior: (shortest, longest) wavelength [um] of the bands
            whose w's line is continued into the window: 2 bands or more, short of it.
        window_exclude: (shortest, longest) wavelength ranges [um] whose bands the
            temperature fit leaves out of the window (a detector artefact, a narrow
            absorption, a band bad in some pixels: its NaN or r <= 0 then fails no
            pixel); they are still corrected at the fitted T.
        min_window_bands: the fewest bands the window may hold once a file's bad bands
            (bbl = 0, left out of its bands) and window_exclude's are left out; fewer:
            the run is refused, listing the window's bands. 4 fits what is left; the
            window's full count of bands refuses a cube whose bad bands thin it, so that
            every cube's T is fitted on the same bands.

    Raises:
        ValueError: naming the option, for a value its check refuses.
    """

    method: str = option("continuum", choices=METHODS, parse=str)
    temperature: float | None = option(
        None, unit="K", convert=_temperature, check=_check_temperature, parse=float, metavar="K"
    )
    window: tuple[float, float] = option(
        (2.3, 2.65),  # short of the 3 um hydration band's wing (~2.7 um)
        unit="um",
        convert=to_pair,
        check=increasing_pair("um"),
        parse=pair_text,
        metavar="UM,UM",
    )
    max_temperature_sigma: float = option(
        10.0,
        unit="K",
        convert=float,
        check=positive("K", finite=False),
        parse=float,
        metavar="K",
        flag="--max-temperature-uncertainty",
    )
    temperature_bounds: tuple[float, float] = option(
        (100.0, 1000.0),
        unit="K",
        convert=to_pair,
        check=increasing_pair("K", positive_ends=True),
        parse=pair_text,
        metavar="K,K",
    )
    # lunar soils' w departs from a line continued from 1.55-2 um to 2.65 um by ~0.01-0.02
    # (the continuum's curvature, the wing of the 3 um band); 0.02 lets each band's w move
    # that far, and still holds the window's w close enough (9 bands) that T is bound to a
    # few K at 375 K, 0.5 % noise
    prior_sigma: float = option(
        0.02,
        unit="w",
        convert=float,
        check=positive("w"),
        parse=float,
        metavar="W",
        flag="--prior-uncertainty",
    )
    # long of the 1 um band's wing, where emission is weak (at 400 K ~2 % of r at 2 um,
    # 0.5 % at 1.8 um: removed at the fitted T, `prior.PRIOR_PASSES`)
    prior_reference: tuple[float, float] = option(
        (1.55, 2.0),
        unit="um",
        convert=to_pair,
        check=increasing_pair("um"),
        parse=pair_text,
        metavar="UM,UM",
    )
    window_exclude: tuple[tuple[float, float], ...] = option(
        (),
        unit="um",
        convert=_ranges,
        check=_check_ranges,
        parse=_ranges_text,
        metavar="UM:UM[,UM:UM]",
    )
    min_window_bands: int = option(
        FEWEST_WINDOW_BANDS, convert=_count, check=_check_window_bands, parse=int, metavar="N"
    )

    def check_together(self) -> None:
        """The method "given" and temperature go together."""
        if self.method == "given" and self.temperature is None:
            raise ValueError('method="given" needs temperature (T [K], a number or a map)')
        if self.temperature is not None and self.method != "given":
            raise ValueError(
                f'temperature is for method="given" only (method={self.method!r} fits T); '
                "give one or the other"
            )

    def window_bands(self, wavelengths):
        """The bands [um] (a NumPy array) of the temperature fit: a boolean mask.

        Raises:
            ValueError: fewer than `min_window_bands` bands in it, naming them.
        """
        inside = within(wavelengths, self.window)
        for limits in self.window_exclude:
            inside &= ~within(wavelengths, limits)
        if inside.sum() < self.min_window_bands:
            bands = ", ".join(f"{band:.4g}" for band in wavelengths[inside])
            held = f"{inside.sum()} bands ({bands} um)" if bands else "no band"
            raise ValueError(
                f"window={self.window!r} holds {held}; the fit "
                f"needs {self.min_window_bands} (min_window_bands; bands marked bad, bbl = 0, "
                "and window_exclude's are left out of it)"
            )
        return inside

    def reference_bands(self, wavelengths):
        """``"prior"``'s reference bands [um]: a boolean mask."""
        return within(wavelengths, self.prior_reference)


def within(wavelengths, limits):
    """The bands [um] (a NumPy array) inside (shortest, longest) [um], each end widened
    by `WAVELENGTH_TOLERANCE` (a float32 band centre of 2.30 um is 2.2999999523)."""
    return (wavelengths >= limits[0] - WAVELENGTH_TOLERANCE) & (
        wavelengths <= limits[1] + WAVELENGTH_TOLERANCE
    )

"""`Endmembers`: the library an intimate mixture is unmixed into."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._params import HapkeParams
from .._status import Status
from .._validation import wavelengths_um
from .optical_endmembers import OpticalMixing, endmembers_from_optical_constants
from .phase import check_phase, endmember_params

__all__ = ["Endmembers"]


def _positive_vector(name: str, value, n: int) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in "fiu":
        raise ValueError(f"Endmembers.{name} must be numeric, got dtype {array.dtype}")
    array = (
        np.broadcast_to(array.astype(np.float64), (n,))
        if array.ndim == 0
        else array.astype(np.float64)
    )
    if array.shape != (n,):
        raise ValueError(
            f"Endmembers.{name} must have one value per endmember, shape ({n},), got {array.shape}"
        )
    bad = ~(np.isfinite(array) & (array > 0.0))
    if np.any(bad):
        raise ValueError(
            f"Endmembers.{name} must be finite and > 0, got {array[bad][0]!r} (endmember {int(np.argmax(bad))})"
        )
    array = np.array(array)  # own, read-only copy
    array.flags.writeable = False
    return array


@dataclasses.dataclass(frozen=True, eq=False)  # arrays: identity, not elementwise, equality
class Endmembers:
    """An endmember library for `lumaxlike.unmix` (Hapke 2012, ch. 10 intimate mixing).

    Attributes:
        names: one name per endmember (tuple of str, unique).
        albedo: single-scattering albedo spectra w_j(lambda), shape (n_endmembers,
            n_bands), each strictly inside (0, 1), on the cube's bands. A dark neutral
            endmember (constant w) is just another row.
        density: solid (grain) density rho_j [g/cm^3], shape (n_endmembers,), > 0.
        grain_size: grain size D_j [um], shape (n_endmembers,), > 0.
        extinction_efficiency: Q_j [-], shape (n_endmembers,), > 0; default 1 (grains
            large against the wavelength).
        wavelengths: band centres [um], shape (n_bands,), or None.
        phase: the endmembers' own phase functions, or None (default): one phase
            function shared by all endmembers, the `HapkeParams`' given to `unmix` (the
            common choice). Given, the mixture's phase function is their albedo-and-
            cross-section-weighted mean p_mix = sum_j f_j w_j p_j / w_mix, per band and
            per pixel (so are its Legendre coefficients and AMSA's P(mu0e), P(mue),
            P-bar), and only `unmix`'s one-step route can unmix it. Either a sequence
            of n_endmembers `HapkeParams`, of which only the phase function is read
            (phase_function, b, c, asymmetry, legendre; the closed forms are evaluated
            exactly), or Legendre coefficients b_0..b_N (N <= 15, b_0 = 1) of
            p(g) = sum_n b_n P_n(cos g), shape (n_endmembers, N + 1), or
            (n_endmembers, n_bands, N + 1) for phase functions that vary with the band.
            Stored as a tuple of `HapkeParams` or as a read-only array of shape
            (n_endmembers, 1 or n_bands, 16), zero-padded.
        optical: None, or (made by `from_optical_constants`) the endmembers' optical
            constants on the bands, grain-size and npFe0 bounds and slab-model variants,
            from which `unmix(..., free=...)` recomputes w_j(D_j, npFe0) per pixel.

    A scalar density, grain_size or extinction_efficiency is used for every endmember.
    Arrays are copied and made read-only. Invalid values raise a ValueError naming the
    field and the endmember.
    """

    names: tuple
    albedo: np.ndarray
    density: np.ndarray
    grain_size: np.ndarray
    # None (the default) means Q_j = 1 for all; __post_init__ always stores an array
    extinction_efficiency: np.ndarray = None  # type: ignore[assignment]
    wavelengths: np.ndarray | None = None
    phase: tuple | np.ndarray | None = None
    optical: OpticalMixing | None = None

    def __post_init__(self):
        names = (self.names,) if isinstance(self.names, str) else tuple(self.names)
        if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise ValueError(
                f"Endmembers.names must be unique strings, at least one, got {self.names!r}"
            )
        albedo = np.asarray(self.albedo)
        if albedo.dtype.kind not in "fiu":
            raise ValueError(f"Endmembers.albedo must be numeric, got dtype {albedo.dtype}")
        albedo = np.array(albedo, np.float64)
        if albedo.ndim != 2 or albedo.shape[0] != len(names) or albedo.shape[1] < 1:
            raise ValueError(
                f"Endmembers.albedo must have shape (n_endmembers, n_bands) = ({len(names)}, bands), "
                f"got {albedo.shape}"
            )
        for j, name in enumerate(names):
            spectrum = albedo[j]
            if not np.all(np.isfinite(spectrum)):
                raise ValueError(
                    f"Endmembers.albedo of {name!r} holds NaN or inf (band {int(np.argmin(np.isfinite(spectrum)))})"
                )
            if not np.all((spectrum > 0.0) & (spectrum < 1.0)):
                raise ValueError(
                    f"Endmembers.albedo of {name!r} must lie strictly inside (0, 1), got values in "
                    f"[{spectrum.min()}, {spectrum.max()}]"
                )
        albedo.flags.writeable = False
        n = len(names)
        efficiency = 1.0 if self.extinction_efficiency is None else self.extinction_efficiency
        wavelengths = self.wavelengths
        if wavelengths is not None:
            wavelengths = np.array(wavelengths_um("Endmembers.wavelengths", wavelengths))
            if wavelengths.shape != (albedo.shape[1],):
                raise ValueError(
                    f"Endmembers.wavelengths must be ({albedo.shape[1]},) band centres [um], "
                    f"got shape {wavelengths.shape}"
                )
            wavelengths.flags.writeable = False
        set_field = object.__setattr__  # frozen: the normalised values replace the given ones
        set_field(self, "names", names)
        set_field(self, "albedo", albedo)
        set_field(self, "density", _positive_vector("density", self.density, n))
        set_field(self, "grain_size", _positive_vector("grain_size", self.grain_size, n))
        set_field(
            self, "extinction_efficiency", _positive_vector("extinction_efficiency", efficiency, n)
        )
        set_field(self, "wavelengths", wavelengths)
        set_field(self, "phase", check_phase(self.phase, n, albedo.shape[1]))
        if self.optical is not None and (
            not isinstance(self.optical, OpticalMixing)
            or self.optical.n.shape != albedo.shape
            or wavelengths is None
        ):
            raise ValueError(
                "Endmembers.optical must come from Endmembers.from_optical_constants (one n, k per "
                "endmember and band, with wavelengths)"
            )

    @property
    def n_endmembers(self) -> int:
        return len(self.names)

    @property
    def n_bands(self) -> int:
        return self.albedo.shape[1]

    @classmethod
    def from_reflectance(
        cls,
        reflectance,
        incidence,
        emission,
        azimuth,
        params: HapkeParams,
        density,
        grain_size,
        *,
        names=None,
        extinction_efficiency=None,
        wavelengths=None,
        solver: str = "numba",
        phase=None,
    ) -> Endmembers:
        """Endmembers from laboratory reflectance spectra, w_j by `lumaxlike.invert`.

        Args:
            reflectance: bidirectional reflectance r [1/sr] (RADF / pi; a reflectance
                factor REFF = pi r / cos i), shape (n_endmembers, n_bands).
            incidence: incidence angle of the laboratory measurement [rad].
            emission: emission angle of the laboratory measurement [rad].
            azimuth: azimuth of the observer relative to the source psi [rad] (0:
                backscatter side), as `lumaxlike.geometry_from_angles` takes it. One
                geometry for every spectrum (scalars), or one per endmember (shape
                (n_endmembers,)).
            params: the `HapkeParams` the spectra are inverted with (the same as the
                mixture's, normally).
            density: as the attribute.
            grain_size: as the attribute.
            extinction_efficiency: as the attribute.
            wavelengths: as the attribute.
            names: as the attribute (default "endmember_0", ...).
            solver: `invert`'s solver.
            phase: the endmembers' own phase functions (the attribute `phase`), or None:
                given, each spectrum is inverted with its endmember's phase function (in
                place of that of `params`; per band where it is given per band).

        Raises:
            ValueError: naming the endmember whose spectrum `invert` cannot fit (a band
                with r <= 0, r above r(w -> 1), NaN, or the source or observer below the
                horizon), or a bad argument.
        """
        from .._geometry import geometry_from_angles
        from .._inverse.albedo.invert import invert

        refl = np.asarray(reflectance)
        if refl.ndim != 2:
            raise ValueError(
                f"reflectance must have shape (n_endmembers, n_bands), got {refl.shape}"
            )
        n = refl.shape[0]
        names = tuple(f"endmember_{j}" for j in range(n)) if names is None else names
        angles = [np.asarray(a, np.float64) for a in (incidence, emission, azimuth)]
        for label, angle in zip(("incidence", "emission", "azimuth"), angles):
            if angle.shape not in ((), (n,)):
                raise ValueError(
                    f"{label} must be a scalar or one angle per endmember ({n},), got {angle.shape}"
                )
        to_sun, to_sensor, normal = (
            np.broadcast_to(v, (n, 3)) for v in geometry_from_angles(*np.broadcast_arrays(*angles))
        )
        own_phase = check_phase(phase, n, refl.shape[1])
        if own_phase is None:
            result = invert(refl, to_sun, to_sensor, normal, params, solver=solver)
            albedo, status = result.w, result.status
        else:  # each endmember (and band, where its phase function is given per band) on its own
            albedo, status = np.empty(refl.shape), np.empty(refl.shape, np.int8)
            slots = 1 if isinstance(own_phase, tuple) else own_phase.shape[1]
            for j in range(n):
                for slot in range(slots):
                    bands = slice(None) if slots == 1 else slice(slot, slot + 1)
                    own = endmember_params(params, own_phase, j, slot)
                    result = invert(
                        refl[j, bands], to_sun[j], to_sensor[j], normal[j], own, solver=solver
                    )
                    albedo[j, bands], status[j, bands] = result.w, result.status
        labels = names if not isinstance(names, str) else (names,)
        for j in range(n):
            failed = status[j] != Status.CONVERGED
            if np.any(failed):
                band = int(np.argmax(failed))
                name = labels[j] if j < len(labels) else j
                raise ValueError(
                    f"reflectance of endmember {name!r}: invert fails in {int(failed.sum())} band(s), first "
                    f"band {band} with status {Status(int(status[j, band])).name} "
                    f"(r = {refl[j, band]!r})"
                )
        return cls(
            names=names,
            albedo=albedo,
            density=density,
            grain_size=grain_size,
            extinction_efficiency=extinction_efficiency,
            wavelengths=wavelengths,
            phase=own_phase,
        )

    @classmethod
    def from_optical_constants(
        cls,
        constants,
        grain_size,
        wavelengths,
        *,
        names=None,
        density=None,
        npfe_fraction=0.0,
        internal_scattering=0.0,
        grain_size_bounds=None,
        npfe_bounds=None,
        iron=None,
        reflections: str = "hapke1993",
        mean_path: str = "hapke2001",
        extinction_efficiency=None,
    ) -> Endmembers:
        """Endmembers whose w_j comes from optical constants (Hapke's equivalent slab,
        `lumaxlike.slab_albedo`), so that `unmix(..., free=("grain_size", "npfe"))` can fit
        each endmember's grain size and the pixel's nanophase iron.

        ``albedo`` is w_j at `grain_size` and `npfe_fraction` on the bands (what `unmix`
        uses when nothing is free); ``optical`` keeps n, k on the bands and the bounds.

        Args:
            constants: a sequence of `OpticalConstants` (one per endmember), each covering
                `wavelengths` (never extrapolated).
            grain_size: D_j [um], scalar or (n_endmembers,): the grain sizes when fixed,
                the starting point when free.
            wavelengths: the cube's band centres [um], shape (bands,); checked as every
                wavelength argument (finite, > 0, at most 100 um: nanometres refused).
            names: default the constants' names.
            density: rho_j [g/cm^3], scalar or (n_endmembers,); default the constants'.
            npfe_fraction: nanophase iron mass fraction of every host (0.005 is 0.5 wt %):
                fixed, or the starting point when free.
            internal_scattering: s_j [1/um], scalar or (n_endmembers,).
            grain_size_bounds: (lower, upper) [um] for every endmember, or shape
                (n_endmembers, 2); default (1, 1000). `grain_size` must lie inside.
            npfe_bounds: (lower, upper) of the npFe0 mass fraction; default (0, 0.02).
                (0, 0) makes endmembers without iron (no iron data needed).
            iron: iron's `OpticalConstants` (default `optical_constants("iron")`:
                Johnson & Christy 1974 joined to Ordal et al. 1988, 0.188-286 um). Read
                where npfe_bounds' upper bound is > 0. Where `npfe_fraction` is 0 and
                iron's table does not cover the bands, the endmembers are made without
                it: npFe0 stays at 0 and `unmix(..., free="npfe")` is refused.
            reflections: the slab model's variant of the surface reflections (as
                `slab_albedo` takes it; so is ``mean_path``).
            extinction_efficiency: Q_j, default 1.

        Raises:
            ValueError: naming the argument: wavelengths not in micrometres, constants
                not covering a band (iron's where npfe_fraction > 0), a missing density,
                a grain size outside its bounds, bad bounds or variants.
        """
        return endmembers_from_optical_constants(
            cls,
            constants,
            grain_size,
            wavelengths_um("wavelengths", wavelengths),
            names=names,
            density=density,
            npfe_fraction=npfe_fraction,
            internal_scattering=internal_scattering,
            grain_size_bounds=grain_size_bounds,
            npfe_bounds=npfe_bounds,
            iron=iron,
            reflections=reflections,
            mean_path=mean_path,
            extinction_efficiency=extinction_efficiency,
        )

    @classmethod
    def from_library(
        cls,
        library,
        params: HapkeParams,
        *,
        density,
        grain_size,
        wavelengths,
        fwhm=None,
        extinction_efficiency=None,
        solver: str = "numba",
        phase=None,
    ) -> Endmembers:
        """Endmembers from a `SpectralLibrary` (laboratory spectra read from files).

        The spectra are resampled to the cube's bands (`SpectralLibrary.resample`:
        Gaussian responses of the band centres and widths), then each w_j is found by
        `from_reflectance` at its spectrum's own measurement geometry
        (``library.incidence``, ``library.emission``, ``library.azimuth``).

        Args:
            library: a `lumaxlike.SpectralLibrary` (`lumaxlike.read_spectral_library`).
            params: the `HapkeParams` the spectra are inverted with.
            density: rho_j [g/cm^3], scalar or (n_endmembers,); grain_size: D_j [um],
                scalar or (n_endmembers,); extinction_efficiency: Q_j, default 1.
            wavelengths: the cube's band centres [um], shape (bands,).
            fwhm: the cube's band full widths at half maximum [um], scalar or (bands,);
                default: the band spacing.
            solver: `invert`'s solver.
            phase: the endmembers' own phase functions, as for `from_reflectance` (per
                band: on the cube's bands).

        Returns:
            `Endmembers` named as the library's spectra, with ``wavelengths`` the cube's.

        Raises:
            ValueError: naming the spectrum and its file where it does not cover a band
                of the cube or `invert` cannot fit it, or a bad argument.
        """
        from .._spectral_library import SpectralLibrary

        if not isinstance(library, SpectralLibrary):
            raise ValueError(
                f"library must be a lumaxlike.SpectralLibrary, got {type(library).__name__}"
            )
        resampled = library.resample(wavelengths, fwhm)
        try:
            return cls.from_reflectance(
                resampled.reflectance,
                resampled.incidence,
                resampled.emission,
                resampled.azimuth,
                params,
                density,
                grain_size,
                names=resampled.names,
                extinction_efficiency=extinction_efficiency,
                wavelengths=resampled.wavelengths,
                solver=solver,
                phase=phase,
            )
        except ValueError as error:  # name the file of the spectrum invert could not fit
            failed = [
                f"{name!r} ({source})"
                for name, source in zip(resampled.names, resampled.sources)
                if source and repr(name) in str(error)
            ]
            if failed:
                raise ValueError(f"{error}; spectrum {failed[0]}") from error
            raise

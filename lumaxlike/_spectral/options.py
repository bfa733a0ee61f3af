"""`SpectralSettings`: every option of the spectral parameters, declared once.

`lumaxlike.spectral_parameters`, `spectral_parameters_file`,
`spectral_parameters_dataarray` (and ``DataArray.hapke.spectral_parameters``) take these
by name or as ``settings=``; ``lumaxlike parameters`` takes those the command line offers
as flags (``--quantity``, ``--tolerance``); `lumaxlike._declared_options` derives it from
the fields below. What is no option stays each front end's own argument: the spectra and
what is shaped like them (``wavelengths``, ``bad_bands``), the products asked for (they
make the maps), how a file is read (``units``, the product's options) and where the work
runs. To add an option: a field here and its test (docs/design.md, "How to add an
option").

Imports nothing heavy: the command line's parser is built from it.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._declared_options import DeclaredOptions, option, positive, positive_float
from .defaults import DEFAULT_TOLERANCE

if TYPE_CHECKING:
    from .lucey import LuceyConstants

__all__ = ["QUANTITIES", "SpectralSettings"]

QUANTITIES = types.MappingProxyType(
    {
        "w": "single-scattering albedo w (lumaxlike.invert)",
        "normalized": "reflectance at a standard geometry (lumaxlike.normalize)",
        "r": "bidirectional reflectance r [1/sr]",
        "radf": "radiance factor RADF (I/F)",
        "reff": "reflectance factor REFF",
        "reflectance": "reflectance, of a kind not said",
    }
)
"""What spectra can hold, as `spectral_parameters` records it: a band depth of w and one
of I/F are different quantities."""


def _check_lucey(name: str, value) -> None:
    from .lucey import LuceyConstants

    if not isinstance(value, LuceyConstants):
        raise ValueError(f"{name} must be a lumaxlike.LuceyConstants, got {type(value).__name__}")


def _lucey_record(value) -> dict | None:
    """The constants as the record keeps them (their fields), None for Clementine's."""
    return None if value is None else dataclasses.asdict(value)


def _nanometres(text: str) -> float:
    """The command line's old ``--tolerance-nm``: a positive number of nm, as um."""
    return positive_float(text) / 1000.0


@dataclass(frozen=True)
class SpectralSettings(DeclaredOptions):
    """How the named spectral products are computed: the options of
    `lumaxlike.spectral_parameters`, `lumaxlike.spectral_parameters_file`,
    `lumaxlike.spectral_parameters_dataarray` (each takes them by name, or as one
    ``settings=``) and ``lumaxlike parameters`` (a flag each where it has one:
    ``--quantity w``). Each is declared once, below: its default, unit, check and record
    there, its meaning here (the command line's help reads it from here).

    Attributes:
        quantity: what the spectra hold, given by every run and recorded with the maps
            (a band depth of w is not one of I/F): w (single-scattering albedo, from
            `invert`), normalized (reflectance at a standard geometry, from `normalize` or
            an M3 L2 product), r, radf (I/F), reff, or reflectance of a kind not said.
        tolerance: how far [um] the band nearest a product's wavelength may lie from it;
            0.01 um is half of M3's 20 nm spacing near 1 um.
        lucey: the constants of FeO, TiO2 and OMAT, a `lumaxlike.LuceyConstants` (None:
            Clementine's, fitted to reflectance at 30 deg incidence and 0 deg emission; on
            w or on another geometry these products need their own constants).

    Raises:
        ValueError: naming the option, for a value its check refuses, and for no
            quantity.
    """

    # required: its default None is refused (`check_together`), but declared, as every
    # option's is (the signatures and the parser read it)
    quantity: str = option(None, choices=tuple(QUANTITIES), parse=str, required=True)
    tolerance: float = option(
        DEFAULT_TOLERANCE,
        unit="um",
        check=positive("um", finite=False),
        parse=positive_float,
        metavar="UM",
        aliases=(("--tolerance-nm", _nanometres),),  # in nm: 10 is 0.01 um
    )
    lucey: LuceyConstants | None = option(None, check=_check_lucey, record=_lucey_record)

    def check_together(self) -> None:
        """The quantity is required: no product is recorded without it."""
        if self.quantity is None:
            raise ValueError(
                f"quantity is required: what the spectra hold, one of {list(QUANTITIES)}"
            )

"""Intimate-mixture unmixing through the Hapke model: mass fractions per pixel."""

from .endmembers import Endmembers
from .result import UnmixResult
from .unmix import unmix, unmix_flat

__all__ = ["Endmembers", "UnmixResult", "unmix", "unmix_flat"]

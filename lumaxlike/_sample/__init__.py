"""Posterior sampling of the Hapke parameters (blackjax HMC, batched over problems)."""

from .result import SampleResult
from .sample import sample

__all__ = ["SampleResult", "sample"]

"""How `sample`'s problems lie in its arrays: one problem per (pixel, band), or per pixel
when some parameters are shared by its bands (then its D = bands p + s parameters are
band 0's p per-band ones, band 1's, ..., then the s shared ones, as in
`JointFitResult.full_covariance`)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._inverse.joint.priors import prior_arrays

__all__ = ["ProblemLayout"]


class ProblemLayout(NamedTuple):
    """The problems of a call: pixel shape, bands, per-band and shared names."""

    pixel_shape: tuple
    n_bands: int
    band_free: tuple
    shared: tuple

    @property
    def n_pixels(self) -> int:
        return int(np.prod(self.pixel_shape, dtype=np.int64))

    def _flat(self, array, trailing: int):
        """(n_pixels, ...) from ``pixels + (...)``, keeping `trailing` axes."""
        array = np.asarray(array)
        return array.reshape((self.n_pixels,) + array.shape[array.ndim - trailing :])

    def fit_start(self, warm):
        """The warm-start fit's values (problems, D) and covariance (problems, D, D):
        problems (pixels, bands) with D = p, or (pixels,) with D = bands p + s."""
        if not self.shared:
            values = np.stack([self._flat(warm.values[n], 1) for n in self.band_free], -1)
            covariance = getattr(warm, "covariance_bands", None)
            if covariance is None:
                covariance = warm.covariance
            return values, self._flat(covariance, 3)
        per_band = np.stack([self._flat(warm.values[n], 1) for n in self.band_free], -1)
        shared = np.stack([self._flat(warm.values[n], 0) for n in self.shared], -1)
        values = np.concatenate([per_band.reshape(self.n_pixels, -1), shared], axis=-1)
        return values, self._flat(warm.full_covariance(), 2)

    def prior_vectors(self, priors):
        """(mean, precision) of every problem's parameters, shaped like `fit_start`'s
        values (precision 0: no prior)."""
        mean_b, weight_b, mean_s, weight_s = prior_arrays(
            priors, self.band_free, self.shared, 0, self.n_pixels, self.n_bands
        )
        if not self.shared:
            return mean_b, weight_b**2
        mean = np.concatenate([mean_b.reshape(self.n_pixels, -1), mean_s], axis=-1)
        weight = np.concatenate([weight_b.reshape(self.n_pixels, -1), weight_s], axis=-1)
        return mean, weight**2

    def per_problem(self, vector):
        """A per-parameter vector in `free` order (per-band ones, then shared) laid out
        as one problem's D parameters."""
        vector = np.asarray(vector)
        if not self.shared:
            return vector
        p = len(self.band_free)
        return np.concatenate([np.tile(vector[:p], self.n_bands), vector[p:]])

    def flat_status(self, status):
        """The warm-start fit's status, (pixels, bands) or (pixels,)."""
        return np.asarray(status).reshape(
            (self.n_pixels,) + ((self.n_bands,), ())[bool(self.shared)]
        )

    def problem_array(self, array):
        """(problems..., rest) -> ``pixels + (bands,) + rest`` or ``pixels + rest``."""
        return array.reshape(self.pixel_shape + array.shape[1:])

    def by_name(self, array):
        """{name: array} from (problems..., D, rest): a per-band parameter's
        ``pixels + (bands,) + rest``, a shared one's ``pixels + rest``."""
        if not self.shared:
            return {
                name: self.problem_array(array[:, :, j]) for j, name in enumerate(self.band_free)
            }
        p, n_per_band = len(self.band_free), self.n_bands * len(self.band_free)
        named = {
            name: self.problem_array(array[:, j:n_per_band:p])
            for j, name in enumerate(self.band_free)
        }
        for q, name in enumerate(self.shared):
            named[name] = self.problem_array(array[:, n_per_band + q])
        return named

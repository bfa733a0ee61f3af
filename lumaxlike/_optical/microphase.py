"""Microphase (Britt-Pieters) iron: the absorption coefficient that iron spheres too large
for the Rayleigh limit add to a host grain, from Mie theory (`miepython`)."""

import numpy as np

from .._model.slab_equations import IRON_DENSITY

__all__ = ["microphase_absorption_coefficient"]


def microphase_absorption_coefficient(n_host, wavelength, n_iron, k_iron, host_density, diameter):
    """d alpha / d f_mp [1/um]: the absorption coefficient that a unit mass fraction of
    iron spheres of `diameter` [um] adds to a host of index `n_host` and density
    `host_density` [g/cm^3] at `wavelength` [um] (all broadcast).

    alpha = N sigma_abs = (3/2) phi Q_abs / d for a volume fraction phi = f rho_host /
    rho_Fe of spheres of diameter d, with Q_abs = Q_ext - Q_sca of the relative index
    (n_Fe + i k_Fe) / n_host at size parameter x = pi d n_host / lambda (Mie theory; Lucey
    & Riner 2011). In the Rayleigh limit (x -> 0) this is the nanophase iron term
    36 pi z phi / lambda. The light the spheres scatter is not counted.
    """
    import miepython

    arrays = np.broadcast_arrays(
        *(
            np.asarray(value, dtype=np.float64)
            for value in (n_host, wavelength, n_iron, k_iron, host_density, diameter)
        )
    )
    n_host, wavelength, n_iron, k_iron, host_density, diameter = (a.ravel() for a in arrays)
    relative = (n_iron - 1j * k_iron) / n_host  # miepython: absorption as -i k
    size = np.pi * diameter * n_host / wavelength
    q_ext, q_sca, _, _ = miepython.efficiencies_mx(relative, size)
    q_abs = np.asarray(q_ext, dtype=np.float64) - np.asarray(q_sca, dtype=np.float64)
    coefficient = 1.5 * (host_density / IRON_DENSITY) * q_abs / diameter
    return coefficient.reshape(arrays[0].shape)

"""The ``DataArray.hapke`` accessor, light enough to register whenever xarray is imported.

`lumaxlike/__init__.py` registers it from a post-import hook on xarray, so it is there
whatever the import order, without `import lumaxlike` importing xarray. The front ends
(`lumaxlike._xarray.invert` and the others, `lumaxlike._xarray.sample` included) are
imported at the accessor's first call: the accessor sits above both packages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["HapkeAccessor", "register"]


class HapkeAccessor:
    """``DataArray.hapke``: Hapke-model operations on a reflectance DataArray."""

    def __init__(self, data_array: xr.DataArray):
        self._data_array = data_array

    def invert(self, geometry, params, solver: str = "jax", **kwargs) -> xr.Dataset:
        """``invert_dataarray(self, geometry, params, solver, **kwargs)``; see `lumaxlike.invert_dataarray`."""
        from ._xarray.invert import invert_dataarray

        return invert_dataarray(self._data_array, geometry, params, solver, **kwargs)

    def normalize(self, geometry, params, solver: str = "jax", **kwargs) -> xr.Dataset:
        """``normalize_dataarray(self, geometry, params, solver, **kwargs)``: photometric
        normalisation to a standard geometry; see `lumaxlike.normalize_dataarray`."""
        from ._xarray.normalize import normalize_dataarray

        return normalize_dataarray(self._data_array, geometry, params, solver, **kwargs)

    def fit(
        self, geometry, params, free=("w", "b", "c"), solver: str = "jax", **kwargs
    ) -> xr.Dataset:
        """Fit Hapke parameters to multi-angle observations (an ``observation`` dim), chunk
        by chunk: ``lumaxlike.fit_dataarray(self, geometry, params, free, solver,
        **kwargs)`` (`lumaxlike.fit` through ``xarray.apply_ufunc``; see its docstring)."""
        from ._xarray.fit import fit_dataarray

        return fit_dataarray(self._data_array, geometry, params, free, solver, **kwargs)

    def sample(self, geometry, params, free=("w", "b", "c"), **kwargs) -> xr.Dataset:
        """The posterior quantiles of the free Hapke parameters per pixel and band (HMC,
        `lumaxlike.sample`), chunk by chunk, lazily on dask:
        ``lumaxlike.sample_dataarray(self, geometry, params, free, **kwargs)``."""
        from ._xarray.sample import sample_dataarray

        return sample_dataarray(self._data_array, geometry, params, free, **kwargs)

    def unmix(self, geometry, endmembers, params, solver: str = "jax", **kwargs) -> xr.Dataset:
        """``unmix_dataarray(self, geometry, endmembers, params, solver, **kwargs)``: mass
        fractions per pixel (`lumaxlike.unmix`); see `lumaxlike.unmix_dataarray`."""
        from ._xarray.unmix import unmix_dataarray

        return unmix_dataarray(self._data_array, geometry, endmembers, params, solver, **kwargs)

    def remove_thermal(self, geometry, params, solver: str = "jax", **kwargs) -> xr.Dataset:
        """``remove_thermal_dataarray(self, geometry, params, solver, **kwargs)``: the
        temperature per pixel and the thermally corrected reflectance and w; see
        `lumaxlike.remove_thermal_dataarray`."""
        from ._xarray.thermal import remove_thermal_dataarray

        return remove_thermal_dataarray(self._data_array, geometry, params, solver, **kwargs)

    def spectral_parameters(self, products, **kwargs) -> xr.Dataset:
        """``spectral_parameters_dataarray(self, products, **kwargs)``: named spectral
        products (M3, Lucey, CRISM) of these spectra, one variable each (``quantity=``,
        the options of `lumaxlike.SpectralSettings`, by name or as ``settings=``); see
        `lumaxlike.spectral_parameters_dataarray`."""
        from ._xarray.spectral import spectral_parameters_dataarray

        return spectral_parameters_dataarray(self._data_array, products, **kwargs)


def register(xarray_module) -> None:
    """Register `HapkeAccessor` as ``DataArray.hapke`` on the imported `xarray_module`."""
    xarray_module.register_dataarray_accessor("hapke")(HapkeAccessor)

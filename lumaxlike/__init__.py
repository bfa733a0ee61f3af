"""lumaxlike: per-pixel inversion of Hapke's AMSA reflectance model over hyperspectral cubes.

The package never changes global JAX configuration: float64 inputs are computed in
float64 inside a local `jax.enable_x64` scope, float32 inputs in float32.

`import lumaxlike` is light: each public name is imported at its first use (SPEC 1 lazy
loading), so JAX, numba, rasterio, xarray and dask load only when something needs them.
The xarray accessor ``DataArray.hapke`` is registered whenever xarray is imported, before
or after lumaxlike. Compiled numba kernels are cached in a per-user directory, never in
the package (see `lumaxlike._model.numba_cache`).
"""

import lazy_loader as _lazy
import wrapt as _wrapt

# the public names, listed in __init__.pyi (which type checkers read too)
_public_getattr, __dir__, __all__ = _lazy.attach_stub(__name__, __file__)


def __getattr__(name: str):
    """A public name, imported at its first use; ``__version__`` from the installed metadata.

    The version is written once, in pyproject.toml; it is read here (at first use, as
    `importlib.metadata` alone would cost a tenth of the import budget) from the metadata
    that ``pip install`` (or ``pip install -e .``) records.
    """
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version(__name__)
        except PackageNotFoundError:
            raise ImportError(
                "lumaxlike's version comes from its installed metadata, and this copy is not "
                "installed: run `pip install -e .` in the source tree"
            ) from None
        globals()["__version__"] = value
        return value
    return _public_getattr(name)


# DataArray.hapke, registered when xarray is imported (at once if it already is); the
# accessor's module is imported only then.
_wrapt.register_post_import_hook("lumaxlike._xarray_accessor:register", "xarray")

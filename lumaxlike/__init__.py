"""lumaxlike: per-pixel inversion of Hapke's AMSA reflectance model over hyperspectral cubes.

The package never changes global JAX configuration: float64 inputs are computed in
float64 inside a local `jax.enable_x64` scope, float32 inputs in float32.
"""

from ._geometry import (
    direction_from_zenith_azimuth as direction_from_zenith_azimuth,
    geometry_from_angles as geometry_from_angles,
    normals_from_dtm as normals_from_dtm,
)
from ._inverse.invert import invert as invert
from ._inverse.jax_solver import ElementwiseLevenbergMarquardt as ElementwiseLevenbergMarquardt
from ._inverse.result import InversionResult as InversionResult
from ._inverse.status import Status as Status
from ._model.forward import amsa as amsa, h_function as h_function
from ._params import HapkeParams as HapkeParams

__version__ = "0.1.0"

"""Files in and out: cube and geometry readers, mission products, laboratory spectra and
goniometer tables, result writers and their formats, and the provenance read back,
in three subpackages: `read`, `missions` and `write`.

The file front ends that use them (`invert_file`, ...) are :mod:`lumaxlike._files`.

Public names (re-exported by :mod:`lumaxlike`): :func:`read_cube`, :func:`iter_cube_blocks`,
:class:`CubeReader`, :class:`CubeInfo`, :class:`GeometryReader`, :func:`write_result`,
:class:`ResultWriter`, :func:`to_bidirectional_reflectance`, :data:`OBS_BAND_NAMES`;
from their modules: `open_product` (:mod:`.missions.product_dataarray`), `read_provenance`
(:mod:`.write.provenance_files`), `read_spectral_library` (:mod:`.read.spectral_library`),
`read_goniometer_table` and `GoniometerTable` (:mod:`.read.goniometer`).
"""

from .read.geometry_rasters import (
    ANGLE_ROLES as ANGLE_ROLES,
)
from .read.geometry_rasters import (
    OBS_BAND_NAMES as OBS_BAND_NAMES,
)
from .read.geometry_rasters import (
    GeometryReader as GeometryReader,
)
from .read.raster import (
    CubeInfo as CubeInfo,
)
from .read.raster import (
    CubeReader as CubeReader,
)
from .read.raster import (
    RasterGrid as RasterGrid,
)
from .read.raster import (
    iter_cube_blocks as iter_cube_blocks,
)
from .read.raster import (
    read_cube as read_cube,
)
from .read.units import (
    REFLECTANCE_UNITS as REFLECTANCE_UNITS,
)
from .read.units import (
    to_bidirectional_reflectance as to_bidirectional_reflectance,
)
from .write.atomic import AtomicOutputs as AtomicOutputs
from .write.writers import (
    ResultWriter as ResultWriter,
)
from .write.writers import (
    output_format as output_format,
)
from .write.writers import (
    result_paths as result_paths,
)
from .write.writers import (
    write_result as write_result,
)

__all__ = [
    "ANGLE_ROLES",
    "AtomicOutputs",
    "CubeInfo",
    "CubeReader",
    "GeometryReader",
    "OBS_BAND_NAMES",
    "REFLECTANCE_UNITS",
    "RasterGrid",
    "ResultWriter",
    "iter_cube_blocks",
    "output_format",
    "read_cube",
    "result_paths",
    "to_bidirectional_reflectance",
    "write_result",
]

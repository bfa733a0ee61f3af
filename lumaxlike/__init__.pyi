"""Public API of lumaxlike: read by type checkers, and by `lazy_loader.attach_stub` in
`__init__.py`, which imports each name at its first use. Add public names here."""

__version__: str

from . import demo as demo
from . import testing as testing
from ._files import fit_file as fit_file
from ._files import invert_file as invert_file
from ._files import normalize_file as normalize_file
from ._files import remove_thermal_file as remove_thermal_file
from ._files import sample_file as sample_file
from ._files import spectral_parameters_file as spectral_parameters_file
from ._files import unmix_file as unmix_file
from ._geometry import (
    angles_from_geometry as angles_from_geometry,
)
from ._geometry import (
    direction_from_zenith_azimuth as direction_from_zenith_azimuth,
)
from ._geometry import (
    geometry_from_angles as geometry_from_angles,
)
from ._geometry import (
    normal_from_slope_aspect as normal_from_slope_aspect,
)
from ._geometry import (
    normals_from_dtm as normals_from_dtm,
)
from ._inverse.albedo.invert import invert as invert
from ._inverse.elementwise_lm import ElementwiseLevenbergMarquardt as ElementwiseLevenbergMarquardt
from ._inverse.fit.arguments import default_bounds as default_bounds
from ._inverse.fit.fit import fit as fit
from ._inverse.fit.options import FitSettings as FitSettings
from ._inverse.joint.result import JointFitResult as JointFitResult
from ._inverse.options import InvertSettings as InvertSettings
from ._inverse.result import FitResult as FitResult
from ._inverse.result import InversionResult as InversionResult
from ._io import (
    OBS_BAND_NAMES as OBS_BAND_NAMES,
)
from ._io import (
    CubeInfo as CubeInfo,
)
from ._io import (
    CubeReader as CubeReader,
)
from ._io import (
    GeometryReader as GeometryReader,
)
from ._io import (
    ResultWriter as ResultWriter,
)
from ._io import (
    iter_cube_blocks as iter_cube_blocks,
)
from ._io import (
    read_cube as read_cube,
)
from ._io import (
    to_bidirectional_reflectance as to_bidirectional_reflectance,
)
from ._io import (
    write_result as write_result,
)
from ._io.missions.product_dataarray import open_product as open_product
from ._io.read.goniometer import (
    GoniometerTable as GoniometerTable,
)
from ._io.read.goniometer import (
    read_goniometer_table as read_goniometer_table,
)
from ._io.read.spectral_library import read_spectral_library as read_spectral_library
from ._io.write.provenance_files import read_provenance as read_provenance
from ._model.forward import amsa as amsa
from ._model.forward import h_function as h_function
from ._model.model_forward import reflectance as reflectance
from ._normalize.normalize import NormalizationResult as NormalizationResult
from ._normalize.normalize import normalize as normalize
from ._normalize.options import NormalizeSettings as NormalizeSettings
from ._optical.constants import OpticalConstants as OpticalConstants
from ._optical.shipped import optical_constants as optical_constants
from ._optical.shipped import optical_constants_names as optical_constants_names
from ._optical.slab import slab_albedo as slab_albedo
from ._options import ProductOptions as ProductOptions
from ._options import RunOptions as RunOptions
from ._options import SolverOptions as SolverOptions
from ._params import (
    HapkeParams as HapkeParams,
)
from ._params import (
    porosity_k_from_filling_factor as porosity_k_from_filling_factor,
)
from ._photometric import PhotometricFunction as PhotometricFunction
from ._provenance import Provenance as Provenance
from ._run.progress import InversionSummary as InversionSummary
from ._sample.options import SampleSettings as SampleSettings
from ._sample.result import SampleResult as SampleResult
from ._sample.sample import sample as sample
from ._spectral.bands import BandParameters as BandParameters
from ._spectral.bands import band_parameters as band_parameters
from ._spectral.continuum import continuum_removed as continuum_removed
from ._spectral.declarations import SpectralProduct as SpectralProduct
from ._spectral.lucey import LuceyConstants as LuceyConstants
from ._spectral.options import SpectralSettings as SpectralSettings
from ._spectral.products import SPECTRAL_PRODUCTS as SPECTRAL_PRODUCTS
from ._spectral.products import SpectralParameters as SpectralParameters
from ._spectral.products import available_spectral_products as available_spectral_products
from ._spectral.products import spectral_parameters as spectral_parameters
from ._spectral_library import SpectralLibrary as SpectralLibrary
from ._status import Status as Status
from ._thermal.api import ThermalResult as ThermalResult
from ._thermal.api import remove_thermal as remove_thermal
from ._thermal.options import ThermalSettings as ThermalSettings
from ._unmix.endmembers import Endmembers as Endmembers
from ._unmix.options import UnmixSettings as UnmixSettings
from ._unmix.result import UnmixResult as UnmixResult
from ._unmix.unmix import unmix as unmix
from ._xarray.fit import fit_dataarray as fit_dataarray
from ._xarray.invert import invert_dataarray as invert_dataarray
from ._xarray.normalize import normalize_dataarray as normalize_dataarray
from ._xarray.sample import sample_dataarray as sample_dataarray
from ._xarray.spectral import spectral_parameters_dataarray as spectral_parameters_dataarray
from ._xarray.thermal import remove_thermal_dataarray as remove_thermal_dataarray
from ._xarray.unmix import unmix_dataarray as unmix_dataarray

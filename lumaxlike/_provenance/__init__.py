"""How an output was made: the record every lumaxlike output carries, and reading it back.

Every result file (GeoTIFF and ENVI tags, netCDF and zarr global attributes) and the Dataset
returned by `lumaxlike.invert_dataarray` holds these ``lumaxlike_*`` keys, each value
JSON text (so numbers and lists round-trip exactly):

=============================  ========================================================
key                            value
=============================  ========================================================
``lumaxlike_version``          lumaxlike's version, e.g. ``"0.1.0"``
``lumaxlike_model``            ``{component: choice}``: ``reflectance``, ``h_function``,
                               ``roughness``, ``opposition``, ``phase_function``
``lumaxlike_bands``            number of spectral bands
``lumaxlike_param_<name>``     one per `lumaxlike.HapkeParams` field, in its units
                               (``roughness`` in radians): a number when every band has
                               the same value, else a list with one value per band;
                               ``legendre`` only when some band uses Legendre coefficients
``lumaxlike_units``            what the input held: ``"r"``, ``"radf"`` or ``"reff"``
``lumaxlike_solver``           ``"numba"`` or ``"jax"``
``lumaxlike_tol``              convergence tolerance on the step in w (the value used)
``lumaxlike_max_iter``         iteration limit (the value used)
``lumaxlike_refl_sigma``       standard uncertainty of the input, in its units; ``null``
``lumaxlike_input_cube``       input file (absolute path; ``null`` for in-memory data)
``lumaxlike_input_geometry``   OBS raster path, a list of ``[role, path]`` pairs, or null
``lumaxlike_input_dtm``        DTM path or ``null`` (flat surface)
``lumaxlike_geometry_layout``  (file inputs only) how the geometry was read: ``surface``
                               (``"local"`` or ``"ellipsoid"``), ``layout`` (one line),
                               ``bands`` / ``checked`` / ``not_read``: ``{role: band}``
``lumaxlike_command``          the command line, or the Python call
``lumaxlike_created``          when the run started, UTC ISO 8601
``lumaxlike_standard_deg``     (photometric normalisation only) the standard geometry
                               ``[incidence, emission, phase]`` in degrees
``lumaxlike_input_param_maps`` (normalisation with parameter maps only) a list of
                               ``[field, path]`` pairs, roughness maps in degrees
``lumaxlike_product``          (file inputs only) what the input cube is and what was
                               done with it: ``kind`` (e.g. "M3 L2 reflectance (RFL)"),
                               ``label``, ``wavelengths`` (their source, or "unknown"),
                               ``bad_bands``, ``thermal_bands``, the radiance conversion
                               (``solar_spectrum``, ``solar_distance_au``), the
                               ``geometry`` used and why (see docs/mission-products.md)
``lumaxlike_fit_<key>``        (``fit`` outputs only) ``free``, ``cubes``,
                               ``geometries``, ``fitted_maps`` (``{name: path}``), ...;
                               the ``param_*`` keys then hold the starting values
``lumaxlike_unmix_<key>``      (``unmix`` outputs only) ``route``, ``sum_to_one``,
                               ``endmembers``, ``density``, ``grain_size``,
                               ``extinction_efficiency``, ``library``
``lumaxlike_sample_<key>``     (``sample`` outputs only) ``free``, ``cubes``, ``prior``,
                               ``refl_sigma``, ``num_samples``, ``num_chains``,
                               ``num_warmup``, ``seed``, ``median_maps``, ...; the
                               ``param_*`` keys then hold the warm start's values
=============================  ========================================================

A new model choice (another H-function, phase function or multiple-scattering scheme) is
one more value of a ``lumaxlike_model`` component plus its ``lumaxlike_param_*`` keys.
An empirical photometric function (`lumaxlike.PhotometricFunction`) is recorded
as the model ``{"reflectance": <its name>}`` (`PHOTOMETRIC_TEXT`) with one
``lumaxlike_param_<name>`` per parameter of ``PhotometricFunction`` (``limb_darkening``,
``minnaert_k``, ``mu1``, ``m``, ``mu2``, ``eta``) instead of the Hapke ones.
netCDF and zarr outputs also get the CF global attributes ``Conventions``, ``source`` and
``history``.

`read_provenance` (`lumaxlike._io.write.provenance_files`) reads the record back from any output (the ``w`` map, any sibling
map, a netCDF file or a zarr store); ``lumaxlike invert CUBE --params-from OLD --out NEW``
reruns with it.

The record is :mod:`.record` (`Provenance`, `make_provenance`); the words it is written
in (the model's components, the configuration, the inputs' paths, the Python call) are
:mod:`.describe`.
"""

from .describe import (
    MODEL,
    PREFIX,
    OptionsCall,
    configuration_of,
    geometry_record,
    model_of,
    python_call,
    utc_now,
)
from .record import Provenance, make_provenance

__all__ = [
    "MODEL",
    "OptionsCall",
    "PREFIX",
    "Provenance",
    "configuration_of",
    "geometry_record",
    "make_provenance",
    "model_of",
    "python_call",
    "utc_now",
]

"""The xarray front ends: a reflectance DataArray in, maps out, in memory or chunk by chunk
with dask.

One module per front end, each wrapping its operation with ``xarray.apply_ufunc(...,
dask="parallelized")``: a NumPy-backed cube is solved at once, a dask-backed one chunk by
chunk (on whatever scheduler computes it: threads, processes, a dask.distributed cluster):

* :mod:`.invert`: `invert_dataarray` (`lumaxlike.invert`);
* :mod:`.normalize`: `normalize_dataarray` (`lumaxlike.normalize`);
* :mod:`.fit`: `fit_dataarray` (`lumaxlike.fit`, an observation dim; its regional fits
  :mod:`.regions`);
* :mod:`.unmix`: `unmix_dataarray` (`lumaxlike.unmix`);
* :mod:`.sample`: `sample_dataarray` (`lumaxlike.sample`, an observation dim);
* :mod:`.per_band`: the one body of `invert_dataarray` and `normalize_dataarray`
  (`solve_bands`);
* :mod:`.chunks`: what they all share (argument checks, inputs aligned and chunked, a
  chunk's reflectance and geometry, attrs and provenance); :mod:`.geometry`: the
  geometry Dataset turned into vectors.

The ``DataArray.hapke`` accessor (``refl.hapke.invert(...)`` and the others, `sample`
included) is :mod:`lumaxlike._xarray_accessor`, above this package and `lumaxlike._sample`.
This ``__init__`` imports nothing (importing a front end stays as light as its module):
the public names are re-exported by `lumaxlike/__init__.pyi` from their modules.

Geometry is a Dataset (or a dict of DataArrays) aligned with the cube on its pixel dims,
holding either

* the angles ``to_sun_zenith``, ``to_sun_azimuth``, ``to_sensor_zenith``,
  ``to_sensor_azimuth`` in degrees (radians when a variable's ``units`` attribute says
  ``rad``), azimuths clockwise from north; or
* the vectors ``to_sun`` and ``to_sensor`` (east, north, up) with one extra dim of
  size 3;

plus, optionally, ``normal`` vectors with a dim of size 3 (default: a flat surface); or

* the angles ``incidence``, ``emission``, ``phase`` (same units rule), relative to the
  surface, without ``normal`` (see :func:`lumaxlike.geometry_from_angles`; an
  inconsistent triplet gives that pixel the status ``NONFINITE_INPUT``).

Numba threads: the numba solver uses ``num_threads`` threads per chunk. By default (None)
a chunk computed in a dask worker (a dask.distributed worker, or a worker thread of
dask's threaded scheduler) uses one thread, as dask's own workers set
``OMP_NUM_THREADS=1``: the dask workers supply the parallelism. A NumPy-backed cube
inverted in the main thread uses numba's full thread count. JAX is not fork-safe: use
dask's default ``spawn`` start method for worker processes.
"""

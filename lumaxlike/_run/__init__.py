"""The run layer: how a file command's blocks are streamed, solved and written.

Between the front ends (``invert_file``, ``normalize_file``, ``fit_file``,
``unmix_file``, ``sample_file`` and their xarray twins) and the IO layer
(:mod:`lumaxlike._io`: readers, writers, formats) and the operations
(:mod:`lumaxlike._inverse`, :mod:`lumaxlike._unmix`, :mod:`lumaxlike._normalize`,
:mod:`lumaxlike._sample`):

The run layer knows no operation: it runs the block task an operation declares
(:mod:`lumaxlike._operations`) on the blocks a front end reads.

* :mod:`.pool`: :class:`~.pool.BlockPool`, blocks solved here or on a dask.distributed
  cluster (:mod:`.cluster`; :mod:`.dask_worker` is what its workers preload), results
  in order;
* :mod:`.stream`: :func:`~.stream.run_blocks`, the block loop every file command runs:
  read, solve, write, journal, publish;
* :mod:`.region_groups`: regional fits' regions packed into groups under a memory cap;
* :mod:`.journal`: what a killed run finished, for ``--resume``;
* :mod:`.progress`: the progress bar and the run summary.
"""

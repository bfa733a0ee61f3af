"""The operations as data: one module per operation (`invert`, `normalize`, `unmix`,
`fit`, `sample`, `spectral`, `thermal`) holds its declaration (`declaration.Operation`),
its block task on NumPy arrays and the maps it writes; `blocks` what the block tasks
share. Every front end (files, xarray, the command line) reads these; the run layer takes
the block task and nothing else."""

"""An operation run on one cube file, block by block (`run_on_cube`): what the file front
ends of the operations on one cube (`invert_file`, `normalize_file`, `unmix_file`, ...)
do alike.

The front end checks its own arguments and says, in a `BlockPlan` made once the cube is
open, what its block task gets beyond the block's reflectance and geometry; this module
opens the product and its geometry, records the run, and hands the blocks, the
operation's block task (`lumaxlike._operations.declaration.Operation`) and the writer to
`stream_to_outputs`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io.read.geometry_rasters import GeometryReader
from .._io.write.layout import FieldLayout
from .._operations.declaration import Operation
from .._options import ProductOptions, RunOptions, SolverOptions
from .._run.pool import BlockPool
from .._run.progress import InversionSummary
from .arguments import check_not_an_input, check_run_arguments
from .blocks import BlockSetup, block_setup
from .inputs import run_inputs
from .outputs import BlockSource, stream_to_outputs
from .records import recorded_command

__all__ = ["BlockPlan", "CubeInputs", "run_on_cube"]


@dataclass(frozen=True)
class CubeInputs:
    """The inputs of a file command on one cube (see `lumaxlike.invert_file`).

    Attributes:
        cube_path, out_path: the cube and the output path.
        units: what the cube holds (``"r"``, ``"radf"``, ``"reff"``, ``"radiance"``).
        geometry, dtm, surface: the geometry, the DTM and which angles are used.
        sigma: the cube's standard uncertainty in ``units``, or None.
        product: how the mission product is read.
        extra_files: other input files of the run (fingerprinted for ``resume``).
    """

    cube_path: Any
    out_path: Any
    units: str
    geometry: Any = None
    dtm: Any = None
    surface: str = "auto"
    sigma: float | None = None
    product: ProductOptions = field(default_factory=ProductOptions)
    extra_files: tuple = ()


@dataclass(frozen=True)
class BlockPlan:
    """What an operation's block task gets beyond a block's reflectance and geometry,
    decided once its cube is open.

    Attributes:
        params: the task's ``params`` (one model per band, or one for all).
        recorded_params: one `lumaxlike.HapkeParams` per band, for the record.
        options: the task's options; None for the run's `lumaxlike.SolverOptions`.
        extra: ``extra(rows) -> {keyword: value}`` for the task, or None.
        record: settings of the record beyond the common ones (``tol``, ``standard``,
            ``param_maps``, ...), overriding them.
        amend: fields of the record (`lumaxlike.Provenance`) to replace after it is made.
        journal: what else the maps depend on, for a resume's check.
        layout: the maps' layout where it is made from the opened cube (the names of
            `unmix_file`'s endmembers, made from its bands); None: `run_on_cube`'s.
    """

    params: Any
    recorded_params: list
    options: Any = None
    extra: Callable[[slice], dict] | None = None
    record: Mapping = field(default_factory=dict)
    amend: Mapping = field(default_factory=dict)
    journal: Mapping | None = None
    layout: FieldLayout | None = None


def run_on_cube(
    operation: Operation,
    inputs: CubeInputs,
    *,
    run: RunOptions,
    solver: SolverOptions,
    plan: Callable[[BlockSetup], BlockPlan],
    fields: list[str],
    layout: FieldLayout,
    call: Mapping,
    command: str | None = None,
    chunk_pixels: Callable[[int], int] | None = None,
) -> InversionSummary:
    """Run ``operation`` on every block of ``inputs.cube_path`` into its outputs.

    Args:
        operation: the operation's declaration (its block task, words, bad bands).
        inputs: the cube, its geometry and product, the output path.
        run, solver: how the run and the solver run (``solver.chunk_size`` is set here).
        plan: ``plan(setup) -> BlockPlan`` once the cube is open (`BlockSetup`).
        fields, layout: the maps written and their layout (its main map's name before
            the cube is opened; the plan's, `BlockPlan.layout`, where it gives one).
        call: the keywords of the recorded Python call beyond the cube, the output, the
            solver's, the run's and the product's.
        command: the command line to record, or None for the Python call.
        chunk_pixels: the solver's pixels per chunk for a number of bands, or None.

    Returns:
        `InversionSummary` (its ``verb`` the operation's).

    Raises:
        As `lumaxlike.invert_file` does.
    """
    start = time.perf_counter()
    check_run_arguments(solver.solver, inputs.units, inputs.sigma, run.chunk_rows, radiance=True)
    if not operation.geometry and (inputs.geometry is not None or inputs.dtm is not None):
        raise ValueError(
            f"{operation.name} takes no geometry and no dtm (it reads the values alone)"
        )
    files = run_inputs(
        [inputs.cube_path],
        dtm=inputs.dtm,
        geometries=[inputs.geometry],
        product=inputs.product,
        extra=inputs.extra_files,
    )
    check_not_an_input(inputs.out_path, fields, files, main=layout.main)
    with block_setup(
        inputs.cube_path,
        inputs.units,
        inputs.geometry,
        inputs.dtm,
        inputs.product,
        chunk_rows=run.chunk_rows,
        solver=solver.solver,
        max_iter=solver.max_iter,
        tol=solver.tol,
        chunk_pixels=chunk_pixels,
        bad_bands="exclude" if operation.bad_bands == "exclude" else "mark",
        with_geometry=operation.geometry,
        check_values=operation.geometry,
    ) as setup:
        block_plan = plan(setup)
        with _geometry_reader(operation, setup, inputs) as geometry_reader:
            record = _record(
                operation, setup, geometry_reader, inputs, run, solver, block_plan, call, command
            )
            published = stream_to_outputs(
                inputs.out_path,
                like=setup.info,
                fields=fields,
                provenance=record,
                rows_per_block=setup.rows_per_block,
                inputs=files,
                run=run,
                blocks=BlockSource(
                    read=setup.block_reader(
                        geometry_reader,
                        sigma=inputs.sigma,
                        params=block_plan.params,
                        options=block_plan.options,
                        extra=block_plan.extra,
                    ),
                    pool_factory=lambda: BlockPool(
                        run.workers, run.scheduler, function=operation.block()
                    ),
                    on_start=setup.cube.tell,  # every check passed: the run starts
                    bad_bands=setup.cube.bad_bands if operation.bad_bands == "mark" else None,
                    journal=block_plan.journal,
                ),
                description=f"{operation.progress} {Path(inputs.cube_path).name}",
                layout=layout if block_plan.layout is None else block_plan.layout,
            )
        return published.summary(setup.info, start, operation.verb)


def _geometry_reader(operation, setup, inputs):
    """The run's `GeometryReader` (a context), or None (`contextlib.nullcontext`) for an
    operation on the values alone (`Operation.geometry` False)."""
    if not operation.geometry:
        return contextlib.nullcontext()
    return GeometryReader(
        setup.opened.geometry, setup.info.grid, inputs.dtm, surface=inputs.surface
    )


def _record(operation, setup, geometry_reader, inputs, run, solver, block_plan, call, command):
    """The run's record (`BlockSetup.provenance`) with the plan's settings and the call."""
    settings = {
        "params": block_plan.recorded_params,
        "units": inputs.units,
        "solver": solver.solver,
        "tol": solver.tol,
        "max_iter": solver.max_iter,
        "refl_sigma": inputs.sigma,
        **block_plan.record,
        "command": recorded_command(
            command,
            operation.file_function,
            inputs.cube_path,
            inputs.out_path,
            **call,
            solver=solver.solver,
            max_iter=solver.max_iter,
            tol=solver.tol,
            surface=inputs.surface,
            workers=run.workers,
            scheduler=run.scheduler,
            product=inputs.product,
        ),
    }
    record = setup.provenance(geometry_reader, **settings)
    return dataclasses.replace(record, **block_plan.amend) if block_plan.amend else record

"""An operation run on a stack of co-registered cube files, block by block (`run_on_stack`):
what the file front ends of the operations on several observations of one scene
(`fit_file`, `sample_file`) do alike, as `lumaxlike._files.cube_run.run_on_cube` does for
the operations on one cube.

Each cube is one observation of every pixel, with its own geometry raster. This module
opens the cubes (as mission products, or as plain cubes of reflectance) and their
geometries, checked aligned and alike (`check_stack`); the front end says, in a
`StackPlan` made once they are open, how the run cuts them, what its block task gets and
what the record adds; this module records the run and hands the blocks and the writer to
`stream_to_outputs`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import rasterio

from .._compat.xla_log import without_slow_compile_banner
from .._io.missions.product_cube import ProductCube, product_options
from .._io.missions.product_geometry import check_reff_incidence
from .._io.missions.products import refuse_normalised
from .._io.missions.value_checks import check_unit_tag
from .._io.read.geometry_rasters import GeometryReader
from .._io.read.raster import GDAL_CACHE_BYTES, CubeReader, check_aligned
from .._io.write.layout import FieldLayout
from .._operations.declaration import Operation
from .._options import ProductOptions, RunOptions
from .._params import HapkeParams
from .._provenance import make_provenance
from .._run.progress import InversionSummary
from .arguments import FromBands, check_not_an_input, made
from .inputs import run_inputs
from .outputs import BlockSource, stream_to_outputs
from .records import recorded_command
from .stacks import check_stack, read_stack_block

__all__ = [
    "OpenedStack",
    "StackInputs",
    "StackPlan",
    "block_rows",
    "open_stack",
    "run_on_stack",
    "stack_arguments",
    "stack_paths",
]


@dataclass(frozen=True)
class StackInputs:
    """The inputs of a file command on a stack of cubes (see `lumaxlike.fit_file`).

    Attributes:
        cubes: the cube paths, one observation each.
        geometries: one ``geometry`` argument per cube (see `lumaxlike.invert_file`).
        out_path: the output path.
        units: what the cubes hold (``"r"``, ``"radf"``, ...).
        params: the model recorded for every band (`lumaxlike.HapkeParams`: the start),
            or a `FromBands` that makes it once the cubes are open.
        dtm: a DTM on the grid (shared by all observations), or None.
        product: how the cubes are read as mission products (`lumaxlike.ProductOptions`),
            or None for plain cubes of reflectance whose unit tag must agree with
            ``units`` (no product recorded).
        extra_files: other input files of the run (fingerprinted for ``resume``).
    """

    cubes: list[Path]
    geometries: list
    out_path: Any
    units: str
    params: HapkeParams | FromBands
    dtm: Any = None
    product: ProductOptions | None = None
    extra_files: tuple = ()


@dataclass(frozen=True)
class OpenedStack:
    """The stack's cubes and geometries opened (see `open_stack`).

    Attributes:
        readers: the cubes' readers (`ProductCube` or `CubeReader`), in order.
        geometry_readers: their `GeometryReader`, in order.
        units: the units the cubes are read in (a product's radiance: ``"radf"``).
        incidence: ``"areoid"`` where REFF is divided by the ellipsoid's cos i, else None.
        record: what the products are (``lumaxlike_product``), or None for plain cubes.
        params: the model of every band (`StackInputs.params`, made of the cubes' bands
            where a `FromBands`).
    """

    readers: list
    geometry_readers: list
    units: str
    incidence: str | None
    record: dict | None
    params: HapkeParams

    @property
    def info(self):
        """The first cube's `CubeInfo` (the stack's grid and bands)."""
        return self.readers[0].info

    def bad_bands(self) -> np.ndarray:
        """Per band, whether any cube marks it bad (bool ``(bands,)``)."""
        return np.any([reader.bad_bands for reader in self.readers], axis=0)

    def read(self, rows: slice) -> tuple:
        """A block of rows of every cube, stacked (`read_stack_block`): r ``(rows, cols,
        bands, observations)`` [1/sr] and to_sun, to_sensor, normal ``(rows, cols,
        observations, 3)``."""
        return read_stack_block(
            self.readers, self.geometry_readers, rows, self.units, self.incidence
        )

    def tell(self) -> None:
        """Every check passed: the run starts (each cube says what it read)."""
        for reader in self.readers:
            reader.tell()


@dataclass(frozen=True)
class StackPlan:
    """How a run on an opened stack goes, decided by its front end.

    Attributes:
        rows_per_block: the rows of a block.
        blocks: the blocks' source (`BlockSource`: the task, its arguments, the journal).
        record: the common record's solver settings (``solver``, ``tol``, ``max_iter``,
            ``refl_sigma``), as `make_provenance` takes them.
        settings: the operation's own record (``lumaxlike_<name>_*`` keys).
        quiet_compile: whether XLA's banner about slow compiles is silenced.
    """

    rows_per_block: int
    blocks: BlockSource
    record: Mapping
    settings: Mapping
    quiet_compile: bool = False


def run_on_stack(
    operation: Operation,
    inputs: StackInputs,
    *,
    run: RunOptions,
    plan: Callable[[OpenedStack, contextlib.ExitStack], StackPlan],
    fields,
    layout: FieldLayout,
    call: Mapping,
    command: str | None = None,
) -> InversionSummary:
    """Run ``operation`` on every block of the stack ``inputs.cubes`` into its outputs.

    Args:
        operation: the operation's declaration (its words, its file function's name).
        inputs: the cubes, their geometries, the output path.
        run: how the run goes (`lumaxlike.RunOptions`).
        plan: ``plan(opened, stack) -> StackPlan`` once the stack is open (``stack``,
            the `contextlib.ExitStack` that closes the run's files, for more of them).
        fields, layout: the maps written and their layout.
        call: the keywords of the recorded Python call beyond the cubes and the output
            (the run's and the product's are added here).
        command: the command line to record, or None for the Python call.

    Returns:
        `InversionSummary` (its ``verb`` the operation's).

    Raises:
        ValueError: naming the file, for misaligned cubes or rasters or cubes that are
            not alike (`check_stack`), a normalised product, an output that would replace
            an input; as the plan and `lumaxlike.invert_file` do.
    """
    start = time.perf_counter()
    files = run_inputs(
        inputs.cubes,
        dtm=inputs.dtm,
        geometries=inputs.geometries,
        product=inputs.product,
        extra=inputs.extra_files,
    )
    check_not_an_input(inputs.out_path, fields, files, main=layout.main)
    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES), contextlib.ExitStack() as stack:
        opened = open_stack(stack, operation, inputs)
        stack_plan = plan(opened, stack)
        provenance = _record(operation, opened, inputs, run, stack_plan, call, command)
        quiet = stack_plan.quiet_compile
        with without_slow_compile_banner() if quiet else contextlib.nullcontext():
            published = stream_to_outputs(
                inputs.out_path,
                like=opened.info,
                fields=fields,
                provenance=provenance,
                rows_per_block=stack_plan.rows_per_block,
                inputs=files,
                run=run,
                blocks=stack_plan.blocks,
                description=f"{operation.progress} {inputs.cubes[0].name}",
                layout=layout,
            )
    return published.summary(opened.info, start, operation.verb)


def open_stack(stack, operation: Operation, inputs: StackInputs) -> OpenedStack:
    """Open the cubes and their geometries under ``stack``, checked: not normalised
    (unless the product's ``correction_undone``), aligned and alike, the REFF incidence
    of a product, the unit tag of a plain cube."""
    product = inputs.product
    readers = [_open_cube(stack, operation, inputs, path) for path in inputs.cubes]
    info = readers[0].info
    for reader in readers[1:]:
        check_aligned(info.grid, reader.info.grid, "cube")
    check_stack([reader.info for reader in readers])
    incidence: str | None = None
    record: dict[str, Any] | None = None  # plain cubes: no product recorded
    if product is not None:
        incidence = check_reff_incidence(
            inputs.units, product.reff_incidence, readers[0].kind, inputs.cubes[0]
        )
        record = {"cubes": [reader.record() for reader in readers]}
        if incidence is not None:
            record["reff_incidence"] = incidence
    geometry_readers = [
        stack.enter_context(GeometryReader(g, info.grid, inputs.dtm)) for g in inputs.geometries
    ]
    units = inputs.units if product is None else readers[0].units
    params = made(inputs.params, info)
    return OpenedStack(readers, geometry_readers, units, incidence, record, params)


def _open_cube(stack, operation: Operation, inputs: StackInputs, path):
    """One cube of the stack opened under ``stack``: a `ProductCube` read as
    ``inputs.product`` says, or a `CubeReader` whose unit tag agrees with ``units``;
    refused where normalised to a standard geometry (a product: unless
    ``correction_undone``)."""
    product = inputs.product
    if product is None:
        reader = stack.enter_context(CubeReader(path))
        refuse_normalised(reader.located, operation.name)
        check_unit_tag(reader, inputs.units, path)
        return reader
    options = product_options(
        product.solar_spectrum,
        product.solar_distance,
        product.wavelengths_from,
        product.thermal_bands,
    )
    cube = stack.enter_context(ProductCube(path, inputs.units, **options))
    if not product.correction_undone:
        refuse_normalised(cube.located, operation.name)
    return cube


def stack_arguments(call: Mapping, geometry: str = "geometry") -> tuple[list[Path], list]:
    """A file function's ``cubes`` (as paths) and ``geometry`` (a list) from its call
    (``locals()``), with its ``params``, refused naming the argument (``geometry``: its
    name in the message): no cubes, a count of geometries other than the cubes', params
    that are not one `lumaxlike.HapkeParams` (or a `FromBands` that makes one)."""
    cubes, geometries = [Path(c) for c in call["cubes"]], list(call["geometry"])
    if not cubes:
        raise ValueError("give at least one cube")
    if len(geometries) != len(cubes):
        raise ValueError(
            f"{geometry} gives {len(geometries)} rasters for {len(cubes)} cubes (one per "
            "cube, in order)"
        )
    params = call["params"]
    if not isinstance(params, (HapkeParams, FromBands)):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    return cubes, geometries


def block_rows(chunk_rows, row_bytes: int, target_bytes: int, height: int) -> int:
    """Rows per block: ``chunk_rows`` when given, else as many as fit ``target_bytes``
    at ``row_bytes`` a row [bytes], at least one and at most the image's ``height``."""
    if chunk_rows is not None:
        return int(chunk_rows)
    return int(max(1, min(target_bytes // row_bytes, height)))


def stack_paths(cubes, geometries) -> dict[str, list]:
    """The cubes (paths) and geometries (``geometry`` arguments) as an operation's record
    keeps them (``cubes``, ``geometries``): absolute paths, None for a geometry given as
    arrays."""
    return {
        "cubes": [str(Path(p).absolute()) for p in cubes],
        "geometries": [
            str(Path(g).absolute()) if isinstance(g, (str, Path)) else None for g in geometries
        ],
    }


def _record(operation, opened, inputs, run, stack_plan, call, command):
    """The run's record: the common one (the recorded params for every band, the plan's
    solver settings, the products, the call) with the operation's settings."""
    provenance = make_provenance(
        params=[opened.params] * opened.info.bands,
        units=inputs.units,
        **stack_plan.record,
        dtype=opened.info.dtype,
        cube=None,
        geometry=None,
        dtm=inputs.dtm,
        product=opened.record,
        command=recorded_command(
            command,
            operation.file_function,
            [str(p) for p in inputs.cubes],
            inputs.out_path,
            **call,
            workers=run.workers,
            scheduler=run.scheduler,
            product=inputs.product,
        ),
    )
    return dataclasses.replace(provenance, **{f"{operation.name}_settings": stack_plan.settings})

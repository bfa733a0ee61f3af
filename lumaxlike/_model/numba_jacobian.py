"""r and its derivatives with respect to any chosen Hapke parameters, compiled by numba.

The derivatives are JAX's: `jax.jvp` of the very equations the forward model evaluates
(`equations.terms_from_geometry` then the JAX model's `reflectance_core`, whose custom JVP
rule gives dr/dw analytically; autodiff for the others), one JVP per free parameter,
traced to a scalar jaxpr (`columns_program.traced_columns`, the program the JAX `fit`
evaluates too), printed as straight-line Python by `_jaxpr_to_python` (the primal part
shared by the JVPs printed once) and compiled by numba. So the numba solvers get exact
(autodiff) derivatives of the same physics, and an edit to `equations` reaches them with
no second copy to keep in step.

The program is split by data dependence (`scalar_jaxpr_to_split_source`): everything that
depends only on an observation's geometry and the fixed parameters is computed once per
observation (`ColumnFunctions.hoist`, into a row of residual values); what depends on the
free parameters alone once per step (`ColumnFunctions.prepare`: tan theta-bar, b^n, ...);
the rest for every observation at every step (`ColumnFunctions.columns`). For w alone,
the row holds the w-independent terms of the model (what `invert` hoists by hand); with
roughness fixed, the roughness terms; and so on for any set of free parameters.

Each set of free parameters gets its own functions, generated on first use and kept on
disk in lumaxlike's per-user cache directory (`numba_cache.cache_dir()`,
``generated/columns_<digest>.py``), where numba also caches their machine code and that
of the kernels compiled around them (`hoisted_rows` here, the solver's in `_inverse/fit/numba_solver.py`):
the first process pays the generation and compilation (~3-10 s), later ones load them.
The digest covers what the generated code is made from (the free parameters, the model
configuration, every source file of `lumaxlike._model` and `_params`, the versions of
lumaxlike, JAX and numba), so an edit to the equations generates new code. Where the
cache directory cannot be written, the code is generated and compiled in each process.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import jax
import numba
import numpy as np

from .. import __version__
from .._params import PARAMETER_NAMES
from . import numba_cache
from ._backends import (
    EXACT_TERMS_CALL,
    numba_exact_terms_and_slopes_flat,
    numba_exact_terms_flat,
)
from ._exact_h_tables import N_CHEBYSHEV
from ._jaxpr_to_python import scalar_jaxpr_to_split_source
from .cache_temporaries import remove_stale_temporaries
from .columns_program import traced_columns
from .equations import GeometryTerms
from .family import DEFAULT_KEY, ModelKey
from .numba_cache import cached_njit, compile_variant, variant_slot
from .numba_threads import run_in_blocks

__all__ = [
    "PARAMETER_NAMES",
    "GEOMETRY_ROW",
    "ColumnFunctions",
    "model_columns",
    "model_columns_source",
    "hoisted_rows",
]

GEOMETRY_ROW = len(GeometryTerms._fields)  # length of an observation's geometry row
_VALID = GeometryTerms._fields.index("valid")
# LLVM fast-math flags of the generated code: reciprocals shared by the many divisions by
# the same denominators that derivatives make (arcp), reassociation, fused multiply-add,
# approximate-function rewrites such as pow(x, 0.5) -> sqrt(x): 1.6x faster, changes in the
# last bits only. Not "nnan"/"ninf": NaN and inf propagate exactly as without fastmath.
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}


def _traced_columns(free: tuple[str, ...], key: ModelKey):
    """`columns_program.traced_columns` in float64 (its literals printed as such)."""
    with jax.enable_x64(True):  # local scope: float64 literals in the traced program
        # the exact H's tables as scalars: a scalar program, which `_jaxpr_to_python` prints
        return traced_columns(free, key, np.float64, scalar_tables=key.h_function == "exact")


def model_columns_source(free: tuple[str, ...], key: ModelKey = DEFAULT_KEY):
    """Python source of `ColumnFunctions` for `free` in model configuration `key`:
    (source, row length, step length)."""
    argument_names = list(PARAMETER_NAMES) + list(GeometryTerms._fields)
    split = scalar_jaxpr_to_split_source(
        _traced_columns(free, key),
        argument_names,
        free,
        "_known_part",
        "_step_part",
        "_free_part",
        opaque_calls={EXACT_TERMS_CALL: ("_exact_terms_flat", 1)},
        opaque_jvps={EXACT_TERMS_CALL: ("_exact_terms_and_slopes_flat", 2 * N_CHEBYSHEV)},
    )
    fixed = [name for name in PARAMETER_NAMES if name not in free]
    free_in_order = [name for name in PARAMETER_NAMES if name in free]  # the split's order
    row_names = [f"row{k}" for k in range(split.n_residuals)]
    step_names = [f"step{k}" for k in range(split.n_step_values)]
    hoist = [
        "def hoist(parameters, geometry, row):",
        *(f"    {name} = parameters[{PARAMETER_NAMES.index(name)}]" for name in fixed),
        *(
            f"    {name} = geometry[{k}]" + (" != 0.0" if k == _VALID else "")
            for k, name in enumerate(GeometryTerms._fields)
        ),
        f"    values = _known_part({', '.join(fixed + list(GeometryTerms._fields))})",
        *(f"    row[{k}] = values[{k}]" for k in range(split.n_residuals)),
    ]
    prepare = [
        "def prepare(parameters, step):",
        *(f"    {name} = parameters[{PARAMETER_NAMES.index(name)}]" for name in free_in_order),
        f"    values = _step_part({', '.join(free_in_order)})",
        *(f"    step[{k}] = values[{k}]" for k in range(split.n_step_values)),
    ]
    columns = [
        "def columns(step, row, out):",
        *(f"    {name} = row[{k}]" for k, name in enumerate(row_names)),
        *(f"    {name} = step[{k}]" for k, name in enumerate(step_names)),
        f"    values = _free_part({', '.join(row_names + step_names)})",
        *(f"    out[{k}] = values[{k}]" for k in range(len(free) + 1)),
    ]
    wrappers = "\n\n\n".join("\n".join(lines) for lines in (hoist, prepare, columns))
    return split.source + "\n\n" + wrappers + "\n", split.n_residuals, split.n_step_values


class ColumnFunctions(NamedTuple):
    """The numba-compiled model of one set of free parameters (see the module docstring).

    hoist(parameters, geometry, row): once per observation, from all `PARAMETER_NAMES`
        values (the free ones are ignored) and its `GeometryTerms` row, writes the
        `row_length` values the rest needs.
    prepare(parameters, step): once per step, from the free parameters' values, writes
        the `step_length` values that depend on them alone.
    columns(step, row, out): per observation and step, out[0] = r [1/sr] and
        out[1 + j] = dr/d(free[j]).
    name: a short name unique to this generated code (the digest), for the cache entries
        of kernels compiled around it; module: the generated module when it lives in a
        file (a kernel that compiles it in lists it in its ``inlines``), else None.
    """

    hoist: object
    prepare: object
    columns: object
    row_length: int
    step_length: int
    name: str
    module: object


def _generation_digest(free: tuple[str, ...], key: ModelKey) -> str:
    """Digest of everything the generated source of (`free`, `key`) is made from."""
    import jax

    digest = hashlib.sha256(
        f"lumaxlike {__version__}, jax {jax.__version__}, numba {numba.__version__}, {free!r}, {key!r}".encode()
    )
    model_dir = Path(__file__).parent
    for source in (*sorted(model_dir.glob("*.py")), model_dir.parent / "_params.py"):
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()[:24]


_TEMPORARY_PREFIX = ".tmp-"  # a generated module being written


def _generated_module(free: tuple[str, ...], key: ModelKey, digest: str):
    """The generated module, from ``generated/columns_<digest>.py`` in the cache directory
    (written there first if absent); an in-memory module where that folder is unusable."""
    name = f"lumaxlike_generated_columns_{digest}"
    path = numba_cache.cache_dir() / "generated" / f"columns_{digest}.py"
    meta = None
    try:
        if not path.is_file():
            meta = model_columns_source(free, key)
            text = _MODULE_TEMPLATE.format(
                free=free, key=key.name, row=meta[1], step=meta[2], source=meta[0]
            )
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(path.parent, f"{_TEMPORARY_PREFIX}*.py")
            with tempfile.NamedTemporaryFile(
                "w", dir=path.parent, prefix=_TEMPORARY_PREFIX, suffix=".py", delete=False
            ) as file:
                file.write(text)
            os.replace(file.name, path)  # atomic: another process sees the whole file or none
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:  # not for a .py file; said plainly if ever
            raise ImportError(f"cannot load the generated module {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
        return module, True
    except OSError:  # cache directory not creatable or writable: generate in memory
        source, row_length, step_length = meta or model_columns_source(free, key)
        module = type(sys)(name)
        vars(module).update(
            math=math,
            ROW_LENGTH=row_length,
            STEP_LENGTH=step_length,
            _exact_terms_flat=numba_exact_terms_flat,
            _exact_terms_and_slopes_flat=numba_exact_terms_and_slopes_flat,
        )
        exec(compile(source, f"<lumaxlike columns {key.name} {free}>", "exec"), vars(module))
        return module, False


_MODULE_TEMPLATE = '''"""Generated by lumaxlike._model.numba_jacobian for free={free!r}, model {key}.

Safe to delete (it is generated again when needed).
"""

import math

from lumaxlike._model._backends import numba_exact_terms_flat as _exact_terms_flat
from lumaxlike._model._backends import (
    numba_exact_terms_and_slopes_flat as _exact_terms_and_slopes_flat,
)

ROW_LENGTH = {row}
STEP_LENGTH = {step}


{source}'''


@functools.cache
def model_columns(free: tuple[str, ...], key: ModelKey = DEFAULT_KEY) -> ColumnFunctions:
    """The `ColumnFunctions` for the parameters named in `free` in model configuration
    `key` (generated and compiled on first use, or loaded from the cache directory)."""
    unknown = [name for name in free if name not in PARAMETER_NAMES]
    if unknown:
        raise ValueError(
            f"unknown parameter names {unknown}; expected names from {PARAMETER_NAMES}"
        )
    free = tuple(free)
    digest = _generation_digest(free, key)
    module, in_file = _generated_module(free, key, digest)
    if in_file:
        jit = cached_njit(error_model="numpy", fastmath=FASTMATH)
    else:
        jit = numba.njit(error_model="numpy", fastmath=FASTMATH)
    for name in ("_known_part", "_step_part", "_free_part", "hoist", "prepare", "columns"):
        setattr(module, name, jit(getattr(module, name)))  # the wrappers call the parts as globals
    return ColumnFunctions(
        module.hoist,
        module.prepare,
        module.columns,
        module.ROW_LENGTH,
        module.STEP_LENGTH,
        f"cols-{digest[:16]}",
        module if in_file else None,
    )


# The names the kernels over a `ColumnFunctions` call (`_hoist_kernel` here, the fit and
# joint solvers' normal equations): its functions, bound in each kernel's variants.
hoist = variant_slot("hoist")
prepare = variant_slot("prepare")
columns = variant_slot("columns")


@cached_njit(nogil=True, error_model="numpy")
def _hoist_kernel(first, last, geometry_rows, parameters, rows):
    """Pixels first to last - 1 (`numba_threads.run_in_blocks`). Compiled only as
    variants (`_hoist_kernel_for`), with `hoist` bound to generated code."""
    n_obs = geometry_rows.shape[1]
    for pixel in range(first, last):
        for k in range(n_obs):
            hoist(parameters, geometry_rows[pixel, k], rows[pixel, k])


@functools.cache
def _hoist_kernel_for(functions: ColumnFunctions):
    inlines = () if functions.module is None else (functions.module,)
    return compile_variant(_hoist_kernel, functions.name, inlines=inlines, hoist=functions.hoist)


def hoisted_rows(functions: ColumnFunctions, geometry_rows, parameters):
    """(pixels, observations, row_length) rows from (pixels, observations, 11) geometry rows."""
    rows = np.empty(geometry_rows.shape[:2] + (max(functions.row_length, 1),))
    run_in_blocks(
        _hoist_kernel_for(functions),
        rows.shape[0],
        np.require(geometry_rows, np.float64, ("C", "W")),
        np.require(parameters, np.float64, ("C", "W")),
        rows,
    )
    return rows

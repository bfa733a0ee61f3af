"""Compiled kernels are cached in lumaxlike's per-user cache directory, never in the package.

The tests run fresh processes (a first `invert`, `fit`, the demo) with their own
``LUMAXLIKE_CACHE_DIR`` and compare the package directory before and after: the only
files allowed to appear there are Python's own bytecode files. An unusable cache
directory means no cache; editing a module a kernel compiles in invalidates its cache.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import lumaxlike

pytestmark = pytest.mark.slow  # fresh processes compile into fresh caches

PACKAGE_DIR = Path(lumaxlike.__file__).parent

FIRST_CALLS = textwrap.dedent(
    """
    import math, sys
    import numpy as np
    import lumaxlike
    from lumaxlike.testing import default_params, multi_angle_geometry, multi_angle_reflectance, random_geometry

    rng = np.random.default_rng(0)
    params = default_params()
    geometry = random_geometry(40, rng)
    w_true = rng.uniform(0.05, 0.95, (40, 3))
    refl = lumaxlike.amsa(w_true, *geometry, params, backend="numba")
    for solver in sys.argv[1].split(","):
        result = lumaxlike.invert(refl, *geometry, params, solver)
        converged = result.status == lumaxlike.Status.CONVERGED
        assert converged[np.isfinite(refl)].all(), solver
        np.testing.assert_allclose(result.w[converged], w_true[converged], rtol=0, atol=1e-8)
    if sys.argv[2] == "fit":
        truth = lumaxlike.HapkeParams(b=0.25, c=0.5, roughness=math.radians(20.0))
        geometry = multi_angle_geometry(4, 9, rng)
        w_true = rng.uniform(0.15, 0.9, (4, 2))
        refl = multi_angle_reflectance(w_true, *geometry, truth)
        result = lumaxlike.fit(refl, *geometry, truth, free=("w", "b", "c"), solver="numba")
        assert result.counts()["CONVERGED"] == 8, result.counts()
    """
)


def package_files() -> dict[Path, tuple[int, int]]:
    """(modification time, size) of every file under the package directory."""
    return {
        p: (p.stat().st_mtime_ns, p.stat().st_size) for p in PACKAGE_DIR.rglob("*") if p.is_file()
    }


def is_python_bytecode(path: Path) -> bool:
    """A module's .pyc as Python itself writes it: __pycache__/NAME.<cache tag>[.opt-N].pyc."""
    name_parts = path.name.split(".")
    return (
        path.parent.name == "__pycache__"
        and path.suffix == ".pyc"
        and sys.implementation.cache_tag in name_parts
        and (path.parent.parent / f"{name_parts[0]}.py").is_file()
    )


def written_in_package(before: dict[Path, tuple[int, int]]) -> list[Path]:
    """Files added or changed under the package since `before`, other than Python's bytecode."""
    after = package_files()
    return sorted(
        p for p, stat in after.items() if before.get(p) != stat and not is_python_bytecode(p)
    )


def run_python(args, cache_dir, numba_cache_dir, cwd) -> None:
    env = {
        **os.environ,
        "LUMAXLIKE_CACHE_DIR": str(cache_dir),
        "NUMBA_CACHE_DIR": str(numba_cache_dir),
    }
    completed = subprocess.run(
        [sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 0, completed.stderr[-3000:]


def cached_kernels(cache_dir: Path) -> set[str]:
    """Names of the kernels with a numba index file under `cache_dir`."""
    return {p.name.split(".")[1].split("-")[0] for p in cache_dir.rglob("*.nbi")}


def test_first_runs_cache_in_the_user_cache_dir_only(tmp_path):
    cache_dir, numba_cache_dir = tmp_path / "lumaxlike-cache", tmp_path / "numba-cache"
    numba_cache_dir.mkdir()
    before = package_files()
    run_python(["-c", FIRST_CALLS, "numba,jax", "fit"], cache_dir, numba_cache_dir, tmp_path)
    demo = [
        "-m",
        "lumaxlike",
        "demo",
        "--size",
        "12",
        "--no-figure",
        "--workdir",
        str(tmp_path / "demo"),
    ]
    run_python(demo, cache_dir, numba_cache_dir, tmp_path)

    assert written_in_package(before) == []
    assert {"_amsa_pixels_kernel", "_albedo_kernel", "_covariance_kernel"} <= cached_kernels(
        cache_dir / "numba"
    )
    assert not any(
        numba_cache_dir.iterdir()
    )  # numba's own cache setting does not move lumaxlike's kernels

    # a second process loads the kernel instead of compiling it
    load = (
        "import numpy as np, lumaxlike; from lumaxlike._model import numba_model;"
        "lumaxlike.amsa(np.full((1, 1), 0.5), np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.6, 0.8]),"
        " np.array([0.0, 0.0, 1.0]), lumaxlike.HapkeParams(b=0.2, c=0.4), backend='numba');"
        "stats = numba_model._amsa_pixels_kernel.stats;"
        "assert sum(stats.cache_hits.values()) == 1 and not stats.cache_misses, stats"
    )
    run_python(["-c", load], cache_dir, numba_cache_dir, tmp_path)

    # ... and the numba code `fit` generates per set of free parameters: neither
    # generated again nor compiled again
    assert len(list((cache_dir / "generated").glob("columns_*.py"))) == 1
    script = FIRST_CALLS.replace("import lumaxlike\n", LOAD_GENERATED) + "loaded()\n"
    run_python(["-c", script, "numba", "fit"], cache_dir, numba_cache_dir, tmp_path)
    assert written_in_package(before) == []


# Run before the first `fit` of FIRST_CALLS: fails if the code is generated again;
# `loaded()`, at the end, checks that the solver's and the hoisting kernels were loaded.
LOAD_GENERATED = """import lumaxlike
from lumaxlike._inverse.fit import numba_solver
from lumaxlike._model import numba_jacobian

def not_again(*args):
    raise AssertionError("the generated code was generated again")

def loaded():
    functions = numba_jacobian.model_columns(("w", "b", "c"), truth.model_key)  # as `fit` calls it
    for kernel in (numba_solver.lm_kernel_for(functions), numba_jacobian._hoist_kernel_for(functions)):
        stats = kernel.stats
        assert sum(stats.cache_hits.values()) == 1 and not stats.cache_misses, stats

numba_jacobian.model_columns_source = not_again
"""


def test_unusable_cache_dir_means_no_cache_not_an_error(tmp_path):
    # a path below a regular file can never be created, even by root (chmod would not stop root)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    numba_cache_dir = tmp_path / "numba-cache"
    numba_cache_dir.mkdir()
    before = package_files()
    run_python(["-c", FIRST_CALLS, "numba", "no-fit"], blocker / "cache", numba_cache_dir, tmp_path)
    assert written_in_package(before) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "numba-cache"]
    assert not any(numba_cache_dir.iterdir())


KERNEL_MODULE = """
import numba
from lumaxlike._model.numba_cache import cached_njit
import helper

add = numba.njit(helper.add)


@cached_njit(inlines=(helper,))
def kernel(x):
    return add(x)


print(kernel(1.0), sum(kernel.stats.cache_hits.values()))
"""


def test_editing_an_inlined_module_recompiles_the_kernel(tmp_path):
    (tmp_path / "kernel.py").write_text(KERNEL_MODULE)
    helper = tmp_path / "helper.py"
    env = {
        **os.environ,
        "LUMAXLIKE_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(PACKAGE_DIR.parent)]),
    }

    def run_kernel() -> list[str]:
        completed = subprocess.run(
            [sys.executable, "kernel.py"], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        return completed.stdout.split()  # [result, cache hits]

    helper.write_text("def add(x):\n    return x + 1.0\n")
    assert run_kernel() == ["2.0", "0"]  # compiled and cached
    assert run_kernel() == ["2.0", "1"]  # loaded from the cache
    helper.write_text("def add(x):\n    return x + 2.0\n")
    assert run_kernel() == ["3.0", "0"]  # the kernel's own file is unchanged, yet recompiled
    assert run_kernel() == ["3.0", "1"]


FORWARD_CALLS = textwrap.dedent(
    """
    import sys
    import numpy as np
    import lumaxlike
    from lumaxlike.testing import random_geometry

    rng = np.random.default_rng(0)
    geometry = random_geometry(20, rng)
    w = rng.uniform(0.05, 0.95, (20, 2))
    for model in sys.argv[1].split(","):
        params = lumaxlike.HapkeParams(b=0.3, c=0.4, multiple_scattering=model)
        np.save(f"{model}-{sys.argv[2]}.npy", lumaxlike.amsa(w, *geometry, params, backend="numba"))
    """
)


def test_configurations_cached_by_different_processes_stay_apart(tmp_path):
    # Each configuration compiled in its own process, then both loaded from the cache into
    # one: each must still run its own equations (numba names compiled code by qualified
    # name and a per-process counter, so the two could otherwise share symbols).
    cache_dir, numba_cache_dir = tmp_path / "lumaxlike-cache", tmp_path / "numba-cache"
    numba_cache_dir.mkdir()
    run_python(["-c", FORWARD_CALLS, "amsa", "alone"], cache_dir, numba_cache_dir, tmp_path)
    run_python(["-c", FORWARD_CALLS, "imsa", "alone"], cache_dir, numba_cache_dir, tmp_path)
    run_python(["-c", FORWARD_CALLS, "amsa,imsa", "together"], cache_dir, numba_cache_dir, tmp_path)
    for model in ("amsa", "imsa"):
        np.testing.assert_array_equal(
            np.load(tmp_path / f"{model}-together.npy"), np.load(tmp_path / f"{model}-alone.npy")
        )
    assert not np.allclose(
        np.load(tmp_path / "amsa-alone.npy"), np.load(tmp_path / "imsa-alone.npy")
    )


VARIANT_MODULE = """
import math, sys
import numba
from lumaxlike._model.numba_cache import cached_njit, compile_variant

add_one = numba.njit(lambda x: x + 1.0)
add_two = numba.njit(lambda x: x + 2.0)


def add(x):
    raise AssertionError("compiled only as variants")


@cached_njit()
def step(x):  # too large for LLVM to inline: the kernel calls it by its symbol
{body}
    return add(x)


@cached_njit()
def kernel(x):
    return step(x) * 10.0


def variant(name):
    bound = compile_variant(step, name, add={{"one": add_one, "two": add_two}}[name])
    return compile_variant(kernel, name, step=bound)


print(" ".join(repr(variant(name)(1.0)) for name in sys.argv[1].split(",")))
""".format(
    body="\n".join(
        f"    x = math.sin(x * {1 + k / 100}) + math.exp(-x * {0.5 + k / 100})" for k in range(60)
    )
)


def test_variants_cached_by_different_processes_stay_apart(tmp_path):
    # Two variants of one kernel (`compile_variant`), each compiled in a fresh process with
    # the same history (so numba's per-process counter gives their code the same names),
    # their caches merged, then both loaded into one process: each must run its own code.
    (tmp_path / "variants.py").write_text(VARIANT_MODULE)

    def run(names, cache) -> list[str]:
        env = {
            **os.environ,
            "LUMAXLIKE_CACHE_DIR": str(cache),
            "PYTHONPATH": os.pathsep.join([str(tmp_path), str(PACKAGE_DIR.parent)]),
        }
        completed = subprocess.run(
            [sys.executable, "variants.py", names],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        return completed.stdout.split()

    (alone_one,), (alone_two,) = run("one", tmp_path / "one"), run("two", tmp_path / "two")
    assert alone_one != alone_two
    merged = tmp_path / "merged" / "numba"
    for cache in ("one", "two"):
        for entry in (tmp_path / cache / "numba").rglob("*"):
            if entry.is_file():
                target = merged / entry.relative_to(tmp_path / cache / "numba")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(entry.read_bytes())
    assert run("one,two", tmp_path / "merged") == [alone_one, alone_two]
    assert run("two,one", tmp_path / "merged") == [alone_two, alone_one]

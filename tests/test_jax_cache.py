"""lumaxlike's JAX caches (`lumaxlike._model.jax_cache`, `jax_executables`): a second
process loads the solver program the first compiled, without tracing it; off, nothing is
written; a cache folder the user configured is used instead (and no executables are
stored); the user's own programs and JAX configuration are left alone; a damaged stored
executable is compiled again.

The process cases run fresh processes (the caches load in a new process) on a tiny
`invert` with solver="jax", whose solver program compiles in ~0.5-2 s."""

import json
import math
import os
import pickle
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from lumaxlike._model import cache_temporaries, jax_cache, jax_executables

pytestmark = pytest.mark.slow  # processes that fill and read JAX's cache

ROOT = Path(__file__).resolve().parents[1]

# The child: a user's script. It sets a JAX option of its own (no cache folder), calls
# `invert`, then compiles a program of its own; prints what JAX's monitoring saw.
CHILD = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
events = []
jax.monitoring.register_event_listener(lambda event, **kw: events.append(event))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # the user's setting
import lumaxlike
from lumaxlike import HapkeParams
from lumaxlike._model import jax_executables
traced = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: traced.append(kw.get("fun_name"))
    if event == "/jax/core/compile/jaxpr_trace_duration" else None)
rng = np.random.default_rng(0)
normal = np.tile([0.0, 0.0, 1.0], (6, 1))
to_sun = np.column_stack([np.sin(rng.uniform(0.2, 0.9, 6)), np.zeros(6), np.ones(6)])
to_sensor = np.column_stack([np.zeros(6), np.sin(rng.uniform(0.0, 0.5, 6)), np.ones(6)])
params = HapkeParams(b=0.3, c=0.4)
refl = rng.uniform(0.02, 0.08, (6, 3))  # [1/sr]
result = lumaxlike.invert(refl, to_sun, to_sensor, normal, params, solver="jax")
solver_events, solver_traced = list(events), list(traced)
def user_program(x):
    return jnp.sin(x) * 3.0 + 1.0
jax.jit(user_program)(jnp.ones(7)).block_until_ready()
print(json.dumps({
    "hits": solver_events.count("/jax/compilation_cache/cache_hits"),
    "writes": solver_events.count("/jax/compilation_cache/cache_misses"),
    "stored": dict(jax_executables.store_events),
    "traced": solver_traced,
    "w": result.w.tolist(),
    "status": result.status.tolist(),
    "cache_dir": jax.config.jax_compilation_cache_dir,
    "min_compile_s": jax.config.jax_persistent_cache_min_compile_time_secs,
}))
"""


def run_child(cache: Path, **env_vars) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "LUMAXLIKE_JAX"))}
    env.update(LUMAXLIKE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT), **env_vars)
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*-cache")) if folder.exists() else []


def stored(folder: Path) -> list[str]:
    executables = folder / jax_executables.EXECUTABLES_FOLDER
    return sorted(p.name for p in executables.iterdir()) if executables.exists() else []


def test_second_process_loads_the_cache_and_leaves_the_user_alone(tmp_path):
    folder = tmp_path / "jax"
    first = run_child(tmp_path)
    written, executables = entries(folder), stored(folder)
    # the solver program compiled and stored as an executable (and not in JAX's cache:
    # an executable JAX loads from there cannot be stored again)
    assert first["stored"] == {"loaded": 0, "written": 1, "compiled": 1}
    assert "solve_albedo_jax_stored" in first["traced"] and len(executables) == 1
    assert not any("solve_albedo_jax" in name for name in written), written
    second = run_child(tmp_path)
    # ... loaded by the second process: neither traced nor compiled again
    assert second["stored"] == {"loaded": 1, "written": 0, "compiled": 0}
    assert not any("solve_albedo_jax" in name for name in second["traced"] if name)
    assert second["writes"] == 0
    assert entries(folder) == written and stored(folder) == executables  # nothing new
    assert second["w"] == first["w"] and second["status"] == first["status"]  # same bits
    for run in (first, second):
        # the user's JAX configuration is as they left it, during and after the call ...
        assert run["cache_dir"] is None and run["min_compile_s"] == 0.0
    # ... and the user's own program, compiled after lumaxlike's call with the user's
    # threshold of 0 s, was not cached in lumaxlike's folder
    assert not any(name.startswith("jit_user_program-") for name in entries(folder))


def test_cache_off_writes_nothing(tmp_path):
    run = run_child(tmp_path, LUMAXLIKE_JAX_CACHE="off")
    assert run["hits"] == 0 and run["writes"] == 0
    assert run["stored"] == {"loaded": 0, "written": 0, "compiled": 0}
    assert "solve_albedo_jax" in run["traced"]  # compiled by jax.jit, as without caches
    assert not (tmp_path / "jax").exists()


def test_users_own_cache_folder_is_used_instead(tmp_path):
    users = tmp_path / "users-jax-cache"
    run = run_child(tmp_path, JAX_COMPILATION_CACHE_DIR=str(users))
    assert run["cache_dir"] == str(users)
    assert not (tmp_path / "jax").exists()  # lumaxlike's folder not made, not used
    assert run["stored"] == {"loaded": 0, "written": 0, "compiled": 0}  # no executables
    names = entries(users)
    assert any(name.startswith("jit_solve_albedo_jax-") for name in names), names
    assert any(name.startswith("jit_user_program-") for name in names), names  # theirs: all


def test_scope_sets_thread_local_settings_only(tmp_path, monkeypatch):
    import jax

    monkeypatch.setenv("LUMAXLIKE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(jax_cache.JAX_CACHE_VARIABLE, raising=False)
    before = (
        jax.config.jax_compilation_cache_dir,
        jax.config.jax_persistent_cache_min_compile_time_secs,
    )
    with jax_cache.compilation_cache_scope():
        from jax._src import config

        assert config.compilation_cache_dir.value == str(tmp_path / "jax")
        assert config.persistent_cache_min_compile_time_secs.value == jax_cache.MIN_COMPILE_SECONDS
        with jax_cache.compilation_cache_scope():  # nested: unchanged
            assert config.compilation_cache_dir.value == str(tmp_path / "jax")
    after = (
        jax.config.jax_compilation_cache_dir,
        jax.config.jax_persistent_cache_min_compile_time_secs,
    )
    assert after == before
    monkeypatch.setenv(jax_cache.JAX_CACHE_VARIABLE, "0")
    assert jax_cache._folder_for_scope() is None
    with jax_cache.compilation_cache_scope():
        assert config.compilation_cache_dir.value is None


def test_a_damaged_stored_executable_is_compiled_again(tmp_path, monkeypatch):
    import jax.numpy as jnp
    import numpy as np

    monkeypatch.setenv("LUMAXLIKE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(jax_cache.JAX_CACHE_VARIABLE, raising=False)
    monkeypatch.setattr(jax_executables, "_memory", {})  # this process's programs: none
    monkeypatch.setattr(
        jax_executables, "store_events", dict.fromkeys(["loaded", "written", "compiled"], 0)
    )

    @jax_executables.stored_jit(static_argnames=("power",))
    def program(x, pair, power):
        return {"sum": pair[0] + pair[1] * x**power, "x": x}

    x, pair = np.linspace(0.0, 1.0, 5), (np.float32(2.0), jnp.ones(5))
    expected = 2.0 + np.linspace(0.0, 1.0, 5, dtype=np.float32) ** 3
    assert program(x, pair, power=3)["sum"].tolist() == pytest.approx(expected.tolist())
    assert jax_executables.store_events["compiled"] == 0  # outside a scope: jax.jit
    assert not (tmp_path / "jax").exists()

    def call_in_scope():
        with jax_cache.compilation_cache_scope():
            result = program(x, pair, power=3)
        np.testing.assert_allclose(result["sum"], expected, rtol=1e-6)
        np.testing.assert_array_equal(result["x"], x.astype(np.float32))
        jax_executables._memory.clear()  # as a new process would start
        return dict(jax_executables.store_events)

    assert call_in_scope() == {"loaded": 0, "written": 1, "compiled": 1}
    (entry,) = (tmp_path / "jax" / jax_executables.EXECUTABLES_FOLDER).iterdir()
    stored_bytes = entry.read_bytes()
    assert len(stored_bytes) < len(zlib.decompress(stored_bytes))  # stored compressed
    assert call_in_scope() == {"loaded": 1, "written": 1, "compiled": 1}
    entry.write_bytes(entry.read_bytes()[:100])  # damaged: cut short
    assert call_in_scope() == {"loaded": 1, "written": 2, "compiled": 2}  # rewritten
    assert call_in_scope() == {"loaded": 2, "written": 2, "compiled": 2}

    # through `ahead`: a stored entry's executable loads on a worker thread, and one that
    # will not load there is compiled again at the call, and rewritten
    def ahead_then_call():
        with jax_cache.compilation_cache_scope():
            program.ahead(x, pair, power=3)
            program(x, pair, power=3)  # waits for it; the next call finds it kept
        return call_in_scope()

    assert ahead_then_call() == {"loaded": 3, "written": 2, "compiled": 2}
    _, *rest = pickle.loads(zlib.decompress(entry.read_bytes()))
    entry.write_bytes(zlib.compress(pickle.dumps((b"not an executable", *rest))))
    assert ahead_then_call() == {"loaded": 3, "written": 3, "compiled": 3}
    assert ahead_then_call() == {"loaded": 4, "written": 3, "compiled": 3}


def test_programs_not_stored_on_the_cpu_are_kept_in_the_process(tmp_path, monkeypatch):
    """`stored_jit(store_on_cpu=False)` (sample's chunk programs): on the CPU backend
    compiled and kept in this process, never written; stored where the backend is not
    the CPU."""
    import numpy as np

    monkeypatch.setenv("LUMAXLIKE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(jax_cache.JAX_CACHE_VARIABLE, raising=False)
    monkeypatch.setattr(jax_executables, "_memory", {})
    monkeypatch.setattr(
        jax_executables, "store_events", dict.fromkeys(["loaded", "written", "compiled"], 0)
    )
    # JAX's cache never takes the CPU's compile (it would if that took over 0.05 s, as on
    # a loaded machine: the accelerator's compile would then load it, and a program JAX
    # loaded is never stored)
    monkeypatch.setattr(jax_cache, "MIN_COMPILE_SECONDS", math.inf)

    @jax_executables.stored_jit(store_on_cpu=False)
    def program(x):
        return x * 2.0

    def calls_in_scope():
        with jax_cache.compilation_cache_scope():
            np.testing.assert_array_equal(program(np.arange(3.0)), [0.0, 2.0, 4.0])
            program(np.arange(3.0))  # the process's own program
        return dict(jax_executables.store_events)

    assert calls_in_scope() == {"loaded": 0, "written": 0, "compiled": 1}
    folder = tmp_path / "jax" / jax_executables.EXECUTABLES_FOLDER
    assert not folder.exists() or not any(folder.iterdir())
    jax_executables._memory.clear()
    monkeypatch.setattr(jax_executables, "default_is_cpu", lambda: False)  # as on an accelerator
    assert calls_in_scope() == {"loaded": 0, "written": 1, "compiled": 2}


def test_a_write_that_fails_leaves_no_temporary_file(tmp_path, monkeypatch):
    """A write that fails once its temporary file is made (a full disk; here an entry
    that is a folder, which the rename cannot replace) stores nothing and leaves nothing
    behind: each failed call left a ``.writing-*`` file, as large as it got."""
    import numpy as np

    monkeypatch.setenv("LUMAXLIKE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(jax_cache.JAX_CACHE_VARIABLE, raising=False)
    monkeypatch.setattr(jax_executables, "_memory", {})
    monkeypatch.setattr(
        jax_executables, "store_events", dict.fromkeys(["loaded", "written", "compiled"], 0)
    )

    @jax_executables.stored_jit
    def program(x):
        return x * 3.0

    def call_in_scope():
        with jax_cache.compilation_cache_scope():
            np.testing.assert_array_equal(program(np.arange(3.0)), [0.0, 3.0, 6.0])
        jax_executables._memory.clear()  # as a new process would start

    call_in_scope()
    folder = tmp_path / "jax" / jax_executables.EXECUTABLES_FOLDER
    (entry,) = folder.iterdir()
    entry.unlink()
    entry.mkdir()  # os.replace cannot put a file there
    call_in_scope()
    call_in_scope()
    assert jax_executables.store_events == {"loaded": 0, "written": 1, "compiled": 3}
    assert [p.name for p in folder.iterdir()] == [entry.name]


def test_a_compile_ahead_that_failed_is_tried_again(tmp_path, monkeypatch):
    """A compile started by ``ahead`` that raised (XLA out of memory, say) raises at the
    call that waits for it, and the next call compiles again, as `jax.jit` would: the
    failed compile stayed this process's program, each later call raising it again."""
    import numpy as np

    monkeypatch.setenv("LUMAXLIKE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(jax_cache.JAX_CACHE_VARIABLE, raising=False)
    monkeypatch.setattr(jax_executables, "_memory", {})
    compile_lowered = jax_executables._compile_lowered
    failures = [MemoryError("out of memory while compiling")]

    def fails_once(*args):
        if failures:
            raise failures.pop()
        return compile_lowered(*args)

    monkeypatch.setattr(jax_executables, "_compile_lowered", fails_once)

    @jax_executables.stored_jit
    def program(x):
        return x * 4.0

    with jax_cache.compilation_cache_scope():
        program.ahead(np.arange(3.0))
        with pytest.raises(MemoryError, match="out of memory while compiling"):
            program(np.arange(3.0))
        np.testing.assert_array_equal(program(np.arange(3.0)), [0.0, 4.0, 8.0])


def test_a_killed_writes_temporary_file_is_removed_an_hour_on(tmp_path, monkeypatch):
    """A ``.writing-*`` file older than `STALE_TEMPORARY_SECONDS` (a process killed while
    writing) is removed at the folder's next write; a fresh one (a write under way in
    another process) is kept."""
    import os
    import time

    import numpy as np

    monkeypatch.setenv("LUMAXLIKE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(jax_cache.JAX_CACHE_VARIABLE, raising=False)
    monkeypatch.setattr(jax_executables, "_memory", {})
    cache_temporaries.remove_stale_temporaries.cache_clear()
    folder = tmp_path / "jax" / jax_executables.EXECUTABLES_FOLDER
    folder.mkdir(parents=True)
    stale, fresh = folder / ".writing-killed", folder / ".writing-under-way"
    stale.write_bytes(b"part of an entry")
    fresh.write_bytes(b"part of an entry")
    old = time.time() - cache_temporaries.STALE_TEMPORARY_SECONDS - 60.0
    os.utime(stale, (old, old))

    @jax_executables.stored_jit
    def program(x):
        return x * 5.0

    with jax_cache.compilation_cache_scope():
        np.testing.assert_array_equal(program(np.arange(2.0)), [0.0, 5.0])
    names = sorted(p.name for p in folder.iterdir())
    assert ".writing-killed" not in names and ".writing-under-way" in names
    assert len(names) == 2  # the entry written, and the fresh temporary file
    cache_temporaries.remove_stale_temporaries.cache_clear()


def test_argument_types_kept_by_shape_are_jax_own():
    """`_aval` keeps an array's type text by its type, shape, dtype, weak type and
    precision: each is what `jax.typeof` gives that very argument, also when the same
    shape comes again under the other precision or as another kind of array."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    leaves = [
        np.zeros((3, 2)),
        np.zeros((3, 2), np.float32),
        jnp.zeros((3, 2), jnp.float32),
        jax.ShapeDtypeStruct((3, 2), np.float64),
        jax.ShapeDtypeStruct((3, 2), np.float32, weak_type=True),
        np.int32(4),
        0.5,
    ]
    for x64 in (False, True, False):
        with jax.enable_x64(x64):
            for leaf in leaves:
                assert jax_executables._aval(leaf) == jax_executables._aval_text(leaf), leaf

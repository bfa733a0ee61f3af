"""lumaxlike's JAX persistent compilation cache (`lumaxlike._model.jax_cache`): a second
process loads what the first compiled; off, it writes nothing; a cache folder the user
configured is used instead; the user's own programs and JAX configuration are left alone.

Each case runs fresh processes (JAX's cache is per process) on a tiny `invert` with
solver="jax", whose solver program compiles in ~0.5-2 s (above the cache's threshold)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from lumaxlike._model import jax_cache

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
rng = np.random.default_rng(0)
normal = np.tile([0.0, 0.0, 1.0], (6, 1))
to_sun = np.column_stack([np.sin(rng.uniform(0.2, 0.9, 6)), np.zeros(6), np.ones(6)])
to_sensor = np.column_stack([np.zeros(6), np.sin(rng.uniform(0.0, 0.5, 6)), np.ones(6)])
params = HapkeParams(b=0.3, c=0.4)
refl = rng.uniform(0.02, 0.08, (6, 3))  # [1/sr]
result = lumaxlike.invert(refl, to_sun, to_sensor, normal, params, solver="jax")
solver_events = list(events)
def user_program(x):
    return jnp.sin(x) * 3.0 + 1.0
jax.jit(user_program)(jnp.ones(7)).block_until_ready()
print(json.dumps({
    "hits": solver_events.count("/jax/compilation_cache/cache_hits"),
    "writes": solver_events.count("/jax/compilation_cache/cache_misses"),
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


def test_second_process_loads_the_cache_and_leaves_the_user_alone(tmp_path):
    folder = tmp_path / "jax"
    first = run_child(tmp_path)
    written = entries(folder)
    assert first["hits"] == 0 and first["writes"] >= 1
    assert any(name.startswith("jit_solve_albedo_jax-") for name in written), written
    second = run_child(tmp_path)
    assert second["hits"] >= 1 and second["writes"] == 0
    assert entries(folder) == written  # nothing new: everything came from the cache
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
    assert not (tmp_path / "jax").exists()


def test_users_own_cache_folder_is_used_instead(tmp_path):
    users = tmp_path / "users-jax-cache"
    run = run_child(tmp_path, JAX_COMPILATION_CACHE_DIR=str(users))
    assert run["cache_dir"] == str(users)
    assert not (tmp_path / "jax").exists()  # lumaxlike's folder not made, not used
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

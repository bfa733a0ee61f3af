"""Block inversion on dask.distributed: an existing cluster (--scheduler), a worker killed
mid-run, a lost scheduler, an unreachable one."""

import logging
import os
import re

import numpy as np
import psutil
import pytest

from lumaxlike._cli import main
from lumaxlike._io import read_cube
from lumaxlike._run import cluster as cluster_module
from lumaxlike._run.pool import BlockPool

from .test_cli import invert_args
from .test_io import make_scene, write_scene

pytestmark = pytest.mark.slow  # dask.distributed clusters

distributed = pytest.importorskip("distributed")

MAPS = ("w.tif", "w_status.tif", "w_iterations.tif", "w_residual.tif")
COMPLETED = re.compile(r"^lumaxlike invert: .* -> .*, solver \w+: inverted .*$")


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """A 24 x 10 scene, inverted by blocks of 2 rows (12 blocks)."""
    folder = tmp_path_factory.mktemp("scene")
    return write_scene(folder, make_scene(rows=24, cols=10))[:2]


@pytest.fixture(scope="module")
def cluster():
    """A local cluster of two worker processes, as another program would start it."""
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        silence_logs=logging.ERROR,
    ) as local:
        with distributed.Client(local, set_as_default=False) as client:
            yield local, client


def read_maps(folder, prefix="w"):
    return [read_cube(folder / name.replace("w", prefix, 1))[0] for name in MAPS]


def kill_a_busy_worker(pool, cluster_client):
    """SIGKILL the process of a worker that holds or runs blocks of ``pool``; return its pid."""
    futures = [future for _, future in pool._pending]
    busy = {
        address
        for addresses in pool._cluster.client.who_has(futures).values()
        for address in addresses
    }
    busy |= {address for address, keys in pool._cluster.client.processing().items() if keys}
    assert busy, "no worker had blocks in flight"
    pids = cluster_client.run(os.getpid)
    pid = pids[sorted(busy)[0]]
    psutil.Process(pid).kill()
    return pid


def test_a_worker_killed_mid_run_leaves_the_maps_of_a_serial_run(
    tmp_path, capfd, scene, cluster, monkeypatch
):
    cube, obs = scene
    local, client = cluster
    assert main(invert_args(cube, obs, tmp_path / "serial.tif", "--chunk", "2")) == 0
    capfd.readouterr()
    killed = []
    pop = BlockPool.pop

    def pop_then_kill(self):
        result = pop(self)
        if not killed:  # after the first block written: blocks still in flight
            killed.append(kill_a_busy_worker(self, client))
        return result

    monkeypatch.setattr(BlockPool, "pop", pop_then_kill)
    code = main(
        invert_args(
            cube, obs, tmp_path / "w.tif", "--chunk", "2", "--scheduler", local.scheduler_address
        )
    )
    err = capfd.readouterr().err
    assert code == 0, err
    assert killed and not psutil.pid_exists(killed[0])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and COMPLETED.match(lines[0]), err  # nothing from distributed
    for distributed_map, serial_map in zip(read_maps(tmp_path), read_maps(tmp_path, "serial")):
        np.testing.assert_array_equal(distributed_map, serial_map)  # NaN-aware
    assert "--scheduler" in read_provenance_command(tmp_path / "w.tif")


def read_provenance_command(path):
    from lumaxlike import read_provenance

    return read_provenance(path).command


def test_a_lost_scheduler_fails_the_run_in_one_line_publishing_nothing(
    tmp_path, capfd, scene, monkeypatch
):
    cube, obs = scene
    monkeypatch.setattr(cluster_module, "CONNECT_TIMEOUT_S", 1.0)  # reconnection attempts
    doomed = distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        silence_logs=False,
    )  # would restore handler levels
    pop = BlockPool.pop

    def pop_then_lose(self):
        result = pop(self)
        doomed.close()  # the scheduler and its worker go away, blocks in flight
        return result

    monkeypatch.setattr(BlockPool, "pop", pop_then_lose)
    try:
        code = main(
            invert_args(
                cube,
                obs,
                tmp_path / "w.tif",
                "--chunk",
                "2",
                "--scheduler",
                doomed.scheduler_address,
            )
        )
    finally:
        doomed.close()
    lines = capfd.readouterr().err.strip().splitlines()
    assert code == 1 and len(lines) == 1, lines
    assert lines[0].startswith(
        f"lumaxlike invert: error: the dask cluster at {doomed.scheduler_address} failed"
    ), lines
    assert list(tmp_path.iterdir()) == []  # no map, no temporary, no lock


def test_an_unreachable_scheduler_is_a_one_line_error(tmp_path, capfd, scene, monkeypatch):
    cube, obs = scene
    monkeypatch.setattr(cluster_module, "CONNECT_TIMEOUT_S", 0.5)
    address = "tcp://127.0.0.1:9"  # discard port: nothing listens
    code = main(invert_args(cube, obs, tmp_path / "w.tif", "--scheduler", address))
    lines = capfd.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"lumaxlike invert: error: scheduler {address}: cannot connect")
    assert list(tmp_path.iterdir()) == []
    code = main(
        invert_args(cube, obs, tmp_path / "w.tif", "--scheduler", address, "--workers", "2")
    )
    lines = capfd.readouterr().err.strip().splitlines()
    assert code == 2 and "not allowed with argument" in lines[0], lines

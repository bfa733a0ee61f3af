"""The front ends' option objects (`RunOptions`, `ProductOptions`, `SolverOptions`): checked
when made, merged with the keywords for the simple case, refused when the two disagree; a
file command given its options as objects writes the same maps as one given keywords."""

import inspect

import numpy as np
import pytest
import rasterio

import lumaxlike
from lumaxlike._operations.invert import INVERT
from lumaxlike._operations.normalize import NORMALIZE
from lumaxlike._options import RUN_AND_PRODUCT, front_end_options, merged_options

from .test_io import PARAMS, make_scene, write_scene


@pytest.mark.parametrize(
    "kind, kwargs, message",
    [
        (lumaxlike.RunOptions, {"workers": 0}, "workers must be a positive integer"),
        (lumaxlike.RunOptions, {"chunk_rows": 2.5}, "chunk_rows must be a positive integer"),
        (lumaxlike.RunOptions, {"scheduler": 8786}, "scheduler must be an address"),
        (lumaxlike.SolverOptions, {"solver": "scipy"}, "solver='scipy' is not one of"),
        (lumaxlike.SolverOptions, {"solver": "jax", "tol": 0.0}, "tol must be positive"),
        (lumaxlike.SolverOptions, {"solver": "jax", "max_iter": True}, "max_iter must be"),
        (lumaxlike.SolverOptions, {"solver": "numba", "num_threads": 0}, "num_threads must"),
    ],
)
def test_options_refuse_bad_values_naming_them(kind, kwargs, message):
    with pytest.raises(ValueError, match=message):
        kind(**kwargs)


def test_keywords_and_objects_merge_and_a_disagreement_is_refused():
    run = lumaxlike.RunOptions(workers=2, progress=False)
    merged = merged_options(lumaxlike.RunOptions, run, "run", workers=1, chunk_rows=4)
    assert merged == lumaxlike.RunOptions(workers=2, chunk_rows=4, progress=False)
    assert merged_options(lumaxlike.RunOptions, run, "run", workers=2) == run  # the same twice
    with pytest.raises(ValueError, match=r"workers is given as a keyword \(3\) and in run= \(2\)"):
        merged_options(lumaxlike.RunOptions, run, "run", workers=3)
    with pytest.raises(ValueError, match="run must be a lumaxlike.RunOptions, got dict"):
        merged_options(lumaxlike.RunOptions, {"workers": 2}, "run")
    keywords = {"workers": 1, "thermal_bands": "exclude", "tol": 1e-9, "max_iter": None}
    with pytest.warns(DeprecationWarning, match=r"f: the keywords thermal_bands=\.\.\. "):
        run, product, solver = front_end_options(None, None, "numba", keywords, "f")
    assert run == lumaxlike.RunOptions()
    assert product == lumaxlike.ProductOptions(thermal_bands="exclude")
    assert solver == lumaxlike.SolverOptions("numba", tol=1e-9)
    given = lumaxlike.SolverOptions("jax", max_iter=7)
    assert front_end_options(None, None, given, {"tol": 1e-9})[2] == lumaxlike.SolverOptions(
        "jax", max_iter=7, tol=1e-9
    )
    with pytest.raises(ValueError, match=r"max_iter is given as a keyword \(8\) and in solver="):
        front_end_options(None, None, given, {"max_iter": 8})


def test_declarations_name_their_maps_and_block_tasks():
    assert INVERT.written(sigma=None) == ["w", "status", "iterations", "residual"]
    assert INVERT.written(sigma=0.01)[-1] == "sigma"
    assert NORMALIZE.layout("radf").main == "reflectance"
    for operation in (INVERT, NORMALIZE):
        assert callable(operation.block()) and operation.file_function.endswith("_file")


def read_maps(paths):
    maps = {}
    for field, path in sorted(paths.items()):
        with rasterio.open(path) as dataset:
            maps[field] = dataset.read()
    return maps


def test_invert_file_with_option_objects_writes_what_keywords_write(tmp_path):
    scene = make_scene(rows=6, cols=4, bands=3)
    cube, obs, dtm = write_scene(tmp_path, scene)
    common = dict(geometry=obs, dtm=dtm, params=PARAMS, units="r")
    deprecated = r"invert_file: the keywords chunk_rows=\.\.\. are deprecated .* pass run="
    with pytest.warns(DeprecationWarning, match=deprecated):  # still taken for one release
        by_keywords = lumaxlike.invert_file(
            cube, tmp_path / "a.tif", solver="numba", tol=1e-10, chunk_rows=2, **common
        )
    by_objects = lumaxlike.invert_file(
        cube,
        tmp_path / "b.tif",
        solver=lumaxlike.SolverOptions("numba", tol=1e-10),
        run=lumaxlike.RunOptions(chunk_rows=2, progress=False),
        product=lumaxlike.ProductOptions(),
        **common,
    )
    a, b = read_maps(by_keywords.outputs), read_maps(by_objects.outputs)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
    np.testing.assert_allclose(a["w"], np.moveaxis(scene["w"], -1, 0), rtol=1e-7)
    assert lumaxlike.read_provenance(by_objects.outputs["w"]).tol == 1e-10
    refused = pytest.raises(ValueError, match=r"chunk_rows is given as a keyword \(3\)")
    with refused, pytest.warns(DeprecationWarning, match="chunk_rows"):
        lumaxlike.invert_file(
            cube,
            tmp_path / "c.tif",
            solver="numba",
            chunk_rows=3,
            run=lumaxlike.RunOptions(chunk_rows=2),
            **common,
        )
    assert not (tmp_path / "c.tif").exists()


@pytest.mark.parametrize(
    "function",
    [
        lumaxlike.invert_file,
        lumaxlike.normalize_file,
        lumaxlike.fit_file,
        lumaxlike.remove_thermal_file,
        lumaxlike.spectral_parameters_file,
        lumaxlike.unmix_file,
        lumaxlike.sample_file,
    ],
)
def test_file_functions_show_run_and_product_not_their_fields(function):
    shown = inspect.signature(function).parameters
    assert {"run", "product"} <= set(shown) or function is lumaxlike.sample_file
    assert not set(shown) & set(RUN_AND_PRODUCT)  # deprecated: taken, not shown

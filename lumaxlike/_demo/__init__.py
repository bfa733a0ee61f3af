"""The ``lumaxlike demo`` command: the whole job on an embedded, synthetic scene.

Public entry point: :func:`run_demo`. The building blocks (scene, forward model, rasters,
figure) live in the submodules and are usable on their own.
"""

from .run import run_demo as run_demo
from .scene import Scene as Scene, SceneConfig as SceneConfig, make_scene as make_scene
from .spectra import (
    MineralSpectra as MineralSpectra,
    albedo_from_diffusive_reflectance as albedo_from_diffusive_reflectance,
    load_mineral_spectra as load_mineral_spectra,
)

__all__ = [
    "run_demo",
    "Scene",
    "SceneConfig",
    "make_scene",
    "MineralSpectra",
    "albedo_from_diffusive_reflectance",
    "load_mineral_spectra",
]

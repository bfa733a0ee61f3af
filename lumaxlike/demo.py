"""The demo scene of ``lumaxlike demo``, for your own experiments.

A synthetic but realistic hyperspectral scene: Gaussian hills (a DTM), smooth patches of
five minerals whose single-scattering albedo spectra come from USGS splib07 laboratory
spectra (51 bands, 450-2450 nm, vendored with the package), the sun at one direction and a
push-broom sensor looking down across its track. Everything is a pure function of a
`SceneConfig`:

```python
import lumaxlike
from lumaxlike.demo import SceneConfig, demo_hapke_params, make_scene, simulate_reflectance

scene = make_scene(SceneConfig(size=32))         # truth: scene.w, (32, 32, 51)
r = simulate_reflectance(scene)                  # r [1/sr], (32, 32, 51)
result = lumaxlike.invert(r, scene.to_sun, scene.to_sensor, scene.normal,
                          demo_hapke_params(), solver="numba")
```

The scene is an intimate mixture of the minerals with known mass fractions
(``scene.abundance``; ``scene.endmembers`` for `lumaxlike.unmix`), and
``write_mineral_library(path, scene)`` writes the minerals' laboratory spectra as a
library CSV (at ``LIBRARY_GEOMETRY_DEG``) for `lumaxlike.read_spectral_library`.

``lumaxlike demo`` writes the same scene to files (GeoTIFF, ENVI and netCDF) and inverts
them with the command line.
"""

from ._demo.forward import demo_hapke_params as demo_hapke_params
from ._demo.forward import simulate_reflectance as simulate_reflectance
from ._demo.library import LIBRARY_GEOMETRY_DEG as LIBRARY_GEOMETRY_DEG
from ._demo.library import write_mineral_library as write_mineral_library
from ._demo.scene import Scene as Scene
from ._demo.scene import SceneConfig as SceneConfig
from ._demo.scene import make_scene as make_scene

__all__ = [
    "LIBRARY_GEOMETRY_DEG",
    "Scene",
    "SceneConfig",
    "demo_hapke_params",
    "make_scene",
    "simulate_reflectance",
    "write_mineral_library",
]

"""Defaults that both the demo's parser (`lumaxlike._demo.arguments`, which imports
nothing heavy) and its scene (`lumaxlike._demo.scene`) need."""

__all__ = ["DEFAULT_SEED"]

#: the default seed of the scene and the noise (`lumaxlike.demo.SceneConfig`'s)
DEFAULT_SEED = 20240607

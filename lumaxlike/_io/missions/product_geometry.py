"""The geometry and the REFF incidence of a run on a mission product: the standard
geometry of a normalised product given none, which incidence a reflectance factor was
divided by, and what of both goes into the run's record."""

from __future__ import annotations

from .product_cube import ProductCube

__all__ = ["REFF_INCIDENCES", "check_reff_incidence", "product_geometry", "recorded_geometry"]

REFF_INCIDENCES = ("local", "areoid")
"""Which incidence a reflectance factor (REFF = I/F / cos i) was divided by: the local
surface's (DTM facet) or the ellipsoid's (areoid, as CRISM's Lambert correction)."""


def check_reff_incidence(units, reff_incidence, kind, path) -> str | None:
    """The incidence REFF is divided by: ``reff_incidence``, or ``"local"`` by default;
    for a CRISM product (whose Lambert correction used the areoid) it must be given.

    Returns:
        ``"local"`` or ``"areoid"`` for ``units="reff"``; None otherwise.

    Raises:
        ValueError: an unknown choice, or none for a CRISM cube in reff.
    """
    if reff_incidence is not None and reff_incidence not in REFF_INCIDENCES:
        raise ValueError(f"reff_incidence={reff_incidence!r} is not 'local' or 'areoid'")
    if units != "reff":
        return None
    if reff_incidence is None and kind is not None and kind.target == "MARS":
        raise ValueError(
            f"{path} ({kind.name}) given as reff: say which incidence it was "
            "divided by, --reff-incidence areoid (CRISM's Lambert correction) "
            "or local (reff_incidence=)"
        )
    return reff_incidence or "local"


def product_geometry(
    cube: ProductCube,
    cube_path,
    geometry,
    dtm,
    *,
    units,
    reff_incidence=None,
    correction_undone=False,
) -> tuple[object, str | None, dict]:
    """The geometry, REFF incidence and provenance record of a file run on ``cube``.

    Returns:
        ``(geometry, reff_incidence, product_record)``: the geometry to read (the
        standard-geometry mapping for a normalised product given none), the incidence
        REFF is divided by (None unless ``units="reff"``) and `ProductCube.record`
        with both choices added.

    Raises:
        ValueError: see `lumaxlike._io.missions.products.resolve_geometry` and
            `check_reff_incidence`.
    """
    from .products import resolve_geometry, undoes_lambert

    incidence = check_reff_incidence(units, reff_incidence, cube.kind, cube_path)
    info = cube.info
    geometry, chosen = resolve_geometry(
        cube.kind,
        cube_path,
        geometry,
        dtm,
        (info.grid.height, info.grid.width),
        correction_undone=correction_undone or undoes_lambert(cube.kind, units, incidence),
    )
    record = cube.record()
    if chosen is not None:
        record["geometry"] = chosen
    if incidence is not None:
        record["reff_incidence"] = incidence
    return geometry, incidence, record


def recorded_geometry(geometry, record: dict):
    """The geometry input to record: None when it is a product's standard geometry."""
    return None if record.get("geometry", {}).get("geometry") == "standard" else geometry

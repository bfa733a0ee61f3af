"""Geometry backplanes as missions ship them: band names per role, and which bands a run uses.

A geometry backplane (an "OBS" raster, a CRISM DDR, an ISIS ``phocube`` output, or a
mapping of roles to single-band rasters or arrays) gives per-pixel angles in **degrees**
(``facet_cos_i`` is a cosine). Each band plays one *role*:

=====================  ==============================================================
role                   meaning
=====================  ==============================================================
``to_sun_zenith``      angle between the ellipsoid's vertical and the direction to the sun
``to_sun_azimuth``     azimuth of the direction to the sun, clockwise from north
``to_sensor_zenith``   angle between the ellipsoid's vertical and the direction to the sensor
``to_sensor_azimuth``  azimuth of the direction to the sensor, clockwise from north
``incidence``          incidence angle i relative to the ellipsoid (areoid, sphere)
``emission``           emission angle e relative to the ellipsoid
``phase``              phase angle g (the same for the ellipsoid and the local surface)
``local_incidence``    incidence angle relative to the local surface (from a DTM)
``local_emission``     emission angle relative to the local surface
``facet_slope``        slope of the local surface facet, 0 = horizontal
``facet_aspect``       direction the facet faces (downslope), clockwise from north
``facet_cos_i``        cosine of the local incidence angle (checked, not needed)
=====================  ==============================================================

Geometry layouts, each a set of roles that fixes the geometry:

* angles relative to the ellipsoid: the four zenith/azimuth angles, or the triplet
  (incidence, emission, phase);
* angles relative to the local surface: the four zenith/azimuth angles plus
  (facet_slope, facet_aspect) as the facet normal, or (local_incidence, local_emission)
  plus the phase (from its band, or from the zenith/azimuth angles).

``surface`` chooses between them when a backplane carries both (see :func:`plan_geometry`):
``"auto"`` (default) takes the local surface whenever the backplane carries it, else the
ellipsoid; ``"local"`` requires it; ``"ellipsoid"`` reads the ellipsoid angles only. A
band that would change the answer is used or refused, never skipped silently: local-surface
bands that cannot be used (a slope without an aspect, facets without azimuths, a
``facet_cos_i`` alone) stop ``"auto"`` and ``"local"`` with an error, and
``"ellipsoid"`` records the bands it left out.

Band names are matched after :func:`normalise_band_name` (case, ``-``/``_``/spaces,
anything in parentheses or after a comma or semicolon ignored) against
:data:`OBS_BAND_NAMES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "ANGLE_ROLES",
    "GeometryPlan",
    "OBS_BAND_NAMES",
    "ROLES",
    "SURFACES",
    "find_roles",
    "match_obs_bands",
    "normalise_band_name",
    "plan_geometry",
]

ANGLE_ROLES = ("to_sun_zenith", "to_sun_azimuth", "to_sensor_zenith", "to_sensor_azimuth")
"""The four zenith/azimuth angles [deg] of the directions to the sun and to the sensor."""
TRIPLET_ROLES = ("incidence", "emission", "phase")
LOCAL_ANGLE_ROLES = ("local_incidence", "local_emission")
FACET_ROLES = ("facet_slope", "facet_aspect")
LOCAL_ROLES = (*LOCAL_ANGLE_ROLES, *FACET_ROLES, "facet_cos_i")
"""Roles that describe the local surface: never skipped silently."""

SURFACES = ("auto", "local", "ellipsoid")
"""Accepted values of ``surface`` (see :func:`plan_geometry`)."""

# Sources of the spellings (normalised here; the products spell them as quoted):
# - M3 L1B OBS (ENVI header band names, Chandrayaan-1 M3 Data Product SIS, JPL D-39032,
#   v9.10, 2011, OBS file: "to-sun azimuth angle (decimal degrees, clockwise from local
#   north)", ..., "surface slope from DEM (decimal degrees, zero at horizontal)",
#   "surface aspect from DEM (decimal degrees, clockwise from local north)", "local cosine
#   i (unitless, cosine of angle between to-sun and local DEM facet normal vectors)"):
#   "To-Sun AZM", "To-Sun Zenith", "To-Inst AZM", "To-Inst Zenith", "Phase", "To-Sun Path
#   Length", "To-Inst Path Length", "Facet Slope", "Facet Aspect", "Facet Cos i"; tools also
#   write "To-Sun Azimuth", "To-M3 Azimuth", "To-M3 Zenith", "Facet Cos(i)".
# - AVIRIS-NG / AVIRIS-3 / EMIT OBS (JPL orthorectification, ENVI band names; EMIT L1B OBS
#   netCDF "obs" band names): "Path length (m)", "To-sensor azimuth (0 to 360 degrees cw
#   from N)", "To-sensor zenith (0 to 90 degrees from zenith)", "To-sun azimuth (0 to 360
#   degrees cw from N)", "To-sun zenith (0 to 90 degrees from zenith)", "Solar phase",
#   "Slope", "Aspect", "Cosine(i)", "UTC Time", "Earth-sun distance (AU)"; degrees.
# - CRISM DDR (MRO CRISM Data Product SIS, DDR label BAND_NAME, degrees): "INA at areoid,
#   deg", "EMA at areoid, deg", "Phase angle, deg", "Latitude, areocentric, deg N",
#   "Longitude, areocentric, deg E", "INA at surface from MOLA, deg", "EMA at surface from
#   MOLA, deg", "Slope magnitude from MOLA, deg", "MOLA slope azimuth, deg clkwise from N",
#   "Elevation, meters relative to MOLA", "Thermal inertia, J m^-2 K^-1 s^-0.5", "Bolometic
#   albedo", "Local solar time, hours", "Spare" (ENVI copies write "; " for ", ").
# - USGS ISIS phocube (BandBin Name keyword, degrees; GDAL's ISIS3 driver reads it as the
#   band description): "Phase Angle", "Incidence Angle", "Emission Angle", "Local Emission
#   Angle", "Local Incidence Angle"; its "Sun Azimuth" and "Spacecraft Azimuth" are
#   measured in the image (from the 3 o'clock direction), not from north: a phocube lacks
#   the zenith/azimuth layout and is read as incidence/emission/phase.
OBS_BAND_NAMES = {
    "to_sun_zenith": (
        "to sun zenith",
        "to sun zenith angle",
        "sun zenith",
        "sun zenith angle",
        "solar zenith",
        "solar zenith angle",
        "to sun zen",
        "sza",
    ),
    "to_sun_azimuth": (
        "to sun azimuth",
        "to sun azimuth angle",
        "to sun azm",
        "to sun az",
        "sun azimuth",
        "sun azimuth angle",
        "solar azimuth",
        "solar azimuth angle",
        "saa",
    ),
    "to_sensor_zenith": (
        "to sensor zenith",
        "to sensor zenith angle",
        "sensor zenith",
        "sensor zenith angle",
        "to inst zenith",
        "to instrument zenith",
        "to m3 zenith",
        "view zenith",
        "viewing zenith",
        "view zenith angle",
        "vza",
    ),
    "to_sensor_azimuth": (
        "to sensor azimuth",
        "to sensor azimuth angle",
        "to sensor azm",
        "sensor azimuth",
        "sensor azimuth angle",
        "to inst azm",
        "to inst azimuth",
        "to instrument azimuth",
        "to m3 azimuth",
        "view azimuth",
        "viewing azimuth",
        "view azimuth angle",
        "vaa",
    ),
    "incidence": ("incidence", "incidence angle", "ina at areoid", "ina", "inc"),
    "emission": ("emission", "emission angle", "ema at areoid", "ema", "emi"),
    "phase": ("phase", "phase angle", "solar phase", "observation phase angle", "pha"),
    "local_incidence": ("local incidence", "local incidence angle", "ina at surface from mola"),
    "local_emission": ("local emission", "local emission angle", "ema at surface from mola"),
    "facet_slope": ("facet slope", "slope", "surface slope", "slope magnitude from mola"),
    "facet_aspect": (
        "facet aspect",
        "aspect",
        "surface aspect",
        "mola slope azimuth",
        "slope azimuth",
    ),
    "facet_cos_i": ("facet cos i", "facet cos", "cosine", "cosine i", "cos i", "local cosine i"),
}
"""Accepted band descriptions per role, in normalised form (see `normalise_band_name`).

Covers M3 OBS (``To-Sun AZM``, ``To-Inst Zenith``, ``Facet Slope``, ``Facet Cos i``),
AVIRIS-NG / AVIRIS-3 / EMIT OBS (``To-sun zenith (0 to 90 degrees from zenith)``,
``Slope``, ``Aspect``, ``Cosine(i)``), CRISM DDR (``INA at areoid, deg``,
``MOLA slope azimuth, deg clkwise from N``) and ISIS ``phocube`` (``Incidence Angle``,
``Local Emission Angle``) band names.
"""

ROLES = tuple(OBS_BAND_NAMES)
"""Every role a geometry band can play."""


def normalise_band_name(description: str) -> str:
    """Lower-case, drop ``(...)`` and anything after a comma or semicolon, collapse ``-``/``_``/spaces."""
    text = re.split(r"[,;]", re.sub(r"\([^)]*\)", " ", description.lower()))[0]
    return " ".join(re.sub(r"[-_\s]+", " ", text).split())


def find_roles(descriptions, path) -> dict[str, int]:
    """The role of every band whose description names one.

    Args:
        descriptions: one description (or None) per band, band 1 first.
        path: the raster, for messages.

    Returns:
        ``{role: 1-based band index}`` for the roles found (bands naming none are left out).

    Raises:
        ValueError: naming the file, when several bands name the same role.
    """
    lookup = {name: role for role, names in OBS_BAND_NAMES.items() for name in names}
    found: dict[str, list[int]] = {}
    for index, description in enumerate(descriptions, start=1):
        role = lookup.get(normalise_band_name(description or ""))
        if role is not None:
            found.setdefault(role, []).append(index)
    for role, indexes in found.items():
        if len(indexes) > 1:
            raise ValueError(
                f"geometry raster {path} has several bands for {role}: bands {indexes}"
            )
    return {role: indexes[0] for role, indexes in found.items()}


def _accepted(role: str) -> str:
    return (
        f"{role} (accepted, case-insensitive: {', '.join(repr(n) for n in OBS_BAND_NAMES[role])})"
    )


def match_obs_bands(descriptions, path) -> dict[str, int]:
    """The band of each of the four zenith/azimuth :data:`ANGLE_ROLES`.

    Returns:
        ``{role: 1-based band index}`` for the four roles.

    Raises:
        ValueError: naming the file, when a role matches no band or several bands.
    """
    found = find_roles(descriptions, path)
    for role in ANGLE_ROLES:
        if role not in found:
            raise ValueError(
                f"geometry raster {path} has no band named like {_accepted(role)}; "
                f"its band descriptions are {list(descriptions)}"
            )
    return {role: found[role] for role in ANGLE_ROLES}


@dataclass(frozen=True)
class GeometryPlan:
    """Which roles of a backplane a run reads, and how they make the geometry.

    Attributes:
        surface: ``"local"`` (facets, local angles, or a DTM's normals under the
            zenith/azimuth angles) or ``"ellipsoid"`` (the ellipsoid angles, flat surface;
            with ``surface="ellipsoid"`` and a DTM, the DTM still tilts it: see ``normals``).
        angles: ``"zenith_azimuth"`` (the four angles give absolute directions) or
            ``"triplet"`` (incidence, emission, phase in the surface's own frame).
        normals: ``"flat"``, ``"dtm"`` or ``"facets"`` (slope and aspect bands).
        roles: the roles read to build the geometry.
        checks: roles read only to check the geometry built (``facet_cos_i``, local angles).
        unused: local-surface roles present but not read: left out by
            ``surface="ellipsoid"``, or facet slope/aspect whose effect the local angles
            already hold (CRISM DDR).
    """

    surface: str
    angles: str
    normals: str
    roles: tuple
    checks: tuple = ()
    unused: tuple = ()

    def with_unused(self, found) -> GeometryPlan:
        """This plan, listing the local-surface roles of ``found`` it neither reads nor checks."""
        unused = tuple(r for r in LOCAL_ROLES if r in found and r not in self.roles + self.checks)
        return GeometryPlan(
            self.surface, self.angles, self.normals, self.roles, self.checks, unused
        )

    def describe(self) -> str:
        """One line, e.g. ``"to-sun/to-sensor zenith and azimuth; normals from facet slope and aspect"``."""
        if self.angles == "zenith_azimuth":
            normals = {
                "flat": "a flat surface",
                "dtm": "normals from the DTM",
                "facets": "normals from facet slope and aspect",
            }[self.normals]
            text = f"to-sun/to-sensor zenith and azimuth; {normals}"
        elif self.surface == "local":
            text = "local incidence and emission, phase" + (
                "" if "phase" in self.roles else " from the zenith/azimuth angles"
            )
        else:
            text = "incidence, emission and phase relative to the ellipsoid"
        if self.checks:
            text += f"; checked against {', '.join(self.checks)}"
        if self.unused:
            text += f"; not read: {', '.join(self.unused)}"
        return text


def _layouts_text() -> str:
    return (
        "ellipsoid angles: the four zenith/azimuth angles "
        f"({', '.join(ANGLE_ROLES)}) or incidence, emission, phase; local-surface angles: "
        "the four zenith/azimuth angles plus facet_slope and facet_aspect, or "
        "local_incidence and local_emission plus phase"
    )


def plan_geometry(
    found,
    *,
    surface: str = "auto",
    dtm: bool = False,
    source="geometry",
    found_text: str | None = None,
) -> GeometryPlan:
    """Choose the bands that make the geometry, from the roles a backplane carries.

    Args:
        found: the roles present (any iterable of :data:`ROLES`).
        surface: ``"auto"`` (default): the local surface when the backplane carries it
            (facet slope/aspect with the zenith/azimuth angles, or local incidence and
            emission with a phase), else the ellipsoid; ``"local"``: the local surface,
            an error if the backplane (or a DTM) does not give it; ``"ellipsoid"``: the
            ellipsoid angles only, the surface flat (or from ``dtm``), local-surface
            bands recorded as not read.
        dtm: whether a DTM gives the normals; it needs the zenith/azimuth angles, and it
            conflicts with local-surface bands unless ``surface="ellipsoid"``.
        source: the backplane, for messages.
        found_text: what the backplane holds, for messages (default: the roles found).

    Raises:
        ValueError: bad ``surface``; no usable layout (the message lists what was found
            and what each layout needs); local-surface bands that cannot be used;
            a DTM and local-surface bands together.

    Returns:
        :class:`GeometryPlan`; its ``unused`` lists the local-surface roles not read.
    """
    found = set(found)
    return _choose(found, surface, dtm, source, found_text).with_unused(found)


def _choose(found, surface, dtm, source, found_text) -> GeometryPlan:
    if surface not in SURFACES:
        raise ValueError(f"surface={surface!r} is not one of {', '.join(map(repr, SURFACES))}")
    holds = found_text or f"roles {sorted(found)}"
    has_azimuths = set(ANGLE_ROLES) <= found
    has_triplet = set(TRIPLET_ROLES) <= found
    local_present = tuple(role for role in LOCAL_ROLES if role in found)
    if has_azimuths and set(FACET_ROLES) <= found:
        local = "facets"
    elif set(LOCAL_ANGLE_ROLES) <= found and ("phase" in found or has_azimuths):
        local = "local_angles"
    else:
        local = None

    if not (has_azimuths or has_triplet or local == "local_angles"):
        missing_azimuth = [r for r in ANGLE_ROLES if r not in found]
        missing_triplet = [r for r in TRIPLET_ROLES if r not in found]
        raise ValueError(
            f"{source} holds no geometry lumaxlike can read; it holds {holds}. Expected "
            f"{_layouts_text()}. Missing for the zenith/azimuth layout: "
            + "; ".join(_accepted(r) for r in missing_azimuth)
            + ". Missing for the incidence/emission/phase layout: "
            + "; ".join(_accepted(r) for r in missing_triplet)
        )
    if dtm and not has_azimuths:
        raise ValueError(
            f"a DTM needs the sun's and the sensor's azimuths to tilt the surface, "
            f"but {source} holds {holds}: give the four zenith/azimuth angles, or no DTM"
        )
    if dtm and local_present and surface != "ellipsoid":
        raise ValueError(
            f"{source} carries local-surface bands ({', '.join(local_present)}) and a DTM was "
            "given: two sources of local slopes. Drop the DTM to use the backplane's, or pass "
            "surface='ellipsoid' (--surface ellipsoid) to use the DTM with the ellipsoid angles"
        )

    if surface == "ellipsoid" or (surface == "auto" and not local_present):
        if not (has_azimuths or has_triplet):
            raise ValueError(
                f"surface={surface!r} needs the ellipsoid angles, but {source} holds "
                f"{holds}. Expected {_layouts_text()}"
            )
        if has_azimuths:
            # a DTM makes the surface local, unless the user asked for the ellipsoid's angles
            chosen = "local" if dtm and surface == "auto" else "ellipsoid"
            return GeometryPlan(chosen, "zenith_azimuth", "dtm" if dtm else "flat", ANGLE_ROLES)
        return GeometryPlan("ellipsoid", "triplet", "flat", TRIPLET_ROLES)

    if dtm:  # surface "local" with a DTM and no local-surface bands
        return GeometryPlan("local", "zenith_azimuth", "dtm", ANGLE_ROLES)
    if local is None:
        what = (
            f"its local-surface bands ({', '.join(local_present)}) cannot be used alone"
            if local_present
            else "it has no local-surface bands"
        )
        raise ValueError(
            f"surface={surface!r}: {source} holds {holds}; {what}. Local-surface angles need "
            "the four zenith/azimuth angles plus facet_slope and facet_aspect, or "
            "local_incidence and local_emission plus phase"
            + (
                "; pass surface='ellipsoid' (--surface ellipsoid) to use the ellipsoid angles "
                "and leave them out"
                if local_present
                else ""
            )
        )
    if local == "facets":
        checks = tuple(r for r in (*LOCAL_ANGLE_ROLES, "facet_cos_i") if r in found)
        return GeometryPlan(
            "local", "zenith_azimuth", "facets", (*ANGLE_ROLES, *FACET_ROLES), checks
        )
    roles = (
        (*LOCAL_ANGLE_ROLES, "phase") if "phase" in found else (*LOCAL_ANGLE_ROLES, *ANGLE_ROLES)
    )
    checks = tuple(r for r in ("facet_cos_i",) if r in found)
    return GeometryPlan("local", "triplet", "flat", roles, checks)

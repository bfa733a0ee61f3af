"""`OpticalConstants`: a material's complex refractive index n + ik on a wavelength grid,
its readers (CSV, refractiveindex.info YAML) and its interpolation."""

import dataclasses
import io
import math
from pathlib import Path

import numpy as np
from jaxtyping import ArrayLike, Float

__all__ = ["OpticalConstants"]


def _checked_grid(wavelength, n, k, name: str):
    wavelength = np.asarray(wavelength, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if wavelength.ndim != 1 or wavelength.size < 1:
        raise ValueError(f"{name}: wavelength must be a 1-D array, got shape {wavelength.shape}")
    if not np.all(np.isfinite(wavelength)) or np.any(wavelength <= 0):
        raise ValueError(f"{name}: wavelength must be finite and > 0 [um]")
    if np.any(np.diff(wavelength) <= 0):
        raise ValueError(f"{name}: wavelength must be strictly increasing")
    if k.shape != wavelength.shape:
        raise ValueError(
            f"{name}: k must have wavelength's shape {wavelength.shape}, got {k.shape}"
        )
    if not np.all(np.isfinite(k)) or np.any(k < 0):
        raise ValueError(f"{name}: k must be finite and >= 0")
    if n.shape not in ((), wavelength.shape):
        raise ValueError(f"{name}: n must be a scalar or have wavelength's shape, got {n.shape}")
    if not np.all(np.isfinite(n)) or np.any(n <= 0):
        raise ValueError(f"{name}: n must be finite and > 0")
    return wavelength, n, k


#: spellings of g/cm^3 accepted after the number of a CSV's ``# density:`` comment
_DENSITY_UNITS = ("", "g/cm3", "g/cm^3", "g cm-3", "g cm^-3", "g/cc")


def _csv_density(path: Path, text: str) -> float:
    """The density [g/cm^3] of a CSV's ``# density:`` comment (``3.3``, ``3.3 g/cm3``);
    ValueError naming the file for anything else."""
    number, _, unit = text.strip().partition(" ")
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0) or unit.strip().lower() not in _DENSITY_UNITS:
        raise ValueError(
            f"{path}: '# density: {text}': a density > 0 in g/cm^3 expected, "
            "e.g. '# density: 3.3' or '# density: 3.3 g/cm3'"
        )
    return value


@dataclasses.dataclass(frozen=True, eq=False)
class OpticalConstants:
    """A material's optical constants, n + ik, on a wavelength grid.

    Attributes:
        name: the material's name.
        wavelength: the grid [um], shape ``(points,)``, strictly increasing.
        n: real refractive index, a scalar (``shape ()``) or shape ``(points,)``.
        k: imaginary refractive index (extinction coefficient), shape ``(points,)``, >= 0.
        density: the material's density [g/cm^3], or None where unknown (needed to turn
            a nanophase iron mass fraction into a volume fraction, `slab_albedo`).

    Build one directly, with `from_csv`, `from_refractiveindex_yaml` or
    `from_reflectance`, or load a shipped set with `lumaxlike.optical_constants`.
    """

    name: str
    wavelength: np.ndarray
    n: np.ndarray
    k: np.ndarray
    density: float | None = None

    def __post_init__(self) -> None:
        wavelength, n, k = _checked_grid(self.wavelength, self.n, self.k, repr(self.name))
        if self.density is not None and not (np.isfinite(self.density) and self.density > 0):
            raise ValueError(f"density must be finite and > 0 [g/cm^3], got {self.density}")
        for field, value in (("wavelength", wavelength), ("n", n), ("k", k)):
            value.setflags(write=False)
            object.__setattr__(self, field, value)
        if self.density is not None:
            object.__setattr__(self, "density", float(self.density))

    def interpolate(
        self, wavelengths: ArrayLike
    ) -> tuple[Float[np.ndarray, "..."], Float[np.ndarray, "..."]]:
        """(n, k) at `wavelengths` [um] (any shape), linear in wavelength between grid
        points (refractiveindex.info's convention).

        Raises:
            ValueError: a wavelength outside the grid (no extrapolation).
        """
        wavelengths = np.asarray(wavelengths, dtype=np.float64)
        low, high = self.wavelength[0], self.wavelength[-1]
        outside = ~((wavelengths >= low) & (wavelengths <= high))
        if np.any(outside):
            raise ValueError(
                f"wavelengths outside {self.name!r}'s grid [{low:g}, {high:g}] um: "
                f"{np.unique(wavelengths[outside])[:5]}"
            )
        k = np.interp(wavelengths, self.wavelength, self.k)
        if self.n.ndim == 0:
            return np.broadcast_to(self.n, wavelengths.shape).copy(), k
        return np.interp(wavelengths, self.wavelength, self.n), k

    @classmethod
    def from_csv(cls, path, *, name: str | None = None, density: float | None = None):
        """Read a CSV file with the columns ``wavelength`` [um], ``n`` and ``k``.

        Lines starting with ``#`` are comments; ``# name: ...`` and ``# density: ...``
        [g/cm^3: a number, optionally followed by ``g/cm3``] among them give the defaults
        of `name` (else the file's stem) and `density`. The first other line is the header (the three column names, in any
        order, extra columns ignored).

        Raises:
            ValueError: naming the file: a missing column, no data line, a non-numeric or
                non-finite value (named with its line), a density in another unit, or a
                grid `OpticalConstants` refuses.
        """
        path = Path(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        meta = dict(
            line.lstrip("#").split(":", 1) for line in lines if line.startswith("#") and ":" in line
        )
        meta = {key.strip().lower(): value.strip() for key, value in meta.items()}
        body = [
            (i + 1, line)
            for i, line in enumerate(lines)
            if line.strip() and not line.startswith("#")
        ]
        if not body:
            raise ValueError(f"{path}: no header line (wavelength,n,k)")
        header = [column.strip().lower() for column in body[0][1].split(",")]
        missing = [column for column in ("wavelength", "n", "k") if column not in header]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing}; header is {header}")
        rows = []
        for number, line in body[1:]:
            try:
                values = [float(value) for value in line.split(",")]
            except ValueError:
                raise ValueError(f"{path}, line {number}: not a number in {line!r}") from None
            if len(values) != len(header) or not np.all(np.isfinite(values)):
                raise ValueError(f"{path}, line {number}: {len(header)} finite values expected")
            rows.append(values)
        if not rows:
            raise ValueError(f"{path}: no data line after the header (wavelength,n,k)")
        table = np.array(rows, dtype=np.float64).reshape(-1, len(header))
        columns = {column: table[:, header.index(column)] for column in ("wavelength", "n", "k")}
        if density is None and "density" in meta:
            density = _csv_density(path, meta["density"])
        try:
            return cls(name or meta.get("name", path.stem), density=density, **columns)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None

    @classmethod
    def from_refractiveindex_yaml(
        cls, path, *, name: str | None = None, density: float | None = None
    ):
        """Read a refractiveindex.info database entry (YAML): ``tabulated nk`` blocks, or
        ``tabulated n`` blocks with ``tabulated k`` blocks (n then interpolated onto
        k's grid, which must lie within n's). Wavelengths are in um, as in the database.
        Several blocks of one type are joined into one grid where their ranges do not
        overlap (each block after the other, in wavelength).

        Raises:
            ValueError: a formula entry (``formula 1`` ...), no k, malformed data, blocks
                of one type whose ranges overlap, or a ``tabulated nk`` block beside
                ``tabulated n`` or ``k`` blocks (which to take is not said).
        """
        import yaml  # a dependency of dask, and of lumaxlike

        path = Path(path)
        try:
            entry = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as error:
            raise ValueError(f"{path}: not YAML ({error})") from None
        blocks = entry.get("DATA") if isinstance(entry, dict) else None
        if not isinstance(blocks, list) or not blocks:
            raise ValueError(f"{path}: no DATA list (not a refractiveindex.info entry)")
        found: dict[str, list[np.ndarray]] = {}
        for block in blocks:
            kind = str(block.get("type", "")) if isinstance(block, dict) else ""
            if kind not in ("tabulated nk", "tabulated n", "tabulated k"):
                raise ValueError(f"{path}: DATA type {kind!r} not supported (tabulated only)")
            found.setdefault(kind, []).append(
                _yaml_table(path, kind, block.get("data"), 3 if kind.endswith("nk") else 2)
            )
        if "tabulated nk" in found and len(found) > 1:
            raise ValueError(
                f"{path}: a 'tabulated nk' block with {sorted(set(found) - {'tabulated nk'})} "
                "block(s): which n or k to take is not said"
            )
        tables = {kind: _joined_blocks(path, kind, parts) for kind, parts in found.items()}
        if "tabulated nk" in tables:
            wavelength, n, k = tables["tabulated nk"].T
        elif "tabulated k" not in tables:
            raise ValueError(f"{path}: no k (a 'tabulated nk' or 'tabulated k' block)")
        else:
            wavelength, k = tables["tabulated k"].T
            if "tabulated n" not in tables:
                raise ValueError(f"{path}: a 'tabulated k' block without 'tabulated n'")
            n_table = tables["tabulated n"]
            if wavelength[0] < n_table[0, 0] or wavelength[-1] > n_table[-1, 0]:
                raise ValueError(f"{path}: k's wavelengths exceed n's")
            n = np.interp(wavelength, n_table[:, 0], n_table[:, 1])
        return cls(name or path.stem, wavelength, n, k, density)

    @classmethod
    def from_reflectance(
        cls,
        refl,
        incidence,
        emission,
        azimuth,
        params,
        grain_size,
        n,
        density,
        wavelengths,
        **options,
    ):
        """k of a material from its laboratory reflectance spectrum at a known grain
        size (Lucey 1998; Lapotre et al. 2017): w per band by `lumaxlike.invert` (the
        Hapke model `params` at one geometry), then k per band from the equivalent slab
        (`slab_albedo`) by bisection in log k, all bands at once.

        w decreases with k from its k -> 0 limit down to a minimum, beyond which S_e's
        growth with k takes over; the solve searches k in [1e-12, the k of that
        minimum]. A band whose w lies outside that range is set to the range's nearer
        end, with a warning naming it.

        Args:
            refl: bidirectional reflectance r [1/sr] (RADF / pi), shape ``(bands,)``.
            incidence: the laboratory's incidence angle [rad], a scalar (conventions of
                `lumaxlike.geometry_from_angles`).
            emission: its emission angle [rad], a scalar.
            azimuth: its azimuth [rad], a scalar (0: the observer on the source's side).
            params: the `HapkeParams` of the sample (everything but w).
            grain_size: the sample's grain size D [um].
            n: real refractive index, a scalar or shape ``(bands,)`` (Lucey 1998: 1.56
                plagioclase, 1.73 pyroxene, 1.66-1.83 olivine).
            density: the material's density [g/cm^3], or None.
            wavelengths: band centres [um], shape ``(bands,)``, increasing.
            **options: ``name`` (default "from reflectance"), ``internal_scattering``
                s [1/um] (default 0), ``reflections`` and ``mean_path`` (the variants
                of `slab_albedo`), ``solver`` ("numba" default, or "jax") and ``tol``
                (of `invert`).

        Returns:
            `OpticalConstants` on `wavelengths`, with `n` and the k found.

        Raises:
            ValueError: shapes that do not match, a non-scalar angle, a band where
                `invert` found no w (named by wavelength), an unknown variant.
        """
        from .from_reflectance import k_from_reflectance

        name = options.pop("name", "from reflectance")
        wavelengths = np.asarray(wavelengths, dtype=np.float64)
        angles = (incidence, emission, azimuth)
        k = k_from_reflectance(refl, angles, params, grain_size, n, wavelengths, **options)
        return cls(name, wavelengths, np.asarray(n, dtype=np.float64), k, density)


def _yaml_table(path: Path, kind: str, data, columns: int) -> np.ndarray:
    if not isinstance(data, str):
        raise ValueError(f"{path}: the {kind!r} block has no data text")
    try:
        table = np.loadtxt(io.StringIO(data), dtype=np.float64, ndmin=2)
    except ValueError as error:
        raise ValueError(f"{path}: the {kind!r} block's data: {error}") from None
    if table.shape[1] != columns or not np.all(np.isfinite(table)):
        raise ValueError(f"{path}: the {kind!r} block needs {columns} finite columns")
    return table


def _joined_blocks(path: Path, kind: str, tables: list[np.ndarray]) -> np.ndarray:
    """The rows of several blocks of one type, in wavelength: refused where their ranges
    overlap (which rows to take is not said)."""
    tables = sorted(tables, key=lambda table: table[0, 0])
    for before, after in zip(tables, tables[1:]):
        if after[0, 0] <= before[-1, 0]:
            raise ValueError(
                f"{path}: two {kind!r} blocks overlap ({before[0, 0]:g}-{before[-1, 0]:g} "
                f"and {after[0, 0]:g}-{after[-1, 0]:g} um): which to take is not said"
            )
    return np.concatenate(tables)

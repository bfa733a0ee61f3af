"""The static vocabulary of the models: the configurations (`ModelKey` and the choices
it names), the Legendre order of the phase-function expansions, the photometric
functions' kinds and parameters.

Shared by the parameter types (`lumaxlike._params`, `lumaxlike._photometric`), which
check their values against it, and by the model (`lumaxlike._model`), which binds its
equations by it; so it imports nothing of lumaxlike (the parameter types and the model
would otherwise import each other).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "N_LEGENDRE",
    "ModelKey",
    "DEFAULT_KEY",
    "MULTIPLE_SCATTERING",
    "H_FUNCTIONS",
    "PHASE_FUNCTIONS",
    "PHOTOMETRIC_KINDS",
    "PHOTOMETRIC_PARAMETER_NAMES",
    "PHOTOMETRIC_DEFAULTS",
    "HAPKE_FIELD_NAMES",
    "HAPKE_PARAMETER_NAMES",
]

#: `lumaxlike.HapkeParams`' parameter fields (``lumaxlike._params.FIELD_NAMES``), and with w
#: every parameter `fit` can free (``PARAMETER_NAMES``)
HAPKE_FIELD_NAMES = ("b", "c", "roughness", "hs", "bs0", "hc", "bc0", "porosity_k", "asymmetry")
HAPKE_PARAMETER_NAMES = ("w",) + HAPKE_FIELD_NAMES

N_LEGENDRE = 15  # highest Legendre order of the P, P-bar expansions (Hapke 2002, eq. 27 ff.)

#: multiple-scattering choice -> bindings of `_model.equations` names to its functions
MULTIPLE_SCATTERING = {
    "amsa": {"multiple_scattering_sums": "legendre_sums"},
    "imsa": {"multiple_scattering_sums": "isotropic_sums"},
}

#: H-function choice -> its description (the functions are `_model.h_functions`' ``<choice>_terms``
#: and ``<choice>_values``)
H_FUNCTIONS = {
    "hapke2002": "Hapke (2002, eq. 13) approximation",
    "hapke1981": "Hapke (1981) two-stream approximation",
    "exact": "Chandrasekhar's exact H for isotropic scattering",
}

#: phase-function choice -> bindings of `_model.equations` names to its closed form p(g) and its
#: Legendre coefficients b_n (user-given Legendre coefficients go with "dhg" only)
PHASE_FUNCTIONS = {
    "dhg": {
        "phase_closed_form": "double_hg_phase",
        "phase_closed_coefficient": "hg_legendre_coefficient",
    },
    "hg": {
        "phase_closed_form": "single_hg_phase",
        "phase_closed_coefficient": "single_hg_legendre_coefficient",
    },
    "cornette_shanks": {
        "phase_closed_form": "cornette_shanks_phase",
        "phase_closed_coefficient": "cornette_shanks_legendre_coefficient",
    },
}


class ModelKey(NamedTuple):
    """A model configuration (hashable: one compiled model per configuration)."""

    multiple_scattering: str = "amsa"
    h_function: str = "hapke2002"
    phase_function: str = "dhg"

    @property
    def name(self) -> str:
        """A short identifier, e.g. ``"imsa-hapke1981"`` or ``"amsa-hapke2002-hg"`` (cache
        file names, metadata); the default phase function "dhg" adds nothing (no choice
        contains "-", so the names are unique)."""
        phase = "" if self.phase_function == "dhg" else f"-{self.phase_function}"
        return f"{self.multiple_scattering}-{self.h_function}{phase}"


DEFAULT_KEY = ModelKey()


#: photometric kind -> (the function of `_model.photometric` bound to its slot
#: `photometric_function`, the parameters it uses); every kind's parameters, in the order
#: `photometric_scale` takes them, are `PHOTOMETRIC_PARAMETER_NAMES`.
PHOTOMETRIC_KINDS = {
    "lambert": ("lambert_function", ()),
    "lommel_seeliger": ("lommel_seeliger_function", ()),
    "lunar_lambert": ("lunar_lambert_function", ("limb_darkening",)),
    "minnaert": ("minnaert_function", ("minnaert_k",)),
    "shkuratov": ("shkuratov_function", ("mu1", "m", "mu2", "eta")),
}
PHOTOMETRIC_PARAMETER_NAMES = ("limb_darkening", "minnaert_k", "mu1", "m", "mu2", "eta")
#: each parameter's default (ISIS3's defaults L = 1 and k = 1; Shkuratov's terms off)
PHOTOMETRIC_DEFAULTS = {
    "limb_darkening": 1.0,
    "minnaert_k": 1.0,
    "mu1": 0.0,
    "m": 0.0,
    "mu2": 0.0,
    "eta": 0.0,
}

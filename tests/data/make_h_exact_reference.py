"""Regenerate h_exact_mpmath.csv: Chandrasekhar's exact H for isotropic scattering by
adaptive tanh-sinh quadrature at 30 significant digits (mpmath; not a lumaxlike
dependency: ``pip install mpmath`` to rerun), independent of lumaxlike's quadrature:

    ln H(w, mu) = -(mu/pi) * integral_0^(pi/2) ln(1 - w t cot t) / (cos^2 t + mu^2 sin^2 t) dt

(Chandrasekhar 1960, Radiative Transfer, ch. V). The interval is split where the
integrand changes on small scales: near t = sqrt(1 - w) (the logarithm's near-singularity
at t = 0 as w -> 1) and near t = pi/2 - mu (the kernel's peak of width mu).
Checked: the moments integral_0^1 H dmu = 2 (1 - sqrt(1 - w))/w and, at w = 1,
integral_0^1 mu H dmu = 2/sqrt(3), to 18 digits.

H is evaluated at the float64 numbers nearest to the printed w and mu (mp.mpf(float(...))):
near w = 1, the 1e-16 rounding of 0.999999999999 alone moves H by 2e-11.

Usage: python tests/data/make_h_exact_reference.py > tests/data/h_exact_mpmath.csv
"""

import mpmath as mp

mp.mp.dps = 30
W = [
    "0",
    "1e-6",
    "0.05",
    "0.3",
    "0.6",
    "0.8",
    "0.95",
    "0.99",
    "0.999",
    "0.99999",
    "0.99999999",
    "0.999999999999",
    "1",
]
MU = [
    "0",
    "1e-12",
    "1e-9",
    "1e-6",
    "1e-4",
    "1e-3",
    "0.01",
    "0.03",
    "0.1",
    "0.2",
    "0.35",
    "0.5",
    "0.7",
    "0.85",
    "1",
]


def one_minus_t_cot_t(t):
    if t > mp.mpf("1e-3"):
        return 1 - t * mp.cot(t)
    return t**2 / 3 + t**4 / 45 + 2 * t**6 / 945 + t**8 / 4725


def ln_h(w, mu):
    if mu == 0 or w == 0:
        return mp.mpf(0)

    def integrand(t):
        return mp.log((1 - w) + w * one_minus_t_cot_t(t)) / (
            mp.cos(t) ** 2 + mu**2 * mp.sin(t) ** 2
        )

    near_zero = [x for x in (mp.sqrt(1 - w) / 10, mp.sqrt(1 - w), mp.mpf("0.3")) if 0 < x < 0.5]
    near_end = [mp.pi / 2 - m for m in (100 * mu, 10 * mu, mu, mu / 10) if m < mp.pi / 2 - 0.9]
    points = [mp.mpf(0)] + sorted(set(near_zero)) + [mp.mpf("0.8")] + sorted(near_end) + [mp.pi / 2]
    return -mu / mp.pi * mp.quad(integrand, points)


if __name__ == "__main__":
    print("w,mu,h")
    for w in W:
        for mu in MU:
            h = mp.exp(ln_h(mp.mpf(float(w)), mp.mpf(float(mu))))
            print(f"{w},{mu},{mp.nstr(h, 20)}")

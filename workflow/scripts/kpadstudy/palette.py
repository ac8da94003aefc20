"""One colour, marker and line style per configuration, the same in every figure.

Families (colour-blind-safe colours of the Okabe-Ito palette, Okabe & Ito 2008, "Color Universal Design"):
van black down-triangles, suf orange squares, ngram sky-blue triangles, Trident reddish-purple diamonds,
kpadauto vermillion stars. kpad K and nopad K share K's colour, sampled from matplotlib's ``viridis`` map
(perceptually uniform, readable with colour-vision deficiencies) at ``(log2(K) - 2) / 3`` over 0.0-0.9, so
K 4, 8, 16 (and 6, 12 between them) keep their colours whatever else a figure shows: kpad filled circles on
solid lines, nopad open circles on dashed lines (the second cue besides colour). Other K follow the same
rule (clipped to K 4-32); a family not listed is grey with a plus marker.
"""

from __future__ import annotations

import math

#: family -> (colour, marker); Okabe-Ito colours
FAMILIES = {
    "van": ("#000000", "v"),
    "suf": ("#E69F00", "s"),
    "ngram": ("#56B4E9", "^"),
    "trident": ("#CC79A7", "D"),
    "kpadauto": ("#D55E00", "*"),
}
OTHER = ("#999999", "P")


def k_colour(k: float) -> tuple[float, float, float, float]:
    """The colour of draft length ``k`` (kpad and nopad alike): ``viridis`` at ``(log2 k - 2) / 3`` mapped to
    0.0-0.9 (K 4 -> 0.0 purple, K 8 -> 0.3 blue, K 12 -> 0.48 teal, K 16 -> 0.6 green, K 32 -> 0.9 yellow-green),
    clipped to that range; RGBA."""
    from matplotlib import colormaps

    x = min(1.0, max(0.0, (math.log2(max(float(k), 1.0)) - 2.0) / 3.0))
    return colormaps["viridis"](0.9 * x)


def style(configuration: str, method: str | None = None, k: float | None = None) -> dict:
    """Matplotlib keyword arguments for one configuration: ``color``, ``marker``, ``linestyle``,
    ``markerfacecolor``.

    Args:
        configuration: its name (``van``, ``suf``, ``kpad8``, ``trident``, ...); a name in :data:`FAMILIES`
            wins over its method (Trident is method suf).
        method: ``van`` / ``suf`` / ``ngram`` / ``kpad`` / ``nopad`` / ``kpadauto`` (None: read from the name).
        k: its K (None: the digits at the end of the name).
    """
    name = str(configuration)
    if method is None:
        method = name.rstrip("0123456789") or name
    if k is None or (isinstance(k, float) and math.isnan(k)):
        digits = name[len(name.rstrip("0123456789")) :]
        k = float(digits) if digits else None
    if name in FAMILIES or (method in FAMILIES and method != "kpad"):
        colour, marker = FAMILIES[name] if name in FAMILIES else FAMILIES[method]
        return {"color": colour, "marker": marker, "linestyle": "-", "markerfacecolor": colour}
    if method in ("kpad", "bestkpad", "nopad") and k is not None:
        colour = k_colour(k)
        if method == "nopad":
            return {"color": colour, "marker": "o", "linestyle": "--", "markerfacecolor": "white"}
        return {"color": colour, "marker": "o", "linestyle": "-", "markerfacecolor": colour}
    return {"color": OTHER[0], "marker": OTHER[1], "linestyle": ":", "markerfacecolor": OTHER[0]}

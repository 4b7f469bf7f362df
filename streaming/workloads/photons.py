"""The ``photons`` XML stream of paper 002 (Figure 2) and its example subscriptions q1-q8 (Figures 3, 10).

The generated stream has the RASS-like value ranges of the paper's
astrophysics scenario: celestial coordinates (ra 0-360°, dec -90-90°), a
fraction of the photons from the Vela region the example queries select
(ra 120-138°, dec -49 to -40°), detector pixel coordinates (dx, dy in 0-511),
pulse height channel (phc 0-255), energy in keV (0.1-2.4, skewed low as
X-ray spectra are) and an increasing detection time in seconds. Values have
at most three decimals, as the paper's constants.

>>> items = list(photon_items(3, seed=1))
>>> items[0].startswith("<photon><coord><cel><ra>")
True
"""

from __future__ import annotations

import math
import random
from typing import Iterator

__all__ = ["PHOTONS_DTD", "PHOTONS_MAPPING", "PAPER_QUERIES", "JOIN_QUERIES", "photon_values", "photon_items", "photons_document"]

PHOTONS_DTD = """<!ELEMENT photons (photon*)>
<!ELEMENT photon (coord, phc, en, det_time)>
<!ELEMENT coord (cel, det)>
<!ELEMENT cel (ra, dec)>
<!ELEMENT ra (#PCDATA)>
<!ELEMENT dec (#PCDATA)>
<!ELEMENT det (dx, dy)>
<!ELEMENT dx (#PCDATA)>
<!ELEMENT dy (#PCDATA)>
<!ELEMENT phc (#PCDATA)>
<!ELEMENT en (#PCDATA)>
<!ELEMENT det_time (#PCDATA)>
"""

PHOTONS_MAPPING: dict = {
    "time": "det_time",
    "relations": [{
        "name": "Photon", "path": "", "key": "pid",
        "attributes": {name: {"path": path, "type": kind} for name, path, kind in (
            ("ra", "coord/cel/ra", "float"), ("dec", "coord/cel/dec", "float"), ("dx", "coord/det/dx", "int"),
            ("dy", "coord/det/dy", "int"), ("phc", "phc", "int"), ("en", "en", "float"),
            ("det_time", "det_time", "float"))},
    }],
}
"""Each photon as one ``Photon`` tuple (generated key ``pid``), so filters and keyword queries run on the stream."""

_VELA = """[coord/cel/ra >= 120.0 and coord/cel/ra <= 138.0 and
   coord/cel/dec >= -49.0 and coord/cel/dec <= -40.0]"""

PAPER_QUERIES: dict[str, str] = {
    "q1": f"""<photons>
{{ for $w in stream("photons")/photons/photon
  {_VELA}
  |det_time diff 60 step 40|
  let $a := avg($w/en)
  where $a >= 1.3
  return <avg_en> {{ $a }} </avg_en> }}
</photons>""",
    "q2": f"""<photons>
{{ for $w in stream("photons")/photons/photon
  {_VELA}
  |det_time diff 20 step 10|
  let $a := avg($w/en)
  return <avg_en> {{ $a }} </avg_en> }}
</photons>""",
    "q3": """<photons>
{ for $p in stream("photons")/photons/photon
  where $p/en >= 1.3
    and $p/coord/cel/ra >= 130.5
    and $p/coord/cel/ra <= 135.5
    and $p/coord/cel/dec >= -48.0
    and $p/coord/cel/dec <= -45.0
  return
    <rxj>
      { $p/coord/cel/ra }
      { $p/coord/cel/dec }
      { $p/en } { $p/det_time }
    </rxj>
}
</photons>""",
    "q4": """<photons>
{ for $p in stream("photons")/photons/photon
  where $p/coord/cel/ra >= 120.0
    and $p/coord/cel/ra <= 138.0
    and $p/coord/cel/dec >= -49.0
    and $p/coord/cel/dec <= -40.0
  return
    <vela>
      { $p/coord/cel/ra }
      { $p/coord/cel/dec }
      { $p/phc } { $p/en } { $p/det_time }
    </vela>
}
</photons>""",
}


def _join(size1: int, step1: int, size2: int, step2: int, condition: str, returned: str) -> str:
    return f"""<photons>
{{ for $x in stream("photon1")/photons/photon |det_time diff {size1} step {step1}|
  for $y in stream("photon2")/photons/photon |det_time diff {size2} step {step2}|
  where {condition}
  return
    <result>
      {{ $x/en }} {{ $x/{returned} }}
      {{ $y/en }} {{ $y/{returned} }}
    </result>
}}
</photons>"""


JOIN_QUERIES: dict[str, str] = {
    "q5": _join(10, 5, 20, 10, "$x/en >= $y/en + 0.5", "phc"),
    "q6": _join(10, 5, 20, 10, "$x/en >= $y/en", "det_time"),
    "q7": _join(30, 5, 15, 10, "$x/en >= $y/en", "det_time"),
    "q8": _join(15, 10, 30, 15, "$x/phc >= $y/phc", "det_time"),
}


def photon_values(rng: random.Random, t: float, vela: float = 0.3) -> dict[str, float]:
    """One photon's values at detection time ``t``.

    Vela photons are harder, and flare every 300 s (their mean energy swings
    between about 0.6 and 1.9 keV), so windowed averages cross the example
    queries' 1.3 keV threshold now and then.
    """
    if rng.random() < vela:
        ra, dec = rng.uniform(118.0, 140.0), rng.uniform(-50.0, -39.0)
        mean = 1.2 + 0.7 * math.sin(2 * math.pi * t / 300.0)
    else:
        ra, dec = rng.uniform(0.0, 360.0), rng.uniform(-90.0, 90.0)
        mean = 0.6
    en = min(2.4, 0.1 + rng.expovariate(1 / mean))
    return {"ra": round(ra, 3), "dec": round(dec, 3), "dx": rng.randrange(512), "dy": rng.randrange(512),
            "phc": min(255, int(en / 2.4 * 230 + rng.gauss(0, 6)) if en else 0), "en": round(en, 3),
            "det_time": round(t, 3)}


def photon_items(count: int, seed: int = 7, rate: float = 2.0, vela: float = 0.3,
                 start: float = 0.0) -> Iterator[str]:
    """``count`` ``<photon>`` items (XML text), ``rate`` photons per second on average."""
    rng = random.Random(seed)
    t = start
    for _ in range(count):
        t += rng.expovariate(rate)
        v = photon_values(rng, t, vela)
        yield (f"<photon><coord><cel><ra>{v['ra']}</ra><dec>{v['dec']}</dec></cel>"
               f"<det><dx>{v['dx']}</dx><dy>{v['dy']}</dy></det></coord>"
               f"<phc>{max(0, v['phc'])}</phc><en>{v['en']}</en><det_time>{v['det_time']}</det_time></photon>")


def photons_document(count: int, seed: int = 7, **options: float) -> str:
    """A ``<photons>`` document of ``count`` items, one a line."""
    return "<photons>\n" + "\n".join(photon_items(count, seed, **options)) + "\n</photons>\n"

"""``python -m streaming wxquery apt|match|query|run``: WXQuery subscriptions over XML streams (no Spark, Redis or Django).

::

    python -m streaming wxquery apt   --dtd D.dtd --query Q.xq
    python -m streaming wxquery match --dtd D.dtd --stream S.xq --query Q.xq
    python -m streaming wxquery query --apt APT.json
    python -m streaming wxquery run   --dtd D.dtd --subscriptions DIR --items ITEMS.xml --out-dir OUT
                                      [--sharing none|match|widen]

``apt`` prints the query's APT (or APF) as JSON; ``match`` prints
``{"match": bool, "merged": APT}`` (the stream's APT itself on a match, the
widened one otherwise, null if they read different streams); ``query`` prints
the WXQuery of an APT (back-translation); ``run`` evaluates every
``DIR/*.xq`` (registered in name order) over the items and writes
``OUT/<name>.xml`` (the result items in order, in the query's outer
elements), ``OUT/dead_letters.ndjson`` and ``OUT/stats.json``. Every
``OUT/<name>.xml`` is the same whatever ``--sharing``. See docs/wxquery.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from ..wxquery.apt import Abstraction
from ..wxquery.backtranslate import to_wxquery
from ..wxquery.matching import match_or_merge
from ..wxquery.parser import WXQueryError
from ..wxquery.planner import MODES
from ..wxquery.run import run_subscriptions
from ..wxquery.translate import Subscription, compile_text
from ..xmlstream.dtd import DTDError, StreamDTD
from ..xmlstream.items import BodyRejected, parse_items

HELP = "WXQuery subscriptions over XML streams: APT, matching, back-translation, shared evaluation"

_ABSTRACTION = TypeAdapter(Abstraction)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    apt = sub.add_parser("apt", help="print the APT (or APF) of a query as JSON")
    apt.add_argument("--dtd", required=True, help="the stream DTD (every stream the query reads)")
    apt.add_argument("--query", required=True, help="a WXQuery file")
    match = sub.add_parser("match", help='print {"match": bool, "merged": APT} for a stream and a query')
    match.add_argument("--dtd", required=True)
    match.add_argument("--stream", required=True, help="the WXQuery whose result stream is offered for sharing")
    match.add_argument("--query", required=True, help="the newly registered WXQuery")
    query = sub.add_parser("query", help="print the WXQuery of an APT/APF JSON (back-translation)")
    query.add_argument("--apt", required=True, help="an APT or APF as printed by apt")
    run = sub.add_parser("run", help="evaluate DIR/*.xq over the items, writing OUT/<name>.xml and OUT/stats.json")
    run.add_argument("--dtd", required=True)
    run.add_argument("--subscriptions", required=True, metavar="DIR", help="directory of .xq files")
    run.add_argument("--items", required=True, help="a document of the stream's items, or <interleaved> streams")
    run.add_argument("--out-dir", required=True, metavar="OUT")
    run.add_argument("--sharing", choices=MODES, default="widen", help="none, match or widen (default)")


def _dtd(path: str) -> StreamDTD:
    return StreamDTD.from_text(Path(path).read_text(encoding="utf-8"))


def _compile(path: Path, dtd: StreamDTD) -> Subscription:
    try:
        return compile_text(path.read_text(encoding="utf-8"), lambda _stream: dtd)
    except WXQueryError as exc:
        raise WXQueryError(f"{path}: {exc}") from None


def main(args: argparse.Namespace) -> int:
    try:
        if args.action == "query":
            return _query(args)
        dtd = _dtd(args.dtd)
        if args.action == "apt":
            print(_compile(Path(args.query), dtd).abstraction.model_dump_json(indent=1))
            return 0
        if args.action == "match":
            stream = _compile(Path(args.stream), dtd).abstraction
            query = _compile(Path(args.query), dtd).abstraction
            matched, merged = match_or_merge(stream, query, lambda _s: dtd)
            out = {"match": matched, "merged": None if merged is None else merged.model_dump(mode="json")}
            print(json.dumps(out, indent=1))
            return 0
        return _run(args, dtd)
    except (WXQueryError, DTDError, BodyRejected, OSError) as exc:
        print(str(exc), file=sys.stderr)
        return 2


def _query(args: argparse.Namespace) -> int:
    try:
        abstraction = _ABSTRACTION.validate_json(Path(args.apt).read_text(encoding="utf-8"))
    except ValidationError as exc:
        print(f"{args.apt}: not an APT or APF: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}", file=sys.stderr)
        return 2
    try:
        print(to_wxquery(abstraction))
    except ValueError as exc:
        print(f"{args.apt}: {exc}", file=sys.stderr)
        return 2
    return 0


def _run(args: argparse.Namespace, dtd: StreamDTD) -> int:
    files = sorted(Path(args.subscriptions).glob("*.xq"))
    if not files:
        print(f"{args.subscriptions}: no .xq subscription files", file=sys.stderr)
        return 2
    subs = [(f.stem, _compile(f, dtd)) for f in files]
    streams = sorted({inp.stream for _, s in subs for inp in s.inputs})
    parsed = parse_items(Path(args.items).read_bytes(), dtd)
    items = []
    for item in parsed.items:
        if item.stream is None and len(streams) > 1:
            print(f"{args.items}: the subscriptions read streams {', '.join(streams)}; give their items as "
                  '<interleaved><item stream="ID">...</item>...</interleaved>', file=sys.stderr)
            return 2
        items.append((item.stream or streams[0], item.element))
    result = run_subscriptions(subs, items, args.sharing, lambda _s: dtd)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, sub in subs:
        (out / f"{name}.xml").write_text(_document(sub.wrappers, result.results[name]), encoding="utf-8")
    dead = parsed.dead_letters + result.dead_letters
    with open(out / "dead_letters.ndjson", "w", encoding="utf-8") as fh:
        for letter in dead:
            fh.write(json.dumps(letter.to_dict()) + "\n")
    stats = {**result.stats, "dead_letters": len(dead),
             "results": {name: len(rows) for name, rows in result.results.items()}}
    (out / "stats.json").write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")
    return 0


def _document(wrappers: tuple[str, ...], rows: list[str]) -> str:
    tags = wrappers or ("results",)
    head = "".join(f"<{t}>" for t in tags)
    tail = "".join(f"</{t}>" for t in reversed(tags))
    return head + "\n" + "".join(row + "\n" for row in rows) + tail + "\n"

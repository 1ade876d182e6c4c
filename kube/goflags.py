"""Go-style command lines for koord's argparse parsers, so the daemons take the argument lists upstream
Koordinator's chart passes (docs/flags.md, "Upstream flags").

Go's ``flag`` package (and pflag for long names) accepts ``-name`` and ``--name``, ``-name=value`` and
``-name value``, and booleans as ``-name`` or ``-name=true|false`` (never ``-name false``).
``normalise(parser, argv, upstream)`` rewrites such an argv into the form argparse understands:

* a flag the parser has becomes ``--name=value`` (value flags), ``--name`` / ``--no-name`` (booleans);
* a flag of the component's upstream set that koord does not implement is swallowed with its value and
  reported in ``GoArgv.ignored`` (the caller logs one warning line naming them);
* anything else that looks like a flag is an error naming it (``FlagError``).

``parse_gates`` reads a ``--feature-gates`` value (``A=true,B=false``, Go's boolean spellings,
``AllAlpha``/``AllBeta``): gates koord does not know are reported, not fatal; a malformed item is an error
naming it.

Pure: no I/O, no logging. Imports: the standard library only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "FlagError",
    "Gates",
    "GoArgv",
    "add_klog_and_gate_flags",
    "go_bool",
    "ignored_flags_message",
    "normalise",
    "parse_gates",
    "parse_go_args",
]

_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
ALL_GATES = frozenset({"AllAlpha", "AllBeta"})


class FlagError(ValueError):
    """A command line koord cannot take; the message names the flag (and the value)."""


def go_bool(text: str) -> bool | None:
    """Go's ``strconv.ParseBool`` spellings (and any case of true/false); None when not a boolean."""
    if text in _GO_TRUE or text.lower() == "true":
        return True
    if text in _GO_FALSE or text.lower() == "false":
        return False
    return None


@dataclass(frozen=True)
class GoArgv:
    argv: list[str]
    """What to hand argparse."""
    ignored: tuple[str, ...]
    """Upstream flags koord accepted without implementing them, as ``--name``, first-seen order."""


@dataclass(frozen=True)
class _Option:
    spelling: str  # the option string to emit (the long one when there is one)
    action: argparse.Action


def _options(parser: argparse.ArgumentParser) -> dict[str, _Option]:
    """Flag name (no dashes) → how to emit it, for every option string of the parser."""
    table: dict[str, _Option] = {}
    for action in parser._actions:
        longs = [s for s in action.option_strings if s.startswith("--")]
        for s in action.option_strings:
            spelling = s if s.startswith("--") or not longs else longs[0]
            table[s.lstrip("-")] = _Option(spelling, action)
    return table


def _split(token: str) -> tuple[str, str | None]:
    """``--name=value`` → ("name", "value"); ``-name`` → ("name", None)."""
    body = token[2:] if token.startswith("--") else token[1:]
    if not body or body.startswith("-") or body.startswith("="):
        raise FlagError(f"bad flag syntax: {token}")
    name, sep, value = body.partition("=")
    return name, (value if sep else None)


def _lookup(table: Mapping[str, object], name: str) -> str | None:
    """The key ``name`` is known by: as given, or with Go's underscores as dashes (klog's ``log_dir``)."""
    for candidate in (name, name.replace("_", "-")):
        if candidate in table:
            return candidate
    return None


def _boolean(token: str, opt: _Option, value: str | None) -> list[str]:
    """A koord flag that takes no value, given as ``-name`` or ``-name=bool``."""
    if value is None:
        return [opt.spelling]
    on = go_bool(value)
    if on is None:
        raise FlagError(f"{token}: invalid boolean value {value!r} (true or false)")
    action = opt.action
    if isinstance(action, argparse.BooleanOptionalAction):
        negated = opt.spelling.startswith("--no-")
        if on != negated:
            return [
                next(s for s in action.option_strings if s.startswith("--") and not s.startswith("--no-"))
            ]
        return [next(s for s in action.option_strings if s.startswith("--no-"))]
    if isinstance(action, argparse._StoreTrueAction):
        return [opt.spelling] if on else []
    if isinstance(action, argparse._StoreFalseAction):
        return [opt.spelling] if not on else []
    raise FlagError(f"{token}: {opt.spelling} takes no value")


def normalise(
    parser: argparse.ArgumentParser,
    argv: Sequence[str],
    upstream: Mapping[str, bool],
    aliases: Mapping[str, str] | None = None,
) -> GoArgv:
    """``argv`` in Go's flag syntax → argparse's. ``upstream`` maps the upstream flags koord does not
    implement to whether they are booleans (take no separate value); ``aliases`` maps upstream names
    onto a koord option string (e.g. ``port`` → ``--metrics-port``)."""
    table = _options(parser)
    for name, target in (aliases or {}).items():
        key = target.lstrip("-")
        if key not in table:
            raise ValueError(f"alias {name!r} → {target!r}: the parser has no such flag")
        table[name] = table[key]
    out: list[str] = []
    ignored: dict[str, None] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            out.extend(argv[i:])
            break
        if not token.startswith("-") or token == "-":
            out.append(token)  # not a flag: argparse reports a stray value by name
            continue
        name, value = _split(token)
        known = _lookup(table, name)
        if known is not None:
            opt = table[known]
            nargs = opt.action.nargs
            if nargs == 0:
                out.extend(_boolean(token, opt, value))
            elif nargs == "?":
                out.append(opt.spelling if value is None else f"{opt.spelling}={value}")
            else:
                if value is None:
                    if i >= len(argv):
                        raise FlagError(f"flag needs an argument: {token}")
                    value = argv[i]
                    i += 1
                out.append(f"{opt.spelling}={value}")
            continue
        up = _lookup(upstream, name)
        if up is None:
            raise FlagError(
                f"unknown flag {token.partition('=')[0]}: neither a koord flag nor an upstream one"
            )
        ignored[f"--{up}"] = None
        if value is None and not upstream[up]:
            if i >= len(argv):
                raise FlagError(f"flag needs an argument: {token}")
            i += 1  # the value goes with the flag
    return GoArgv(out, tuple(ignored))


def ignored_flags_message(component: str, ignored: Sequence[str]) -> str:
    """The one warning line for the upstream flags ``component`` accepted without implementing them."""
    return f"{component}: accepted upstream flags koord does not implement (ignored): {', '.join(ignored)}"


@dataclass(frozen=True)
class Gates:
    values: dict[str, bool]
    """Every gate koord knows, defaults overlaid with the flag."""
    not_implemented: tuple[str, ...] = ()
    """Upstream gates named in the flag that koord does not implement."""
    unknown: tuple[str, ...] = ()
    """Gates named in the flag that neither koord nor upstream has."""

    def warning(self, component: str, flag: str = "--feature-gates") -> str | None:
        """One line naming the gates that have no effect, or None."""
        parts = []
        if self.not_implemented:
            parts.append(f"upstream gates koord does not implement: {', '.join(self.not_implemented)}")
        if self.unknown:
            parts.append(f"unknown gates: {', '.join(self.unknown)}")
        return f"{component}: {flag}: ignoring {'; '.join(parts)}" if parts else None


def parse_gates(
    text: str,
    defaults: Mapping[str, bool],
    upstream: Collection[str] = (),
    flag: str = "--feature-gates",
) -> Gates:
    """``A=true,B=false`` over ``defaults``. ``AllAlpha``/``AllBeta`` switch every gate koord knows; a
    gate named explicitly wins over them whatever the order (as in Kubernetes). Empty items are skipped."""
    gates = dict(defaults)
    explicit: dict[str, bool] = {}
    not_implemented: dict[str, None] = {}
    unknown: dict[str, None] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        on = go_bool(value.strip()) if sep else None
        if not name or on is None:
            raise FlagError(f"{flag}: {item!r}: expected Name=true|false")
        if name in ALL_GATES:
            gates = dict.fromkeys(gates, on)
        elif name in defaults:
            explicit[name] = on
        elif name in upstream:
            not_implemented[name] = None
        else:
            unknown[name] = None
    gates.update(explicit)
    return Gates(gates, tuple(not_implemented), tuple(unknown))


def parse_go_args(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    component: str,
    upstream: Mapping[str, bool],
    upstream_gates: Collection[str],
    gate_defaults: Mapping[str, bool],
    aliases: Mapping[str, str] | None = None,
) -> tuple[argparse.Namespace, list[str]]:
    """``normalise`` + ``parse_args`` + ``parse_gates`` for a daemon's entry point: the parsed flags
    (``feature_gates`` replaced by every gate's value) and the warning lines for the accepted arguments
    that have no effect (``argv`` None: the process's arguments). A bad or unknown flag, or a malformed
    gate, exits through ``parser.error``."""
    try:
        go = normalise(parser, sys.argv[1:] if argv is None else argv, upstream, aliases)
        args = parser.parse_args(go.argv)
        gates = parse_gates(args.feature_gates, gate_defaults, upstream_gates)
    except FlagError as e:
        parser.error(str(e))
    warnings = [ignored_flags_message(component, go.ignored)] if go.ignored else []
    if (gate_warning := gates.warning(component)) is not None:
        warnings.append(gate_warning)
    args.feature_gates = gates.values
    return args, warnings


def add_klog_and_gate_flags(
    parser: argparse.ArgumentParser, component: str, implemented: Collection[str] = ()
) -> None:
    """``--feature-gates`` and ``--v``: every upstream gate is accepted; a gate not in ``implemented`` is
    reported by ``parse_go_args`` and ignored."""
    does = f"implements {', '.join(sorted(implemented))}" if implemented else "implements none of them"
    parser.add_argument(
        "--feature-gates",
        default="",
        help=f"Gate=true|false,...: upstream {component}'s gates are accepted; {component} {does}, so any "
        "other gate named is logged and ignored",
    )
    parser.add_argument(
        "--v", type=int, default=0, help="log verbosity as upstream's klog: 4 and above = debug"
    )

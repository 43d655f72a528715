"""Kerberos principal -> user name (`sasl.kerberos.principal.to.local.rules`), as Kafka maps a
GSSAPI client's principal to the `User:<name>` its ACLs and quotas see (Hadoop's auth_to_local
rules, Kafka's KerberosShortNamer):

    principal   service[/host]@REALM      e.g. alice@EXAMPLE.COM, kafka/broker1@EXAMPLE.COM
    rules       a list, tried in order; the first that applies gives the name; none: refused
      DEFAULT                             the first component, when REALM is krb5.conf's
                                          default_realm (kafka/broker1@EXAMPLE.COM -> kafka)
      RULE:[n:format](match)s/from/to/g/L applies to names of n components (1 or 2): format
                                          builds a string from $0 (the realm), $1, $2 (the
                                          components); it must fully match `match` (optional);
                                          then s/from/to/ (g: every match) rewrites it; /L
                                          lower-cases the result
    e.g. RULE:[1:$1@$0](.*@EXAMPLE.COM)s/@.*//,RULE:[2:$1](kafka)s/.*/broker/,DEFAULT

A rule's result with '/' or '@' left in it is an error, as in Kafka. Java regular expressions
map onto Python's `re` for the forms auth_to_local rules use; `$n` in a replacement is a group
reference, as Java's Matcher.replaceAll reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KerberosName", "NoMatchingRule", "ShortNamer", "parse_rules"]

_NAME = re.compile(r"([^/@]*)(?:/([^/@]*))?@([^/@]*)")
_RULE = re.compile(r"((DEFAULT)|(RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?))/?(L)?")
_PARAMETER = re.compile(r"([^$]*)(\$(\d*))?")
_NON_SIMPLE = re.compile(r"[/@]")


class NoMatchingRule(ValueError):
    """No rule maps the principal, or a rule left a name that is not simple."""


@dataclass(frozen=True)
class KerberosName:
    service: str
    host: str | None
    realm: str | None

    @classmethod
    def parse(cls, principal: str) -> KerberosName:
        m = _NAME.fullmatch(principal)
        if m is None:
            if "@" in principal:
                raise ValueError(f"malformed Kerberos name {principal!r}")
            return cls(principal, None, None)
        return cls(m.group(1), m.group(2), m.group(3))

    def __str__(self) -> str:
        return (
            self.service
            + (f"/{self.host}" if self.host is not None else "")
            + (f"@{self.realm}" if self.realm is not None else "")
        )


def _java_replacement(to: str) -> str:
    """Java's replacement syntax ($1, \\$) in Python's (\\g<1>, $)."""
    out, i = [], 0
    while i < len(to):
        c = to[i]
        if c == "\\" and i + 1 < len(to):
            out.append(to[i + 1].replace("\\", "\\\\"))
            i += 2
        elif c == "$" and i + 1 < len(to) and to[i + 1].isdigit():
            j = i + 1
            while j < len(to) and to[j].isdigit():
                j += 1
            out.append(f"\\g<{to[i + 1 : j]}>")
            i = j
        else:
            out.append(c.replace("\\", "\\\\"))
            i += 1
    return "".join(out)


@dataclass(frozen=True)
class _Rule:
    text: str
    default: bool
    components: int = 0
    format: str = ""
    match: re.Pattern | None = None
    sub_from: re.Pattern | None = None
    sub_to: str = ""
    repeat: bool = False
    lower: bool = False

    def apply(self, params: list[str], default_realm: str) -> str | None:
        result: str | None = None
        if self.default:
            if params[0] == default_realm:
                result = params[1]
        elif len(params) - 1 == self.components:
            base = _fill(self.format, params, self.text)
            if self.match is None or self.match.fullmatch(base):
                if self.sub_from is None:
                    result = base
                else:
                    result = self.sub_from.sub(_java_replacement(self.sub_to), base, count=0 if self.repeat else 1)
        if result is not None and _NON_SIMPLE.search(result):
            raise NoMatchingRule(f"non-simple name {result!r} after auth_to_local rule {self.text}")
        if self.lower and result is not None:
            result = result.lower()
        return result


def _fill(fmt: str, params: list[str], rule: str) -> str:
    out, start = [], 0
    while start < len(fmt):
        m = _PARAMETER.match(fmt, start)  # consumes at least one character
        assert m is not None
        out.append(m.group(1))
        if m.group(3) is not None:
            if not m.group(3):
                raise ValueError(f"bad format in rule {rule}: '$' without a number")
            n = int(m.group(3))
            if n >= len(params):
                raise ValueError(f"index {n} in {fmt!r} (rule {rule}) is outside 0 to {len(params) - 1}")
            out.append(params[n])
        start = m.end()
    return "".join(out)


def parse_rules(rules: list[str]) -> list[_Rule]:
    """`sasl.kerberos.principal.to.local.rules` (a list) -> rules; ValueError naming a bad one."""
    out = []
    for text in rules:
        text = text.strip()
        m = _RULE.match(text)
        if m is None or m.end() != len(text):
            rest = "" if m is None else f", unmatched: {text[m.end() :]!r}"
            raise ValueError(f"invalid principal-to-local rule {text!r}{rest}")
        if m.group(2):
            out.append(_Rule(text, True, lower=m.group(12) == "L"))
            continue
        try:
            match = re.compile(m.group(7)) if m.group(7) is not None else None
            sub_from = re.compile(m.group(9)) if m.group(9) is not None else None
        except re.error as e:
            raise ValueError(f"invalid regular expression in principal-to-local rule {text!r}: {e}") from None
        out.append(
            _Rule(
                text,
                False,
                int(m.group(4) or 0),
                m.group(5),
                match,
                sub_from,
                m.group(10) or "",
                m.group(11) == "g",
                m.group(12) == "L",
            )
        )
    return out


class ShortNamer:
    def __init__(self, rules: list[str], default_realm: str) -> None:
        self.rules = parse_rules(rules or ["DEFAULT"])
        self.default_realm = default_realm

    def short_name(self, principal: str) -> str:
        name = KerberosName.parse(principal)
        if name.host is None:
            if name.realm is None:
                return name.service
            params = [name.realm, name.service]
        else:
            params = [name.realm or "", name.service, name.host]
        for rule in self.rules:
            result = rule.apply(params, self.default_realm)
            if result is not None:
                return result
        raise NoMatchingRule(
            f"no principal-to-local rule applies to {principal} "
            f"(sasl.kerberos.principal.to.local.rules: {', '.join(r.text for r in self.rules)}; "
            f"default realm {self.default_realm or '(none)'})"
        )

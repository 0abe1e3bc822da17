"""Kubernetes' CEL macros that the ``common-expression-language`` library lacks, rewritten into those it has, so a
selector using them evaluates (:func:`rewrite`, before the library compiles it):

* ``cel.bind(x, init, body)`` → ``[init].map(x, body)[0]``: ``body`` with ``x`` bound to ``init``, evaluated once;
* the two-variable comprehensions (cel-go's ``ext.TwoVarComprehensions``) over ``kubeflux_pairs(range)``, the
  range's ``[index, value]`` (list) or ``[key, value]`` (map) pairs, each variable bound by a one-item comprehension:
  ``r.all(i, v, p)`` → ``kubeflux_pairs(r).all(e, [e[0]].all(i, [e[1]].all(v, p)))``, and so ``exists`` and
  ``existsOne``; ``transformList(i, v, [filter,] f)`` maps (and filters) the pairs; ``transformMap(k, v, [filter,]
  f)`` builds the map of ``[k, f]`` pairs (``kubeflux_map``) and ``transformMapEntry(k, v, [filter,] f)`` merges the
  maps ``f`` gives (``kubeflux_merge``);
* ``r.sortBy(x, key)`` → ``kubeflux_sort_by(r, r.map(x, key))``.

The functions named ``kubeflux_*`` are :mod:`kubeflux.apiobjects.devicecel`'s.
"""

from __future__ import annotations

from typing import Final

from kubeflux.apiobjects.celsyntax import Node, deep_recursion, parse

__all__ = ["rewrite"]

PAIR: Final = "kubeflux_pair"
"""The variable bound to each ``[index or key, value]`` pair."""
_TWO_VARIABLE: Final = frozenset({"all", "exists", "existsOne", "transformList", "transformMap", "transformMapEntry"})


def rewrite(expression: str) -> str:
    """``expression`` with the macros the library lacks (see the module docstring) in terms of those it has."""
    with deep_recursion():
        tree = parse(expression)
        return expression if tree is None else _rewritten(expression, tree)


def _rewritten(source: str, node: Node) -> str:
    args = node.args
    texts = [_rewritten(source, arg) for arg in args]  # once each: a chain of calls is as deep as it is long
    if node.kind == "call" and node.method and all(arg.kind == "ident" for arg in args[1:2]):
        name = node.value
        if name == "bind" and len(args) == 4 and args[0].kind == "ident" and args[0].value == "cel":
            return f"([{texts[2]}].map({args[1].value}, {texts[3]})[0])"
        if name == "sortBy" and len(args) == 3:
            return f"kubeflux_sort_by({texts[0]}, {texts[0]}.map({args[1].value}, {texts[2]}))"
        if name in _TWO_VARIABLE and len(args) in (4, 5) and args[2].kind == "ident":
            return _two_variables(name, texts[0], args[1].value, args[2].value, texts[3:])
    text = source[node.start : node.end]
    for item, rewritten in sorted(zip(args, texts, strict=True), key=lambda pair: pair[0].start, reverse=True):
        text = text[: item.start - node.start] + rewritten + text[item.end - node.start :]
    return text


def _two_variables(name: str, over: str, first: str, second: str, bodies: list[str]) -> str:
    pairs = f"kubeflux_pairs({over})"

    def bound(body: str, macro: str) -> str:
        """``body`` with ``first`` and ``second`` bound to the pair's items, through one-item ``macro``s."""
        if macro == "map":
            return f"[{PAIR}[0]].map({first}, [{PAIR}[1]].map({second}, {body})[0])[0]"
        return f"[{PAIR}[0]].{macro}({first}, [{PAIR}[1]].{macro}({second}, {body}))"

    if name in ("all", "exists"):
        return f"{pairs}.{name}({PAIR}, {bound(bodies[0], name)})"
    if name == "existsOne":
        return f"{pairs}.exists_one({PAIR}, {bound(bodies[0], 'exists')})"
    if len(bodies) == 2:
        pairs = f"{pairs}.filter({PAIR}, {bound(bodies[0], 'all')})"
    value = bound(bodies[-1], "map")
    if name == "transformList":
        return f"{pairs}.map({PAIR}, {value})"
    if name == "transformMap":
        return f"kubeflux_map({pairs}.map({PAIR}, [{PAIR}[0], {value}]))"
    return f"kubeflux_merge({pairs}.map({PAIR}, {value}))"

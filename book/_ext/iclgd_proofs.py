"""Theorem boxes named by the papers' numbers, not by the book's counters.

Loaded by ``iclgd_sphinx.setup``. sphinx-proof numbers every ``prf:`` box by the book's chapter
("Theorem 4.3"), which clashes with the papers' own numbers that the boxes' titles carry
("Theorem 1 of Xie et al."). Here every box is unnumbered (sphinx-proof's ``:nonumber:``, set
on all of them) and its title written as it is (``proof_title_format: "%t"`` in
``_config.yml``), so a box reads "Theorem · <title>", or just its title where the title names
the statement itself ("Theorem 1 of Xie et al.": the class ``iclgd-named`` hides the type, see
``book/_static/iclgd.css``); a ``{prf:ref}`` without a text of its own shows the box's title,
math included, instead of the number sphinx-proof would print. Proofs (``prf:proof``) fold,
titled "Proof".
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.nodes import make_refnode
from sphinx_proof import directive as prf_directive
from sphinx_proof import domain as prf_domain

_NAMED = re.compile(
    r"^(Theorem|Lemma|Proposition|Corollary|Definition|Remark|Claim|Example)\b", re.IGNORECASE
)


def _patch_directive() -> None:
    original = prf_directive.ElementDirective.run
    if getattr(original, "_iclgd", False):
        return

    def run(self) -> list[nodes.Node]:
        self.options.setdefault("nonumber", None)
        result = original(self)
        box = result[0]
        title = next(iter(box.findall(nodes.title)), None)
        if self.arguments and _NAMED.match(self.arguments[0]):
            box["classes"].append("iclgd-named")
        entry = self.env.proof_list.get(box.get("label"))
        if entry is not None and title is not None:
            entry["iclgd_title"] = [child.deepcopy() for child in title.children]
        return result

    run._iclgd = True  # type: ignore[attr-defined]
    prf_directive.ElementDirective.run = run


def _patch_domain() -> None:
    original = prf_domain.ProofDomain.resolve_xref
    if getattr(original, "_iclgd", False):
        return

    def resolve_xref(self, env, fromdocname, builder, typ, target, node, contnode):
        match = getattr(env, "proof_list", {}).get(target)
        explicit = node.get("refexplicit", False)
        if match is None or explicit or not match.get("iclgd_title"):
            return original(self, env, fromdocname, builder, typ, target, node, contnode)
        text = nodes.inline("", "", *[child.deepcopy() for child in match["iclgd_title"]])
        return make_refnode(builder, fromdocname, match["docname"], target, text)

    resolve_xref._iclgd = True  # type: ignore[attr-defined]
    prf_domain.ProofDomain.resolve_xref = resolve_xref


def _patch_proof() -> None:
    """``prf:proof`` boxes fold (sphinx-togglebutton's ``dropdown`` admonitions, titled "Proof"),
    so a chapter reads statement, check, experiment; the proof is one click away."""
    cls = prf_directive.ProofDirective
    if getattr(cls.run, "_iclgd", False):
        return

    def run(self) -> list[nodes.Node]:
        realtyp = self.name.split(":")[1]
        classes = ["proof", realtyp, "dropdown", *self.options.get("class", [])]
        section = nodes.admonition(classes=classes, ids=[realtyp])
        section += nodes.title("", realtyp.title())
        self.state.nested_parse(self.content, self.content_offset, section)
        node = prf_directive.proof_node()
        node += section
        return [node]

    run._iclgd = True  # type: ignore[attr-defined]
    cls.run = run


def setup(app: Sphinx) -> dict[str, Any]:
    _patch_directive()
    _patch_domain()
    _patch_proof()
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

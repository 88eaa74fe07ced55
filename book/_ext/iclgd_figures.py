"""Numbered, captioned figures from notebook outputs.

Loaded by ``iclgd_sphinx.setup``. A figure of the book is drawn by a code cell (``iclgd.plot``);
its caption is the markdown cell that follows, written as

````md
```{figure-caption} p2-fig2a
The paper's Fig. 2(a) ... what the paper reports ... what the book finds ...
```
````

The directive's argument is the figure's label. On the page, the code cell and the caption
become one numbered figure (a ``nodes.figure`` whose caption Sphinx numbers, ``numfig``), the
cell's outputs inside it, the paper-scale tab set included (``iclgd_paper_runs`` runs after
this). ``{numref}`label``` links it as "Figure N", ``{ref}`label``` with its caption. Outside the
book (Colab, Jupyter), ``scripts/make_reader_notebooks.py`` writes the caption as a paragraph
"**Figure.** ...".

A caption that does not follow a code cell with an output is a build warning (an error under
``-W``).
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)


class figure_caption(nodes.General, nodes.Element):  # noqa: N801  (docutils node naming)
    """Placeholder for a caption, replaced by :class:`CaptionFigures`."""


class FigureCaption(SphinxDirective):
    """``figure-caption``: the caption of the figure drawn by the code cell just above."""

    required_arguments = 1  # the label
    has_content = True

    def run(self) -> list[nodes.Node]:
        node = figure_caption(label=self.arguments[0])
        self.set_source_info(node)
        para = nodes.paragraph()
        self.state.nested_parse(self.content, self.content_offset, para)
        # nested_parse puts paragraphs inside: keep their inline children as the caption
        inline = []
        for child in para.children:
            inline += child.children if isinstance(child, nodes.paragraph) else [child]
        node += nodes.caption("", "", *inline)
        return [node]


def _cell_above(node: nodes.Node) -> nodes.container | None:
    """The code cell that the caption's markdown cell follows (skipping nothing else)."""
    here = node
    while here.parent is not None:
        parent = here.parent
        index = parent.index(here)
        for sibling in reversed(parent.children[:index]):
            if isinstance(sibling, nodes.container) and sibling.get("nb_element") == "cell_code":
                return sibling
            if isinstance(sibling, (nodes.paragraph, nodes.section, nodes.table)):
                return None  # prose between the figure and its caption
            if isinstance(sibling, nodes.target):
                continue
        if isinstance(parent, nodes.section):
            return None
        here = parent
    return None


class CaptionFigures(SphinxTransform):
    """Wrap each captioned code cell and its caption into one numbered figure."""

    default_priority = 795  # after myst-nb's cells, before iclgd_paper_runs' tabs (800)

    def apply(self, **kwargs: Any) -> None:
        for node in list(self.document.findall(figure_caption)):
            label = node["label"]
            cell = _cell_above(node)
            has_output = cell is not None and any(
                c.get("nb_element") == "cell_code_output" for c in cell.children
            )
            if not has_output:
                logger.warning(
                    "[iclgd] figure-caption %r does not follow a code cell with an output",
                    label,
                    location=node,
                )
                node.parent.remove(node)
                continue
            figure = nodes.figure(classes=["iclgd-figure"])
            figure["names"].append(label)
            figure["ids"].append(nodes.make_id(label))
            cell.parent.replace(cell, figure)
            figure += cell
            figure += node.children[0]  # the caption
            node.parent.remove(node)
            self.document.note_explicit_target(figure)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_node(figure_caption)
    app.add_directive("figure-caption", FigureCaption)
    app.add_transform(CaptionFigures)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}

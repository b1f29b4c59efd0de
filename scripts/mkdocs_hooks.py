"""mkdocs hooks: the build fails on a reStructuredText role left in a page.

The API reference renders docstrings as Markdown; a Sphinx role there
(``:class:`Queue```) shows up raw. Write code spans or links instead.
"""

from __future__ import annotations

import re
from typing import Any

from mkdocs.exceptions import PluginError

#: A Sphinx role as it comes out of the Markdown renderer (the target in <code>, or raw).
ROLE = re.compile(r"(:(?:class|meth|func|mod|data|attr|exc|obj|ref|py:[a-z]+):)(?:<code>|`)")


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    found = ROLE.findall(html)
    if found:
        raise PluginError(
            f"{page.file.src_path}: {len(found)} raw reST role(s) ({', '.join(sorted(set(found)))})"
            ": write ``name`` (a code span) or a Markdown link in the docstring instead"
        )
    return html

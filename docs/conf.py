"""Sphinx configuration of hixl_rma's documentation.

Build (warnings are errors, as the test command builds it):
    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "_ext"))

project = "hixl_rma"
author = "hixl_rma contributors"
copyright = "hixl_rma contributors"  # Sphinx's name for it

try:  # the installed package's version; the docs build without it too
    from importlib.metadata import version as _version

    release = _version("hixl_rma")
except Exception:  # any failure leaves the version out, never the build
    release = ""
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "hixl_settings",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
root_doc = "index"

# Markdown: heading anchors so pages can link to each other's sections,
# and the ``{directive}`` fences the API pages use.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# The reference documents the compiled window (hixl_rma._engine.WinBase, whose
# methods carry their signatures: embedsignature) through hixl_rma.Win.
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autoclass_content = "class"
# Defaults as the source writes them (``info=MPI.INFO_NULL``), not their repr.
autodoc_preserve_defaults = True


def _drop_self(app, what, name, obj, options, signature, return_annotation):
    """The compiled methods' embedded signatures name ``self``; Python's do not."""
    if what == "method" and signature and signature.startswith("(self"):
        signature = "(" + signature[len("(self"):].lstrip(", ")
    return signature, return_annotation


def setup(app):
    app.connect("autodoc-process-signature", _drop_self)

html_theme = "furo"
html_title = "hixl_rma"

"""Sphinx configuration for kiel's docs."""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))

import kiel  # noqa: E402

project = "kiel"
copyright = "2026, the kiel developers"
version = release = kiel.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True
exclude_patterns = ["_build"]
html_theme = "alabaster"
nitpicky = False

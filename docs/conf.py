"""Sphinx configuration for kiel's docs."""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))
sys.path.insert(0, os.path.abspath(os.path.dirname(__file__)))

import kiel  # noqa: E402

project = "kiel"
copyright = "2026, the kiel developers"
version = release = kiel.__version__
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
autodoc_member_order = "bysource"
# The examples run in the test suite (``sphinx-build -b doctest``, from
# tests/test_docs.py); dict reprs may wrap over lines, and "..." elides.
import doctest  # noqa: E402

doctest_default_flags = (
    doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE | doctest.DONT_ACCEPT_TRUE_FOR_1
)
# Fragments that continue a page's story take a cluster from here (see
# docs/examples_env.py), in hidden blocks.
doctest_global_setup = (
    "from examples_env import brokers, fault_proxy, kafka_cluster, kazoo_client, run, tansu, "
    "topic_factory, zk_hosts, zookeeper"
)
doctest_global_cleanup = "import examples_env; examples_env.shutdown()"
autodoc_typehints = "description"
napoleon_google_docstring = True
exclude_patterns = ["_build"]
html_theme = "alabaster"
nitpicky = False

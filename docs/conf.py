"""Sphinx configuration of the distlearn API documentation.

Build (warnings are errors; ``tests/test_docs.py`` runs the same command)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The build needs no network: there is no intersphinx, and the theme is Sphinx's
built-in ``alabaster``.  The package is imported from this source tree, so the
documentation always describes the code next to it.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
sys.path.insert(0, ROOT)

import distlearn  # noqa: E402

project = "distlearn"
author = "distlearn developers"
copyright = "distlearn developers"  # noqa: A001 (Sphinx's name)
release = distlearn.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
]

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path: list[str] = []

# -- autodoc / autosummary -----------------------------------------------------------------------
# api.rst writes every autodoc directive by hand; autosummary only draws the overview tables (no
# :toctree:, so nothing is generated into the source tree at build time).
autosummary_generate = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
autoclass_content = "class"
autodoc_default_options = {"show-inheritance": True}

# -- napoleon: the package's docstrings are numpydoc-style ---------------------------------------
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False

# -- HTML ----------------------------------------------------------------------------------------
html_theme = "alabaster"
html_title = f"distlearn {release}"
html_theme_options = {
    "description": "Fast online learners turned into accurate batch classifiers, run on Dask.",
    "fixed_sidebar": True,
}
html_static_path: list[str] = []


def _skip_sklearn_request_setters(app, what, name, obj, skip, options):
    """Leave out scikit-learn's generated ``set_{method}_request`` (metadata routing) methods.

    scikit-learn attaches them to every estimator class, so autodoc sees them as the class's own
    members; their docstrings reference scikit-learn's glossary, which does not exist here.
    """
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_request_setters)

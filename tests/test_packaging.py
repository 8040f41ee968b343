"""pyproject.toml in the form current setuptools builds without warnings (PEP 639)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_license_is_an_spdx_string_with_its_file():
    pp = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # A table ({text = ...}) makes setuptools >= 77 warn on every build and install.
    assert pp["project"]["license"] == "BSD-3-Clause"
    files = pp["project"]["license-files"]
    assert files and all((ROOT / f).is_file() for f in files)
    assert "BSD 3-Clause" in (ROOT / files[0]).read_text()
    assert not any(c.startswith("License ::") for c in pp["project"].get("classifiers", []))  # PEP 639 forbids both
    req = [r for r in pp["build-system"]["requires"] if r.startswith("setuptools")]
    m = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", req[0])
    assert m and int(m.group(1)) >= 77, req  # the first setuptools that reads the SPDX form

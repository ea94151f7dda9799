"""Shared paths and fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MBSE = REPO / ".." / "shared" / "data" / "mbse"


@pytest.fixture(scope="session")
def mbse_dir() -> Path:
    """../shared/data/mbse, the MBSE reference mechanisms and results."""
    if not MBSE.is_dir():
        pytest.fail(f"shared data missing: expected {MBSE} beside the repository")
    return MBSE

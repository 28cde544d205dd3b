import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def fixtures():
    return ROOT / "test" / "fixtures"


@pytest.fixture
def tool():
    """A masformer command-line tool of the same build."""
    build = pathlib.Path(os.environ.get("MASFORMER_BUILD_DIR", ROOT / "build"))
    return lambda name: str(build / "bin" / name)

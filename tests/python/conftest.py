"""Shared fixtures of the Python package's tests (tests/CMakeLists.txt runs them through ctest with
PYTHONPATH=<build>/python and the paths below in the environment)."""
import glob
import os
import subprocess

import pytest

SOURCE_DIR = os.environ["FUSOR_SOURCE_DIR"]
CLI = os.environ["FUSOR_CLI"]  # the fusor executable of this build
CONFIG_MODELS = sorted(glob.glob(os.path.join(SOURCE_DIR, "configs", "models", "*.json")))


def config_model(name):
    return os.path.join(SOURCE_DIR, "configs", "models", name + ".json")


def file_stem(tensor_name):
    """The CLI's .npy file name for a tensor (tools/ModelIo.cpp file_stem)."""
    return tensor_name.replace("/", "_").replace(":", "_").replace("\\", "_")


def cli(*args, check=True):
    """Runs the fusor CLI; returns the CompletedProcess (text mode)."""
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=check)


@pytest.fixture(scope="session")
def mlp_head():
    import fusor
    return fusor.load(config_model("mlp_head"), threads=1)

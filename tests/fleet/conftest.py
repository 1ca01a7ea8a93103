"""Fixtures of the fleet tests (tests/CMakeLists.txt runs them through ctest): a private
PostgreSQL server (pg_server.sh) for the session, and the fusor CLI of this build."""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

SOURCE_DIR = os.environ["FUSOR_SOURCE_DIR"]
CLI = os.environ["FUSOR_CLI"]
BENCH_DB = os.environ.get("FUSOR_BENCH_DB", "")
PG_SERVER = os.path.join(SOURCE_DIR, "tests", "fleet", "pg_server.sh")
# ctest reports a test that prints this as skipped (tests/CMakeLists.txt, support/Skip.h)
SKIP_MARKER = "FUSOR_TEST_SKIPPED: "


def config_model(name):
    return os.path.join(SOURCE_DIR, "configs", "models", name + ".json")


def data_model(name):
    return os.path.join(SOURCE_DIR, "tests", "data", "models", name + ".json")


def cli(*args, check=False, timeout=600):
    """Runs the fusor CLI; returns the CompletedProcess (text mode)."""
    return subprocess.run([CLI, *args], capture_output=True, text=True, check=check, timeout=timeout)


def export(db, path):
    """Exports `db` to `path` with the CLI; returns the parsed document."""
    r = cli("db", "export", db, "-o", path)
    assert r.returncode == 0, r.stderr
    with open(path) as f:
        return json.load(f)


class Server:
    """A running private server: its socket folder and port, and helpers to make databases and
    roles and to run SQL as the superuser."""

    def __init__(self, folder, port):
        self.folder, self.port = folder, port
        self.psql_bin = os.path.join(os.path.dirname(shutil.which("psql") or "/usr/bin/psql"), "psql")

    def url(self, db, user="postgres", password=None):
        auth = user + (":" + password if password else "")
        return f"postgresql://{auth}@/{db}?host={self.folder}&port={self.port}"

    def sql(self, statement, db="postgres"):
        """Runs SQL as the superuser; returns its rows as text lines."""
        r = subprocess.run([self.psql_bin, "-X", "-qtA", "-v", "ON_ERROR_STOP=1", "-c", statement, self.url(db)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    def create_db(self, name):
        """A new empty database; returns its URL."""
        self.sql(f"CREATE DATABASE {name}")
        return self.url(name)


@pytest.fixture(scope="session")
def pg():
    folder = tempfile.mkdtemp(prefix="fpg.", dir="/tmp")  # short: a socket path has at most 107 bytes
    r = subprocess.run([PG_SERVER, "start", folder], capture_output=True, text=True)
    if r.returncode == 77:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(SKIP_MARKER + r.stderr.strip())
    assert r.returncode == 0, r.stderr
    with open(os.path.join(folder, "port")) as f:
        server = Server(folder, f.read().strip())
    try:
        yield server
    finally:
        subprocess.run([PG_SERVER, "stop", folder], capture_output=True)

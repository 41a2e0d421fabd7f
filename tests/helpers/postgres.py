"""A real PostgreSQL server from Debian's packages on 127.0.0.1 for tests: a fresh cluster in a temp folder, one
database with its own password-protected role, stopped and removed afterwards.

PostgreSQL refuses to run as root, so a root test process runs it as the ``postgres`` user the package creates.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def bin_dir() -> Path | None:
    """The newest /usr/lib/postgresql/<major>/bin holding initdb and postgres, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """``with Postgres("mlflow", password) as pg:`` -> a server on 127.0.0.1:``pg.port`` with database and role
    ``name`` (login with ``password``, scram-sha-256 over TCP), its cluster in a fresh folder under the temp
    folder (one the ``postgres`` user can enter: pytest's tmp_path is private to root)."""

    def __init__(self, name: str, password: str):
        self.bin = bin_dir()
        if self.bin is None:
            raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
        self.folder = Path(tempfile.mkdtemp(prefix="ccda-postgres-"))
        self.name, self.password = name, password
        self.port = _free_port()
        self.data = self.folder / "data"
        self.sockets = self.folder / "sockets"
        self.proc: subprocess.Popen | None = None
        self.user = None
        if os.geteuid() == 0:
            self.user = pwd.getpwnam("postgres")

    def _demote(self):
        if self.user is not None:
            os.setgid(self.user.pw_gid)
            os.setuid(self.user.pw_uid)

    def _run(self, *cmd: str) -> None:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, preexec_fn=self._demote,
                              cwd=self.folder)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")

    def __enter__(self) -> Postgres:
        self.sockets.mkdir()
        if self.user is not None:
            for p in (self.folder, self.sockets):
                os.chown(p, self.user.pw_uid, self.user.pw_gid)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth-local=trust",
                  "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions")
        self.log = open(self.folder / "postgres.log", "w")  # noqa: SIM115 - closed in __exit__
        if self.user is not None:
            os.chown(self.folder / "postgres.log", self.user.pw_uid, self.user.pw_gid)
        self.proc = subprocess.Popen(
            [str(self.bin / "postgres"), "-D", str(self.data), "-h", "127.0.0.1", "-p", str(self.port),
             "-k", str(self.sockets)],
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=self._demote)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {(self.folder / 'postgres.log').read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError("postgres did not listen within 60 s") from None
                time.sleep(0.3)
        psql = [str(self.bin / "psql"), "-h", str(self.sockets), "-p", str(self.port), "-U", "postgres",
                "-v", "ON_ERROR_STOP=1", "-d", "postgres", "-c"]
        self._run(*psql, f"CREATE ROLE {self.name} LOGIN PASSWORD '{self.password}'")
        self._run(*psql, f"CREATE DATABASE {self.name} OWNER {self.name}")
        return self

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if getattr(self, "log", None):
            self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)

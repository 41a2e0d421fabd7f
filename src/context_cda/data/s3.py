"""S3 through boto3 (``pip install 'context-cda[s3]'``): ``s3://bucket/key`` files and ``s3://bucket/prefix/``
folders, copied once into a local cache and read from there.

* Any S3-compatible store: the endpoint comes from ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` (MinIO, SeaweedFS,
  Ceph), credentials from boto3's usual chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``,
  an instance or pod role).
* A copy is keyed by the objects' ETags: a changed object is fetched again, an unchanged one is not (one HEAD or
  LIST request tells).
* Downloads go to a temporary file or folder beside the destination and are renamed when complete, so a failed
  or interrupted download leaves nothing half written.
* Every failure is one :class:`~context_cda.errors.CCDAError` line naming the URI and the fix (missing bucket,
  missing key, bad or missing credentials, unreachable endpoint).

Versioned pipeline outputs are DVC's job (its S3 remote, docs/dvc.md); this module only reads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import CCDAError, InputError
from ..io import atomic_dir, atomic_path, stable_id

SCHEME = "s3://"
_DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
           "InvalidClientTokenId", "Forbidden", "403"}
_MISSING = {"NoSuchKey", "NotFound", "404"}


def is_s3(location: object) -> bool:
    """True for ``s3://...`` (also after a ``Path()`` squashed the two slashes into one)."""
    return str(location).startswith(("s3://", "s3:/"))


def normalise(location: object) -> str:
    s = str(location)
    return SCHEME + s[len("s3:/"):].lstrip("/") if s.startswith("s3:/") and not s.startswith(SCHEME) else s


def split(uri: str) -> tuple[str, str]:
    """(bucket, key) of ``s3://bucket/key``."""
    bucket, _, key = normalise(uri)[len(SCHEME):].partition("/")
    if not bucket:
        raise InputError(f"{uri}: no bucket name; write s3://BUCKET/KEY.")
    return bucket, key


def join(uri: str, *parts: str) -> str:
    base = normalise(uri).rstrip("/")
    rest = "/".join(p.strip("/") for p in parts if p.strip("/"))
    return f"{base}/{rest}" if rest else base


def endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def check_endpoint(location: str) -> None:
    """The S3 endpoint (:func:`endpoint`, else AWS) answers within seconds (:func:`context_cda.data.services.probe`)."""
    from .services import probe

    probe(endpoint() or "https://s3.amazonaws.com", f"the S3 endpoint for {location} (AWS_ENDPOINT_URL)",
          "Start the object store, set AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) to its URL, or use local paths.")


def client():
    """A boto3 S3 client for :func:`endpoint` (None: AWS itself), with bounded retries and timeouts."""
    try:
        import boto3
        from botocore.config import Config as BotoConfig
    except ImportError as e:
        raise InputError("s3:// locations need boto3: pip install 'context-cda[s3]'.") from e
    cfg = BotoConfig(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10, read_timeout=120)
    # a new session each time: boto3's default session would keep the credentials it found first
    return boto3.session.Session().client("s3", endpoint_url=endpoint(), config=cfg)


@dataclass(frozen=True)
class Obj:
    key: str
    etag: str
    size: int


# ------------------------------------------------------------------------------------------------------ errors


def _explain(e: Exception, uri: str, error: type[CCDAError], cli=None) -> CCDAError:
    """One line naming ``uri``, what the store said and the fix."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    where = endpoint() or "AWS S3"
    if isinstance(e, NoCredentialsError | PartialCredentialsError):
        return error(f"{uri}: no AWS credentials found. Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
                     f"AWS_PROFILE) for {where}.")
    if isinstance(e, EndpointConnectionError | ConnectTimeoutError):
        return error(f"{uri}: cannot reach the S3 endpoint {where}. Check AWS_ENDPOINT_URL and that the server "
                     "is up.")
    if not isinstance(e, ClientError):
        return error(f"{uri}: S3 request to {where} failed ({type(e).__name__}: {e}).")
    err = e.response.get("Error", {})
    code = str(err.get("Code") or e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    bucket, key = split(uri)
    if code in _MISSING and cli is not None and not _bucket_exists(cli, bucket):
        code = "NoSuchBucket"
    if code == "NoSuchBucket":
        return error(f"{uri}: bucket {bucket!r} does not exist at {where}. Create it, or fix the bucket name "
                     "(and AWS_ENDPOINT_URL).")
    if code in _MISSING:
        return error(f"{uri}: no such object (nor objects under {uri.rstrip('/')}/) in bucket {bucket!r}. Check the "
                     f"key, or upload it: aws s3 cp FILE {uri}.")
    if code in _DENIED:
        return error(f"{uri}: {where} refused the request ({code}). Check AWS_ACCESS_KEY_ID / "
                     "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) and the bucket policy.")
    return error(f"{uri}: S3 error {code} from {where}: {err.get('Message') or e}.")


def _bucket_exists(cli, bucket: str) -> bool:
    try:
        cli.head_bucket(Bucket=bucket)
        return True
    except Exception as e:  # noqa: BLE001 - a 404 says no; anything else (403) says "exists, or cannot tell"
        status = getattr(e, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
        return status != 404


# ------------------------------------------------------------------------------------------------------ reading


def head(uri: str, cli=None, error: type[CCDAError] = InputError) -> Obj | None:
    """The object at ``uri`` (None when there is none, the bucket existing)."""
    from botocore.exceptions import ClientError

    cli = cli or client()
    bucket, key = split(uri)
    try:
        r = cli.head_object(Bucket=bucket, Key=key)
    except ClientError as e:
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 404 and _bucket_exists(cli, bucket):
            return None
        raise _explain(e, uri, error, cli) from None
    except Exception as e:
        raise _explain(e, uri, error, cli) from None
    return Obj(key, str(r.get("ETag", "")).strip('"'), int(r.get("ContentLength", 0)))


def listing(uri: str, cli=None, error: type[CCDAError] = InputError) -> list[Obj]:
    """Every object below ``uri`` taken as a folder (``prefix/``), in key order."""
    cli = cli or client()
    bucket, key = split(uri)
    prefix = key.rstrip("/") + "/" if key.strip("/") else ""
    out: list[Obj] = []
    try:
        for page in cli.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            out += [Obj(o["Key"], str(o.get("ETag", "")).strip('"'), int(o.get("Size", 0)))
                    for o in page.get("Contents", []) if not o["Key"].endswith("/")]
    except Exception as e:
        raise _explain(e, uri, error, cli) from None
    return sorted(out, key=lambda o: o.key)


def fetch_to(uri: str, path: Path, cli=None, error: type[CCDAError] = InputError) -> Path:
    """Copy one object into ``path`` (a temporary file the caller renames: see :func:`download`)."""
    cli = cli or client()
    bucket, key = split(uri)
    try:
        cli.download_file(bucket, key, str(path))
    except Exception as e:
        raise _explain(e, uri, error, cli) from None
    return path


def download(uri: str, dest: Path, cli=None, error: type[CCDAError] = InputError) -> Path:
    """Copy one object to ``dest`` atomically (a temporary file beside it, renamed when complete)."""
    with atomic_path(dest) as tmp:
        fetch_to(uri, tmp, cli, error)
    return dest


def _relative(prefix: str, key: str) -> str:
    rel = key[len(prefix):].lstrip("/") if prefix else key
    parts = PurePosixPath(rel).parts
    if not rel or any(p in ("..", ".") for p in parts):
        raise InputError(f"s3 key {key!r}: not a plain path below {prefix!r}; refusing to write it.")
    return rel


def download_tree(uri: str, dest: Path, objects: list[Obj], cli=None,
                  error: type[CCDAError] = InputError) -> Path:
    """Copy ``objects`` (a :func:`listing` of ``uri``) into the folder ``dest``, which appears only when every
    object is there.

    ``dest`` is named by the objects' ETags (see :func:`local_copy`, :func:`model_dir`), so a ``dest`` that is
    already there holds the same objects: it is kept and this copy dropped. Parallel pods sharing a cache (shards
    on one volume) thus never pull a folder from under a sibling that is reading it, and when two finish at once
    the loser's rename onto the winner's folder (``ENOTEMPTY``/``EEXIST``) is that same case, not an error
    (:func:`context_cda.io.atomic_dir`)."""
    cli = cli or client()
    bucket, key = split(uri)
    prefix = key.rstrip("/") + "/" if key.strip("/") else ""
    with atomic_dir(dest, replace=False) as tmp:
        for o in objects:
            target = tmp / _relative(prefix, o.key)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                cli.download_file(bucket, o.key, str(target))
            except Exception as e:
                raise _explain(e, f"{SCHEME}{bucket}/{o.key}", error, cli) from None
    return dest


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "-" for c in text.strip("/").rsplit("/", 1)[-1])
    return keep.strip(".-") or "root"


def local_copy(uri: str, cache: Path, error: type[CCDAError] = InputError) -> Path:
    """A local copy of ``uri`` below ``cache``: the object itself (a file), else every object under it as a
    folder. Kept under a name made of the ETags, so it is fetched again only when an object changed."""
    uri = normalise(uri)
    cli = client()
    bucket, key = split(uri)
    obj = head(uri, cli, error) if key and not key.endswith("/") else None
    if obj is not None:
        dest = cache / bucket / stable_id(obj.key, obj.etag, obj.size) / PurePosixPath(obj.key).name
        return dest if dest.is_file() else download(uri, dest, cli, error)
    objects = listing(uri, cli, error)
    if not objects:
        raise error(f"{uri}: no such object, and no objects under {uri.rstrip('/')}/ in bucket {bucket!r}. Check "
                    f"the key, or upload the data: aws s3 cp --recursive FOLDER {uri.rstrip('/')}/.")
    dest = cache / bucket / f"{_slug(key or bucket)}-{tree_key(objects)}"
    return dest if dest.is_dir() else download_tree(uri, dest, objects, cli, error)


def tree_key(objects: list[Obj]) -> str:
    """One id for a set of objects: changes when any key, ETag or size does."""
    return stable_id(*(f"{o.key}:{o.etag}:{o.size}" for o in objects))


def model_dir(uri: str, cache: Path) -> Path:
    """A ``save_pretrained`` folder stored under ``s3://bucket/prefix/``, downloaded once into ``cache`` (the model
    cache) under a name keyed by the objects' ETags: a changed model is fetched again, an unchanged one is not."""
    from ..errors import ModelError

    uri = normalise(uri)
    objects = listing(uri, error=ModelError)
    bucket, key = split(uri)
    if not objects:
        raise ModelError(f"{uri}: no objects under this prefix in bucket {bucket!r}. Upload a save_pretrained() "
                         f"folder there (aws s3 cp --recursive MODEL_DIR {uri.rstrip('/')}/), or fix the URI.")
    prefix = key.rstrip("/") + "/" if key.strip("/") else ""
    if not any(o.key == f"{prefix}config.json" for o in objects):
        raise ModelError(f"{uri}: no config.json directly under this prefix; point at the folder that "
                         "save_pretrained() wrote.")
    dest = cache / f"s3-{_slug(key or bucket)}-{tree_key(objects)}"
    if (dest / "config.json").is_file():
        return dest
    return download_tree(uri, dest, objects, error=ModelError)

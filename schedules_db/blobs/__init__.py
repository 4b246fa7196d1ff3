"""The artifact store: files (schedule libraries, compiled models, uploaded model sources,
cost-model archives) kept by the sha256 of their bytes, behind one interface with two
implementations chosen by configuration:

* `DirectoryBlobs`: a local directory, ``<sha[:2]>/<sha><suffix>`` (the embedded default);
* `DatabaseBlobs`: the database itself (tables ``blobs`` + ``blob_chunks``), so every process
  of a deployment needs only the database and broker URLs.

See `schedules_db.blobs.base.BlobStore` for the contract; `collect_garbage` removes what no row
refers to.
"""

from schedules_db.blobs.base import (
    CHUNK_BYTES,
    BlobCorrupt,
    BlobError,
    BlobKey,
    BlobMissing,
    BlobStore,
    BlobUnavailable,
    StoredBlob,
    blob_path,
    file_sha256,
)
from schedules_db.blobs.collect import Collected, collect_garbage
from schedules_db.blobs.database import DatabaseBlobs
from schedules_db.blobs.directory import DirectoryBlobs

__all__ = [
    "CHUNK_BYTES",
    "BlobCorrupt",
    "BlobError",
    "BlobKey",
    "BlobMissing",
    "BlobStore",
    "BlobUnavailable",
    "Collected",
    "DatabaseBlobs",
    "DirectoryBlobs",
    "StoredBlob",
    "blob_path",
    "collect_garbage",
    "file_sha256",
]

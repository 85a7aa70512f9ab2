"""kafka-python's codecs, made to work where a library of theirs is missing."""

from types import SimpleNamespace

import cramjam

from kiel.compression._xxh32 import xxh32


def patch_kafka_codec(monkeypatch):
    """kafka.codec (3.0.12), with shims for whatever optional module is missing.

    kafka.codec needs python-snappy for snappy, and lz4 + xxhash for the
    "old kafka" LZ4 functions; the test extra installs none of them. The shims
    keep kafka-python's own framing code under test:

    * python-snappy >= 0.7 *is* ``bytes(cramjam.snappy.compress_raw(d))`` and
      ``bytes(cramjam.snappy.decompress_raw(d))``, so that shim is exact.
    * ``xxhash.xxh32(d).digest()`` is the big-endian hash; kiel's xxh32 is
      checked against the reference vectors below.
    * ``lz4_decode`` becomes cramjam's (liblz4) frame decoder: an independent
      reader for what kafka-python's header fix-up produces.
    * ``lz4_encode`` cannot be shimmed faithfully; encoding conformance uses
      digests of real kafka-python output instead (LZ4_OLD_KAFKA_GOLDEN).
    """
    import kafka.codec as kc
    if kc.snappy is None:
        monkeypatch.setattr(
            kc,
            "snappy",
            SimpleNamespace(
                compress=lambda d: bytes(cramjam.snappy.compress_raw(d)),
                decompress=lambda d: bytes(cramjam.snappy.decompress_raw(d)),
            ),
        )
    if kc.xxhash is None:
        monkeypatch.setattr(
            kc,
            "xxhash",
            SimpleNamespace(
                xxh32=lambda d: SimpleNamespace(digest=lambda: xxh32(d).to_bytes(4, "big"))
            ),
        )
    if kc.lz4_decode is None:
        monkeypatch.setattr(kc, "lz4_decode", lambda d: bytes(cramjam.lz4.decompress(d)))
    return kc


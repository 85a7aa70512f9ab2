"""Compression codecs for Kafka message sets and record batches: none, gzip, snappy, lz4, zstd.

A Kafka message (or record batch) keeps its codec id in the low 3 bits of its
attributes (:data:`CODEC_MASK`): 0 none, 1 gzip, 2 snappy, 3 lz4, and 4 zstd
(record batches, magic 2, only). This package maps those ids to
:class:`~kiel.compression.base.Codec` objects and knows nothing else about
Kafka: bytes in, bytes out, no I/O.

gzip uses the standard library. snappy, lz4 and zstd use cramjam, a
dependency of kiel (``pip install kiel`` installs it; it ships wheels for
every platform kiel runs on). It is imported when one of those codecs is
first used; in an environment that lacks it (installed with ``--no-deps``,
say), kiel still imports and using those codecs raises
:class:`~kiel.exc.MissingDependencyError`.

:data:`CODEC_NAMES` and :func:`codec_id_for` name the codecs a message set
(magic 0 and 1) can carry; ``codec_id_for(name, magic=2)`` also knows
``"zstd"``.

Example::

    from kiel import compression

    packed = compression.compress(compression.GZIP, b"payload")
    assert compression.decompress(compression.GZIP, packed) == b"payload"
    codec = compression.get_codec(compression.SNAPPY, xerial=False)
"""
from typing import Any

from kiel.compression.base import DEFAULT_MAX_OUTPUT_SIZE, BytesLike, Codec, NoneCodec
from kiel.compression.gzip import DEFAULT_GZIP_LEVEL, GzipCodec
from kiel.compression.lz4 import LZ4Codec
from kiel.compression.snappy import DEFAULT_XERIAL_BLOCK_SIZE, SnappyCodec
from kiel.compression.zstd import DEFAULT_ZSTD_LEVEL, ZstdCodec
from kiel.exc import ConfigError, MissingDependencyError, UnsupportedCodecError

__all__ = [
    "CODEC_MASK",
    "CODEC_NAMES",
    "DEFAULT_GZIP_LEVEL",
    "DEFAULT_MAX_OUTPUT_SIZE",
    "DEFAULT_XERIAL_BLOCK_SIZE",
    "DEFAULT_ZSTD_LEVEL",
    "GZIP",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "BytesLike",
    "Codec",
    "GzipCodec",
    "LZ4Codec",
    "NoneCodec",
    "SnappyCodec",
    "ZstdCodec",
    "codec_id_for",
    "compress",
    "decompress",
    "get_codec",
    "is_available",
]

#: Codec ids, as in the low bits of a message's attributes.
NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
#: Record batches (magic 2) only.
ZSTD = 4
#: The attribute bits that hold the codec id.
CODEC_MASK = 0x07

_CODECS: dict[int, type[Codec]] = {
    NONE: NoneCodec,
    GZIP: GzipCodec,
    SNAPPY: SnappyCodec,
    LZ4: LZ4Codec,
    ZSTD: ZstdCodec,
}
#: Codec names (as in Kafka's ``compression.codec`` setting) to ids, for
#: message sets (magic 0 and 1): zstd is not among them.
CODEC_NAMES: dict[str, int] = {
    cls.name: codec_id for codec_id, cls in _CODECS.items() if codec_id != ZSTD
}
_BATCH_CODEC_NAMES: dict[str, int] = {cls.name: codec_id for codec_id, cls in _CODECS.items()}

_defaults: dict[int, Codec] = {}


def codec_id_for(name: str, *, magic: int = 0) -> int:
    """Map a codec name to its id.

    Args:
        name: ``"none"``, ``"gzip"``, ``"snappy"`` or ``"lz4"`` (any case),
            and ``"zstd"`` when ``magic`` is 2.
        magic: the message format the codec is for: 0 or 1 (message sets),
            2 (record batches).

    Returns:
        the codec id.

    Raises:
        ConfigError: the name is not one of those.
    """
    names = _BATCH_CODEC_NAMES if magic >= 2 else CODEC_NAMES
    try:
        return names[name.lower()]
    except (KeyError, AttributeError) as exc:
        raise ConfigError(
            f"unknown compression codec {name!r}; expected one of {', '.join(names)}"
        ) from exc


def get_codec(codec_id: int, **options: Any) -> Codec:
    """Return the codec for an id.

    Without options the codec is a shared instance with default settings;
    with options a new one is built (e.g. ``level=9`` for gzip,
    ``xerial=False`` for snappy, ``magic=1`` for lz4, ``level=19`` for
    zstd, ``max_output_size`` for any).

    Args:
        codec_id: the codec id (0 to 4).
        **options: keyword arguments for the codec class.

    Returns:
        the codec.

    Raises:
        UnsupportedCodecError: kiel knows no codec with this id.
        MissingDependencyError: the codec needs cramjam, which is not installed.
        ConfigError: an option is invalid.
    """
    cls = _CODECS.get(codec_id) if type(codec_id) is int else None
    if cls is None:
        raise UnsupportedCodecError(f"unsupported compression codec id {codec_id!r}")
    if options:
        try:
            return cls(**options)
        except TypeError as exc:
            raise ConfigError(f"invalid option for the {cls.name} codec: {exc}") from exc
    codec = _defaults.get(codec_id)
    if codec is None:
        codec = _defaults[codec_id] = cls()
    return codec


def is_available(codec_id: int) -> bool:
    """Tell whether a codec can be used (the library it needs is importable).

    Args:
        codec_id: the codec id.

    Returns:
        ``True`` if :func:`get_codec` would return a codec for it.
    """
    try:
        get_codec(codec_id)
    except (UnsupportedCodecError, MissingDependencyError):
        return False
    return True


def compress(codec_id: int, data: BytesLike, **options: Any) -> bytes:
    """Compress ``data`` with the codec ``codec_id``.

    Args:
        codec_id: the codec id.
        data: the uncompressed bytes.
        **options: codec options, as for :func:`get_codec`.

    Returns:
        the compressed bytes.

    Raises:
        UnsupportedCodecError: unknown codec id.
        MissingDependencyError: the codec needs cramjam, which is not installed.
        ConfigError: an option is invalid.
        LocalProtocolError: ``data`` is not bytes-like.
    """
    return get_codec(codec_id, **options).compress(data)


def decompress(codec_id: int, data: BytesLike, **options: Any) -> bytes:
    """Decompress ``data`` with the codec ``codec_id``.

    Args:
        codec_id: the codec id (from a message's attributes).
        data: the compressed bytes (untrusted).
        **options: codec options, as for :func:`get_codec` (typically
            ``max_output_size``).

    Returns:
        the decompressed bytes.

    Raises:
        UnsupportedCodecError: unknown codec id.
        CompressionError: ``data`` does not decompress, or decompresses to
            more than ``max_output_size`` bytes.
        MissingDependencyError: the codec needs cramjam, which is not installed.
        ConfigError: an option is invalid.
        LocalProtocolError: ``data`` is not bytes-like.
    """
    return get_codec(codec_id, **options).decompress(data)

"""The codec interface shared by every compression codec.

A codec turns bytes into bytes: it knows nothing of Kafka messages, sockets or
Tornado. Decoders treat their input as untrusted: anything they cannot decode
raises :class:`kiel.exc.CompressionError`, and their output is bounded by
``max_output_size`` so that a small "decompression bomb" cannot make them
allocate gigabytes.
"""
import abc
from types import ModuleType
from typing import Any, ClassVar, Optional, Union

from kiel.exc import CompressionError, ConfigError, LocalProtocolError, MissingDependencyError

#: What codecs accept as input.
BytesLike = Union[bytes, bytearray, memoryview]

#: Default cap on the size of one decompressed payload (128 MiB).
DEFAULT_MAX_OUTPUT_SIZE = 128 * 1024 * 1024

_cramjam: Optional[ModuleType] = None


def require_cramjam(codec: str) -> ModuleType:
    """Import cramjam, or say that this environment lacks it.

    cramjam is an install dependency of kiel, so it is missing only from an
    environment installed without dependencies or left broken; the message
    says what to install rather than naming an extra.

    Args:
        codec: the name of the codec that needs cramjam (``"snappy"``,
            ``"lz4"`` or ``"zstd"``), quoted in the error message.

    Returns:
        the ``cramjam`` module.

    Raises:
        MissingDependencyError: cramjam is not importable.
    """
    global _cramjam
    if _cramjam is None:
        try:
            import cramjam
        except ImportError as exc:
            raise MissingDependencyError(
                f"{codec} compression needs the cramjam package, a dependency of kiel"
                " that is missing here: pip install cramjam"
            ) from exc
        _cramjam = cramjam
    return _cramjam


def as_view(data: Any) -> memoryview:
    """Return a flat unsigned-byte memoryview of a bytes-like object, without copying.

    Raises:
        LocalProtocolError: ``data`` is not a contiguous bytes-like object
            (``str`` included: codecs never guess an encoding).
    """
    if isinstance(data, str):
        raise LocalProtocolError("codecs take bytes, not str")
    try:
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
    except TypeError as exc:
        kind = type(data).__name__
        raise LocalProtocolError(f"codecs take bytes-like objects, not {kind}") from exc
    return view


def check_positive_int(name: str, value: Any) -> int:
    """Validate an integer setting that must be at least 1.

    Raises:
        ConfigError: ``value`` is not an ``int`` (``bool`` excluded) or is below 1.
    """
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


class Codec(abc.ABC):
    """A compression codec: ``compress`` and ``decompress`` bytes.

    Args:
        max_output_size: the largest decompressed payload :meth:`decompress`
            produces; a larger one raises :class:`~kiel.exc.CompressionError`.

    Raises:
        ConfigError: ``max_output_size`` is not a positive integer.
    """

    #: The codec id in the low 3 bits of a Kafka message's attributes.
    codec_id: ClassVar[int]
    #: The codec's name, as in ``compression.type``.
    name: ClassVar[str]

    def __init__(self, *, max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE) -> None:
        self.max_output_size = check_positive_int("max_output_size", max_output_size)

    @abc.abstractmethod
    def compress(self, data: BytesLike) -> bytes:
        """Compress ``data``.

        Args:
            data: the uncompressed bytes.

        Returns:
            the compressed bytes.

        Raises:
            LocalProtocolError: ``data`` is not bytes-like.
            MissingDependencyError: the codec's dependency (cramjam) is missing.
        """

    @abc.abstractmethod
    def decompress(self, data: BytesLike) -> bytes:
        """Decompress ``data``.

        Args:
            data: the compressed bytes (untrusted).

        Returns:
            the decompressed bytes.

        Raises:
            CompressionError: ``data`` is not a valid compressed payload, or it
                decompresses to more than ``max_output_size`` bytes.
            LocalProtocolError: ``data`` is not bytes-like.
            MissingDependencyError: the codec's dependency (cramjam) is missing.
        """

    def _too_large(self, size: Optional[int] = None) -> CompressionError:
        if size is None:
            detail = f"more than max_output_size={self.max_output_size} bytes"
        else:
            detail = f"{size} bytes, over max_output_size={self.max_output_size}"
        return CompressionError(f"{self.name}: payload decompresses to {detail}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} id={self.codec_id} {self.name}>"


class NoneCodec(Codec):
    """Codec 0: no compression; both directions return a copy of the input."""

    codec_id = 0
    name = "none"

    def compress(self, data: BytesLike) -> bytes:
        """Return ``data`` as ``bytes``.

        Raises:
            LocalProtocolError: ``data`` is not bytes-like.
        """
        return bytes(as_view(data))

    def decompress(self, data: BytesLike) -> bytes:
        """Return ``data`` as ``bytes``.

        Raises:
            LocalProtocolError: ``data`` is not bytes-like.
        """
        return bytes(as_view(data))

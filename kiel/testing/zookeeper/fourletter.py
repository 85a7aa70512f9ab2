"""ZooKeeper's four-letter words: ask a server how it is, over a plain socket."""
import socket
from typing import Optional

__all__ = ["FOUR_LETTER_WORDS", "four_letter_word", "server_status"]

#: Four-letter words the servers answer (``srvr`` is what readiness uses).
FOUR_LETTER_WORDS = ("srvr", "stat", "mntr", "ruok", "conf", "cons", "envi", "dirs", "wchs")


def four_letter_word(host: str, port: int, word: str = "srvr", timeout: float = 1.0) -> str:
    """Send a four-letter word to a ZooKeeper server and return its answer.

    Args:
        host: server host.
        port: server client port.
        word: the command (it must be in the server's
            ``4lw.commands.whitelist``).
        timeout: seconds for connecting and for each read.

    Returns:
        the answer, decoded as text.

    Raises:
        OSError: the server could not be reached or did not answer in time.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(word.encode("ascii"))
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def server_status(host: str, port: int, timeout: float = 1.0) -> Optional[dict[str, str]]:
    """Ask a server ``srvr`` and parse the answer.

    Args:
        host: server host.
        port: server client port.
        timeout: seconds for connecting and for each read.

    Returns:
        the ``Key: value`` lines as a dict (``Mode`` is ``standalone``,
        ``leader`` or ``follower``), or ``None`` if the server cannot be
        reached or is up but not serving requests (no quorum yet).
    """
    try:
        answer = four_letter_word(host, port, "srvr", timeout)
    except OSError:
        return None
    status: dict[str, str] = {}
    for line in answer.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            status[key.strip()] = value.strip()
    return status if "Mode" in status else None

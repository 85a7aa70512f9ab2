"""Check a plain ``pip install kiel`` (no extras): run by ``make install-check``.

Not a pytest module: making a fresh environment needs the network, so the
Makefile builds one (``pip install .`` into ``.venv-plain``) and runs this
file with its Python, from outside the checkout so that the installed kiel is
the one imported. It checks what issue 22 promised a plain install: the C
CRC-32C, every codec a Java producer may have used, the ``kiel`` command and
the pytest fixtures' entry point. Exits non-zero, saying what is wrong, if
any of it is missing.
"""

import os
import shutil
import subprocess
import sys
from importlib import metadata

TEXT = b"kiel reads what a Java producer compressed. " * 3

# Frames made by cramjam 2.14's own encoders (liblz4, libzstd, snappy), as a
# producer would send them: an LZ4 frame of independent blocks with content
# size and checksum, one zstd frame, and snappy in the xerial framing Java
# clients write.
FRAMES = {
    "lz4": "04224d187440bd37000000ff1d6b69656c20726561647320776861742061204a6176612070726f"
    "647563657220636f6d707265737365642e202c0040507365642e202c3fabb9000000000922a3d5",
    "zstd": "28b52ffd2084a50100c4026b69656c20726561647320776861742061204a6176612070726f64"
    "7563657220636f6d707265737365642e200100ac37a932",
    "snappy": "82534e41505059000000000100000001000000368401b06b69656c2072656164732077686174"
    "2061204a6176612070726f647563657220636f6d707265737365642e206bfe2c005a2c00",
}


def main() -> int:
    import kiel
    from kiel import compression
    from kiel.protocol import crc32c

    problems = []
    here = os.path.dirname(os.path.abspath(kiel.__file__))
    if "site-packages" not in here:
        problems.append(f"kiel imported from {here}, not from the installed package")
    if crc32c.IMPLEMENTATION != "google-crc32c":
        problems.append(f"CRC-32C is {crc32c.IMPLEMENTATION!r}, not the C one (google-crc32c)")
    elif crc32c.crc32c(b"123456789") != 0xE3069283:
        problems.append("CRC-32C of '123456789' is not 0xE3069283")
    for name, frame in FRAMES.items():
        codec_id = compression.codec_id_for(name, magic=2)
        try:
            out = compression.decompress(codec_id, bytes.fromhex(frame))
        except Exception as exc:  # reported, and the check fails
            problems.append(f"{name} does not decode: {type(exc).__name__}: {exc}")
        else:
            if out != TEXT:
                problems.append(f"{name} decodes to {out!r}")
    requires = metadata.requires("kiel") or []
    for name in ("cramjam", "google-crc32c"):
        if not any(r.startswith(name) and "extra ==" not in r for r in requires):
            problems.append(f"{name} is not an install dependency: {requires}")
    pytest11 = metadata.entry_points().select(group="pytest11")
    plugins = {ep.name: ep.value for ep in pytest11}
    if plugins.get("kiel") != "kiel.testing.pytest_plugin":
        problems.append(f"no pytest11 entry point for kiel's fixtures: {plugins}")
    command = shutil.which("kiel", path=os.path.dirname(sys.executable))
    if command is None:
        problems.append("the kiel command is not installed")
    else:
        result = subprocess.run([command, "--help"], capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            problems.append(f"kiel --help exits {result.returncode}: {result.stderr}")
        result = subprocess.run([command, "--version"], capture_output=True, text=True,
                                timeout=60)
        if result.returncode != 0 or result.stdout.split() != ["kiel", kiel.__version__]:
            problems.append(f"kiel --version says {result.stdout!r} (exit {result.returncode}), "
                            f"the installed kiel is {kiel.__version__}")
    for problem in problems:
        print(f"plain install: {problem}", file=sys.stderr)
    if not problems:
        print(
            f"plain install of kiel {kiel.__version__}: CRC-32C {crc32c.IMPLEMENTATION}, "
            f"{', '.join(FRAMES)} decode, kiel command and pytest11 entry point present"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""TLS and SASL for the Spark data source, from the Java client's ``kafka.*`` options.

Pure parsing plus one builder (no pyspark, no network):

* the value parsers of the security rows of
  :data:`kiel.spark.options.CLIENT_SETTINGS` (``kafka.security.protocol``,
  ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``, ``kafka.ssl.*``);
* :func:`check_security`: the rules between them (a SASL protocol needs a
  mechanism and a JAAS line, ``kafka.ssl.*`` options need an SSL protocol...),
  giving a :class:`TlsSettings` and a :class:`SaslLogin`;
* :func:`ssl_context`: THE place an :class:`ssl.SSLContext` is made from
  options. A context does not pickle, and options travel to Spark's workers
  as strings, so each client builds its own where it is made; parsing builds
  one too, only to check the files at planning time;
* :func:`mask`: the options with every secret replaced, for ``raw``.

Secrets (the JAAS password, ``kafka.ssl.key.password``) never appear in a
``repr()``, a log line or an error message.
"""

import logging
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional

from kiel.exc import ConfigError
from kiel.sasl import PASSWORD_MECHANISMS as MECHANISMS
from kiel.sasl import sasl_credentials

__all__ = [
    "LOGIN_MODULES",
    "PROTOCOLS",
    "JaasLogin",
    "SaslLogin",
    "TlsSettings",
    "check_security",
    "endpoint_identification",
    "inline_key",
    "mask",
    "parse_jaas",
    "secret",
    "sasl_mechanism",
    "security_protocol",
    "ssl_context",
    "store_type",
]

# The options' logger: every "kiel.spark ignores ..." warning is on one logger.
log = logging.getLogger("kiel.spark.options")

#: ``kafka.security.protocol`` values: (uses TLS, uses SASL).
PROTOCOLS: dict[str, tuple[bool, bool]] = {
    "PLAINTEXT": (False, False),
    "SSL": (True, False),
    "SASL_PLAINTEXT": (False, True),
    "SASL_SSL": (True, True),
}

#: The JAAS login module the Java client pairs with each mechanism.
LOGIN_MODULES: dict[str, str] = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

#: Mechanisms of the Java client that the Spark source does not take, and why.
#: OAUTHBEARER: kiel's clients speak it, but with a token provider, Python
#: code that Spark's string options cannot carry to the workers (the Java
#: client's unsecured JAAS login is for tests only: left out).
_UNSUPPORTED_MECHANISMS = {
    "GSSAPI": "kiel does not implement GSSAPI (Kerberos)",
    "OAUTHBEARER": "the Spark source takes no OAUTHBEARER (OAuth 2 tokens): kiel's "
                   "clients take it as sasl_oauth_token_provider, a Python function, which "
                   "string options cannot carry",
}

#: Option values replaced by this in :func:`mask`.
HIDDEN = "<hidden>"

_JAAS = "kafka.sasl.jaas.config"
_MASKED_KEYS = frozenset({_JAAS, "kafka.ssl.keystore.key"})


# ----------------------------------------------------------------------
# what the options give


@dataclass(frozen=True)
class JaasLogin:
    """What ``kafka.sasl.jaas.config`` says.

    Attributes:
        module: the login module's class name.
        username: the ``username`` option.
        password: the ``password`` option (not in ``repr()``).
    """

    module: str
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class SaslLogin:
    """The SASL settings of a client: mechanism and credentials.

    Attributes:
        mechanism: ``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        username: the user.
        password: the password (not in ``repr()``).
    """

    mechanism: str
    username: str
    password: str = field(repr=False)

    def client_options(self) -> dict[str, Any]:
        """The ``sasl_*`` keyword arguments of a kiel client."""
        return {"sasl_mechanism": self.mechanism, "sasl_username": self.username,
                "sasl_password": self.password}


@dataclass(frozen=True)
class TlsSettings:
    """What a client's :class:`ssl.SSLContext` is made of (strings: they pickle).

    Attributes:
        truststore_location: a PEM file of trusted CA certificates (None:
            the system's CAs, unless ``truststore_certificates``).
        truststore_certificates: trusted CA certificates as PEM text.
        keystore_location: a PEM file holding the client's private key and
            certificate chain (None: no client certificate).
        key_password: the password of that key (not in ``repr()``).
        check_hostname: check the broker's host name against its
            certificate (``ssl.endpoint.identification.algorithm=https``,
            the default), else the chain only.
    """

    truststore_location: Optional[str] = None
    truststore_certificates: Optional[str] = field(default=None, repr=False)
    keystore_location: Optional[str] = None
    key_password: Optional[str] = field(default=None, repr=False)
    check_hostname: bool = True


# ----------------------------------------------------------------------
# value parsers: (option name, raw string) -> value, or ConfigError


def security_protocol(name: str, raw: str) -> str:
    """``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL`` (any case), upper-cased.

    Raises:
        ConfigError: anything else.
    """
    value = raw.strip().upper()
    if value not in PROTOCOLS:
        raise ConfigError(f"option {name} must be one of {', '.join(PROTOCOLS)}, got {raw!r}")
    return value


def sasl_mechanism(name: str, raw: str) -> str:
    """``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512`` (any case), upper-cased.

    Raises:
        ConfigError: GSSAPI (kiel does not implement it), OAUTHBEARER (the
            source cannot carry a token provider) or another name.
    """
    value = raw.strip().upper()
    if value in _UNSUPPORTED_MECHANISMS:
        raise ConfigError(f"option {name}={raw.strip()!r}: {_UNSUPPORTED_MECHANISMS[value]}; "
                          f"it speaks {', '.join(MECHANISMS)}")
    if value not in MECHANISMS:
        raise ConfigError(f"option {name} must be one of {', '.join(MECHANISMS)}, got {raw!r}")
    return value


def store_type(name: str, raw: str) -> str:
    """``PEM`` (any case): the only key and trust store format kiel reads.

    Raises:
        ConfigError: JKS, PKCS12 or anything else.
    """
    value = raw.strip().upper()
    if value != "PEM":
        raise ConfigError(f"option {name}={raw.strip()!r}: kiel reads PEM only; convert the "
                          "store to PEM (keytool -exportcert -rfc, or openssl pkcs12 -nodes) "
                          f"and set {name}=PEM")
    return value


def endpoint_identification(name: str, raw: str) -> bool:
    """``https`` (check the host name) or empty (the chain only).

    Returns:
        whether the host name is checked.

    Raises:
        ConfigError: another value.
    """
    value = raw.strip().lower()
    if value not in ("https", ""):
        raise ConfigError(f"option {name} must be 'https' (check the broker's host name) or "
                          f"empty (check the certificate chain only), got {raw!r}")
    return value == "https"


def secret(name: str, raw: str) -> str:
    """A password, as it is (spaces are part of it).

    Raises:
        ConfigError: empty (the message does not show it).
    """
    if not raw:
        raise ConfigError(f"option {name} must not be empty")
    return raw


def inline_key(name: str, raw: str) -> None:
    """Refuse the Java client's inline PEM key store (``ssl.keystore.key``/``.certificate.chain``).

    Raises:
        ConfigError: always (the value is never shown: it is a private key).
    """
    raise ConfigError(f"option {name}: kiel reads the client's key and certificate chain from "
                      "one PEM file: set kafka.ssl.keystore.location (kafka.ssl.keystore.type=PEM)")


# ----------------------------------------------------------------------
# the JAAS line


class _Token(NamedTuple):
    kind: str  # "word", "quoted", "=" or ";"
    text: str
    at: int  # character position, for messages (never the text: it may be a secret)


_WORD = re.compile(r"[\w$.\-]+")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})


def _tokens(name: str, text: str) -> list[_Token]:
    """Split a JAAS line into words, quoted strings, ``=`` and ``;``.

    Raises:
        ConfigError: an unterminated quote or a character outside the grammar
            (the message gives its position, never the text).
    """
    out: list[_Token] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
        elif char in "=;":
            out.append(_Token(char, char, i))
            i += 1
        elif char == '"':
            # Strategy: a backslash takes the next character as it is (\" and
            # \\ and \;), as the Java client's tokenizer does; \n and the like
            # are control characters there too.
            start, i, chars = i, i + 1, []
            while i < len(text) and text[i] != '"':
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                    chars.append(_ESCAPES.get(text[i], text[i]))
                else:
                    chars.append(text[i])
                i += 1
            if i >= len(text):
                raise ConfigError(f"option {name} is malformed: the quote at character "
                                  f"{start + 1} is never closed")
            out.append(_Token("quoted", "".join(chars), start))
            i += 1
        else:
            match = _WORD.match(text, i)
            if match is None:
                raise ConfigError(f"option {name} is malformed: unexpected character at "
                                  f"position {i + 1}")
            out.append(_Token("word", match.group(), i))
            i = match.end()
    return out


def parse_jaas(name: str, raw: str) -> JaasLogin:
    """Parse the one-entry JAAS line the Java client takes in ``sasl.jaas.config``::

        org.apache.kafka.common.security.scram.ScramLoginModule required
            username="alice" password="s3cret";

    Values are quoted (``\\"`` is a quote, ``;`` inside quotes is text) or
    plain words. Options other than ``username`` and ``password`` are
    ignored with a warning naming them, except SCRAM's ``tokenauth=true``
    (delegation tokens: kiel has none).

    Returns:
        the module, user name and password.

    Raises:
        ConfigError: a malformed line, more than one entry, a missing
            username or password, a repeated option, or ``tokenauth=true``.
            The message never contains a value.
    """

    def malformed(token: Optional[_Token], expected: str) -> ConfigError:
        where = "at its end" if token is None else f"at character {token.at + 1}"
        return ConfigError(f"option {name} is malformed {where}: expected {expected} "
                           "(the form is: <LoginModule class> required username=\"...\" "
                           "password=\"...\";)")

    tokens = _tokens(name, raw)
    if len(tokens) < 2 or tokens[0].kind != "word" or tokens[1].kind != "word":
        raise malformed(tokens[1] if len(tokens) > 1 else None, "a login module and a flag")
    module, flag = tokens[0].text, tokens[1]
    if flag.text.lower() not in _FLAGS:
        raise malformed(flag, "the flag 'required'")
    values: dict[str, str] = {}
    rest = tokens[2:]
    i = 0
    while i < len(rest) and rest[i].kind != ";":
        key, equals = rest[i], rest[i + 1] if i + 1 < len(rest) else None
        value = rest[i + 2] if i + 2 < len(rest) else None
        if key.kind != "word":
            raise malformed(key, "an option name or ';'")
        if equals is None or equals.kind != "=":
            raise malformed(equals, f"'=' after {key.text}")
        if value is None or value.kind not in ("word", "quoted"):
            raise malformed(value, f"a value for {key.text}")
        if key.text in values:
            raise ConfigError(f"option {name} sets {key.text} twice")
        values[key.text] = value.text
        i += 3
    if i >= len(rest):
        raise malformed(None, "';' closing the entry")
    if i + 1 < len(rest):
        raise ConfigError(f"option {name} must hold one login module entry, got more "
                          f"(character {rest[i + 1].at + 1})")
    if values.pop("tokenauth", "false").strip().lower() == "true":
        raise ConfigError(f"option {name}: tokenauth=true (delegation tokens) is not "
                          "supported by kiel")
    missing = [option for option in ("username", "password") if not values.get(option)]
    if missing:
        raise ConfigError(f"option {name} needs {' and '.join(missing)} (non-empty)")
    for option in sorted(values.keys() - {"username", "password"}):
        log.warning("kiel.spark ignores %s option %s: kiel cannot honour it", name, option)
    return JaasLogin(module, values["username"], values["password"])


# ----------------------------------------------------------------------
# the rules between the options


def _pem(path: str) -> bool:
    """Whether the file holds PEM text (read as bytes: a JKS store is binary).

    Raises:
        OSError: it cannot be read.
    """
    with open(path, "rb") as f:
        return b"-----BEGIN " in f.read(1 << 20)


def _check_pem(location_option: str, type_option: str, path: str,
               explicit_type: Optional[str]) -> None:
    """A store given without a type is taken when it is PEM (the Java default, JKS, is not read).

    Raises:
        ConfigError: the file cannot be read or is not PEM.
    """
    try:
        pem = _pem(path)
    except OSError as e:
        raise ConfigError(f"option {location_option}: cannot read {path!r}: "
                          f"{e.strerror or e}") from None
    if not pem:
        said = f"{type_option}=PEM but" if explicit_type else f"no {type_option} given, and"
        raise ConfigError(f"option {location_option}: {said} {path!r} is not PEM; kiel reads "
                          "PEM only (the Java client's default type is JKS): convert it "
                          "(keytool -exportcert -rfc, or openssl pkcs12 -nodes)")


_SECURITY_ATTRS = (
    "security_protocol", "sasl_mechanism", "sasl_jaas", "ssl_truststore_location",
    "ssl_truststore_type", "ssl_truststore_certificates", "ssl_keystore_location",
    "ssl_keystore_type", "ssl_key_password", "ssl_check_hostname",
)


def check_security(values: dict[str, Any], options: Mapping[str, str]
                   ) -> tuple[Optional[TlsSettings], Optional[SaslLogin]]:
    """Take the security settings out of ``values`` and check them together.

    Args:
        values: the parsed settings (``{attr: value}``); the security ones
            (``security_protocol``, ``sasl_*``, ``ssl_*``) are removed.
        options: every option, keys lowercased (for ``kafka.ssl.*`` and
            ``kafka.sasl.*`` keys kiel does not honour).

    Returns:
        ``(tls, sasl)``: each None when the protocol does not use it.

    Raises:
        ConfigError: ``kafka.ssl.*`` options with a protocol without SSL,
            ``kafka.sasl.*`` ones with a protocol without SASL, a SASL protocol
            without a mechanism or a JAAS line, a JAAS module that is not the
            mechanism's, an unreadable or non-PEM store, or one the
            :class:`ssl.SSLContext` refuses (checked by building it once).
    """
    got = {attr: values.pop(attr) for attr in _SECURITY_ATTRS if attr in values}
    protocol = got.get("security_protocol", "PLAINTEXT")
    uses_tls, uses_sasl = PROTOCOLS[protocol]
    # Strategy: refuse rather than ignore: a user who set TLS or SASL options
    # meant security, and must not have their data sent in clear text (or
    # unauthenticated) with only a log line saying so.
    for prefix, used, what in (("kafka.ssl.", uses_tls, "SSL"), ("kafka.sasl.", uses_sasl, "SASL")):
        stray = sorted(k for k in options if k.startswith(prefix))
        if stray and not used:
            raise ConfigError(
                f"option(s) {', '.join(stray)} need a kafka.security.protocol with {what}, "
                f"got {protocol}: set kafka.security.protocol "
                f"({'SSL or SASL_SSL' if what == 'SSL' else 'SASL_PLAINTEXT or SASL_SSL'})"
            )
    sasl = _sasl(protocol, got) if uses_sasl else None
    tls = _tls(got) if uses_tls else None
    if tls is not None:
        ssl_context(tls)  # the files are checked now, at planning time
    return tls, sasl


def _sasl(protocol: str, got: dict[str, Any]) -> SaslLogin:
    mechanism: Optional[str] = got.get("sasl_mechanism")
    if mechanism is None:
        raise ConfigError(
            f"kafka.security.protocol={protocol} needs option kafka.sasl.mechanism "
            f"({', '.join(MECHANISMS)}): the Java client's default, GSSAPI (Kerberos), is "
            "not available in kiel"
        )
    jaas: Optional[JaasLogin] = got.get("sasl_jaas")
    if jaas is None:
        raise ConfigError(
            f"kafka.security.protocol={protocol} needs option {_JAAS}, e.g. "
            f'{LOGIN_MODULES[mechanism]} required username="..." password="...";'
        )
    if jaas.module != LOGIN_MODULES[mechanism]:
        raise ConfigError(f"option {_JAAS} names the login module {jaas.module}, but "
                          f"kafka.sasl.mechanism={mechanism} takes {LOGIN_MODULES[mechanism]}")
    sasl_credentials(mechanism, jaas.username, jaas.password)  # kiel's own checks, now
    return SaslLogin(mechanism, jaas.username, jaas.password)


def _tls(got: dict[str, Any]) -> TlsSettings:
    trust_at: Optional[str] = got.get("ssl_truststore_location")
    trust_pem: Optional[str] = got.get("ssl_truststore_certificates")
    key_at: Optional[str] = got.get("ssl_keystore_location")
    if trust_at is not None and trust_pem is not None:
        raise ConfigError("options kafka.ssl.truststore.location and "
                          "kafka.ssl.truststore.certificates: set one, not both")
    if trust_at is not None:
        _check_pem("kafka.ssl.truststore.location", "kafka.ssl.truststore.type", trust_at,
                   got.get("ssl_truststore_type"))
    if key_at is not None:
        _check_pem("kafka.ssl.keystore.location", "kafka.ssl.keystore.type", key_at,
                   got.get("ssl_keystore_type"))
    elif "ssl_key_password" in got:
        raise ConfigError("option kafka.ssl.key.password needs kafka.ssl.keystore.location "
                          "(a PEM file holding the key and its certificate chain)")
    return TlsSettings(trust_at, trust_pem, key_at, got.get("ssl_key_password"),
                       got.get("ssl_check_hostname", True))


# ----------------------------------------------------------------------
# the one builder


def ssl_context(tls: TlsSettings) -> ssl.SSLContext:
    """The client's :class:`ssl.SSLContext`, made where the client is made.

    Args:
        tls: the settings.

    Returns:
        a client context: ``ssl.create_default_context()`` with the trust
        store (the system's CAs without one), the client certificate, and
        host name checking as ``tls.check_hostname`` says.

    Raises:
        ConfigError: a file cannot be read, holds no certificate, or the key
            does not match its certificate or password.
    """
    try:
        if tls.truststore_location is None and tls.truststore_certificates is None:
            context = ssl.create_default_context()
        else:
            context = ssl.create_default_context(cafile=tls.truststore_location,
                                                 cadata=tls.truststore_certificates)
    except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
        option = ("kafka.ssl.truststore.location" if tls.truststore_location is not None
                  else "kafka.ssl.truststore.certificates")
        raise ConfigError(f"option {option}: no trusted certificate could be loaded "
                          f"({_reason(e)})") from None
    if tls.keystore_location is not None:
        try:
            # Strategy: always a str password, "" when none was given: with
            # None, OpenSSL would prompt on the terminal for an encrypted key
            # and block the Spark task.
            context.load_cert_chain(tls.keystore_location, password=tls.key_password or "")
        except (OSError, ValueError) as e:
            raise ConfigError(f"option kafka.ssl.keystore.location: the key and certificate "
                              f"chain in {tls.keystore_location!r} cannot be loaded "
                              f"({_reason(e)}; is kafka.ssl.key.password right?)") from None
    context.check_hostname = tls.check_hostname
    return context


def _reason(error: BaseException) -> str:
    """An ssl/OS error in a few words (they never contain a password)."""
    if isinstance(error, ssl.SSLError) and error.reason:
        return str(error.reason)
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return type(error).__name__


def mask(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` with every secret value (the JAAS line, passwords, inline keys) hidden."""
    return {k: HIDDEN if k.lower() in _MASKED_KEYS or k.lower().endswith("password") else v
            for k, v in options.items()}

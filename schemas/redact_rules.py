"""What counts as a secret: the redaction config and the detectors it builds.

Detectors come from two places. detect-secrets (PyPI) supplies the regexes of its plugin
classes (`denylist`, plus JWT's formal-validity check); they are compiled once into
whole-text patterns instead of being run through `analyze_line` line by line, which is
about 40x slower on trajectory text (docs/security.md, "Speed"). worldtrace adds
patterns for key formats detect-secrets lacks or only half matches (Anthropic,
project-scoped OpenAI, fine-grained GitHub, Google API keys and OAuth tokens, AWS
secrets, Stripe test and restricted keys, npm, Hugging Face, DigitalOcean, Slack app and
refresh tokens, Docker, Shopify, Azure SAS signatures, bearer tokens, whole private key
blocks and base64 of one, passwords in URLs, Discord webhooks, and providers' prefixed
keys: `PROVIDER_KEYS`, `SERVICE_KEYS`) and for values of no shape found by the name before them (API keys in
headers such as `X-Api-Key`, `*_API_KEY=`, `*_TOKEN=`, `*_SECRET=`, and passwords after
`password:`, `--password`, a MySQL client's `-p`: `_value`; any value of an option
whose whole name says it is a credential, `--api-key abcdefghij`: `CREDENTIAL_OPTIONS`;
the whole unquoted value of a dotenv or shell assignment line, `DB_PASSWORD=k3v(Q9,x;2`:
`_assigned`; a value in a table's cell after its name's cell, `| DB_PASSWORD | X |`,
psql's `password | X`, `│ DB_PASSWORD │ X │`, or aligned after its name,
`DB_PASSWORD   X`: `_cells`; the values in the rows below a column's header naming a
credential, psql's `SELECT user, password`: `_column_cells`; a name/value pair's
`value`, either first: `_pair`; an XML element named so, `<password>X</password>`:
`_element`; a kubeconfig user's `token`: `_KUBE_USER`), passwords where a command's
grammar says so (curl's `-u user:X`, `docker login -p X`, `redis-cli -a X`:
`PASSWORD_FLAGS`, openssl's `pass:X`, SQL's `IDENTIFIED BY 'X'`), and every match of a built-in or detect-secrets
rule runs to the end of its token (`Detector.extend`). The high-entropy, keyword and
public-IP plugins are off by default: they flag the SHAs, sums, UUIDs and addresses a
world model must learn (the keyword plugin also `password = get_password()`, which the
named-value rules keep).
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import random
import re
import string
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, NamedTuple

from pydantic import AfterValidator, Field

from .parsing import configclass, load_yaml, parse

PLACEHOLDER = "<secret:{kind}>"
"""What a secret becomes: typed, deterministic, the same for every value of a kind."""
PLACEHOLDER_MARK = "<secret:"
ENV_KIND = "env_value"
"""Kind of a value handed to a sandbox as an environment variable."""
CONFIG_ENV = "WORLDTRACE_REDACT_CONFIG"
"""Environment variable naming a RedactConfig YAML file used by every boundary."""
SCREEN_CACHE = "worldtrace/redact-screen"
"""Where under the user's cache directory (`$XDG_CACHE_HOME`, else `~/.cache`) compiled
batch screens are kept, one file per set of rules (`redact._Screen`)."""

DETECT_SECRETS_PLUGINS = (
    "AWSKeyDetector", "AzureStorageKeyDetector", "BasicAuthDetector", "DiscordBotTokenDetector",
    "GitHubTokenDetector", "GitLabTokenDetector", "JwtTokenDetector", "MailchimpDetector",
    "NpmDetector", "OpenAIDetector", "PypiTokenDetector", "SendGridDetector", "SlackDetector",
    "SquareOAuthDetector", "StripeDetector", "TwilioKeyDetector",
)  # fmt: skip
"""detect-secrets plugin classes used by default: those whose regexes run fast or only
on texts holding their literal. Left out for speed (5-20x slower than the rest on
trajectory text; `RedactConfig.detect_secrets` can add them): ArtifactoryDetector,
CloudantDetector, IbmCloudIamDetector, IbmCosHmacDetector, SoftlayerDetector,
TelegramBotTokenDetector. Left out because they flag ordinary data a world model must
learn: KeywordDetector, Base64HighEntropyString, HexHighEntropyString, IPPublicDetector;
PrivateKeyDetector matches only the BEGIN line (the built-in pattern takes the block)."""
SLOW_PLUGINS = (
    "ArtifactoryDetector", "CloudantDetector", "IbmCloudIamDetector", "IbmCosHmacDetector",
    "SoftlayerDetector", "TelegramBotTokenDetector",
)  # fmt: skip
PLUGIN_MODULES = {
    "AWSKeyDetector": "aws", "ArtifactoryDetector": "artifactory",
    "AzureStorageKeyDetector": "azure_storage_key", "BasicAuthDetector": "basic_auth",
    "CloudantDetector": "cloudant", "DiscordBotTokenDetector": "discord",
    "GitHubTokenDetector": "github_token", "GitLabTokenDetector": "gitlab_token",
    "IbmCloudIamDetector": "ibm_cloud_iam", "IbmCosHmacDetector": "ibm_cos_hmac",
    "JwtTokenDetector": "jwt", "MailchimpDetector": "mailchimp", "NpmDetector": "npm",
    "OpenAIDetector": "openai", "PrivateKeyDetector": "private_key",
    "PypiTokenDetector": "pypi_token", "SendGridDetector": "sendgrid", "SlackDetector": "slack",
    "SoftlayerDetector": "softlayer", "SquareOAuthDetector": "square_oauth",
    "StripeDetector": "stripe", "TelegramBotTokenDetector": "telegram_token",
    "TwilioKeyDetector": "twilio",
}  # fmt: skip
"""The `detect_secrets.plugins` module of each regex-based plugin class: importing only
the modules the rules name costs ~4 ms of a run's start, detect-secrets' own registry
(every plugin module; KeywordDetector's compiles its regexes on import) ~15 ms more. A
class not where this says (another detect-secrets version) is found in the registry."""

_NAME = r"(?=[A-Za-z_])(?:[A-Z0-9_]+|[a-z0-9_]+|[A-Za-z_]+)"
"""A variable's name as people write one: one case (`DB_PASS`, `db_pass2`) or no digit
(`dbPassword`); a value of both cases and a digit (`Tr0ub4dor_x9Qz`) is a secret."""
DEFAULT_ALLOW = (
    rf"\$(?:{_NAME}|\{{{_NAME}\}})",  # $TOKEN, ${DB_PASS}, $db_password, $dbPassword
    r"\*+|[xX]+|\.\.\.+|<[^<>]*>",  # ****, xxxx, ..., <password>
)
"""Kept values: placeholders people write instead of secrets, and our own placeholder.

A `$NAME` or `${NAME}` is a variable, not a secret, when NAME reads as a variable name:
all upper case, or all lower case (digits and `_` allowed in both), or letters and `_`
only (camelCase). Both cases and a digit together (`$Tr0ub4dor_x9Qz`, `$ghTokenPw2024`,
`${Sup3rSecret}`) is what a password or a generated secret looks like, and is redacted
(2026-12-03: every `$`-led value was kept). A single-case password behind a `$`
(`$ecret123`) still passes for a variable."""
DEFAULT_ENV_KEEP = (
    "PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "TERM", "TZ", "USER", "SHELL", "PWD",
    "HOSTNAME", "PYTHONPATH", "DEBIAN_FRONTEND", "PAGER", "EDITOR",
    # what a job sets for a server (MCP `set_env`) and tools print back: identities,
    # hosts, ports, directories and paths (`*`: any characters)
    "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
    "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM",
    "HOST", "PORT", "*_HOST", "*_HOSTS", "*_DOMAINS", "*_PORT", "*_DIR", "*_PATH",
    # settings a server reads by name, words a text holds (`NODE_ENV: production` cut
    # `reproduction` in an observation and rewrote an action and an instruction, 12-06)
    "NODE_ENV", "*_ENV", "ENVIRONMENT", "*_ENVIRONMENT", "LOG_LEVEL", "*_LOG_LEVEL",
    "DEBUG", "*_DEBUG", "*_MODE", "*_TIMEOUT", "*_VERSION",
)  # fmt: skip


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    return value


Kind = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]
Regex = Annotated[str, AfterValidator(_regex)]


@configclass
class RedactPattern:
    """One extra detector."""

    kind: Kind
    """Placeholder kind (`<secret:KIND>`): lower case, digits and `_`."""
    regex: Regex
    """Python regular expression, applied to whole texts (MULTILINE)."""
    group: Annotated[int, Field(ge=0)] = 0
    """The group replaced (0: the whole match), so context such as `KEY=` stays."""


@configclass
class RedactConfig:
    """Redaction rules, applied by collectors, importers and `process` alike."""

    enabled: bool = True
    """Off only for data known to hold no secrets (nothing is redacted then)."""
    builtin: bool = True
    """worldtrace's patterns for current key formats (see docs/security.md)."""
    detect_secrets: tuple[str, ...] = DETECT_SECRETS_PLUGINS
    """detect-secrets plugin class names whose regexes are used."""
    patterns: tuple[RedactPattern, ...] = ()
    """Extra detectors, tried after the built-in ones."""
    allow: tuple[Regex, ...] = DEFAULT_ALLOW
    """A found secret that fully matches one of these regexes is kept."""
    env_min_chars: Annotated[int, Field(ge=1)] = 6
    """Environment values handed to a sandbox are redacted wherever they appear when at
    least this long (shorter ones such as `1` or `yes` would erase ordinary text)."""
    env_keep: tuple[str, ...] = DEFAULT_ENV_KEEP
    """Environment variables whose values are not secrets (PATH, HOME, LANG, ...); a name
    with `*` matches any characters there (`*_HOST`)."""

    @classmethod
    def load(cls, path: str | Path) -> RedactConfig:
        """A YAML file of these settings (unknown keys are refused with their line)."""
        data, lines = load_yaml(path)
        from .parsing import ConfigError

        try:
            return parse(cls, data)
        except ConfigError as exc:
            raise exc.located(lines, str(path)) from None


class LazyPattern:
    """A regex compiled on its first search, with the compiled pattern's `pattern` and
    `flags` from the start (all the batch screen reads: `redact._Screen`). Compiling
    the 70 detector regexes (some of kilobytes) took ~0.15 s of every process that
    redacts, on the critical path of a small or incremental `process` run and of each
    worker's start, though the records the screen passes (the usual ones) are never
    searched with them. For patterns without global inline flags
    (`(?i)` at the start: scoped `(?i:...)` are fine), which `builtin_detectors` holds
    to (`tests/schemas/test_redact_lazy.py`)."""

    __slots__ = ("_compiled", "finditer", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern = pattern
        self.flags = flags | (0 if flags & re.ASCII else re.UNICODE)  # as `re.compile`'s
        self._compiled: re.Pattern | None = None
        self.finditer = self._first_finditer
        """The compiled pattern's own `finditer` once compiled: redaction's search calls
        it per text and detector, so it costs nothing more than a `re.Pattern`'s."""

    def compiled(self) -> re.Pattern:
        if self._compiled is None:  # two threads may both compile: the same pattern
            self._compiled = re.compile(self.pattern, self.flags)
            self.finditer = self._compiled.finditer
        return self._compiled

    def _first_finditer(self, string: str, *args):
        return self.compiled().finditer(string, *args)

    def __getattr__(self, name: str):  # finditer, search, groups...: the compiled one's
        return getattr(self.compiled(), name)

    def __reduce__(self):
        return LazyPattern, (self.pattern, self.flags)


class Detector(NamedTuple):
    kind: str
    regex: re.Pattern | LazyPattern
    group: int
    """-1: every non-empty group (detect-secrets' findall semantics)."""
    check: Callable[[str], bool] | None = None
    """Further test of a candidate (JWT: both parts decode as JSON)."""
    gates: tuple[str | re.Pattern, ...] | None = None
    """Literals (or cheap regexes) one of which every match contains: a text holding
    none is not searched, since a substring test is ~100x faster than these regexes.
    None: always searched."""
    fold: bool = False
    """Gates are lower case and tested against the lower-cased text."""
    extend: bool = False
    """A match ends where its token ends: a rule that takes a fixed number of a key's
    characters (detect-secrets' Stripe rule: 24) would leave the rest of a longer key in
    the text, so a match followed by more of the letters and digits its last run is made
    of goes on to the end of that run (`redact._token_end`). Built-in and detect-secrets
    rules; never a user's pattern (it says exactly what it takes) or a literal value."""
    cells: Callable[[str, re.Match], list[tuple[int, int]]] | None = None
    """The spans a match stands for, read in the text around it, instead of its groups:
    the values in the rows below a column's header (`_column_cells`)."""


_K = "A-Za-z0-9_+/-"  # characters of keys and base64: a key must not continue one
_SEPARATED = ("[+/-]", "%[0-9A-Fa-f]{2}")
"""What may stand right before a key though it is a key character: `/` (a path, a URL's
path or user: `/run/secrets/KEY`, `https://KEY@github.com`), `+` and `-` (a diff's line:
`+sk-proj-...`), and a percent-encoded character (`%22KEY`, `token%3DKEY`: its hex
digits are key characters). 2026-12-07, a hunt: 28 of the 38 built-in kinds were kept
whole there, `_K` refusing them all. After one the key must read as generated
(`GENERATED`), so a slug or a name in a path or a flag stays (`feature/ghp-fix`)."""
GENERATED = (
    r"(?=[A-Za-z0-9_.-]{0,256}?[0-9])(?=[A-Za-z0-9_.-]{0,256}?[A-Za-z])"
    r"|(?=[A-Za-z0-9_.-]{0,256}?[a-z])(?=[A-Za-z0-9_.-]{0,256}?[A-Z])"
)
"""After a key's literal start, in its run of key characters: a digit and a letter,
or both cases (a Hugging Face token is letters only); what a random key holds and a
lower-case slug with no digit (`sk-learn-models`) does not."""


_ESCAPED = (r"\\[bfnrt]", r"[\\]u[0-9A-Fa-f]{4}")
"""The JSON escapes that end in a key character: `\\b`, `\\f`, `\\n`, `\\r`, `\\t` and
`\\uXXXX` (any other control character, and with `ensure_ascii` every character beyond
ASCII: `\\u201c`, `\\u2192`, `\\u0007`, hex in either case). What they stand for is no
key character, so a key right after one starts there: a terminal's raw stream in
`state_json` puts `\\r\\n` before every line, and `printf '\\u201c%s\\u201d' KEY` or
`echo "\\u2192KEY"` a curly quote or an arrow (2026-12-05: only `\\n`, `\\r`, `\\t` were
read so, and such keys stayed in `state_json` and `arguments_json`). A hex run not led
by `\\u` (`deadbeefsk-...`, `u201csk-`) is no escape. (`[\\]u`, not `\\\\u`: the batch
screen refuses a rule holding `\\u`, Python's escape, as `azure_sas_token`'s `[\\]u0026`.)"""


def _bounded(literals: tuple[str, ...], refused: str) -> str:
    """Lookbehinds, at the end of one of `literals` (regexes of a fixed width), that
    take it as the start of a word: not preceded by a character of `refused` (the body
    of a class), or preceded by a JSON escape (`_ESCAPED`)."""
    plain = "".join(f"(?<![{refused}]{lit})" for lit in literals)
    escaped = "|".join(f"(?<={e}{lit})" for e in _ESCAPED for lit in literals)
    return f"(?:{plain}|{escaped})"


def _start(literal: str) -> str:
    """`literal` at the start of a match, not preceded by a key character, unless that
    character ends a JSON escape (`_ESCAPED`), or is a separator (`_SEPARATED`) and the
    key reads as generated. The literal leads the regex so `re` can search for it
    directly (a leading lookbehind makes the same pattern 10x slower); the lookbehinds
    after it check the characters before."""
    bounded = _bounded((literal,), _K)
    after = "|".join(f"(?<={sep}{literal})" for sep in _SEPARATED)
    return f"{literal}(?:{bounded}|(?:{after})(?:{GENERATED}))"


_E = r"(?![A-Za-z0-9_-])"  # nor followed by one
_Q = r"(?:\\?[\"'])?"  # a quote around a key or a value, also escaped inside a JSON string
_AWS_IDS = ("A3T", "AKIA", "ASIA", "ABIA", "ACCA")

# -- values found by the name before them (2026-12-03: `X-Api-Key: <hex>`, `DD_API_KEY=`,
# `password: hunter2word`, a MySQL client's `-p` with the password attached) -------------
# A value of no known shape is a secret only after a name that says so, and only when it
# reads as a literal: the keyword plugin (off) flags `password = get_password()`. So a
# value must hold a digit or a symbol, or be 16 or more letters of both cases that read
# as no name (`password: SecretStr`, `password: string;`, `POSTGRES_PASSWORD=postgres`:
# a type, a word, a default, kept), and is not code (`os.environ[...]`, `self.password`,
# `pw2,`, `get_key()`, `s3_connection`, `Ed25519PrivateKey`), a template or a variable
# (`${X:-y}`, `{{ x }}`, `%(x)s`, `$(cmd)`; `$NAME`: `DEFAULT_ALLOW`), a path, the next
# option (`--password -h`), a label (`Enter password: mysqldump: ...`) or a placeholder
# (`your-api-key-1`, `changeme`, `[FILTERED]`, `<password>`). Each rule is led by its
# name's last word in both cases (`[Tt][Oo][Kk][Ee][Nn]`), which `re` finds with a fast
# scan, and looks behind for the words before it (led by a case-blind group or an
# alternation, the same rules searched code at 3-22 MB/s). Every repeat over a value is
# bounded (`_MAX`): a long run holding many names (`password=password=...(`) was read
# again to its end from each name, 180 KB in minutes (0.8 s bounded).
_MAX = 512
"""The bound of every repeat over a value after a name (a value holds up to `_MAX`
characters before its first digit or symbol, and `_MAX` after): a longer one is left to
the shape rules."""
_VC = r"[^\s\x00-\x1f\x7f'\"`\\;&|<>()\[\]{},]"
"""A character of an unquoted value: not a shell operator, bracket, comma or quote."""
_VEND = r"(?=[\s\x00-\x1f\x7f'\"`\\;&|]|$)"
"""Where an unquoted value ends: a space, a quote, `\\` (`\\n` in JSON), `;`, `&` (a
query string), `|`; never `(`, `[`, `.`, `,` (a call, an index, code)."""
_ASCII = "".join(map(chr, range(0x21, 0x7F)))  # printable, no space
_SYM = r"[0-9!#$%*+=@^~&]"
"""A digit or a symbol: what a value must hold to read as a literal secret (not `?`:
`password: string?` is a nullable type)."""


def _both(word: str) -> str:
    """`word` in either case, letter by letter: a class leads the regex, so `re`
    scans for its first character instead of trying the rule at every position."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


_NOT_VALUE = (
    r"(?![\[<{]|\$[{(]|%[({]|#\{|\.{0,2}/|~/|\$\{?\w+\}?/"
    rf"|[^\s'\"]{{0,{_MAX}}}?\{{\w*\}}"
    rf"|[^\s'\"]{{0,{_MAX}}}?(?<![A-Za-z])(?:"
    + "|".join(map(_both, ("your", "example", "placeholder", "changeme", "change_me", "redacted")))
    + "))"
)
"""Not a bracketed token (`[MASK]`, `[FILTERED]`, `<password>`), a template or command
substitution, a format string (`"KEY={}"`), a path (`$dir/private/cakey.pem`), or a
placeholder."""
_TYPE_WORDS = (
    "Key", "Keys", "Str", "String", "Field", "Type", "Auth", "Token", "Secret", "Password",
    "Bearer", "Credential", "Credentials", "Provider", "Manager", "Config", "Settings", "Hash",
    "Hasher", "Error", "Exception", "Validator", "Form", "Input", "Model", "Schema", "Value",
    "Handler", "Service", "Client", "Store", "Pair", "Bytes", "Header", "Format", "Required",
    "Invalid", "Missing",
)  # fmt: skip
_CAMEL = r"_*(?:[A-Z][a-z])?(?:[A-Z0-9]|[A-Z][a-z]{2,})*(?:" + "|".join(_TYPE_WORDS) + r")"
"""A class's or an error's name: capitalised words (one of 2 letters first), capitals and
digits, ending in a word such names end in, private or not (`SecretStr`,
`Ed25519PrivateKey`, `OAuth2PasswordBearer`, `InvalidPasswordFormat`,
`_EllipticCurvePrivateKey` in a quoted annotation). Ending in any two words, a random 8
to 15 letters and digits read so once in 200; ending in these, once in 10^6 (16 to 40:
none of 10^6)."""
_ATTR = r"(?:[A-Za-z_]\w*\.)"
_SNAKE = r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"
_CODE = rf"(?!-|(?:{_ATTR}+{_NAME}|{_ATTR}*{_CAMEL}|{_SNAKE})[!?]?(?!{_VC}))"
"""Code, unquoted: the next option (`--password -h host`), an attribute
(`settings.S3_SECRET`, `process.env.KEY!`), a class (`Ed25519PrivateKey`,
`hpke.MLKEM768X25519PrivateKey`), a snake-case name (`s3_connection`, `DEFAULT_PW_2`).
A password written so (`admin_123`) is kept."""
_WORD = r"(?:[A-Z]*[a-z]{2,}|[A-Z]+(?![A-Za-z]))"
_WORDS = rf"{_WORD}(?:[-_.]{_WORD}|(?=[A-Z]){_WORD}){{0,{_MAX}}}"
"""Words of 2 letters or more, capitalised or not, and capitals, joined as names are
(`CustomGraphModulePass`, `challengePassword`, `X-Xet-Access-Token`): 16 or more letters
of both cases are a secret only when they read otherwise (a random 16 to 40 letters and
digits holding none of `_SYM` reads so about once in 1,700)."""


_AT_HOST = (
    rf"@(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|localhost)(?::\d{{1,5}})?"
    rf"(?:[/?#]{_VC}{{0,{_MAX}}})?{_VEND}"
)
"""`@`, a host (a dotted name or address, `localhost`), a port, a path, then the value's
end: what follows the password in a URL (`https://x-access-token:PW@github.com/o/r.git`,
a URL's user read as a credential's name) or in a config line (`password=PW@db.internal`).
An unquoted value after a name ends before it when what lies before reads as a value
(2026-12-05: the value ran on over the host and path, which the placeholder took);
`Hx7p@ss@db.internal` ends at the last `@` before the host, as `url_password` does; a
value that would not read as one alone (`p@db.internal`: too short; `Summer@2024.Q1`)
stays whole, and a dotenv line's value is all of it to the first blank (`_assigned`)."""


def _value(
    least: int,
    letter: bool = False,
    shaped: bool = True,
    forms: str = "dsu",
    end: str = _VEND,
    kept: str = "",
) -> str:
    """A value after its name: double-quoted, single-quoted (the groups take what the
    quotes hold, backslash escapes included: `_ESCAPES`; `\\"` inside a JSON string too)
    or unquoted, `least` to `_MAX` characters. `letter`: it holds a letter (a key or a
    token; `MAX_TOKEN=4096` is a number); `shaped`: it holds a digit or a symbol (an
    escaped quote, backslash or symbol is one), or is 16 or more letters of both cases
    (off where the command's grammar says the value is a password: `mysql -pX`,
    `sshpass -p X`, `.netrc`, a credential option of `CREDENTIAL_OPTIONS`); `forms`:
    which of the three are taken (`d`, `s`, `u`: SQL's passwords are string literals,
    single-quoted); `end`: where an unquoted one ends (`_OPT_END` after an option);
    `kept`: a regex of whole values of no shape that are none (`_NO_OPTION_VALUE`)."""

    n = _MAX

    def ahead(c: str) -> str:  # `least` characters, a letter among them if `letter`
        return f"(?={c}{{{least}}})" + (f"(?={c}{{0,{n}}}[A-Za-z])" if letter else "")

    def held(c: str, plain: str, sym: str, end: str) -> str:
        """The value's group: a literal (`plain` characters then a digit or a symbol, or
        16 letters of both cases that read as no words) of `c` characters, then `end`."""
        mixed = f"(?!{_WORDS}{end})(?={c}{{0,{n}}}[a-z])(?={c}{{0,{n}}}[A-Z]){c}{{16,{n}}}"
        return f"({plain}{{0,{n}}}{sym}{c}{{0,{n}}}|{mixed}){end}"

    def body(
        c: str, end: str, host: bool = False, escapes: tuple[str, str] | None = None
    ) -> tuple[str, str]:
        """(the lookaheads that read the value, what is matched) of a value of `c`
        characters, `escapes` (those that stand for a symbol, the others) each one too."""
        # The value is taken in a lookahead (its group) up to where it ends, and only up
        # to its first digit or symbol (or 16 letters, or 1) is matched: the batch screen
        # reads rules without their lookarounds and strings back to back, and must flag
        # neither `password = os.environ[...]` nor, with a value at a string's end, the
        # string after it (`TOKEN=dckr_pat_...` + `/` + `ok`).
        ascii_c = "[" + "".join(map(re.escape, filter(re.compile(c).match, _ASCII))) + "]"
        plain, sym = c[:-1] + _SYM[1:], _SYM  # `c` but a digit or a symbol: the first ends it
        if escapes is not None:
            c = f"(?:{c}|{escapes[0]}|{escapes[1]})"
            plain, sym = f"(?:{plain}|{escapes[1]})", f"(?:{_SYM}|{escapes[0]})"
        out = ahead(c)
        if not shaped:  # but a word standing for one (`login username password password`)
            words = "|".join(map(_both, ("password", "passwd", "pass", "secret", "none", "null")))
            words += f"|{kept}" if kept else ""
            group = f"(?=({c}{{1,{n}}}){end})"
            if host and kept:  # an option's value before `@host` ends there, as below
                cut = f"(?:(?!{_AT_HOST}){c})"
                group = f"(?:{ahead(cut)}(?=({cut}{{1,{n}}})(?={_AT_HOST}))|{group})"
            return out + f"(?!(?:{words}){end}){group}", c
        group = f"(?={held(c, plain, sym, end)})"
        if host:  # a value that reads as one before `@host` ends there (`_AT_HOST`)
            cut = f"(?:(?!{_AT_HOST}){c})"
            group = f"(?:{ahead(cut)}(?={held(cut, plain, sym, f'(?={_AT_HOST})')})|{group})"
        # matched: `least` characters or more up to and with the first digit or symbol,
        # or 16 ASCII ones (read as 16 bytes by the screen, not 64); in quotes, where the
        # quote already tells a value, only up to the first digit or symbol: with its
        # escapes, each a character, `least` of them made the screen's pattern too big
        # for hyperscan to keep exact (it flagged `password = os.environ[`)
        if escapes is not None:
            return out + group, f"(?:{plain}{{0,{n}}}{sym}|{ascii_c}{{16}})"
        taken = [f"{plain}{{{i}}}{sym}{c}{{{least - 1 - i}}}" for i in range(1, least - 1)]
        taken = [f"{sym}{c}{{{least - 1}}}", *taken] if least > 1 else taken
        taken += [f"{plain}{{{least - 1},{n}}}{sym}", f"{ascii_c}{{16}}"]
        return out + group, f"(?:{'|'.join(taken)})"

    label = rf"(?!{_VC}{{0,{_MAX}}}:{end})"  # `Password: mysqldump: Got error`

    def quoted(q: str) -> str:
        """In `q` quotes, through backslash escapes to the closing quote, or opened by
        `\\q` (inside a JSON string) to the closing `\\q` (`_ESCAPES`). What is matched
        after the quote is read as the first form reads it (a JSON string's escape is two
        of its escapes): one pattern for both keeps the batch screen's from growing past
        what hyperscan compiles exactly (with four, it flagged `password = os.environ[`)."""
        c = rf"[^{q}\s\\]"
        marks = (q, rf"\\{q}")
        reads = [
            rf"{mark}{_NOT_VALUE}(?!{_CAMEL}{mark}){body(c, mark, escapes=_ESCAPES[i])[0]}"
            for i, mark in enumerate(marks)
        ]
        return f"(?:{'|'.join(reads)}){body(c, q, escapes=_ESCAPES[0])[1]}"

    branches = {
        "d": quoted('"'),
        "s": quoted("'"),
        "u": rf"{_NOT_VALUE}{_CODE}{label}" + "".join(body(_VC, end, host=True)),
    }
    return "(?:" + "|".join(branches[f] for f in forms) + ")"


_WIDE = r"u(?:00[89a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})"
"""A JSON `\\u` escape's body for a character beyond ASCII (`\\u00e4`, as `json.dumps`
writes `ä`), not for an ASCII one (`\\u0067`: what hides a key from the rules)."""
_ESCAPES = (
    (r"\\[^\sA-Za-z0-9]", rf"[\\]{_WIDE}"),
    (r"\\\\(?:\\[\\\"']|[^\sA-Za-z0-9\\])", rf"\\[\\]{_WIDE}"),
)  # `[\\]u`, not `\\u` (which holds `\u`, Python's escape): the batch screen refuses it
"""A backslash escape in a quoted value, each one character of it, (those that stand for
a symbol: `\\"`, `\\\\`, `\\$`, `\\/`; a character beyond ASCII, `\\u00e4`): as it stands,
and inside a JSON string (`\\\\\\"`, `\\\\\\\\`, `\\\\u00e4`: an escaped backslash and what
follows). A quoted value runs through them to its closing quote (`"Zq8\\"Lm$3v"`,
`'Kd7\\\\Wn4'`, `\\"Zq8\\\\\\"Lm\\"`), as JSON, YAML, a Python dict's repr and a shell's
`declare -p` write it; another escape (`\\n`, `\\u0067`) ends it, as before. Until
2026-12-06 a value ended at its first backslash: `{"password": "Zq8\\"Lm$3vX9pR!w"}` was
kept whole, `"S3cr3t\\"Passw0rd"` after `S3cr3t` (a hunt: 275 of 371 random passwords
holding `"` or `\\` kept whole in JSON)."""


def _behind(words: tuple[str, ...], last: str) -> str:
    """Lookbehinds (any case) for `word` + `last`, `word_last`, `word-last`, for each word,
    at the end of `last`."""
    w_, l_ = map(_both, words), _both(last)
    return "(?:" + "|".join(f"(?<={w}[_-]{l_})|(?<={w}{l_})" for w in w_) + ")"


_TAG = r"!!?[A-Za-z][\w.-]{0,40}"
_YAML_TAG = rf"(?:{_TAG}[ \t]+|(?!{_TAG}(?:[ \t]|$)))"
"""A YAML tag before a value (`password: !secret X`, `!!str`, Ansible's `!vault`), which is
no part of it: taken when there is one, so the value after it is read (2026-12-06, a hunt:
`!secret` was read as the value, a literal of 7 characters with a symbol, and the password
after it kept). What a tag names (Home Assistant's `!secret wifi_password`) reads as code."""
_SEP = _Q + rf"(?:[ \t]*(?:=>|:(?!=))[ \t]*{_YAML_TAG}|[ \t]+=(?!=)[ \t]*|=(?![=\s]))"
"""After a name: a quote (`"password": ...`), then `=`, `:` or `=>` (and a YAML tag); not
`==`, `!=`, `:=`, nor `=` and a space (`PASSWORD= cmd` runs `cmd` with it empty;
`"password= scm="`)."""


def _cases(*words: str) -> tuple[str, ...]:
    """Gates of a rule led by `_both(word)`: the word in lower case, capitalised and in
    capitals (`password`, `dbPassword`, `DB_PASSWORD`; not `pAsSwOrD`)."""
    return tuple(c for w in words for c in (w, w.capitalize(), w.upper()))


_ITEM = r"\\{0,3}[\"'][ \t]*,(?:[ \t\r\n]|\\[rnt]){0,80}(?=\\{0,3}[\"'])"
"""Between an argument and the next in a list, as JSON, a Python list's repr or a JSON
string holding one write an argv (`"--token", "V"`, `'-p', 'V'`, `\\"--token\\",
\\"V\\"`, compact `","`): the first's closing quote, a comma, blanks; the next one's
opening quote is left to the value (`_value` reads it to its closing quote). 2026-12-06,
a hunt: `{"command": ["server", "--token", "V"]}`, `["docker", "login", "-p", "V"]`, a
Claude Desktop config's `"args": [..., "--api-key", "V"]` were kept, the same options
with spaces redacted. The blanks may hold line breaks, also as a JSON string's `\\n`
(2026-12-06, z: pretty-printed JSON, `json.dumps(..., indent=2)`, an `.mcp.json` shown by
`cat`, put each item on its own line and kept the value)."""
_FLOW = r"[ \t]*,[ \t]*(?=(?:\\?\"[^\"\n]*\"|'[^'\n]*'|[^\s,\[\]{}'\"]+)[ \t]*[,\]])"
"""Between an unquoted option and its value in a YAML flow sequence (`args: [--token,
V]`, `[--api-key, "V"]`, `[ --token , V ]`, compact `[--token,V]`): a comma and blanks,
where the value that follows is an item that a `,` or the `]` ends (not prose:
`--password, username and host`). 2026-12-06, z; blanks before the comma 12-06, t."""
_BLOCK = r"(?:\\{0,3}[\"'])?[ \t]*(?:\r?\n|\\r\\n|\\n)[ \t]*-[ \t]+"
"""Between an option and its value in a YAML block sequence, one item a line (a
Kubernetes container's or a compose service's `args:`/`command:`, `- --token` then `-
V`), also in a JSON string (`\\n`). 2026-12-06, z."""
_OPT_END = r"(?=[\s\x00-\x1f\x7f'\"`\\;&|\]]|,(?:[ \t]|$|[^\s\[\]{}]{0,512}\])|$)"
"""Where an unquoted option's value ends: where any value does (`_VEND`), or at a flow
sequence's `]`, or at a `,` and a blank (`_FLOW`) or a `,` of a compact sequence (what
follows runs to its `]` without a blank: `[--token,V,--port,8080]`, as YAML or a shell's
`IFS=,; echo "[$*]"` write one; 2026-12-06, t: only `[--token,V]` was read); not at a `,`
inside an argument (docker's `--secret id=X,src=Y`, `id=X,src=Y,type=file .`)."""
_ARGS = rf"(?:[ \t]+|{_ITEM}\\{{0,3}}[\"'])"
"""Between two words of a command: blanks, or list items' `", "` (`_ITEM`)."""
_ARG_LEAD = r"(?:[ \t](?:\\{0,3}[\"'])?|[\[,]\\{0,3}[\"'])"
"""Before an option of a command: a blank, or a list item's opening quote (after `[`,
`,` or a blank: `["mysql", "-pX"]`, compact `["curl","-u",...]`)."""

_OPT_SEP = rf"(?:[ \t]+|=(?![=\s])|{_ITEM}|{_FLOW}|{_BLOCK})"
"""Between a credential option and its value: spaces, `=`, or a list item's separator
(`_ITEM`, `_FLOW`, `_BLOCK`)."""


def _option(words: str) -> str:
    """A command-line option ending in one of `words` (a regex), then its value after
    spaces, `=` or a list item's separator (`_ITEM`, `_FLOW`, `_BLOCK`): `--password X`,
    `--db-password X`, `--api-key=X`, `--token="X"`, `"--secret", "X"`, `[--token, X]`.
    Every credential option takes `=` (2026-12-06: `--token=X`, `--secret=X` were kept,
    `--api-key=X` redacted, only the names `_SEP` reads after a word taking it)."""
    return rf"--(?:[A-Za-z0-9]+-)*(?:{words}){_OPT_SEP}"


_PASSWORD = (
    _both("p")
    + r"(?:[Aa][Ss][Ss](?:[Ww](?:[Oo][Rr][Dd]|[Dd])|(?<=[_-][Pp][Aa][Ss][Ss]))"
    + r"|[Ww][Dd](?<=[_-][Pp][Ww][Dd]))(?<!/password)(?<!/passwd)"
)
"""`password`, `DB_PASSWORD`, `PGPASSWORD`, `dbPassword`, `passwd`, `MYSQL_PWD`,
`SMTP_PASS`, `spring.datasource.password`; not `/etc/passwd:` (grep's output), `PWD`,
`OLDPWD` (a directory)."""
_KEY_WORDS = ("api", "app", "application", "subscription", "private", "encryption", "signing",
              "master")  # fmt: skip
_API_KEY = _both("key") + _behind(_KEY_WORDS, "key")
"""`X-Api-Key`, `Api-Key`, `dd-api-key`, `DD-APPLICATION-KEY`, `Ocp-Apim-Subscription-Key`,
`DD_API_KEY`, `DD_APP_KEY`, `*_API_KEY`, `apiKey`, `api_key`; not `GPG_KEY` (a public
key's fingerprint in the python images' environment), `primary_key`, `cache_key`."""
_TOKEN_WORDS = ("access", "auth", "refresh", "api", "bot", "bearer", "session", "oauth",
                "personal", "private", "secret", "github", "gh", "hf", "npm", "vault", "slack",
                "discord", "client", "service", "deploy", "registry", "csrf", "xsrf")  # fmt: skip
_TOKEN = (
    _both("token")
    + r"(?:(?<=_TOKEN)|(?<=TOKEN)"
    + _bounded(("TOKEN",), "A-Za-z0-9_")
    + "|"
    + _behind(_TOKEN_WORDS, "token")
    + ")"
)
"""Any `*_TOKEN` environment name (`CI_JOB_TOKEN`, `VAULT_TOKEN`), `X-Auth-Token`, and
the names of credentials in any case (`refresh_token`, `accessToken`); not a bare
`token` (a tokenizer's output), `nextPageToken`, `NextToken` (cursors), `eos_token`."""
_SECRET_WORDS = ("client", "api", "app", "consumer", "jwt", "session", "signing", "webhook",
                 "shared", "oauth", "token")  # fmt: skip
_SECRET = (
    _both("secret")
    + r"(?:[_-]?[Kk][Ee][Yy]|(?<=_SECRET)|(?<=SECRET)"
    + _bounded(("SECRET",), "A-Za-z0-9_")
    + "|"
    + _behind(_SECRET_WORDS, "secret")
    + ")"
)
"""Any `*_SECRET` environment name, `client_secret`, Django's `SECRET_KEY`."""
_MYSQL = (
    r"(?:mysql|mariadb)"
    + _bounded(("mysql", "mariadb"), r"\w.-")
    + r"(?:dump|admin|import|show|check|pump|-dump|-admin)?(?![\w.-])"
    r"[^\n|;&]{0,200}?" + _ARG_LEAD + r"-p(?!(?:[\d.]+:)*\d{1,5}(?:/(?:tcp|udp))?(?![^\s'\"`]))"
)
"""A MySQL client's `-p` with its password attached (`-p'X'`; `-p db` prompts), on the
client's command line, also as list items (`['mysql', '-pX']`); not a port (`docker run
--name mysql -p3306:3306`)."""
_CURL = (
    r"curl"
    + _bounded(("curl",), r"\w.-")
    + r"(?![\w.-])[^\n|;&]{0,200}?"
    + _ARG_LEAD
    + rf"(?:-[uU](?:[ \t]*|{_ITEM})|--(?:proxy-)?user(?:[ \t]+|=|{_ITEM}))"
    + r"(?:\\{0,7}[\"'])?[^\s:'\"\\]*:"
)
"""curl's `-u user:password` (`--user`, `--proxy-user`, `-U`), quoted or not (the quote
escaped in JSON, also in JSON inside a JSON string), also as list items (`["curl", "-u",
"user:X"]`, `{"command": "curl", "args": ["-u", "user:X"]}`): the password after the
user's `:` (`-u user` alone prompts; `-u "$U:$P"` is variables)."""
_USER_ARG = (
    r"-[uU](?<![\w-]-[uU])" + rf"(?:[ \t]+|{_ITEM})" + r"(?:\\{0,3}[\"'])?[\w.@+-]{1,64}:"
    r"(?=[^\s:'\"\\]{0,80}[a-z])(?=[^\s:'\"\\]{0,80}[A-Z])(?=[^\s:'\"\\]{0,80}[0-9])"
    r"([A-Za-z0-9!#$%*+=@^~&._/-]{12,128})(?=[\s'\"\\]|$)"
)
"""`-u user:X` without `curl` before it on the line (an MCP config's `"args": ["-u",
"alice:X"]`, 2026-12-06) when X reads as a generated credential: 12 or more characters
holding both cases and a digit. `docker run -u 1000:1000`, `-u www-data:www-data`,
`-u app:app2` (a uid or a user and a group) stay."""
_REGISTRY_LOGIN = (
    r"(?:docker|podman|buildah|skopeo|nerdctl|oras|registry)" + _ARGS + r"login(?![\w.-])"
    r"[^\n|;&]{0,200}?" + _ARG_LEAD + rf"(?:-p(?:[ \t]*|{_ITEM})|--password(?:[ \t]+|=|{_ITEM}))"
)
"""A registry login's `-p X` / `--password X` (Docker, Podman, Buildah, Skopeo, nerdctl,
ORAS, `helm registry login`), also as list items (`["docker", "login", "-p", "X"]`); not
`--password-stdin`."""
_IDENTIFIED = (
    r"(?:IDENTIFIED|(?:@|" + _both("user") + r"[ \t]+)[^\s@]{1,100}[ \t]+" + _both("identified")
    + r")[ \t]+(?:" + _both("with") + r"[ \t]+\w+[ \t]+)?" + _both("by") + r"[ \t]+(?:"
    + _both("password") + r"[ \t]+)?"
)  # fmt: skip
"""SQL's `IDENTIFIED BY 'X'` (MySQL, MariaDB, Oracle; `IDENTIFIED WITH plugin BY`, a
hash after `BY PASSWORD`): in capitals, or after a user (`user@host`, `USER name`) in
any case; not prose (`commits identified by "squash"`)."""
_PORT = r"(?!(?:[\d.]+:)*\d{1,5}(?:/(?:tcp|udp))?(?![^\s'\"`]))"
"""Not a port or a port mapping (`-p 27017:27017`, `-p3306`, `-p 8080/tcp`)."""
PASSWORD_FLAGS = (
    ("redis-cli", "", "a"),
    ("mongo", "(?:sh|dump|restore|import|export|files|stat|top)?", "p"),
    ("ldap", "(?:search|add|modify|delete|modrdn|compare|passwd|whoami|exop)", "w"),
)  # fmt: skip
"""(command, the rest of its name, flag) of clients whose short option takes the password
as its next argument: `redis-cli -a X`, `mongosh -u u -p X` (and the database tools),
`ldapsearch -D dn -w X` (2026-12-07, b: kept; `redis-cli -a` was the hunt's). Read on the
command's line, as `_MYSQL`'s `-p`, also as list items; not a port after `-p` (`docker run
--name mongo -p 27017:27017`), and the value's shape is not asked (`_value`, not `shaped`)
but for help's words and metavars (`_NO_OPTION_VALUE`: `-a <password>`, `-w PASSWORD`)."""


def _password_flag(command: str, rest: str, flag: str) -> str:
    """`PASSWORD_FLAGS`' rule: the command, its flag on its line, the password after it."""
    return (
        command
        + _bounded((command,), r"\w.-")
        + rest
        + r"(?![\w.-])[^\n|;&]{0,200}?"
        + _ARG_LEAD
        + f"-{flag}(?:[ \t]+|{_ITEM}){_PORT}"
        + _value(1, shaped=False, kept=_NO_OPTION_VALUE)
    )


_IN_JSON = r"(?:(?!</[A-Za-z])(?:[^\s\x00-\x1f\x7f\\\"]|\\[\\\"/]|\\(?![bfnrtu])))"
_LINE_VALUE = {"raw": r"(?:(?!</[A-Za-z])[^\s\x00-\x1f\x7f])", "json": _IN_JSON, "export": _IN_JSON}
"""A character of a value an assignment line holds unquoted (`_assigned`): anything but
a blank or a control character. In a line that may lie in a JSON string (`_LINE`) also
not `"`, which ends the string (a placeholder must not take it), nor a JSON escape that
stands for a blank or a control (`\\n`, `\\t`, `\\u0007`); `\\\\`, `\\"` and `\\/` are
one character there. Nor, in either, the `<` of a closing tag (`<pre>export
TOKEN=...</pre>` in a saved page)."""
_LINE_SYM = r"[0-9!#$%*+=@^~&()\[\]{}<>,;|?]"
"""What a value in an assignment line must hold to read as a literal (or 16 letters of
both cases): a digit or a symbol (`_SYM`), a bracket, a comma, `;`, `|` or `?` (not
`-`, `_`, `.`, `:`, `/`, which names, paths and addresses are made of)."""
_CAPS_NAME = r"(?=[A-Z][A-Z0-9_]*=)[A-Z0-9_]*?"


def _shown(blank: str) -> str:
    """What a tool puts before a file's line (2026-12-06): a line number and a tab, a
    blank, `:` or `-` (`cat -n`, `nl`, the SWE `read` tool, `less -N`, `grep -n` and its
    context lines), or, unindented, a grep path and `:` (`grep -r`) with a line number
    (`./.env:2:`; a context line's `./.env-1-`); then a diff's or a list's `+` or `-`
    (not `+++`, `---`: no name follows) or a Markdown list's `*`, then the line's indent,
    then a comment's `#` (a commented-out `.env` line still holds a credential, often a
    live one: 2026-12-06). A grep path may follow a revision (`git grep -n X HEAD`:
    `HEAD:.env:2:`). `blank` is a space or a
    tab (`\\t` too in a JSON string). A path is of letters, digits and `._~/+@-`, with
    no `.` or `/` needed (`grep PW env`); the name after it must still be in capitals
    and followed by `=`. Each rule tries this at every line's start: a path is tried
    only where a line starts unindented, and an indent is never given back
    (`(?!{blank})`), which keeps these rules' cost linear in the line."""
    number, indent = r"\d{1,9}", rf"{blank}*(?!{blank})"
    name = r"[\w.~/+@-]{1,255}"
    path = rf"(?:{name}:)?{name}(?::(?:{number}:)?|-{number}-)"
    return (
        rf"(?:{path}{indent}|{indent}(?:{number}(?:[:-]|{blank}){indent})?)"
        rf"(?:[-+*]{indent})?(?:#{{1,3}}{indent})?"
    )


_LINE = {
    "raw": "^" + _shown(r"[ \t]") + r"(?:export[ \t]+)?" + _CAPS_NAME,
    "json": r"[\"\\](?:(?<=\\)[nr]|(?<=\"))"
    + _shown(r"(?:[ \t]|\\t)")
    + r"(?:export[ \t]+)?"
    + _CAPS_NAME,
    "export": "export" + _bounded(("export",), r"\w.-") + r"[ \t]+" + _CAPS_NAME,
}
"""Where a dotenv or shell assignment's name starts, a name in capitals as environment
variables are named: at a line's start, indented or not, or after `export`; a line's
start as a tool shows a file's line too (`_shown`: `     1\\tDB_PASSWORD=...`,
`./.env:2:REDIS_PASSWORD=...`, a diff's `+DB_PASSWORD=...`, a compose file's
`- DB_PASSWORD=...`; until 2026-12-06 such a line was read by `_value`, which stops at
`(`, `,` and `;`). `raw`: a text's start or after a newline as it stands, which no JSON
string holds; `json`: after `\\n` or `\\r` (a line in a JSON string: a terminal's raw
stream in `state_json`) or a string's opening quote; `export`: after `export` anywhere
(after a prompt: `# export API_TOKEN=...`). In the last two the line may lie in a JSON
string. Each leads with a literal or a class, which `re` scans for (a lead of
alternatives or lookbehinds searched text holding these names 3-10x slower)."""


def _code(v: str) -> str:
    """A whole value of `v` characters that reads as code (`_assigned`, `_cell_value`)."""
    n = _MAX
    arg = r"(?:[\w.,:='\"+-]|\\\")"  # `\\"`: a string's quote in a JSON string (2026-12-06)
    call = rf"(?:\({arg}{{0,{n}}}\)|\[{arg}{{0,{n}}}\])"
    dotted = rf"(?:{_NAME}\.)+{_NAME}"  # names: `settings.DB_PW`, not `qb9WYa7z.tUC3Co`
    return (
        rf"(?:{dotted}{call}*(?:[(\[]{arg}{{0,{n}}})?|(?:{_ATTR}*{_CAMEL}|{_SNAKE}"
        rf"|{_NAME}(?=[(\[])){call}*|{_NAME}(?=[,;])|0[xX][0-9a-fA-F]{{1,16}}[uUlL]{{0,3}})"
        rf"[,;]?(?!{v})"
    )  # a hex number up to 64 bits: a C enum's `U_UNEXPECTED_TOKEN=0x10100,` (2026-12-06)


def _assigned(least: int, letter: bool = False, where: str = "raw") -> str:
    """An unquoted value after `=` in an assignment line (`_LINE[where]`: `.env`,
    `export X=`, `env` output): dotenv, docker's `--env-file` and a shell read it to the
    first blank, so every character up to one is the value (`k3vQ9xZp(2mT7`,
    `8)b6&dk$i1`, `Xy7#pQ2,L`, `abc;fGh1`: 2026-12-05, `_value` stops at the brackets,
    commas and operators code is made of, `f(password=pw2)`). `least` to `_MAX`
    characters (`_LINE_VALUE[where]`) that read as a literal as `_value`'s do: a digit or
    a symbol (`_LINE_SYM`), or 16 letters of both cases that read as no words; not a quoted
    value (`_value`'s), a template, a path or a placeholder (`_NOT_VALUE`), code (the
    whole value a dotted, snake-case or class name, or a name called or indexed with
    names, numbers or strings (a dotted name's call may be cut by a blank), or a name
    and `,`:
    `get_password()`, `settings.DB_PW,`, `os.environ['PW']`, `os.getenv("PW", "")`, `pw,`
    `admin_123`; `qs86_od(83j%x`, `qb9WYa7z.tUC3Co` and `-4684%+09` are values here, where
    `_value` reads a call, attributes and an option; names are `_NAME`s), nor a
    variable (the allow-list's `$NAME`s, alone or before a shell operator: `$DB_PASS;cmd`,
    `$PW$SALT`; `$s@s2Zc` is a value, as `_value` reads it). The value
    is taken in a lookahead (its group) and `least` characters of it are matched, as in
    `_value`."""
    n, v = _MAX, _LINE_VALUE[where]
    code = _code(v)
    shaped = (
        f"(?={v}{{0,{n}}}?{_LINE_SYM}|(?=[A-Za-z]{{16}})(?!{_WORDS}(?!{v}))"
        f"(?={v}{{0,{n}}}?[a-z])(?={v}{{0,{n}}}?[A-Z]))"
    )
    return (
        rf"(?![`'\"]|\\[\"'])(?!(?:\$(?:{_NAME}|\{{{_NAME}\}})(?![A-Za-z0-9_]))+(?:[;&|)]|(?!{v})))"
        + _NOT_VALUE
        + f"(?!{code})"
        + (f"(?={v}{{0,{n}}}?[A-Za-z])" if letter else "")
        + f"{shaped}(?=({v}{{{least},{n}}})(?!{v})){v}{{{least}}}"
    )


def _assignment(name: str, least: int, letter: bool = False) -> tuple[str, ...]:
    """`_assigned` after `name` and `=` in each form of line (`_LINE`)."""
    return tuple(_LINE[w] + name + "=" + _assigned(least, letter, w) for w in _LINE)


_BARS = "|│┃║"
"""A table's column rules: ASCII (Markdown, mysql's and sqlite3's `-table` boxes, psql's
columns) and box-drawing (`│`: psql's `linestyle unicode`, sqlite3's `-box`, duckdb's
boxes, rich's and tabulate's `fancy_grid` rows; `┃`: rich's header; `║`: double boxes)."""
_BAR_ESCAPES = ("\\u2502", "\\u2503", "\\u2551")
"""The box-drawing bars as a JSON string writes them with `ensure_ascii` (a table printed
inside a tool's JSON result; 2026-12-07, a: read as text, `\\u2502 password \\u2502`
was no table's row)."""
_BAR = (  # no class: the screen reads a character beyond ASCII in a class as no UTF-8
    # (`prefilter.utf8`); `[\\]u`, not `\\u`, which the screen refuses (`_ESCAPED`)
    "(?:" + "|".join([*map(re.escape, _BARS), *(f"[\\\\]{e[1:]}" for e in _BAR_ESCAPES)]) + ")"
)
_BAR_RE = re.compile(_BAR)
_CELL_QUOTE = r"(?:`|\\?[\"'])?"
"""A cell's text in backticks or quotes (a Markdown table's `` `DB_PASSWORD` ``, a
printed dict's `'password'`), the quote escaped inside a JSON string."""
_CELL_LEADS = (
    (rf"{_BAR}[ \t]+{_CELL_QUOTE}", rf"{_CELL_QUOTE}[ \t]+{_BAR}[ \t]+{_CELL_QUOTE}"),
    *(
        (
            rf"{line}[ \t]*(?=[A-Za-z0-9_.-]{{1,64}}(?:[ \t]*{_BAR}|[ \t]{{2}}|\t|\\t))",
            rf"[ \t]*{_BAR}[ \t]*{_CELL_QUOTE}",
        )
        for line in (r"\n", r"\A", r"\\[nr]", '"')
    ),
)
"""(where a table's cell holding a credential's name starts, what lies between it and
the next cell) of a table's row (`_cells`): a cell after `| ` (Markdown, mysql's boxes,
psql's inner columns) or `│ ` (`_BARS`), blanks around the bar after it (not a regex's
`user|password|x`); or a line's first cell (psql's rows and `\\x` records, `password |
X`, `psql -A`'s `password|X`; or a listing's first column: `_ALIGNED_SEP`), after a
newline or at the text's start, or in a JSON string after `\\n`, `\\r` or its opening
quote, where a lookahead reads the cell as a name and a bar or a padding before the rule
tries the name's words. After a bar, either cell may be in backticks or quotes
(`_CELL_QUOTE`; 2026-12-06, u: `│ DB_PASSWORD │ X │` and `` | `DB_PASSWORD` | `X` | ``
were kept). Each rule is led by a literal or a class, which `re` scans for: led by `^`
or by alternatives (`_LINE`'s way) the twenty searched /usr/share/doc 2-3x as long
(12-06, t)."""
_CELL_END = rf"(?={_CELL_QUOTE}[ \t]*(?:{_BAR}|\\[nr]|\\?\"|\r?$))"
"""Where a cell's value ends: a closing backtick or quote, blanks, then the next bar or
the line's end (also as a JSON string writes it, `\\r\\n` or the string's closing
quote). A cell of more than one word is prose (`| token | the API token |`)."""
_MASK = r"(?!\*{3})"
"""Not a value a tool masks (`****************wxyz`: `aws configure list`)."""
_VERSION = r"v?\d+(?:\.\d+)+(?:[-.+]?[A-Za-z]+\d*)*"
"""A version (`2.10.0rc1`): what follows a package's name in a listing (`pip list`'s
`django-secret-key  2.10.0rc1`)."""
_ALIGNED_SEP = r"(?:[ \t]{2,}|(?:\t|\\t)(?:[ \t]|\\t)*)"
"""Between a name and its value in a whitespace-aligned `NAME   VALUE` line (2026-12-06,
u: `env | column -t -s=`, rich's borderless tables, `docker inspect`-style listings were
kept): two blanks or a tab (`\\t` in a JSON string), the name all of the first column."""
_ALIGNED_END = r"(?=[ \t]*(?:\\[nr]|\\?\"|\r?$)|[ \t]{2}|\t|\\t)"
"""Where a value of a whitespace-aligned listing ends: the line's end, or two blanks or
a tab (the next column)."""


_CELL_VC = r"[^\s\x00-\x1f\x7f'\"`\\|<>]"
"""A character of a table cell's value: `_VC`'s and `(`, `)`, `[`, `]`, `{`, `}`, `,`,
`;`, `&`, which a cell's bars bound as a dotenv line's blanks do (`_assigned`)."""


def _cell_value(least: int, letter: bool, end: str) -> str:
    """A value in a table's cell, ending at `end`: as after `password:` (`_value`,
    unquoted), or, holding `(`, `,`, `;`, a bracket or `&` (2026-12-07, a: `|
    DB_PASSWORD | pa(ss,wo;rd9X |` was kept), all the cell's word when it holds a digit
    or a symbol (`_SYM`: `read,write,admin`, a list, is kept) and is no code
    (`varchar(64)`, `decimal(10,2)`, `get_password()`, `Optional[str]`: `_code`)."""
    v, n = _CELL_VC, _MAX
    held = (
        rf"(?={v}{{0,{n}}}?[(),;\[\]{{}}&])(?={v}{{0,{n}}}?{_SYM})"
        + (f"(?={v}{{0,{n}}}?[A-Za-z])" if letter else "")
        + rf"{_NOT_VALUE}(?!{_code(v)})(?=({v}{{{least},{n}}}){end}){v}{{{least}}}"
    )
    return f"(?:{_value(least, letter, forms='u', end=end)}|{held})"


def _cells(name: str, least: int, letter: bool = False) -> tuple[str, ...]:
    """`name` (a credential's, `_PASSWORD`...) as all of a table's cell, and the value in
    the next cell (2026-12-06, t: `| DB_PASSWORD | s3cr3tValue9 |`, psql's `password |
    hunter2xyz` were kept: a name and its value with no `=` or `:` between them), or as
    a line's first column of blank-aligned columns (`_ALIGNED_SEP`). The value is read
    as after `password:` (`_value`, unquoted): a literal of `least` characters or more, so
    a type, a word or code in the cell (`| password | required |`, `| api_key | string
    |`, `| token | varchar(64) |`, `| secret_key | settings.KEY |`) is kept, and a mask or
    a version; the name may follow other name characters (`DB_`, `spring.datasource.`).
    A line's first cell is read once for both forms (the lead's lookahead at every line
    start costs what the rest of the rule does)."""
    value = _MASK + _cell_value(least, letter, _CELL_END)
    aligned = f"{_ALIGNED_SEP}{_MASK}(?!{_VERSION}{_ALIGNED_END})" + _cell_value(
        least, letter, _ALIGNED_END
    )
    (lead, sep), *lines = _CELL_LEADS
    whole = "[A-Za-z0-9_.-]{0,64}?" + name
    return (
        lead + whole + sep + value,
        *(line + whole + f"(?:{sep}{value}|{aligned})" for line, sep in lines),
    )


_GATE_BARS = (
    *(q + b + c for q in ("", "`", '"', "'", '\\"') for b in ("", " ") for c in _BARS),
    *("\\u25", " \\u25"),  # a bar's JSON escape (`_BAR_ESCAPES`), unquoted
)
_GATE_LINE_ENDS = (" \n", " \r", " \\n", " \\r", "\n-", "\r\n-", "\\n-", "\\r\\n-")


def _cell_gates(*ends: str, header: bool = False) -> tuple[str, ...]:
    """Gates of `_cells`' rules: how the name ends (the last two letters of one of its
    words, `ends`, in any case) right before a bar, before a blank and the bar (a closing
    backtick or quote before either), or before two blanks or a tab (a padded cell, a
    listing's column). A text holding no such cell passes none: gated by the name's word
    (`key`, `token`) as the other name rules are, or by `  |`, the twenty ran on most
    texts (on /usr/share/doc, 20x as many as these gates open; 12-06, t). `header`: the
    gates of a column's header (`_column`): a bar, two blanks, or the line's end after a
    blank (psql pads its header), before a rule's `-` (sqlite3's `-column`), or after a
    name in capitals (kubectl's); not after any word ending a line (`word\\n`: the rules
    ran on a third of /usr/share/doc's texts, 12-06, u)."""
    cased = ["".join(p) for e in ends for p in itertools.product(*((c, c.upper()) for c in e))]
    if not header:
        return tuple(e + a for e in cased for a in (*_GATE_BARS, "  ", "\t", " \t", "\\t"))
    after = (*_GATE_BARS, "  ", "\t", "\\t", *_GATE_LINE_ENDS)
    caps = tuple(e.upper() + a for e in ends for a in ("\n", "\r", "\\n", "\\r"))
    return tuple(e + a for e in cased for a in after) + caps


_HEADER_END = (
    rf"(?:{_CELL_QUOTE}[ \t]*{_BAR}|[ \t]{{2}}|\t|\\t|[ \t]*(?:\r?\n|\\r\\n|\\n)"
    rf"(?:[ \t]*(?:[-=+:]|{_BAR}|─|━|═|[\\]u25[0-7][0-9a-fA-F])|[^\n]{{0,200}}?(?:[ \t]{{2}}|\t|\\t)))"
)
"""After a column's name in a table's header row: a bar (a quote before it), a padding,
or the line's end and a table's next line (a rule, a bar, or columns aligned by blanks:
not a web tree's runs of text joined, `password\\nfield is optional`)."""
_JSON_BREAK = re.compile(r"\\r\\n|\\[nr]")
_RAW_BREAK = re.compile(r"\r?\n")
_JSON_QUOTE = re.compile(r'(?<!\\)"')
_RULE_LINE = re.compile(r"[ \t]*[-=+:|\u2500-\u257f][-=+:|\u2500-\u257f \t]*")
_RULE = re.compile("-{2}|={3}|\u2500{3}|\u2501{3}|\u2550{3}")
_SPACED = re.compile(r"[^ \t]+(?: [^ \t]+)*")
_COLUMN_ROWS = 10_000
"""Rows of a column read below its header at most (a bound on a table's cost)."""


def _rule(line: str) -> bool:
    """A table's rule: `----+----`, `+----+`, `|----|`, `├──┼──┤`, `┡━━╇━━┩`, `--  ----`."""
    line = _box(line)  # `\u2500` in a JSON string
    return _RULE_LINE.fullmatch(line) is not None and _RULE.search(line) is not None


def _lines(text: str, at: int) -> Iterator[tuple[int, int]]:
    """(start, end) of the line holding `at` and of those after it, as the text breaks
    them: by newlines, or by `\\n` and `\\r\\n` escapes when the line lies in a JSON string
    (a terminal's raw stream in `state_json`), up to the string's closing quote. Lazily:
    a cell's rule reads a line or two after its match (`_wrapped`)."""
    raw, esc = text.find("\n", at), _JSON_BREAK.search(text, at)
    in_json = esc is not None and (raw < 0 or esc.start() < raw)
    if in_json:
        before = [m.end() for m in _JSON_BREAK.finditer(text, max(0, at - 4096), at)]
        opened = [m.end() for m in _JSON_QUOTE.finditer(text, max(0, at - 4096), at)]
        start = max([0, *before, *opened])
        close = _JSON_QUOTE.search(text, at)
        stop = close.start() if close else len(text)
    else:
        start, stop = text.rfind("\n", 0, at) + 1, len(text)
    breaks = _JSON_BREAK if in_json else _RAW_BREAK
    for _ in range(_COLUMN_ROWS + 1):
        m = breaks.search(text, start, stop)
        yield start, m.start() if m else stop
        if m is None:
            return
        start = m.end()


_BOX_ESCAPE = re.compile(r"\\u(25[0-7][0-9a-fA-F])")
_TAB = re.compile(r"\t|(?<!\\)\\t")
"""Between a tab-separated row's fields (`mysql -B`, `psql -A -F $'\\t'`, sqlite3's
`-separator $'\\t'`): a tab, or `\\t` in a JSON string (not an escaped backslash's `t`)."""
_TAB_FIELD = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""A tab-separated header's field: a column's name (`ls -C` pads its columns with tabs
too, and blanks: `password  zz`, an empty field, are no header's)."""


def _tab_head_gates(*words: str) -> tuple[str, ...]:
    """Gates of `_column`'s rules for a credential's name as a tab-separated header's last
    field (`user\\tpassword\\n`, `id\\tdb_password\\n`): the name's last word after a
    tab or a name's `_`, `-`, `.`, at a line's end. A bare `password\\n` opened them on a
    third of /usr/share/doc's texts (12-06, u); a regex gate for a tab before the name
    cost 4% of redaction's rate (a pass over every text, 2026-12-07, a)."""
    return tuple(
        lead + w + end
        for w in _cases(*words)
        for lead in ("\t", "\\t", "_", "-", ".")
        for end in ("\n", "\r", "\\n", "\\r")
    )


def _bar_spans(line: str) -> list[tuple[int, int]]:
    return [b.span() for b in _BAR_RE.finditer(line)]


def _box(line: str) -> str:
    """`line` with its box-drawing characters' JSON escapes (`\\u2500`) read."""
    return _BOX_ESCAPE.sub(lambda m: chr(int(m[1], 16)), line) if "\\u25" in line else line


def _between(bars: list[tuple[int, int]], width: int) -> list[tuple[int, int]]:
    """The cells (start, end) of a row of `width` characters between its `bars`."""
    return list(zip([0, *(e for _, e in bars)], [*(s for s, _ in bars), width], strict=True))


def _stripped(text: str, cs: int, ce: int) -> tuple[int, int]:
    """A cell's text without its padding, nor its quotes (`` `X` ``, `'X'`)."""
    while cs < ce and text[cs] in " \t":
        cs += 1
    while ce > cs and text[ce - 1] in " \t":
        ce -= 1
    if ce - cs >= 2 and text[cs] in "`'\"" and text[ce - 1] == text[cs]:
        cs, ce = cs + 1, ce - 1
    return cs, ce


def _column_cells(name: str, value: str, text: str, m: re.Match) -> list[tuple[int, int]]:
    """The values (`value`: a regex read on a whole cell) in the rows below a table's
    header cell that is all a credential's name (`name`) where `m` found it (2026-12-06,
    u: `SELECT username, password FROM users` as psql, mysql, sqlite3's `-box`,
    `-column`, `-markdown` and duckdb print it, `kubectl get secret -o custom-columns`,
    were kept). The header is a table's when a rule follows it, on the next line or the
    one after (duckdb's types), or, its columns aligned by blanks, when it is in capitals
    (kubectl's, docker's), or when its fields are names separated by tabs (`mysql -B`,
    `psql -A -F $'\\t'`; 2026-12-07, a). A bordered row's cell lies between the bars
    where the header's lies, or is the same cell counted by bars (a wide character shifts
    the bars; a bar may be written `\\u2502` in a JSON string); an aligned row's where
    the rule's dashes, else the header's column, lie; a tab-separated row's is the same
    field. A row that is no table's (no bar, a blank line, a misaligned column, another
    number of fields) ends the column. A value wrapped over lines in its cell (rich's
    `overflow="fold"`) is read joined, each piece redacted (`_pieces`)."""
    lines = _lines(text, m.start())
    (hs, he) = next(lines)
    at, head = m.start() - hs, text[hs:he]
    bars = _bar_spans(head)
    tabs = [] if bars else [(f.start(), f.end()) for f in _TAB.finditer(head)]
    fields = [head[a:b] for a, b in _between(tabs, len(head))]
    tabbed = len(fields) > 1 and all(_TAB_FIELD.fullmatch(f) for f in fields)
    if bars:
        cells = _between(bars, len(head))
    elif tabbed:
        cells = _between(tabs, len(head))
    else:
        cells = [(c.start(), c.end()) for c in _SPACED.finditer(head)]
    index = next((i for i, (a, b) in enumerate(cells) if a <= at < b), None)
    if index is None:
        return []
    a, b = cells[index]
    if _compiled(name).fullmatch(head[a:b].strip(" \t`'\"\\")) is None:
        return []
    rows = list(itertools.islice(lines, 3))
    ruled = [i for i, (s, e) in enumerate(rows[:2]) if _rule(text[s:e])]
    if ruled:
        skip = ruled[0] + 1
    elif tabbed or (not bars and len(cells) > 1 and not any(c.islower() for c in head)):
        skip = 0
    else:
        return []
    if not bars and not tabbed:
        if ruled:  # the rule's dashes give the column (psql's header is centred)
            rs, re_ = rows[ruled[0]]
            runs = [(r.start(), r.end()) for r in _SPACED.finditer(text[rs:re_])]
            a, b = next(((s, e) for s, e in runs if s <= at < e), (a, b))
        else:
            b = cells[index + 1][0] if index + 1 < len(cells) else 1 << 30
    lead = next((j for j, (x, y) in enumerate(cells) if head[x:y].strip()), 0)  # first column
    pieces: list[list[tuple[int, int]]] = []  # a value's pieces, one a line of its cell
    fills = False  # the last piece fills its cell: the value may go on below
    for s, e in itertools.chain(rows[skip:], lines):
        row = text[s:e]
        if not row.strip():
            break
        if _rule(row):  # between rows (`├──┼──┤`, `+---+`) or the table's end
            fills = False
            continue
        if bars:
            split = _bar_spans(row)
            if all(_BAR_RE.match(row, p) for p, _ in bars):
                row_cells = [(min(x, len(row)), min(y, len(row))) for x, y in cells]
            elif len(split) == len(bars):
                row_cells = _between(split, len(row))
            elif not split:
                break
            else:
                continue
        elif tabbed:
            row_cells = _between([f.span() for f in _TAB.finditer(row)], len(row))
            if len(row_cells) != len(cells):
                break
        else:
            if a > 0 and (len(row) < a or row[a - 1] not in " \t"):
                break
            row_cells = [(0, a), (a, min(b, len(row))), (min(b, len(row)), len(row))]
        i = index if bars or tabbed else 1
        cs, ce = _stripped(text, s + row_cells[i][0], s + row_cells[i][1])
        blank = [not row[x:y].strip() for x, y in row_cells]
        others = all(blank[:i] + blank[i + 1 :]) or (i != lead and blank[lead])
        on = bars and fills and cs < ce and others  # a line of the value above
        if on:
            pieces[-1].append((cs, ce))
        else:
            pieces.append([(cs, ce)])
        fills = bool(bars) and cs < ce and s + row_cells[i][1] - ce <= 1
    return _pieces(text, _compiled(value), pieces)


def _pieces(
    text: str, read: re.Pattern, values: list[list[tuple[int, int]]]
) -> list[tuple[int, int]]:
    """The spans of `values` (each the spans of its pieces, a line of its cell each) that
    `read` reads as a credential: a value of one piece, its groups; one wrapped over
    lines, all its pieces when its first piece or all of them joined read so (2026-12-07,
    a: rich folds a long cell, and only a first piece long enough was redacted)."""
    out = []
    for spans in values:
        first = read.match(text, *spans[0])
        if len(spans) > 1 and (first or read.match("".join(text[s:e] for s, e in spans))):
            out += [(s, e) for s, e in spans if s < e]
            continue
        for found in (read.match(text, s, e) for s, e in spans):
            if found is not None:
                out += [
                    found.span(g) for g in range(1, (found.lastindex or 0) + 1) if found.group(g)
                ]
    return out


def _wrapped(text: str, m: re.Match) -> list[tuple[int, int]]:
    """The groups of `_cells`' match `m` (a credential's value in a table's row), and the
    pieces of the value below it when it wraps over lines in its cell (rich's
    `overflow="fold"`, 2026-12-07, a): lines whose name cell is blank, the value's cell
    not, at the same bars (the piece above filling its cell) or, in a listing aligned by
    blanks, one word at the value's column (the pieces above as long as the first)."""
    spans = [m.span(g) for g in range(1, (m.lastindex or 0) + 1) if m.group(g)]
    if not spans:
        return spans
    vs, ve = spans[-1]
    lines = _lines(text, vs)
    ls, le = next(lines)
    line = text[ls:le]
    bars = _bar_spans(line)
    between = _between(bars, len(line))
    cell = next((k for k, (x, y) in enumerate(between) if x <= vs - ls < y), None)
    if bars and cell:  # the value's cell, after the name's
        edge = between[cell][1]
        if edge - (ve - ls) > 1:
            return spans
        for s, e in lines:
            row = text[s:e]
            if _bar_spans(row) != bars:
                break
            cells = _between(bars, len(row))
            cs, ce = _stripped(text, s + cells[cell][0], s + cells[cell][1])
            if row[slice(*cells[cell - 1])].strip() or cs == ce:
                break
            spans.append((cs, ce))
            if s + cells[cell][1] - ce > 1:
                break
    elif not bars:
        col, width = vs - ls, ve - vs
        for s, e in lines:
            row = text[s:e]
            word = _WORD_AT.match(row, col)
            if row[:col].strip() or word is None or row[word.end() :].strip():
                break
            spans.append((s + col, s + word.end()))
            if word.end() - col != width:
                break
    return spans


_WORD_AT = re.compile(r"[^\s\\]+(?=[ \t]*$)")


@functools.cache
def _compiled(pattern: str) -> re.Pattern:
    """`_column_cells`' regexes, compiled on first use (as `LazyPattern`s are)."""
    return re.compile(pattern)


def _column(
    kind: str, name: str, least: int, letter: bool, ends: tuple[str, ...], words: tuple[str, ...]
) -> tuple:
    """(kind, regex, group, gates, cells) of the rule reading a column below its header
    (`_column_cells`): the regex finds the header's cell, led by the name's last word."""
    whole = rf"[A-Za-z0-9_.-]{{0,64}}?{name}"
    value = _MASK + _cell_value(least, letter, r"\Z")
    cells = functools.partial(_column_cells, whole, value)
    gates = (*_cell_gates(*ends, header=True), *_tab_head_gates(*words))
    return kind, name + _HEADER_END, 0, gates, cells


_PAIR_Q = r"(?:\\{0,3}[\"'])?"
_PAIR_BETWEEN = (
    r"(?:[ \t]*,(?:[ \t\r\n]|\\{1,3}[rnt])*|[ \t]*(?:\r?\n|\\{1,3}r\\{1,3}n|\\{1,3}n)[ \t]*)"
)
"""Between a pair's name and its `value`: a comma (JSON, a dict's repr; pretty-printed
too, its line breaks escaped once or twice in JSON strings) or a line break (YAML's next
key)."""
_PAIR_VALUE_QUOTES = ("", '"', "'", '\\"', "\\'", '\\\\\\"', "\\\\\\'")
_PAIR_GATES = tuple(v + q + ":" for v in ("value", "Value") for q in _PAIR_VALUE_QUOTES)
"""Gates of `_pair`'s rules: `value` and its closing quote (none, escaped once or twice
in JSON strings), then `:`, as the rules read it."""
_TWICE_Q = r'\\\\\\"'
"""A quote in a JSON string inside a JSON string (`\\\\\\"`: a tool's arguments holding a
JSON text): what opens and closes a value there."""
_PAIR_SKIP = r"""(?:\\{0,3}["'])?[^\s"'\\]{1,512}"""
"""A pair's value, quoted or not, as a `value` before its `name` is read past (one holding
a quote, a backslash or a blank is not)."""


def _twice_value(least: int, letter: bool) -> str:
    """A value in `_TWICE_Q` quotes, read as `_value` reads a quoted one (a literal: a
    digit or a symbol, or 16 letters of both cases that read as no words; no placeholder,
    template or class), of characters that are no quote, backslash or blank. Kept small:
    with `_value`'s unquoted form here, hyperscan refused the pair rules as too long where
    the screen compiles the rules as they stand (a user's rule it cannot rewrite for
    UTF-8), and every record was redacted whole (2026-12-07, b)."""
    c, n, end = r"[^\s\"'\\]", _MAX, f"(?={_TWICE_Q})"
    sym = f"(?={c}{{0,{n}}}?{_SYM})"
    mixed = f"(?!{_WORDS}{end})(?={c}{{0,{n}}}?[a-z])(?={c}{{0,{n}}}?[A-Z])(?={c}{{16}})"
    return (
        _TWICE_Q
        + _NOT_VALUE
        + f"(?!{_CAMEL}{end})"
        + (f"(?={c}{{0,{n}}}?[A-Za-z])" if letter else "")
        + f"(?:{sym}|{mixed})(?=({c}{{{least},{n}}}){end}){c}{{{least}}}"
    )


def _lead(word: str) -> str:
    """`word` (`name`, `key`, `value`) as a whole word in either case of its first letter,
    led by its other letters (`ame`), a literal `re` searches for ~6x as fast as it scans
    for a class (2026-12-07, b, /usr/share/doc's texts holding `value:`: `[Nn]ame` ~180
    MB/s, `ame` ~1 GB/s; a pass for each of the twelve pair rules), the first letter
    looked behind for."""
    first = f"[{word[0].upper()}{word[0]}]{word[1:]}"
    return word[1:] + f"(?<={first})" + _bounded((first,), r"\w-")


def _pair(name: str, least: int, letter: bool = False) -> tuple[str, ...]:
    """`name` (a credential's, `_PASSWORD`...) as all of a name/value pair's `name` (or
    `key`), and its `value`, read as after `password:` (`_value`): Kubernetes' and ECS's
    `env` (`{"name": "DB_PASSWORD", "value": "X"}`, `- name: DB_PASSWORD` then `value:
    X`), HAR's and Postman's headers (`{"name": "x-api-key", "value": "X"}`). 2026-12-07,
    a hunt: all were kept; 12-07, b: a `value` before its `name` (`{"value": "X", "name":
    "DB_PASSWORD"}`, as Go's and Java's encoders order a struct's fields), and a pair in a
    JSON string inside a JSON string (`\\\\\\"value\\\\\\": \\\\\\"X\\\\\\"`), were kept.
    Led by the pair's `name`, `key` or `value` (one rule each: `_lead`); a `value` before
    its name is read when a lookahead finds the name after it, as all of the pair's `name`
    or `key` (`_PAIR_SKIP`)."""
    value_q = r"""(?:["']|\\["']|\\\\\\["'])?"""  # as `_PAIR_VALUE_QUOTES`
    value = f"(?:{_value(least, letter)}|{_twice_value(least, letter)})"
    whole = rf"{_PAIR_Q}[A-Za-z0-9_.-]{{0,64}}?{name}{_PAIR_Q}"
    rest = rf"{_PAIR_Q}[ \t]*:[ \t]*{whole}{_PAIR_BETWEEN}{_PAIR_Q}[Vv]alue{value_q}:[ \t]*"
    named = tuple(_lead(word) + rest + _YAML_TAG + value for word in ("name", "key"))
    after = (
        rf"(?={_PAIR_SKIP}{_PAIR_Q}{_PAIR_BETWEEN}{_PAIR_Q}(?:[Nn]ame|[Kk]ey){_PAIR_Q}[ \t]*:"
        rf"[ \t]*{whole}[ \t]*(?:[,}}\]\r\n]|\\{{1,3}}[rn]|\Z))"
    )
    return (*named, _lead("value") + value_q + ":[ \t]*" + _YAML_TAG + after + value)


_XML_NS = r"(?:[A-Za-z_][\w.-]{0,32}:)?"
_XML_PREFIX = r"[\w.-]{0,64}?"


def _element(tag: str, least: int, letter: bool = False) -> str:
    """An XML element whose tag is a credential's name (`tag`: the name, and the tag's
    `>`), and its text to the closing tag's `</`, read as a table's cell (`_cell_value`:
    the element's bounds are the value's, as the bars are a cell's): Maven's and NuGet's
    `<password>X</password>`, `<apiKey>`, `<access_key>`, an STS response's
    `<SecretAccessKey>` (2026-12-07, b: kept, a name followed by `>` being no name
    of `_SEP`'s). Led by `<`; a tag with attributes, an empty or self-closing element, a
    value on its own lines or in CDATA are not read."""
    return f"<{_XML_NS}(?:{tag})" + _MASK + _cell_value(least, letter, "(?=</)")


def _element_gates(*words: str) -> tuple[str, ...]:
    """Gates of `_element`'s rules: a tag's name ending in one of `words` (`_cases`) and
    `>`."""
    return tuple(w + ">" for w in _cases(*words))


_KUBE_USER = (
    r"user(?:(?<![\w-]user)[ \t]*:[ \t]*(?:\r?\n|\\r\\n|\\n)"
    r"(?:[ \t]+[\w.-]+:[^\n\\]{0,8192}(?:\r?\n|\\r\\n|\\n)){0,8}?[ \t]+token[ \t]*:"
    r"|(?<=\"user)\\{0,3}\"[ \t]*:[ \t]*\{[^{}]{0,4096}?\\{0,3}\"token\\{0,3}\"[ \t]*:)"
    r"[ \t]*"
)
"""A kubeconfig's user and the `token` it authenticates with (`kubectl config view
--raw`, `~/.kube/config`; a static or bootstrap token, `abcdef.0123456789abcdef`): in
YAML, `token:` among the keys of the mapping below `user:`; in JSON, `"token"` in the
object after `"user"` (2026-12-07, b: kept; a bare `token:` is a tokenizer's as often,
which `_TOKEN` leaves). Its `client-key-data` is base64 of a PEM key
(`_BASE64_PRIVATE_KEY`)."""
_BASE64_PRIVATE_KEY = (
    r"(?=(LS0tLS1CRUdJTi[A-Za-z0-9+/]*={0,2}))"
    r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{0,40}?(?:UFJJVkFURSBLRV|BSSVZBVEUgS0VZ|QUklWQVRFIEtFW)"
)
"""base64 of a PEM private key: of `-----BEGIN `, then of `PRIVATE KEY` at any of its three
alignments, the run read whole in a lookahead (group 1, as `_taken` reads a key): a
kubeconfig's `client-key-data`, a Kubernetes TLS secret's `tls.key`, a `.env`'s key kept
base64 on one line (2026-12-07, b: kept). Wrapped over lines (`base64` without `-w0`),
the lines after the first are not read."""


_PASSWORD_OWNERS = ("db", "database", "admin", "root", "user", "login", "account", "master",
                    "new", "old", "current", "proxy", "smtp", "mail", "email", "registry",
                    "keystore", "store", "key", "ldap", "bind", "redis", "mysql", "postgres",
                    "pg", "app", "api", "client", "service", "vnc", "wifi")  # fmt: skip
CREDENTIAL_OPTIONS = {
    "password": ("password", "passwd", "pass", "pwd", "passphrase",
                 *(f"{w}-{p}" for w in _PASSWORD_OWNERS for p in ("password", "pass", "pwd"))),
    "token": ("token", *(f"{w}-token" for w in _TOKEN_WORDS), "personal-access-token"),
    "secret_key": ("secret", *(f"{w}-secret" for w in _SECRET_WORDS), "secret-key",
                   "secret-access-key", "aws-secret-access-key"),
    "api_key": ("api-key", "apikey", *(f"{w}-key" for w in _KEY_WORDS if w != "api"),
                "access-key", "auth-key", "license-key"),
}  # fmt: skip
"""Kind -> the whole names of command-line options whose value is a credential whatever
its shape (2026-12-06, z: `--password hunterlong`, `--api-key abcdefghij`, `--client-secret
abcdefghijk` were kept: a value of no digit or symbol after a name reads as a word, as
`password: string` does, and the option names it a secret; 12-06, t: `--pass X`, `--pwd X`,
`--db-pass X`, the short names `command_secrets` already took; 12-07, b: gpg's
`--passphrase X`, as `gpg --batch` takes it). Whole names from a fixed list,
each a credential's word after the name of what it belongs to: not `--password-file` or
`--token-limit` (another word ends them), nor `--no-password`, `--eos-token`,
`--page-token`, `--sort-key`, `--pass-through`, `--two-pass` (a flag, a tokenizer's or a
cursor's token, an encoder's pass, no credential:
their values are read by the rules of any option, a literal's shape wanted). The value is
taken as a password after `mysql -p` is (`_value`, not `shaped`), 6 or more characters for
a password (x264's `--pass 2`, a pass's number, is kept), 8 with a letter for the others,
unless it is help's or prose's (`_NO_OPTION_VALUE`)."""
_NO_OPTION_VALUE = (
    r"--?[A-Za-z][\w-]*|[A-Z]+(?:[_-][A-Z]+)*|[\w.-]*\.[A-Za-z][A-Za-z0-9]{0,4}|(?:"
    + "|".join((
        "string", "strings", "text", "value", "values", "integer", "boolean", "option",
        "options", "flag", "flags", "argument", "arguments", "parameter", "parameters",
        "switch", "instead", "required", "optional", "default", "defaults", "prompt",
        "environment", "variable", "variables", "specified", "provided", "supplied",
        "together", "without", "should", "cannot", "requires", "expects", "accepts",
        "overrides", "followed", "because", "before", "secrets", "tokens", "passwords",
        "apikey", "interactive", "interactively", "directly", "explicitly", "setting",
        "settings", "field", "header", "passphrase",
    ))
    + r")[.,:;!?]?"
)  # fmt: skip
"""What follows a credential option but is none (`CREDENTIAL_OPTIONS`): the next option
(also quoted, a list's item: `["--token", "--verbose"]`), a file's name (`"--private-key",
"id_rsa.pem"`; unquoted, `_CODE` keeps it), a metavar of
help text, in capitals (argparse's `--api-key API_KEY`, click's `--token TEXT`; `<token>`
and `$TOKEN` are kept by every rule), a type (cobra's `--password string`), a word of prose
(`use --password instead`, `the --token option`, `--api-key argument`), the word for what
`--pass` takes in help (`-P|--pass  passphrase`, /usr/share/doc's IO::Socket::SSL examples)."""


def _credential_option(kind: str) -> tuple[str, str, int, tuple[str, ...]]:
    """(kind, regex, group, gates) of the options of `CREDENTIAL_OPTIONS[kind]` and their value
    of any shape."""
    names = sorted(CREDENTIAL_OPTIONS[kind], key=len, reverse=True)
    least, letter = (6, False) if kind == "password" else (8, True)
    value = _value(least, letter, shaped=False, end=_OPT_END, kept=_NO_OPTION_VALUE)
    last = {"password": ("pass", "pwd"), "token": ("token",), "secret_key": ("secret",),
            "api_key": ("key",)}[kind]  # fmt: skip
    return kind, rf"--(?:{'|'.join(map(re.escape, names))}){_OPT_SEP}{value}", -1, last


_CREDENTIAL_OPTION_RULES = tuple(map(_credential_option, CREDENTIAL_OPTIONS))


_AWS_SEP = r"(?:\s*(?:=|:|=>|\|)\s*|(?:\s|\\[nrt])+)"
"""Between an AWS credential's name and its value: `=`, `:`, `=>`, a table's `|` (`aws
sts get-session-token --output table`: `|  SecretAccessKey  |  KEY  |`), or only
whitespace (`aws configure set aws_secret_access_key KEY`, the key on the line after
`aws configure get`'s)."""
_AWS_TEXT_SEP = r"(?:\t|\\t)"
_AWS_TEXT_ROW = (
    r"A(?:KIA|SIA)[A-Z0-9]{16}"
    + _AWS_TEXT_SEP
    + r"(?:\d{4}-\d\d-\d\d[0-9T:.+Z-]{0,24}"
    + _AWS_TEXT_SEP
    + r")?(?=[A-Za-z0-9+/]{0,39}[a-z])(?=[A-Za-z0-9+/]{0,39}[A-Z])"
    r"([A-Za-z0-9+/]{40})(?![A-Za-z0-9+/=])"
)
"""An access key id, a tab, a date (or none) and a tab, then the secret access key: `aws
... --output text`'s credentials row (`BUILTIN`)."""
_AWS_PROMPT = (
    r"AWS Secret Access Key(?: \[[^\]\r\n]{0,64}\])?:[ \t]*"
    r"((?:[A-Za-z0-9+]|\\{0,3}/){40})(?![A-Za-z0-9/+]|\\+/)"
)
"""`aws configure`'s prompt and the key typed after it: `AWS Secret Access Key [None]: `,
`[****************ABCD]: ` (`BUILTIN`)."""
_MIXED = r"(?=[a-z0-9]*[A-Z])(?=[A-Z0-9]*[a-z])"
"""Both cases ahead, among letters and digits: a generated key has them, a name after a
short prefix (`hf_hub_download`, `fw_version`, `r8_register`) has not."""
PROVIDER_KEYS = (
    # (2026-12-05, hunt: these reached raw, processed and exported data verbatim; shapes
    # as the providers issue them, gitleaks' rules where it has one). OpenRouter: the
    # `openai_key` rules stop at `sk-or-`'s hyphens
    ("openrouter_key", _start("sk-or-v1-") + r"[a-f0-9]{64}" + _E, 0, ("sk-or-v1-",)),
    ("groq_key", _start("gsk_") + _MIXED + r"[A-Za-z0-9]{40,}" + _E, 0, ("gsk_",)),
    ("xai_key", _start("xai-") + _MIXED + r"[A-Za-z0-9]{60,}" + _E, 0, ("xai-",)),
    ("perplexity_key", _start("pplx-") + _MIXED + r"[A-Za-z0-9]{40,}" + _E, 0, ("pplx-",)),
    ("replicate_token", _start("r8_") + _MIXED + r"[A-Za-z0-9]{37,}" + _E, 0, ("r8_",)),
    ("fireworks_key", _start("fw_") + _MIXED + r"(?=[A-Za-z]*\d)[A-Za-z0-9]{20,}" + _E, 0,
     ("fw_",)),
    ("google_oauth_client_secret", _start("GOCSPX-") + r"[A-Za-z0-9_-]{24,}", 0, ("GOCSPX-",)),
    # HashiCorp Vault service and batch tokens (`hvs.CAESI...`: 90 and 138 or more, as
    # Vault issues them; a shorter one after a name is a `token`, `VAULT_TOKEN=hvs.x...`)
    ("vault_token", _start(r"hvs\.") + r"[A-Za-z0-9_-]{90,}", 0, ("hvs.",)),
    ("vault_token", _start(r"hvb\.") + r"[A-Za-z0-9_-]{138,}", 0, ("hvb.",)),
    ("databricks_token", _start("dapi") + r"[a-f0-9]{32}(?:-\d)?" + _E, 0, ("dapi",)),
    ("tailscale_key",
     _start("tskey-") + r"(?:auth|api|client|webhook|scim)-[A-Za-z0-9]{4,}-[A-Za-z0-9]{16,}" + _E,
     0, ("tskey-",)),
    ("linear_key", _start("lin_api_") + r"[A-Za-z0-9]{40,}" + _E, 0, ("lin_api_",)),
    ("notion_token", _start("ntn_") + r"\d{11}[A-Za-z0-9]{35,}" + _E, 0, ("ntn_",)),
    ("supabase_token", _start("sbp_") + r"[a-f0-9]{40}" + _E, 0, ("sbp_",)),
    # Sentry: an org token is `sntrys_` + base64 of its JSON claims + `_` + its secret
    ("sentry_token", _start("sntrys_") + r"eyJ[A-Za-z0-9+/=_]{60,}", 0, ("sntrys_",)),
    ("sentry_token", _start("sntryu_") + r"[a-f0-9]{64}" + _E, 0, ("sntryu_",)),
    ("postman_key", _start("PMAK-") + r"[a-fA-F0-9]{24}-[a-fA-F0-9]{34}" + _E, 0, ("PMAK-",)),
    # Doppler: personal, CLI, service (after its environment's slug) and service
    # account tokens
    ("doppler_token",
     _start(r"dp\.(?:pt|ct|st|sa)\.") + r"(?:[a-z0-9_-]{1,40}\.)?[A-Za-z0-9]{40,}" + _E, 0,
     ("dp.pt.", "dp.ct.", "dp.st.", "dp.sa.")),
    ("grafana_token", _start("glsa_") + r"[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}" + _E, 0, ("glsa_",)),
    # age: bech32, upper case
    ("age_secret_key", "AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}(?![A-Z0-9])", 0,
     ("AGE-SECRET-KEY-1",)),
)  # fmt: skip
"""(kind, regex, group, gates) of keys of providers' own prefixed shapes (part of
`BUILTIN`): each literal prefix is a gate, each shape anchored at its start (`_start`)
and end (`_E`), so a prefix in a word, a short value or a name stays."""


def _taken(literal: str, tail: str, shown: str) -> str:
    """A key that is `literal` and `tail` (group 1, read in a lookahead), of which `literal`
    and `shown` (bounded) are matched: the batch screen reads a rule without its
    lookarounds and a column's strings back to back, so a tail of base64 (`+/=`) or
    `_-`, which `Detector.extend` does not read on over, would run on into the next
    string and flag it too (2026-12-07, b: a key ending an observation flagged the clean
    record after it). Led by a lookahead, the rule is searched ~30x slower than one led by
    its literal: on the texts holding the literal (its gate) only."""
    return f"(?=({_start(literal)}{tail})){literal}{shown}"


SERVICE_KEYS = (
    # (2026-12-07, b: the hunt's last finding; kept verbatim) keys of the services an
    # agent is wired to: tracing (LangSmith, Langfuse), inference (Together, NVIDIA,
    # Bedrock), search (Tavily), vector stores (Pinecone), sandboxes (E2B), webhook
    # signing secrets (Stripe's and Svix's `whsec_`), Atlassian, Vercel, New Relic,
    # Pulumi, 1Password. Shapes as issued (gitleaks' rules where it has one), longer
    # ones allowed: a bounded match of letters and digits goes on over the rest of the
    # key (`Detector.extend`), one of base64 or `_-` is read whole in a lookahead
    # (`_taken`)
    ("langsmith_key", _start("lsv2_(?:pt|sk)_") + r"[A-Za-z0-9]{24,}_[A-Za-z0-9]{6}", 0,
     ("lsv2_pt_", "lsv2_sk_")),
    ("langfuse_key", _start("sk-lf-") + r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
     r"[0-9a-f]{12}" + _E, 0, ("sk-lf-",)),
    ("webhook_secret",
     _taken("whsec_", r"[A-Za-z0-9+/]{24,}={0,2}(?![A-Za-z0-9_+/=-])", "[A-Za-z0-9+/]{24}"), 1,
     ("whsec_",)),
    ("atlassian_token",
     _taken("ATATT3", r"[A-Za-z0-9_=-]{100,}(?![A-Za-z0-9_=-])", "[A-Za-z0-9_=-]{100}"), 1,
     ("ATATT3",)),
    ("together_key", _taken("tgp_v1_", r"[A-Za-z0-9_-]{30,}", "[A-Za-z0-9_-]{30}"), 1,
     ("tgp_v1_",)),
    ("nvidia_key", _taken("nvapi-", r"[A-Za-z0-9_-]{40,}", "[A-Za-z0-9_-]{40}"), 1, ("nvapi-",)),
    ("tavily_key", _start("tvly-") + r"(?:dev-|prod-)?" + _MIXED + r"[A-Za-z0-9]{24}", 0,
     ("tvly-",)),
    ("pinecone_key", _start("pcsk_") + r"[A-Za-z0-9]{4,10}_[A-Za-z0-9]{40}", 0, ("pcsk_",)),
    ("e2b_key", _start("e2b_") + r"[a-f0-9]{40}" + _E, 0, ("e2b_",)),
    ("vercel_token", _start("vc[aikpr]_") + _MIXED + r"[A-Za-z0-9]{24}", 0,
     ("vca_", "vci_", "vck_", "vcp_", "vcr_")),
    ("vercel_token", _start("vercel_") + _MIXED + r"[A-Za-z0-9]{24}", 0, ("vercel_",)),
    ("newrelic_key", _start("NR(?:AK|II)-") + r"[A-Za-z0-9]{27}", 0, ("NRAK-", "NRII-")),
    ("pulumi_token", _start("pul-") + r"[a-f0-9]{40}" + _E, 0, ("pul-",)),
    ("aws_bedrock_key",
     _taken("ABSK", r"[A-Za-z0-9+/]{100,}={0,2}(?![A-Za-z0-9+/=])", "[A-Za-z0-9+/]{100}"), 1,
     ("ABSK",)),
    ("onepassword_token", _taken("ops_", r"eyJ[A-Za-z0-9+/]{200,}={0,3}", "eyJ[A-Za-z0-9+/]{200}"),
     1, ("ops_eyJ",)),
)  # fmt: skip
"""(kind, regex, group, gates) of more keys of providers' own prefixed shapes, as
`PROVIDER_KEYS` (part of `BUILTIN`)."""
_JOINED = r"\"[ \t]*(?:[+.,][ \t]*)?(?:(?:\r?\n|\\{1,3}[rn])[ \t]*)*\\{0,3}\""
"""Between two string literals a key's lines are written in: a closing quote, blanks, a
concatenation's `+` (`.` in PHP) or a list's `,`, line breaks (also a JSON string's
`\\n`), the next opening quote (escaped in a JSON string). 2026-12-07, a hunt: a Python
fixture's `("-----BEGIN RSA PRIVATE KEY-----\\n" "MIIE...\\n" ...)` kept its whole body,
the block's rule stopping at the first quote. Each join reads one way only, so a block
without its end is given up in linear time."""
_KEY_LITERAL = r"[A-Za-z0-9+/=]{4,}(?:\\{1,4}[nr])*(?:\\{0,3}\"|\Z)"
"""A string literal holding a line of a key's base64 (and its `\\n`, `\\\\\\\\n` in JSON
escaped twice), closed or cut at the text's end: what a private key cut short (no
`-----END` line) reads on into after a `_JOINED` (2026-12-07, b: such a key kept every
line after its first literal). Prose or code in the next literal ends it."""
_SCHEMES = (("://", "://"), (r":\\(?<=[A-Za-z0-9]:\\)\\{0,2}/\\{1,3}/", ":\\"))
"""(regex, gate) of a URL's `://`, and of it written `:\\/\\/` as PHP's `json_encode` writes
JSON, and so again inside a JSON string (`:\\\\/\\\\/`: such JSON in a terminal's raw
stream), after a scheme's last letter or digit (a JavaScript regex's `(?:\\/\\/` is no
URL). Two rules, each led by its literal: one led by either searched URLs 2x slower."""
BUILTIN = (
    # A whole PEM/OpenSSH/PGP private key block, or a cut one up to where base64 ends;
    # `\\n` covers keys inside JSON strings (tool arguments, state).
    # Its lines may be string literals (`"-----BEGIN ...\\n" "MIIE...\\n"`: `_JOINED`).
    ("private_key",
     r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
     rf"(?:(?:[^\"]|{_JOINED}){{0,20000}}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
     rf"|(?:\\{{1,4}}[nrt]|[A-Za-z0-9+/=:,.\s-]|\\{{0,3}}{_JOINED}(?={_KEY_LITERAL}))*)", 0,
     ("PRIVATE KEY",)),
    # a PuTTY key file (`.ppk`), to its MAC
    ("private_key",
     rf"PuTTY-User-Key-File-\d+:(?:[^\"]|{_JOINED}){{0,20000}}?Private-MAC:[ \t]*[0-9a-fA-F]+",
     0, ("PuTTY-User-Key-File-",)),
    # base64 of a PEM private key on one line (a kubeconfig's `client-key-data`, `tls.key`)
    ("private_key", _BASE64_PRIVATE_KEY, 1, ("LS0tLS1CRUdJTi",)),
    ("anthropic_key", _start("sk-ant-") + r"[a-z]+\d*-[A-Za-z0-9_-]{20,}", 0, ("sk-ant-",)),
    ("openai_key", _start("sk-") + r"(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}", 0, ("sk-",)),
    ("openai_key", _start("sk-") + r"[A-Za-z0-9]{32,}" + _E, 0, ("sk-",)),
    ("github_token", _start("gh[pousr]_") + r"[A-Za-z0-9]{36,}" + _E, 0,
     ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    ("github_token", _start("github_pat_") + r"[A-Za-z0-9_]{22,}", 0, ("github_pat_",)),
    ("aws_access_key", "A" + _bounded(("A",), "A-Z0-9") + r"(?:3T[A-Z0-9]|KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Z0-9])", 0,
     _AWS_IDS),
    # a key named `aws..secret..` or `SecretAccessKey`/`secret_access_key` (what `aws sts`,
    # `aws configure export-credentials` and the metadata endpoints print)
    # after `_AWS_SEP` (a table's `|`, only whitespace, ...), `/` also written `\/` in
    # JSON (PHP's `json_encode`) and so again inside a JSON string
    ("aws_secret_key",
     r"(?i:aws[A-Za-z0-9_.-]{0,20}?secret|secret_?access_?key)[A-Za-z0-9_.-]{0,20}?" + _Q +
     _AWS_SEP + _Q + r"((?:[A-Za-z0-9+]|\\{0,3}/){40})(?![A-Za-z0-9/+]|\\+/)", 1, ("secret",)),
    # an STS session token (hundreds of base64 characters) beside its key: `SessionToken`,
    # `aws_session_token`, `aws_security_token`, the metadata endpoints' `"Token"`
    ("aws_session_token",
     r"(?i:(?:session|security)_?token|\\?\"token)" + _Q + _AWS_SEP + _Q +
     r"((?:[A-Za-z0-9+]|\\{0,3}/){100,}={0,2})(?![A-Za-z0-9/+=]|\\+/)", 1,
     ("sessiontoken", "session_token", "securitytoken", "security_token", '"token"',
      '"token\\"')),
    # `aws ... --output text`'s row of credentials (`CREDENTIALS`, `ACCESSKEY`: the key id,
    # a date, the secret key, the session token or a status, tab-separated; or as `--query`
    # picks them, the date left out): after the key id, the secret key of 40 characters
    # holding both cases, and the token after it (2026-12-07, a: only the key id was
    # redacted)
    ("aws_secret_key", _AWS_TEXT_ROW, 1, ("AKIA", "ASIA")),
    # `aws configure`'s prompt, the current value masked in brackets (2026-12-07, a hunt:
    # `AWS Secret Access Key [None]: KEY` was kept, the key id above it redacted)
    ("aws_secret_key", _AWS_PROMPT, 1, ("AWS Secret Access Key",)),
    ("aws_session_token", _AWS_TEXT_ROW + _AWS_TEXT_SEP + r"([A-Za-z0-9+/]{100,}={0,2})(?![A-Za-z0-9+/=])",
     2, ("AKIA", "ASIA")),
    ("google_api_key", _start("AIza") + r"[0-9A-Za-z_-]{35}" + _E, 0, ("AIza",)),
    # Stripe secret and restricted keys, live and test (detect-secrets: live only, and
    # only 24 of today's 99 characters); publishable keys (`pk_`) are meant to be public
    ("stripe_access_key", _start("[rs]k_(?:live|test)_") + r"[0-9A-Za-z]{24,}" + _E, 0,
     ("k_live_", "k_test_")),
    ("npm_token", _start("npm_") + r"[A-Za-z0-9]{36,}" + _E, 0, ("npm_",)),
    # Hugging Face: 34 letters, both cases (`hf_hub_download`, `hf_transfer` stay)
    ("huggingface_token", _start("hf_") + _MIXED + r"[A-Za-z0-9]{34,}" + _E, 0, ("hf_",)),
    ("digitalocean_token", _start("do[opr]_v1_") + r"[a-f0-9]{64}" + _E, 0, ("_v1_",)),
    # `xoxe-`: a rotating token's refresh token; `xapp-`: an app-level token
    ("slack_token", _start("xox[abposre]-") + r"[A-Za-z0-9-]{10,}", 0, ("xox",)),
    ("slack_token", _start("xapp-") + r"\d+-[A-Za-z0-9-]{10,}", 0, ("xapp-",)),
    ("google_oauth_token", _start(r"ya29\.") + r"[0-9A-Za-z_-]{20,}", 0, ("ya29.",)),
    ("docker_token", _start("dckr_[po]at_") + r"[A-Za-z0-9_-]{20,}", 0, ("dckr_",)),
    ("shopify_token", _start("shp(?:at|ca|pa|ss)_") + r"[a-fA-F0-9]{32}" + _E, 0,
     ("shpat_", "shpca_", "shppa_", "shpss_")),
    # an Azure SAS URL's signature (base64 of an HMAC, URL-encoded): the URL's credential
    ("azure_sas_token",
     r"(?:[?&;]|[\\]u0026)sig=((?:[A-Za-z0-9+/_-]|%[0-9A-Fa-f]{2}){30,}(?:=|%3[Dd]){0,2})", 1,
     ("sig=",)),
    # a pre-signed S3 or GCS URL's credentials (2026-12-06, a hunt: only the access key
    # id of `X-Amz-Credential` was redacted): the STS session token, percent-encoded in
    # the query or as it is in a header (`X-Amz-Security-Token: IQoJ...`, a JSON or dict
    # key), the signature (which grants the object's access until the URL expires: as
    # Azure SAS's `sig=`), and the GCS credential's account (an AWS credential's key id
    # has its own rule); the date, region and scope after it stay
    ("aws_session_token",
     r"(?i:x-amz-security-token)" + _Q + r"[ \t]*[:=][ \t]*(?:b?\\?[\"'])?"
     r"((?:[A-Za-z0-9+_-]|\\{0,3}/|%[0-9A-Fa-f]{2}){16,}(?:=|%3[Dd]){0,2})", 1,
     ("x-amz-security-token",)),
    ("url_signature", r"(?i:x-(?:amz|goog)-signature)" + _Q + r"[ \t]*[:=][ \t]*" + _Q +
     r"([0-9a-fA-F]{32,})(?![0-9A-Za-z])", 1, ("x-amz-signature", "x-goog-signature")),
    ("gcs_credential", r"(?i:x-goog-credential)" + _Q + r"[ \t]*[:=][ \t]*" + _Q +
     r"((?:[A-Za-z0-9._@+-]|%[013-9A-Fa-f][0-9A-Fa-f]|%2[0-9A-Ea-e]){4,})", 1,
     ("x-goog-credential",)),
    ("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]+", 0, ("hooks.slack",)),
    ("discord_webhook",
     r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api(?:/v\d{1,2})?/webhooks/\d{17,20}/"
     r"[A-Za-z0-9_-]{60,}", 0, ("/webhooks/",)),
    *PROVIDER_KEYS,
    *SERVICE_KEYS,
    # header and payload JSON objects: `{"` is `eyJ`, `{ "` (a space after the brace) `eyAi`
    ("jwt", _start("eyJ") + r"[A-Za-z0-9_-]{4,}\.ey(?:J|Ai)[A-Za-z0-9_-]{3,}\.[A-Za-z0-9_-]*",
     0, ("eyJ",)),
    ("jwt", _start("eyAi") + r"[A-Za-z0-9_-]{3,}\.ey(?:J|Ai)[A-Za-z0-9_-]{3,}\.[A-Za-z0-9_-]*",
     0, ("eyAi",)),
    ("bearer_token", r"(?i:bearer)" + _bounded((".{6}",), r"\w") + r"\s+((?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)", 1,
     ("bearer",)),
    # in an `Authorization` header, a Bearer token without a digit (20 or more characters,
    # both cases) and the `Token` scheme (Django REST framework, GitHub's classic tokens)
    ("bearer_token",
     r"(?i:authorization)" + _Q + r"\s*[:=]\s*" + _Q + r"(?:(?i:bearer)\s+"
     r"((?=[A-Za-z0-9._~+/-]*[a-z])(?=[A-Za-z0-9._~+/-]*[A-Z])[A-Za-z0-9._~+/-]{20,}=*)"
     r"|(?i:token)\s+((?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{20,}=*))", -1,
     ("authorization",)),
    # `Authorization` and `Proxy-Authorization` as a header, a JSON or dict key (the name's
    # closing quote before `:`, httpbin's `/headers` printed by Python) or with `=`
    # (2026-12-06: only `authorization:` then `Basic` was read)
    ("basic_auth",
     r"(?i:authorization)" + _Q + r"\s*[:=]\s*" + _Q + r"(?i:basic)\s+([A-Za-z0-9+/]{8,}={0,2})",
     1, ("basic",)),
    # the password runs to the last `@` before the host (`root:p@ss@db`); the user may be
    # empty (`redis://:PW@host`) or hold an `@` (`ftp://me@corp.example:PW@host`); `://`
    # also written `:\/\/` in JSON (PHP's `json_encode`; 2026-12-06)
    *(("url_password", scheme + r"[^\s:/\"'<>\[\]]*:([^\s/\"'<>]+)@", 1, (gate,))
      for scheme, gate in _SCHEMES),
    # a password holding `/` (read so by SQLAlchemy, redis-py: `mysql://root:a/b@host`),
    # for a user without `@`; a port (`host:8080/x@v2`) or a path is not a password
    *(("url_password",
       scheme + r"[^\s:/@\"'<>\[\]]*:(?!\d{0,5}\\{0,3}[/?#])([^\s/@\"'<>]*/[^\s@\"'<>]*)@", 1,
       (gate,)) for scheme, gate in _SCHEMES),
    # Values found by their names (`_value`), last: a value a shape rule also finds keeps
    # that rule's kind (`GITHUB_TOKEN=ghp_...` is a github_token). They hold no `(?i:`
    # (which would make the screen read their classes as 4-byte characters, `prefilter`):
    # their gates are the names in lower case, capitalised and in capitals (`_cases`).
    # Passwords: 6 or more characters after a password's name or option, a MySQL
    # client's `-p`, `sshpass -p`, a `.netrc` line's `login U password X`
    ("password", _PASSWORD + _SEP + _value(6), -1, _cases("pass", "pwd")),
    ("password", _option(_both("pass") + f"(?:{_both('word')}|{_both('wd')})")
     + _value(6, end=_OPT_END), -1, _cases("pass")),
    ("password", _MYSQL + _value(1, shaped=False), -1, ("mysql", "mariadb")),
    ("password", r"sshpass[ \t]+-p[ \t]*" + _value(1, shaped=False), -1, ("sshpass",)),
    ("password", "login" + _bounded(("login",), r"\w-") + r"[ \t]+\S+\s+password[ \t]+" + _value(1, shaped=False),
     -1, ("password",)),
    # the password in a command's grammar with no name before it (2026-12-04): curl's
    # `-u user:X`, a registry login's `-p X`, openssl's `pass:X`, SQL's `IDENTIFIED BY
    # 'X'` and PostgreSQL's `PASSWORD 'X'` (a string literal after the word)
    ("password", _CURL + _value(1, shaped=False), -1, ("curl",)),
    ("password", _USER_ARG, 1, ("-u", "-U")),
    ("password", _REGISTRY_LOGIN + _value(1, shaped=False), -1, ("login",)),
    ("password", r"-pass(?:in|out|word)?[ \t]+" + _Q + "pass:" + _value(1, shaped=False), -1,
     ("pass:",)),
    ("password", _IDENTIFIED + _value(1, shaped=False, forms="ds"), -1, _cases("identified")),
    ("password", _both("password") + r"[ \t]+" + _value(1, shaped=False, forms="s"), -1,
     _cases("password")),
    # a client's short option taking the password (`redis-cli -a X`: `PASSWORD_FLAGS`)
    *(("password", _password_flag(c, rest, f), -1, (c,)) for c, rest, f in PASSWORD_FLAGS),
    # keys, tokens, secrets: 8 or more characters, a letter among them, after a name or
    # an option: HTTP headers (`X-Api-Key: <hex>`, `X-Auth-Token`), environment and config
    # assignments (`DD_API_KEY=<32 hex>`, `CI_JOB_TOKEN=`, `JWT_SECRET=`)
    ("api_key", _API_KEY + _SEP + _value(8, letter=True), -1, _cases("key")),
    ("api_key", _option(_both("api") + "-?" + _both("key")) + _value(8, True, end=_OPT_END), -1,
     _cases("key")),
    ("token", _TOKEN + _SEP + _value(8, letter=True), -1, _cases("token")),
    ("token", _option(_both("token")) + _value(8, True, end=_OPT_END), -1, _cases("token")),
    ("secret_key", _SECRET + _SEP + _value(8, letter=True), -1, _cases("secret")),
    ("secret_key", _option(_both("secret")) + _value(8, True, end=_OPT_END), -1,
     _cases("secret")),
    # the options whose whole name says the value is a credential: any shape
    *_CREDENTIAL_OPTION_RULES,
    # a credential's name as all of a table's cell, the value in the next cell (`_cells`)
    *(("password", rx, -1, _cell_gates("rd", "wd", "ss"), _wrapped) for rx in _cells(_PASSWORD, 6)),
    *(("token", rx, -1, _cell_gates("en"), _wrapped) for rx in _cells(_TOKEN, 8, letter=True)),
    *(("secret_key", rx, -1, _cell_gates("et", "ey"), _wrapped) for rx in _cells(_SECRET, 8, letter=True)),
    *(("api_key", rx, -1, _cell_gates("ey"), _wrapped) for rx in _cells(_API_KEY, 8, letter=True)),
    # a credential's name as a column's header, the values in the rows below (`_column`)
    _column("password", _PASSWORD, 6, False, ("rd", "wd", "ss"), ("password", "passwd", "pass", "pwd")),
    _column("token", _TOKEN, 8, True, ("en",), ("token",)),
    _column("secret_key", _SECRET, 8, True, ("et", "ey"), ("secret", "key")),
    _column("api_key", _API_KEY, 8, True, ("ey",), ("key",)),
    # a credential's name as a pair's `name` (`key`), its `value` after it (`_pair`)
    *(("password", rx, -1, _PAIR_GATES) for rx in _pair(_PASSWORD, 6)),
    *(("token", rx, -1, _PAIR_GATES) for rx in _pair(_TOKEN, 8, letter=True)),
    *(("secret_key", rx, -1, _PAIR_GATES) for rx in _pair(_SECRET, 8, letter=True)),
    *(("api_key", rx, -1, _PAIR_GATES) for rx in _pair(_API_KEY, 8, letter=True)),
    # a credential's name as an XML element's tag, its text the value (`_element`)
    ("password", _element(rf"{_XML_PREFIX}{_PASSWORD}>|[Pp]assphrase>", 6), -1,
     _element_gates("password", "passwd", "pass", "pwd", "passphrase")),
    ("token", _element(rf"{_XML_PREFIX}{_TOKEN}>|[Tt]oken>(?=[^<\s]{{16}})", 8, letter=True), -1,
     _element_gates("token")),
    ("secret_key", _element(rf"{_XML_PREFIX}{_SECRET}>|[Ss]ecret>", 8, letter=True), -1,
     _element_gates("secret", "key")),
    ("api_key", _element(rf"{_XML_PREFIX}(?:{_API_KEY}|{_both('access')}[_-]?{_both('key')})>", 8,
                         letter=True), -1, _element_gates("key")),
    # a kubeconfig user's `token` (`_KUBE_USER`)
    ("token", _KUBE_USER + _value(8, letter=True), -1,
     ("token:", 'token":', 'token\\":', 'token\\\\\\":')),
    # the same names in capitals in a dotenv or shell assignment line, the value unquoted:
    # all of it to the first blank (2026-12-05: `DB_PASSWORD=k3vQ9xZp(2mT7wR4s9aB` was
    # kept, `API_TOKEN=Ab3dE9xY;fGh1...` kept after the `;`)
    *(("password", rx, 1, ("PASSWORD=", "PASSWD=", "PASS=", "PWD="))
      for rx in _assignment(_PASSWORD, 6)),
    *(("token", rx, 1, ("TOKEN=",)) for rx in _assignment(_TOKEN, 8, letter=True)),
    *(("secret_key", rx, 1, ("SECRET=", "SECRET_KEY=", "SECRETKEY=")) for rx in _assignment(_SECRET, 8, letter=True)),
    *(("api_key", rx, 1, ("KEY=",)) for rx in _assignment(_API_KEY, 8, letter=True)),
)  # fmt: skip
"""(kind, regex, group, gates) of worldtrace's own detectors; earlier ones win overlaps.
Gates of patterns with `(?i:` are lower case (tested on the lower-cased text)."""

CUT_SHAPES = (
    ("anthropic_key", "sk-ant-", "A-Za-z0-9_-", False),
    ("openrouter_key", "sk-or-v1-", "a-f0-9", False),
    ("stripe_access_key", "[rs]k_(?:live|test)_", "A-Za-z0-9", True),
    ("langfuse_key", "sk-lf-", "a-f0-9-", False),
    ("openai_key", "sk-", "A-Za-z0-9_-", False),
    ("github_token", "gh[pousr]_", "A-Za-z0-9", True),
    ("github_token", "github_pat_", "A-Za-z0-9_", True),
    ("aws_access_key", "A(?:3T[A-Z0-9]|KIA|SIA|BIA|CCA)", "A-Z0-9", False),
    ("google_api_key", "AIza", "A-Za-z0-9_-", False),
    ("npm_token", "npm_", "A-Za-z0-9", False),
    ("huggingface_token", "hf_", "A-Za-z0-9", False),
    ("digitalocean_token", "do[opr]_v1_", "a-f0-9", False),
    ("slack_token", "xox[abposre]-|xapp-", "A-Za-z0-9-", True),
    ("google_oauth_token", r"ya29\.", "A-Za-z0-9_-", False),
    ("docker_token", "dckr_[po]at_", "A-Za-z0-9_-", False),
    ("shopify_token", "shp(?:at|ca|pa|ss)_", "a-fA-F0-9", False),
    ("jwt", "eyJ|eyAi", "A-Za-z0-9_.-", False),
    ("gitlab_token", "gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-", "A-Za-z0-9_-", True),
    ("pypi_token", "pypi-", "A-Za-z0-9_-", True),
    # `PROVIDER_KEYS` (2026-12-06)
    ("groq_key", "gsk_", "A-Za-z0-9", False),
    ("xai_key", "xai-", "A-Za-z0-9", False),
    ("perplexity_key", "pplx-", "A-Za-z0-9", False),
    ("replicate_token", "r8_", "A-Za-z0-9", False),
    ("fireworks_key", "fw_", "A-Za-z0-9", False),
    ("google_oauth_client_secret", "GOCSPX-", "A-Za-z0-9_-", False),
    ("vault_token", r"hv[sb]\.", "A-Za-z0-9_-", False),
    ("databricks_token", "dapi", "a-f0-9", False),
    ("tailscale_key", "tskey-", "A-Za-z0-9-", False),
    ("linear_key", "lin_api_", "A-Za-z0-9", False),
    ("notion_token", "ntn_", "A-Za-z0-9", False),
    ("supabase_token", "sbp_", "a-f0-9", False),
    ("sentry_token", "sntry[su]_", "A-Za-z0-9_+/=", False),
    ("postman_key", "PMAK-", "a-fA-F0-9-", False),
    ("doppler_token", r"dp\.(?:pt|ct|st|sa)\.", "A-Za-z0-9_.-", False),
    ("grafana_token", "glsa_", "A-Za-z0-9_", False),
    ("age_secret_key", "AGE-SECRET-KEY-1", "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", False),
    # `SERVICE_KEYS` (2026-12-07, b)
    ("langsmith_key", "lsv2_(?:pt|sk)_", "A-Za-z0-9_", False),
    ("webhook_secret", "whsec_", "A-Za-z0-9+/=", False),
    ("atlassian_token", "ATATT3", "A-Za-z0-9_=-", False),
    ("together_key", "tgp_v1_", "A-Za-z0-9_-", False),
    ("nvidia_key", "nvapi-", "A-Za-z0-9_-", False),
    ("tavily_key", "tvly-", "A-Za-z0-9-", False),
    ("pinecone_key", "pcsk_", "A-Za-z0-9_", False),
    ("e2b_key", "e2b_", "a-f0-9", False),
    ("vercel_token", "vc[aikpr]_|vercel_", "A-Za-z0-9", False),
    ("newrelic_key", "NR(?:AK|II)-", "A-Za-z0-9_-", False),
    ("pulumi_token", "pul-", "a-f0-9", False),
    ("aws_bedrock_key", "ABSK", "A-Za-z0-9+/=", False),
    ("onepassword_token", "ops_eyJ", "A-Za-z0-9+/=", False),
)
"""(kind, literal start, the key's characters, found inside a word) of the keys of known
shape, as the rules of `redact_rules` and detect-secrets read them: a cut tail that is
such a start and one or more of those characters is part of such a key
(`redact.Redactor.cut_tail`). A start is taken where its rule takes it: after no key character
(`_start`; `sk-` in `task-runner` is none), or anywhere for the starts
detect-secrets finds inside a word (GitHub, GitLab, Slack, Stripe, PyPI: `xxxghp_...`).
Longer starts before those they begin with (`sk-ant-`)."""

_KW = r"[_-]?(?:api)?[_-]?(?:key|pwd|pw|pass|token)"
DETECT_SECRETS_GATES: dict[str, tuple[tuple[str | re.Pattern, ...] | None, ...]] = {
    "ArtifactoryDetector": (("AKC",), ("AP",)),
    "AWSKeyDetector": (_AWS_IDS, ("aws",)),
    "AzureStorageKeyDetector": (("AccountKey=",),),
    "BasicAuthDetector": (("://",),),
    "CloudantDetector": ((re.compile(r"cl(?:oudant|ou)?" + _KW),),) * 2
    + (("cloudant.com",),) * 2,
    "DiscordBotTokenDetector": (None,),
    "GitHubTokenDetector": (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),),
    "GitLabTokenDetector": (("glpat-", "gldt-", "glft-", "glsoat-", "glrt-"), ("GR1348941",),
                            ("glcbt-",), ("glimt-",), ("glptt-",), ("glagent-",), ("gloas-",)),
    "IbmCloudIamDetector": (("key", "pwd", "pass", "token"),),  # its prefix may be empty
    "IbmCosHmacDetector": (("secret",),),
    "JwtTokenDetector": (("eyJ",),),
    "MailchimpDetector": (("-us",),),
    "NpmDetector": (("_authToken=",),),
    "OpenAIDetector": (("T3BlbkFJ",),),
    "PypiTokenDetector": (("pypi-",), ("pypi-",)),
    "SendGridDetector": (("SG.",),),
    "SlackDetector": (("xox",), ("hooks.slack.com",)),
    "SoftlayerDetector": ((re.compile(r"(?:softlayer|sl)" + _KW),), ("api.softlayer.com",)),
    "SquareOAuthDetector": (("sq0csp-",),),
    "StripeDetector": (("k_live_",),),
    "TelegramBotTokenDetector": ((":",),),
    "TwilioKeyDetector": (("AC",), ("SK",)),
}  # fmt: skip
"""Per plugin class, per regex of its `denylist`: what each match must contain, read off
the regexes (in lower case where the regex ignores case). Plugins not listed, and
regexes listed as None, run on every text."""


WHOLE_MATCH = {"GitHubTokenDetector": 0, "GitLabTokenDetector": 0}
"""Plugins whose regex groups capture the token's prefix (`ghp`), not the secret: the
whole match is replaced. The others' groups are the secret after its context
(`password=`, `://user:`)."""


def slug(secret_type: str) -> str:
    """detect-secrets' `secret_type` ("AWS Access Key") as a placeholder kind."""
    return re.sub(r"[^a-z0-9]+", "_", secret_type.lower()).strip("_")


@functools.cache
def detect_secrets_detectors(names: tuple[str, ...]) -> tuple[Detector, ...]:
    """The regexes of detect-secrets plugin classes, compiled for whole texts (MULTILINE,
    since the plugins were written for single lines)."""
    if not names:
        return ()
    classes = plugin_classes(names)
    unknown = sorted(set(names) - set(classes))
    if unknown:
        raise ValueError(
            f"unknown detect-secrets plugin(s): {', '.join(unknown)} "
            f"(known: {', '.join(sorted(classes))})"
        )
    out = []
    for name in names:
        cls = classes[name]
        regexes = getattr(cls, "denylist", None)
        if not isinstance(regexes, (list, tuple)):
            raise ValueError(f"detect-secrets plugin {name} is not regex-based")
        check = getattr(cls, "is_formally_valid", None)
        gates = DETECT_SECRETS_GATES.get(name) or (None,) * len(regexes)
        group = WHOLE_MATCH.get(name, -1)
        for rx, gate in zip(regexes, gates, strict=True):
            fold = bool(rx.flags & re.I)
            rx = LazyPattern(rx.pattern, rx.flags | re.M)  # compiled, flags are its own
            out.append(Detector(slug(cls.secret_type), rx, group, check, gate, fold, True))
    return tuple(out)


def plugin_classes(names: tuple[str, ...]) -> dict[str, type]:
    """name -> detect-secrets plugin class for `names`, imported from `PLUGIN_MODULES`;
    when one is not found there, every class detect-secrets registers (an unknown name
    is then missing from the answer)."""
    import importlib

    found = {}
    for name in names:
        try:
            module = importlib.import_module(f"detect_secrets.plugins.{PLUGIN_MODULES[name]}")
            found[name] = getattr(module, name)
        except (KeyError, ImportError, AttributeError):
            from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

            return {c.__name__: c for c in get_mapping_from_secret_type_to_class().values()}
    return found


class _Hashed(tuple):
    """A tuple that hashes once: a rule's gates (the table rules' are hundreds of
    literals) are part of the key `redact._gating` is cached by, hashed again by every
    `Redactor()` (2026-12-07, a: ~45% of building one)."""

    def __hash__(self) -> int:
        h = self.__dict__.get("hash")
        if h is None:
            h = self.__dict__["hash"] = tuple.__hash__(self)
        return h


@functools.cache
def builtin_detectors() -> tuple[Detector, ...]:
    return tuple(
        Detector(k, LazyPattern(rx, re.M), g, None, _Hashed(gates), "(?i:" in rx, not cells, *cells)
        for k, rx, g, gates, *cells in BUILTIN
    )


def detectors(config: RedactConfig) -> tuple[Detector, ...]:
    """Every detector of a config, in priority order."""
    return (
        (builtin_detectors() if config.builtin else ())
        + detect_secrets_detectors(tuple(config.detect_secrets))
        + tuple(Detector(p.kind, re.compile(p.regex, re.M), p.group) for p in config.patterns)
    )


def example_secrets(seed: int = 0) -> dict[str, tuple[str, str]]:
    """kind -> (a fresh fake secret, a line it appears in): one of every kind the built-in
    rules know, for tests, the docs and measuring recall (a test double shipped here)."""
    rng = random.Random(seed)
    alnum = string.ascii_letters + string.digits

    def rand(n: int, alphabet: str = alnum) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    def b64(d: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    pem = "\n".join(rand(64, alnum + "+/") for _ in range(4))
    hexd = "0123456789abcdef"
    values = {
        "openai_key": "sk-proj-" + rand(48, alnum + "_-"),
        "anthropic_key": "sk-ant-api03-" + rand(93, alnum + "_-"),
        "github_token": "ghp_" + rand(36),
        "github_pat": "github_pat_11" + rand(20) + "_" + rand(59),
        "aws_access_key": "AKIA" + rand(16, string.ascii_uppercase + string.digits),
        "aws_secret_key": rand(40, alnum + "/+"),
        "aws_session_token": "IQoJb3JpZ2luX2Vj" + rand(340, alnum + "/+") + "==",
        "google_api_key": "AIza" + rand(35, alnum + "_-"),
        "slack_token": f"xoxb-{rand(12, string.digits)}-{rand(13, string.digits)}-{rand(24)}",
        "jwt": f"{b64({'alg': 'HS256', 'typ': 'JWT'})}.{b64({'sub': rand(8)})}.{rand(43)}",
        "bearer_token": rand(20) + "9" + rand(11),
        "private_key": f"-----BEGIN RSA PRIVATE KEY-----\n{pem}\n-----END RSA PRIVATE KEY-----",
        "url_password": rand(14),
        "stripe_access_key": "sk_live_51" + rand(97),
        "npm_token": "npm_" + rand(36),
        "huggingface_token": "hf_" + rand(34, string.ascii_letters),
        "digitalocean_token": "dop_v1_" + rand(64, "0123456789abcdef"),
        # (2026-12-03; after the others, so their values for a seed stay as they were; a
        # kind found only by its context, such as `azure_sas_token` after `sig=`, is not
        # here: tests plant these values alone too)
        "google_oauth_token": "ya29.a0" + rand(120, alnum + "_-"),
        "docker_token": "dckr_pat_" + rand(27, alnum + "_-"),
        "shopify_token": "shpat_" + rand(32, "0123456789abcdef"),
        # (2026-12-06) `PROVIDER_KEYS`; both cases and a digit where a rule wants them
        "openrouter_key": "sk-or-v1-" + rand(64, "0123456789abcdef"),
        "groq_key": "gsk_Ab1" + rand(49),
        "xai_key": "xai-Ab1" + rand(77),
        "perplexity_key": "pplx-Ab1" + rand(45),
        "replicate_token": "r8_Ab1" + rand(34),
        "fireworks_key": "fw_3Zk" + rand(21),
        "google_oauth_client_secret": "GOCSPX-" + rand(28, alnum + "_-"),
        "vault_token": "hvs.CAESI" + rand(86, alnum + "_-"),
        "databricks_token": "dapi" + rand(32, "0123456789abcdef"),
        "tailscale_key": "tskey-auth-k" + rand(11) + "CNTRL-" + rand(33),
        "linear_key": "lin_api_" + rand(40),
        "notion_token": "ntn_" + rand(11, string.digits) + rand(35),
        "supabase_token": "sbp_" + rand(40, "0123456789abcdef"),
        "sentry_token": "sntryu_" + rand(64, "0123456789abcdef"),
        "postman_key": "PMAK-" + rand(24, "0123456789abcdef") + "-" + rand(34, "0123456789abcdef"),
        "doppler_token": "dp.st.dev." + rand(40),
        "grafana_token": "glsa_" + rand(32) + "_" + rand(8, "0123456789abcdef"),
        "age_secret_key": "AGE-SECRET-KEY-1" + rand(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"),
        # (2026-12-07, b) `SERVICE_KEYS`
        "langsmith_key": "lsv2_pt_" + rand(32, hexd) + "_" + rand(10, hexd),
        "langfuse_key": "sk-lf-" + "-".join(rand(n, hexd) for n in (8, 4, 4, 4, 12)),
        "webhook_secret": "whsec_" + rand(32),
        "atlassian_token": "ATATT3xFfGF0" + rand(180, alnum + "_-") + "=" + rand(8, hexd.upper()),
        "together_key": "tgp_v1_" + rand(43, alnum + "_-"),
        "nvidia_key": "nvapi-" + rand(64, alnum + "_-"),
        "tavily_key": "tvly-dev-Ab1" + rand(29),
        "pinecone_key": "pcsk_" + rand(5) + "_" + rand(62),
        "e2b_key": "e2b_" + rand(40, hexd),
        "vercel_token": "vcp_Ab1" + rand(53),
        "newrelic_key": "NRAK-" + rand(27, string.ascii_uppercase + string.digits),
        "pulumi_token": "pul-" + rand(40, hexd),
        "aws_bedrock_key": "ABSK" + rand(132, alnum + "+/"),
        "onepassword_token": "ops_eyJ" + rand(300, alnum + "+/"),
    }
    context = {
        "aws_secret_key": "AWS_SECRET_ACCESS_KEY={}",
        "aws_session_token": "AWS_SESSION_TOKEN={}",
        "bearer_token": "curl -H 'Authorization: Bearer {}' http://127.0.0.1/",
        "url_password": "git clone https://alice:{}@git.example.com/r.git",
    }
    return {k: (v, context.get(k, "export TOKEN={}").format(v)) for k, v in values.items()}

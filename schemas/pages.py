"""What a page's text says of the environment, for the web sandbox (while it collects)
and the pipeline's GUI filters (for records without the sandbox's flags: imported ones)
alike: a CAPTCHA page is one for both."""

from __future__ import annotations

import re

CAPTCHA_PHRASES = ("captcha", "recaptcha", "hcaptcha", "are you a robot", "verify you are human")
CAPTCHA_RE = re.compile(r"\b(" + "|".join(map(re.escape, CAPTCHA_PHRASES)) + r")\b", re.I)


def shows_captcha(text: str) -> bool:
    """Whether `text` asks for a CAPTCHA (`CAPTCHA_RE`). An ASCII text holding none of the
    phrases in lower case cannot match and is answered without the regex, whose
    case-blind alternation costs ~40 ns a character (pages run to kilobytes)."""
    if text.isascii():
        low = text.lower()
        if not any(p in low for p in CAPTCHA_PHRASES):
            return False
    return CAPTCHA_RE.search(text) is not None

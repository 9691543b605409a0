"""What a page's text says of the environment, for the web sandbox (while it collects)
and the pipeline's GUI filters (for records without the sandbox's flags: imported ones)
alike: a CAPTCHA page is one for both."""

from __future__ import annotations

import re

CAPTCHA_WORDS = ("captcha", "robot", "human")
"""One of these (in lower case) is in every text `CAPTCHA_RE` matches: a text with none is
answered without the regex."""
_CAPTCHA = r"(?:re|h)?captcha"
CAPTCHA_RE = re.compile(
    r"\b(?:"
    r"(?:i['’]?m|i am) not a robot|are you a robot|(?:i am|i['’]m) human"
    r"|verify (?:that )?you(?:['’]re| are) (?:a )?human|prove (?:that )?you(?:['’]re| are) (?:a )?human"
    rf"|(?:complete|solve|enter|type|fill in|answer|pass|retry)\b[^.\n]{{0,24}}\b{_CAPTCHA}"
    rf"|{_CAPTCHA}(?:[ \t]+\w+)?[ \t]+(?:challenge|verification|required|failed|incorrect|invalid|expired|code)"
    rf"|(?:textbox|input|field)\b[^\n]{{0,40}}\b{_CAPTCHA}"
    r")\b",
    re.I,
)
"""A page that asks for a CAPTCHA: reCAPTCHA's "I'm not a robot" box, hCaptcha's "I am
human", Cloudflare's "Verify you are human", "Please complete the CAPTCHA", a field to
type one in, a challenge that failed. A page that only mentions one is no wall: "This
site is protected by reCAPTCHA and the Google Privacy Policy ..." sits under countless
forms, and matched as the bare word it dropped whole trajectories of working sign-ups
(2026-12-07, a hunt)."""


def shows_captcha(text: str) -> bool:
    """Whether `text` asks for a CAPTCHA (`CAPTCHA_RE`). An ASCII text holding none of
    `CAPTCHA_WORDS` in lower case cannot match and is answered without the regex, whose
    case-blind alternation costs ~40 ns a character (pages run to kilobytes)."""
    if text.isascii():
        low = text.lower()
        if not any(w in low for w in CAPTCHA_WORDS):
            return False
    return CAPTCHA_RE.search(text) is not None

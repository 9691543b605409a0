"""Moved: the default tokenizer now lives in `worldtrace.pipelines.tokens` (re-exported
here until the remaining CLI imports are updated)."""

from worldtrace.pipelines.tokens import TOKENIZER_ENV, default_tokenizer

__all__ = ["TOKENIZER_ENV", "default_tokenizer"]

"""The message model's field checks that the other rooms of turnkit share.

Tools, agents, providers, backends and sessions check their own inputs the
way messages do (an exact ``str`` of Unicode scalar values, plain frozen
JSON within the same integer range, the same image types), so one bad value
gets the same :class:`~turnkit.errors.InvalidMessageError` wherever it comes
in. The checks themselves live in the private modules of ``turnkit.messages``;
this is the one place other packages import them from.
"""

from turnkit.messages._checks import IMAGE_MEDIA_TYPES, clean_str, kind_of, need_str
from turnkit.messages._json import freeze_json
from turnkit.messages._limits import MAX_INT, MIN_INT

__all__ = [
    "IMAGE_MEDIA_TYPES",
    "MAX_INT",
    "MIN_INT",
    "clean_str",
    "freeze_json",
    "kind_of",
    "need_str",
]

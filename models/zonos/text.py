"""Text -> phoneme ids, as Zonos' espeak conditioner prepares them: numbers spelled out in English (inflect),
Japanese read through SudachiPy (kana), espeak-ng IPA with stress marks and punctuation kept, then one id
per symbol of the checkpoint's symbol table, between BOS and EOS.

espeak-ng comes from PyPI, not the system: the `espeakng-loader` wheel bundles libespeak-ng and its data, and
`phonemizer` is pointed at both (its EspeakWrapper), so a clean machine with pip alone phonemizes exactly as
a system espeak-ng of the same version would. `PHONEMIZER_ESPEAK_LIBRARY` still wins when set (a system
build). A missing package is one sentence naming it (`pip install 'voxcli[zonos]'`).
"""

from __future__ import annotations

import os
import re
import unicodedata
from functools import cache
from typing import Any

from ..errors import InputError

INSTALL = "pip install 'voxcli[zonos]'"
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
SPECIAL = 4
# The symbol table the checkpoint's phoneme embedding is indexed by (ids from 4 on, in this order).
PUNCTUATION = ';:,.!?¡¿—…"«»“”() *~-/\\&'
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
LETTERS_IPA = (
    "ɑɐɒæɓʙβɔɕçɗɖðʤəɘɚɛɜɝɞɟʄɡɠɢʛɦɧħɥʜɨɪʝɭɬɫɮʟɱɯɰŋɳɲɴøɵɸθœɶʘɹɺɾɻʀʁɽʂʃʈʧʉʊʋⱱʌɣɤʍχʎʏʑʐʒʔʡʕʢ"
    "ǀǁǂǃˈˌːˑʼʴʰʱʲʷˠˤ˞↓↑→↗↘'̩'ᵻ"
)
SYMBOLS = [*PUNCTUATION, *LETTERS, *LETTERS_IPA]
SYMBOL_IDS = {s: i for i, s in enumerate(SYMBOLS, start=SPECIAL)}
VOCAB = SPECIAL + len(SYMBOLS)

# The espeak voices Zonos was trained with; a language's id is its index here (the language_id conditioner).
LANGUAGES = (
    "af",
    "am",
    "an",
    "ar",
    "as",
    "az",
    "ba",
    "bg",
    "bn",
    "bpy",
    "bs",
    "ca",
    "cmn",
    "cs",
    "cy",
    "da",
    "de",
    "el",
    "en-029",
    "en-gb",
    "en-gb-scotland",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
    "en-gb-x-rp",
    "en-us",
    "eo",
    "es",
    "es-419",
    "et",
    "eu",
    "fa",
    "fa-latn",
    "fi",
    "fr-be",
    "fr-ch",
    "fr-fr",
    "ga",
    "gd",
    "gn",
    "grc",
    "gu",
    "hak",
    "hi",
    "hr",
    "ht",
    "hu",
    "hy",
    "hyw",
    "ia",
    "id",
    "is",
    "it",
    "ja",
    "jbo",
    "ka",
    "kk",
    "kl",
    "kn",
    "ko",
    "kok",
    "ku",
    "ky",
    "la",
    "lfn",
    "lt",
    "lv",
    "mi",
    "mk",
    "ml",
    "mr",
    "ms",
    "mt",
    "my",
    "nb",
    "nci",
    "ne",
    "nl",
    "om",
    "or",
    "pa",
    "pap",
    "pl",
    "pt",
    "pt-br",
    "py",
    "quc",
    "ro",
    "ru",
    "ru-lv",
    "sd",
    "shn",
    "si",
    "sk",
    "sl",
    "sq",
    "sr",
    "sv",
    "sw",
    "ta",
    "te",
    "tn",
    "tr",
    "tt",
    "ur",
    "uz",
    "vi",
    "vi-vn-x-central",
    "vi-vn-x-south",
    "yue",
)
DEFAULT_LANGUAGE = "en-us"


def language_id(language: str | None) -> tuple[str, int]:
    """(espeak voice, its id) for a request's language; None/"auto" = en-us, as upstream's default."""
    lang = DEFAULT_LANGUAGE if language is None or language.lower() == "auto" else language.lower()
    if lang not in LANGUAGES:
        raise InputError(f"Zonos does not speak language {language!r}; choose one of {', '.join(LANGUAGES)}")
    return lang, LANGUAGES.index(lang)


# --- English number spelling (what the checkpoint was trained on; needs inflect) ----------------------------
_COMMA_NUMBER = re.compile(r"([0-9][0-9\,]+[0-9])")
_DECIMAL = re.compile(r"([0-9]+\.[0-9]+)")
_POUNDS = re.compile(r"£([0-9\,]*[0-9]+)")
_DOLLARS = re.compile(r"\$([0-9\.\,]*[0-9]+)")
_ORDINAL = re.compile(r"[0-9]+(st|nd|rd|th)")
_NUMBER = re.compile(r"[0-9]+")


@cache
def _inflect() -> Any:
    try:
        import inflect
    except ImportError as e:
        raise InputError(
            f"Zonos spells out numbers with the inflect package; install it with {INSTALL}"
        ) from e
    return inflect.engine()


def _money(amount: str) -> str:
    parts = amount.split(".")
    if len(parts) > 2:
        return amount + " dollars"
    whole = int(parts[0]) if parts[0] else 0
    cents = int(parts[1]) if len(parts) > 1 and parts[1] else 0
    said = []
    if whole:
        said.append(f"{whole} {'dollar' if whole == 1 else 'dollars'}")
    if cents:
        said.append(f"{cents} {'cent' if cents == 1 else 'cents'}")
    return ", ".join(said) if said else "zero dollars"


def _cardinal(digits: str) -> str:
    p, n = _inflect(), int(digits)
    if not 1000 < n < 3000:
        return p.number_to_words(n, andword="")
    # years: 2000, two thousand five, nineteen hundred, nineteen eighty-four
    if n == 2000:
        return "two thousand"
    if 2000 < n < 2010:
        return "two thousand " + p.number_to_words(n % 100)
    if n % 100 == 0:
        return p.number_to_words(n // 100) + " hundred"
    return p.number_to_words(n, andword="", zero="oh", group=2).replace(", ", " ")


def spell_numbers(text: str) -> str:
    if not any(ch.isdigit() for ch in text):
        return text
    text = _COMMA_NUMBER.sub(lambda m: m.group(1).replace(",", ""), text)
    text = _POUNDS.sub(r"\1 pounds", text)
    text = _DOLLARS.sub(lambda m: _money(m.group(1)), text)
    text = _DECIMAL.sub(lambda m: m.group(1).replace(".", " point "), text)
    text = _ORDINAL.sub(lambda m: _inflect().number_to_words(m.group(0)), text)
    return _NUMBER.sub(lambda m: _cardinal(m.group(0)), text)


@cache
def _japanese() -> tuple[Any, Any]:
    try:
        from kanjize import number2kanji
        from sudachipy import Dictionary

        tokenizer = Dictionary(dict="full").create()
    except Exception as e:  # ImportError, or sudachipy without its dictionary package
        raise InputError(
            "Zonos reads Japanese through SudachiPy; install it with "
            "pip install sudachipy sudachidict-full kanjize"
        ) from e
    return tokenizer, number2kanji


def read_japanese(text: str) -> str:
    from sudachipy import SplitMode

    tokenizer, number2kanji = _japanese()
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"\d+", lambda m: number2kanji(int(m[0])), text)
    return " ".join(t.reading_form() for t in tokenizer.tokenize(text, SplitMode.A))


def clean(text: str, language: str) -> str:
    return read_japanese(text) if "ja" in language else spell_numbers(text)


# --- espeak-ng -------------------------------------------------------------------------------------------
def point_phonemizer_at_bundled_espeak() -> None:
    """Point phonemizer at espeakng-loader's libespeak-ng and data unless the user named a library."""
    from phonemizer.backend.espeak.wrapper import EspeakWrapper

    if os.environ.get("PHONEMIZER_ESPEAK_LIBRARY"):
        return
    try:
        import espeakng_loader
    except ImportError as e:
        raise InputError(f"Zonos phonemizes text with espeak-ng; install it with {INSTALL}") from e
    EspeakWrapper.set_library(espeakng_loader.get_library_path())
    EspeakWrapper.set_data_path(espeakng_loader.get_data_path())


@cache
def backend(language: str) -> Any:
    import logging

    try:
        from phonemizer.backend import EspeakBackend
    except ImportError as e:
        raise InputError(
            f"Zonos phonemizes text with espeak-ng (phonemizer); install it with {INSTALL}"
        ) from e
    point_phonemizer_at_bundled_espeak()
    log = logging.getLogger("phonemizer")
    try:
        b = EspeakBackend(
            language, preserve_punctuation=True, with_stress=True, punctuation_marks=PUNCTUATION, logger=log
        )
    except RuntimeError as e:
        raise InputError(f"espeak-ng cannot phonemize language {language!r}: {e}") from e
    log.setLevel(logging.ERROR)
    return b


def warm_up_text() -> None:
    """Load libespeak-ng and inflect once at model load, not inside a request's prepare (the engine bounds
    that in seconds, and the first load takes several on a busy machine). Without the packages this does
    nothing: each request then gets the one sentence that names them."""
    try:
        backend(DEFAULT_LANGUAGE)
        _inflect()
    except InputError:
        pass


def phonemes(text: str, language: str) -> str:
    return backend(language).phonemize([clean(text, language)], strip=True)[0]


def phoneme_ids(text: str, language: str) -> list[int]:
    """BOS, one id per phoneme symbol (unknown symbols: UNK), EOS."""
    return [BOS_ID, *(SYMBOL_IDS.get(s, UNK_ID) for s in phonemes(text, language)), EOS_ID]

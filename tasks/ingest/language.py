"""Which language a trace is written in, offline: Unicode script rules, then a bundled statistical model.

Staging fills a trace's ``language`` with :func:`identify_languages` when neither the record nor the run names
one. Scripts settle what they can: kana means Japanese, hangul Korean, Han without either Chinese. A character
n-gram model cannot: on short texts it mistakes Japanese for Chinese, and gives Han text to Wu or Cantonese.
Everything else goes to py3langid's Naive Bayes model (shipped inside its wheel, numpy only, no download),
restricted to living languages outside the CJK scripts, and returns None below a probability threshold.
``bench/bench_language.py`` measured the rules, the threshold and the alternatives (lingua, pycld2, langid).

py3langid's ``classify`` walks each text byte by byte in Python, about 35 µs per question: more than the rest of
staging. So the model here scores a batch's texts together with numpy (:class:`_Model`), with the same tag as
``classify`` for every text; ``bench/bench_language_batch.py`` measures both. ``py3langid`` is imported on first
use, so importing ragpulse stays cheap.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from py3langid.langid import LanguageIdentifier

__all__ = ["MAX_CHARS", "MIN_CONFIDENCE", "identify_language", "identify_languages", "normalize_language_tag"]

_KANA = re.compile("[\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
"""Hiragana, katakana and half-width katakana; not U+30FB (・), which Chinese writes too."""
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uffa0-\uffdc]")
_HAN = re.compile("[\u3005-\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")
_CJK = re.compile("|".join(script.pattern for script in (_KANA, _HANGUL, _HAN)))
"""Any of the three: most texts have none, and one search settles that."""

_CJK_WEIGHT = 2
"""One CJK character counts as this many other letters when deciding which script a mixed text is in:
``Python 3.11のリリース日は？`` is Japanese, ``What does 北京 mean?`` is English."""

MIN_CONFIDENCE = 0.2
"""py3langid's calibrated probability below which a non-CJK text is None (unknown): a name such as
``Ottawa`` or ``Alexander Graham Bell`` names no language, and a wrong tag is worse than none. At 0.2 a short
answer alone gets a wrong tag 6 % of the time instead of 34 %, and a question is unknown 0.5 % of the time
instead of never (bench/bench_language.py)."""

MAX_CHARS = 500
"""Only the first this many characters are read: plenty for the model, and a pasted document as the question
costs no more than a sentence."""

_NOT_LANGUAGES = frozenset({"zxx", "grc", "hbo", "la", "eo", "vo"})
"""Labels no trace is written in: no linguistic content, Ancient Greek and Hebrew, Latin and two constructed
languages, which short names and numbers otherwise land on."""
_CJK_LABELS = frozenset({"ja", "ko", "zh", "wuu", "yue"})
"""Decided by script before the model runs, so the model must not pick them for other scripts either."""
_MACROLANGUAGE = {"arz": "ar", "ary": "ar", "uzs": "uz", "gug": "gn", "sdh": "ku"}
"""Dialect labels of the model mapped to the tag text metrics and judge prompts key on."""

_DEPRECATED = {"iw": "he", "in": "id", "ji": "yi", "jw": "jv", "mo": "ro"}
"""ISO 639 codes withdrawn in favour of these (IANA subtag registry ``Preferred-Value``)."""

_ALNUM = "[a-z0-9]"
_LANGTAG = re.compile(
    rf"""
    (?P<language>[a-z]{{2,3}}(?:-[a-z]{{3}}){{0,3}})  # ISO 639 language, with up to 3 extlangs
    (?:-(?P<script>[a-z]{{4}}))?
    (?:-(?P<region>[a-z]{{2}}|[0-9]{{3}}))?
    (?P<variants>(?:-(?:{_ALNUM}{{5,8}}|[0-9]{_ALNUM}{{3}}))*)
    (?P<extensions>(?:-[0-9a-wy-z](?:-{_ALNUM}{{2,8}})+)*)
    (?P<private>-x(?:-{_ALNUM}{{1,8}})+)?
    """,
    re.VERBOSE,
)
"""RFC 5646 ``langtag``, lower-cased, except that the language subtag must have 2 or 3 letters: the 4-letter
ones are reserved and no 5-to-8-letter one has ever been registered, so ``english`` is a mistake, not a tag."""
_PRIVATE_USE = re.compile(rf"x(?:-{_ALNUM}{{1,8}})+")


def normalize_language_tag(tag: str) -> str:
    """Check that ``tag`` is a well-formed BCP 47 (RFC 5646) language tag and return it in canonical case.

    Language lower case, script title case, region upper case, the rest lower case (``ZH-hant-tw`` ->
    ``zh-Hant-TW``); withdrawn codes get their replacement (``iw`` -> ``he``). Syntax is checked, not the
    subtag registry: ``qaa`` (private use) passes, and so would a code ISO assigns next year. The 26
    grandfathered tags (``i-klingon``) are refused.

    Raises:
        ValueError: ``tag`` is not a string, or not BCP 47 (``zh_CN``, ``english``, ``e``, ``en-``, ``de-1901-1901``).
    """
    if not isinstance(tag, str):
        raise ValueError(f"language tag must be a string such as 'ja' or 'zh-TW', got {type(tag).__name__}")
    canonical = _canonical(tag.strip().lower())
    if canonical is None:
        suggestion = _canonical(tag.strip().lower().replace("_", "-")) if "_" in tag else None
        hint = f" (subtags are separated by '-': {suggestion!r})" if suggestion else ""
        raise ValueError(
            f"{tag!r} is not a BCP 47 language tag{hint}; expected an ISO 639 code such as 'ja', 'zh' or 'en', "
            "optionally followed by script, region and variants, e.g. 'zh-Hant-TW', 'pt-BR', 'de-CH-1901'"
        )
    return canonical


def _canonical(lowered: str) -> str | None:
    """``lowered`` in canonical case, or None when it is not a valid tag."""
    if _PRIVATE_USE.fullmatch(lowered):
        return lowered
    match = _LANGTAG.fullmatch(lowered)
    if match is None:
        return None
    variants = match["variants"].split("-")[1:]
    singletons = re.findall(r"-([0-9a-wy-z])(?=-)", match["extensions"])
    if len(set(variants)) != len(variants) or len(set(singletons)) != len(singletons):
        return None  # RFC 5646 section 2.2.5 and 2.2.6: no repeated variant or extension singleton
    language, _, extlangs = match["language"].partition("-")
    parts = [_DEPRECATED.get(language, language), *filter(None, [extlangs])]
    if match["script"]:
        parts.append(match["script"].title())
    if match["region"]:
        parts.append(match["region"].upper())
    return "-".join(parts) + "".join(match.group("variants", "extensions")) + (match["private"] or "")


def identify_language(text: str) -> str | None:
    """The primary BCP 47 subtag of the language ``text`` is written in (``ja``, ``en``), None when unsure.

    None for text without letters (digits, punctuation, empty) and for Latin, Cyrillic, Arabic, ... text the
    model cannot place with probability :data:`MIN_CONFIDENCE` (single names, codes). Han-only text is
    ``zh``: a kanji-only Japanese answer (``小笠原諸島``) cannot be told apart, which is why staging asks the
    question first (Japanese questions carry kana) and the answer only when the question gives None.
    """
    return identify_languages([text])[0]


def identify_languages(texts: Sequence[str]) -> list[str | None]:
    """:func:`identify_language` of each text, the model scoring the batch's texts together.

    A repeated text (templated questions, stock answers) is identified once per process while it is among the last
    ``_REMEMBERED`` distinct ones: staging calls this once per batch, and the same questions come back batch after
    batch.
    """
    cut = [text[:MAX_CHARS] for text in texts]
    found: dict[str, str | None] = {}
    with _REMEMBERING:
        for text in cut:
            if text in _remembered:
                found[text] = _remembered[text]
                _remembered.move_to_end(text)
    new = [text for text in dict.fromkeys(cut) if text not in found]
    for start in range(0, len(new), _CHUNK):
        chunk = new[start : start + _CHUNK]
        found.update(zip(chunk, _identified(chunk), strict=True))
    with _REMEMBERING:
        _remembered.update((text, found[text]) for text in new[-_REMEMBERED:])
        while len(_remembered) > _REMEMBERED:
            _remembered.popitem(last=False)
    return [found[text] for text in cut]


_REMEMBERED = 8192
"""Distinct texts whose language is kept, each cut to MAX_CHARS (all that is read): at most a few MiB."""
_remembered: OrderedDict[str, str | None] = OrderedDict()
"""The last ``_REMEMBERED`` distinct texts identified, least recently asked first."""
_REMEMBERING = threading.Lock()

_CHUNK = 2048
"""Texts the model scores at once: at most 4 MB of UTF-8 (MAX_CHARS of 4-byte characters each), whose feature
walk and counts take a few tens of MiB at worst, and far less for questions."""


def _identified(texts: list[str]) -> list[str | None]:
    """:func:`identify_language` of distinct texts already cut to MAX_CHARS; the model is loaded only when a text
    needs it."""
    tags: list[str | None] = [None] * len(texts)
    scored = []
    for i, text in enumerate(texts):
        if not any(map(str.isalpha, text)):
            continue
        if tag := _cjk_language(text):
            tags[i] = tag
        else:
            scored.append(i)
    if scored:
        for i, tag in zip(scored, _model().tags([texts[i] for i in scored]), strict=True):
            tags[i] = tag
    return tags


def _cjk_language(text: str) -> str | None:
    """``ko``, ``ja`` or ``zh`` when CJK characters outweigh the text's other letters, else None."""
    if not _CJK.search(text):
        return None
    kana, hangul = len(_KANA.findall(text)), len(_HANGUL.findall(text))
    cjk = kana + hangul + len(_HAN.findall(text))
    if _CJK_WEIGHT * cjk < sum(map(str.isalpha, text)) - cjk:
        return None
    if hangul > kana:
        return "ko"
    return "ja" if kana else "zh"


class _Model:
    """py3langid's restricted model scoring many texts at once, with the result of its ``classify`` for each.

    ``classify`` walks a text's UTF-8 bytes through the model's automaton in Python (about 35 µs per question);
    here every text of the batch takes its next byte in one numpy step, and the class scores of the batch are one
    sparse-times-dense product. Scores sum the same terms as ``classify`` in another order, so they may differ from
    it in the last bits: a text whose tag could turn on that (two labels or the threshold within the rounding
    bound) is left to ``classify`` itself, which keeps every tag identical to it.
    """

    def __init__(self, identifier: LanguageIdentifier) -> None:
        import numpy as np

        self.identifier = identifier
        self.next_state = np.asarray(identifier.tk_nextmove)  # the model's array, not a copy
        self.row_start = np.asarray(identifier.tk_row, dtype=np.int64) << 8
        self.feature = np.asarray(identifier.tk_output, dtype=np.int32)  # a state's feature, -1 for none
        self.feature_bound = np.abs(identifier.nb_ptc).max(axis=1)
        self.prior_bound = float(np.abs(identifier.nb_pc).max())
        self.labels: list[str] = identifier.nb_classes
        first: dict[str, int] = {}
        self.aliases = [(first.setdefault(label, i), i) for i, label in enumerate(self.labels) if label in first]
        """(first, later) columns of a label the model has twice (a script variant): ``classify`` adds the later
        one's probability to the first's and zeroes it."""

    def tags(self, texts: list[str]) -> list[str | None]:
        """:func:`identify_language` of texts the script rules left to the model (at most ``_CHUNK``)."""
        import numpy as np

        encoded = [_encoded(text) for text in texts]
        counts, sizes = self._feature_counts(encoded)
        raw = counts @ self.identifier.nb_ptc + self.identifier.nb_pc
        featureless = np.diff(counts.indptr) == 0
        raw[featureless] = 0.0  # classify's uniform scores for a text without features
        scale = (1.0 / np.sqrt(np.maximum(sizes, 1))).astype(np.float32)
        scores = raw * scale[:, None]
        np.exp(scores - scores.max(axis=1, keepdims=True), out=scores)
        scores /= scores.sum(axis=1, keepdims=True)
        for first, later in self.aliases:
            scores[:, first] += scores[:, later]
            scores[:, later] = 0.0
        best = scores.argmax(axis=1)
        top_two = np.partition(scores, -2, axis=1)[:, -2:].astype(np.float64)
        # A raw score, here as in classify, is off from the exact sum of its terms by at most (terms + 2) float32
        # roundings of the sum of their magnitudes, and by one of its own when scaled: the two scaled scores differ
        # by at most `drift`, a label's log-probability by twice that, two labels' difference by four times.
        rounding = float(np.finfo(np.float32).eps) / 2
        magnitude = counts @ self.feature_bound + self.prior_bound
        terms = np.diff(counts.indptr) + 2
        drift = scale * rounding * (2 * terms * magnitude + 2 * np.abs(raw).max(axis=1))
        margin = 4 * drift + 1e-4  # and the float32 exponentials and sums, each off by far less than 1e-4
        with np.errstate(divide="ignore"):
            log_top, log_second = np.log(top_two[:, 1]), np.log(top_two[:, 0])
        unsure = (log_top - log_second <= margin) | (np.abs(log_top - np.log(MIN_CONFIDENCE)) <= margin)
        tags: list[str | None] = []
        for text, column, confidence, recheck in zip(texts, best.tolist(), top_two[:, 1].tolist(), unsure, strict=True):
            label, confidence = self.identifier.classify(text) if recheck else (self.labels[column], confidence)
            tags.append(None if confidence < MIN_CONFIDENCE else _MACROLANGUAGE.get(label, label))
        return tags

    def _feature_counts(self, encoded: list[bytes]) -> tuple[Any, NDArray[np.int64]]:
        """log1p of each text's feature counts (CSR, texts by features, as classify weighs them) and its bytes.

        The automaton steps every text still running at once: texts are sorted longest first, so at byte ``t``
        those running are a prefix of the batch.
        """
        import numpy as np
        from scipy.sparse import csr_matrix

        n, features = len(encoded), self.identifier.nb_ptc.shape[0]
        sizes = np.fromiter(map(len, encoded), np.int64, n)
        order = np.argsort(-sizes, kind="stable")
        sorted_sizes = sizes[order]
        data = np.frombuffer(b"".join([encoded[i] for i in order]), np.uint8)
        starts = np.zeros(n, np.int64)
        np.cumsum(sorted_sizes[:-1], out=starts[1:])
        found = np.empty(len(data), np.int32)
        state = np.zeros(n, np.int64)
        running = np.searchsorted(-sorted_sizes, -np.arange(sorted_sizes.max(initial=0)), side="left")
        for t, active in enumerate(running.tolist()):
            at = starts[:active] + t
            moved = self.next_state[self.row_start[state[:active]] + data[at]]
            state[:active] = moved
            found[at] = self.feature[moved]
        # One key per (text, feature) occurrence, the text being its position in the batch: n * features < 2**31.
        keys = np.repeat(order.astype(np.int32) * features, sorted_sizes) + found
        keys, counts = np.unique(keys[found >= 0], return_counts=True)
        row, feature = np.divmod(keys, features)
        weights = np.log1p(counts.astype(np.float32))  # as classify weighs a count
        indptr = np.searchsorted(row, np.arange(n + 1))
        return csr_matrix((weights, feature, indptr), shape=(n, features)), sizes


def _encoded(text: str) -> bytes:
    """The bytes py3langid's ``classify`` reads for ``text``: lower-cased if all upper case, NFC, UTF-8 with any
    lone surrogate written as its 3 bytes."""
    if text.isupper():
        text = text.lower()
    return unicodedata.normalize("NFC", text).encode("utf8", errors="surrogatepass")


_LOADING = threading.Lock()


def _model() -> _Model:
    """The model, loaded once per process: staging slices run in threads, and each first call would load its own
    copy (about 3 CPU-s and 135 MiB each) if they did not wait for the first."""
    with _LOADING:
        return _loaded_model()


def _identifier() -> LanguageIdentifier:
    """py3langid's identifier of :func:`_model` (the restricted labels, calibrated probabilities)."""
    return _model().identifier


@cache
def _loaded_model() -> _Model:
    """py3langid's bundled model with calibrated probabilities and only the labels it may return, loaded once.

    Built from the restricted columns rather than with ``set_languages``, which keeps the full 27 MB weight
    matrix next to the restricted copy. The copy is float32, which the sparse product needs (from float16 it
    costs 13 µs a text more), and row-major, as ``classify`` gathers rows; float16 widens to float32 exactly, so
    ``classify`` scores as before. The model takes about 100 MiB of RSS, 29 more than in float16.
    """
    import numpy as np
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    full = LanguageIdentifier.from_model_file(MODEL_FILE)
    keep = [i for i, label in enumerate(full.nb_classes) if label not in _NOT_LANGUAGES | _CJK_LABELS]
    return _Model(
        LanguageIdentifier(
            np.ascontiguousarray(full.nb_ptc[:, keep], dtype=np.float32),
            full.nb_pc[keep],
            [full.nb_classes[i] for i in keep],
            full.tk_nextmove,
            full.tk_output,
            norm_probs=True,
            tk_row=full.tk_row,
        )
    )

"""Tests of offline language identification (script rules, then py3langid) and of BCP 47 tag canonicalisation."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ragpulse.tasks.ingest.language import identify_language, identify_languages, normalize_language_tag

QUESTIONS = {
    "zh": ["中国的首都是哪里？", "《战国无双3》是由哪两个公司合作开发的？", "這款手機的電池可以用多久？"],
    "ja": ["日本の首都はどこですか？", "梅雨がみられるのはどの期間？", "パスワードを変更するにはどうすればいいですか"],
    "ko": ["대한민국의 수도는 어디입니까?", "비밀번호를 어떻게 바꾸나요?", "배송은 며칠 걸려요?"],
    "en": ["Who wrote the first computer program?", "How do I reset my password?", "Is shipping free?"],
    "de": ["Wie kann ich mein Passwort ändern?", "Wann wurde der Kölner Dom fertiggestellt?", "Gibt es Rabatt?"],
    "es": ["¿Cuál es la capital de Perú?", "¿Cómo puedo cambiar mi contraseña?", "¿Cuánto tarda el envío?"],
    "ar": ["ما هي عاصمة مصر؟", "كيف أغير كلمة المرور؟", "هل التوصيل مجاني؟"],
    "fr": ["Comment réinitialiser mon mot de passe ?", "Qui a écrit Les Misérables ?"],
    "ru": ["Кто написал «Войну и мир»?", "Сколько длится доставка?"],
    "hi": ["भारत की राजधानी क्या है?", "डिलीवरी में कितना समय लगता है?"],
    "vi": ["Thủ đô của Việt Nam là gì?", "Giao hàng mất bao lâu?"],
}


@pytest.mark.parametrize(("expected", "text"), [(lang, text) for lang, texts in QUESTIONS.items() for text in texts])
def test_a_short_question_gets_its_language(expected: str, text: str) -> None:
    assert identify_language(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("東京です。", "ja"),  # one kana is enough: Chinese never writes it
        ("小笠原諸島", "zh"),  # Han alone is Chinese, even when a Japanese answer is only kanji
        ("米特罗凡・巴巴耶娃", "zh"),  # the katakana middle dot is Chinese punctuation too
        ("서울", "ko"),
        ("Python 3.11のリリース日は？", "ja"),  # a CJK character outweighs a Latin letter
        ("iPhoneの電池を交換したい", "ja"),
        ("What does 北京 mean in English?", "en"),
        ("北京", "zh"),
    ],
)
def test_cjk_scripts_decide_without_the_model(text: str, expected: str) -> None:
    assert identify_language(text) == expected


@pytest.mark.parametrize("text", ["", "   \n", "12345", "3.14 + 2 = 5.14", "？！…", "-- // ##", "😀👍", "2026-03-11"])
def test_text_without_letters_has_no_language(text: str) -> None:
    assert identify_language(text) is None


@pytest.mark.parametrize("text", ["Ottawa", "Alexander Graham Bell", "Konrad Adenauer", "iPhone 15", "OK"])
def test_a_bare_name_is_unknown_rather_than_guessed(text: str) -> None:
    assert identify_language(text) is None


def test_only_the_start_of_a_long_text_is_read() -> None:
    assert identify_language("日本の首都はどこですか？" * 50 + " Where is the capital of Japan?" * 300) == "ja"


def test_model_labels_come_back_as_the_tags_metrics_key_on() -> None:
    assert identify_language("إزيك عامل إيه النهارده يا صاحبي؟") == "ar"  # Egyptian Arabic (arz) is ar
    texts = [text for texts in QUESTIONS.values() for text in texts] + ["Lorem ipsum dolor sit amet, consectetur"]
    for tag in identify_languages(texts):
        assert tag is None or re.fullmatch("[a-z]{2,3}", tag), tag
        assert tag not in {"la", "wuu", "yue", "zxx"}


def test_identify_languages_matches_one_by_one_and_runs_a_repeated_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragpulse.tasks.ingest import language

    texts = ["日本の首都はどこですか？", "How do I reset my password?", "42", "日本の首都はどこですか？", ""]
    expected = [identify_language(text) for text in texts]
    calls: list[str] = []
    real = language._identified

    def counted(batch: list[str]) -> list[str | None]:
        calls.extend(batch)
        return real(batch)

    monkeypatch.setattr(language, "_identified", counted)
    language._remembered.clear()
    assert identify_languages(texts) == expected == ["ja", "en", None, "ja", None]
    assert calls == ["日本の首都はどこですか？", "How do I reset my password?", "42", ""]
    assert identify_languages([]) == []
    # Later batches reuse what earlier ones identified; a long text is remembered by the part that is read.
    long_text = "How do I reset my password? " * 40
    tags = identify_languages([texts[1], long_text, long_text + "Ich weiß es nicht."])
    assert tags[0] == "en" and tags[1] == tags[2]
    assert calls[4:] == [long_text[: language.MAX_CHARS]]


def test_the_least_recently_asked_text_is_forgotten_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragpulse.tasks.ingest import language

    monkeypatch.setattr(language, "_REMEMBERED", 3)
    language._remembered.clear()
    identify_languages(["a1", "a2", "a3"])
    identify_languages(["a1", "a4"])  # a1 asked again, so a2 goes
    assert list(language._remembered) == ["a3", "a1", "a4"]
    identify_languages([f"b{i}" for i in range(5)])  # more new texts than are kept: the last ones stay
    assert list(language._remembered) == ["b2", "b3", "b4"]
    language._remembered.clear()


def _bench_texts() -> list[str]:
    """bench/bench_language.py's texts (JSQuAD, CMRC 2018, ARES when ../shared/datasets is there, and its
    hand-written pairs): questions, answers, both joined, and the passages they come from (past MAX_CHARS)."""
    import csv
    import json

    from bench import bench_language

    tables = (bench_language.HANDWRITTEN, bench_language.NEIGHBOURS)
    pairs = [pair for table in tables for language_pairs in table.values() for pair in language_pairs]
    texts = [text for question, answer in pairs for text in (question, answer, f"{question}\n{answer}")]
    datasets = bench_language.DATASETS
    for name in ("jsquad/jsquad-v1.3-valid-first-articles.json", "cmrc2018/cmrc2018-dev-first-articles.json"):
        if (datasets / name).exists():
            for article in json.loads((datasets / name).read_text(encoding="utf-8"))["data"]:
                for paragraph in article["paragraphs"]:
                    texts.append(paragraph["context"])
                    for qa in paragraph["qas"]:
                        texts += [qa["question"], *(answer["text"] for answer in qa["answers"][:1])]
    csv.field_size_limit(1 << 30)
    for name in ("nq", "hotpotqa"):
        if (path := datasets / "ares" / f"{name}_synthetic_queries.tsv").exists():
            with path.open(encoding="utf-8", newline="") as handle:
                for row in csv.DictReader(handle, delimiter="\t"):
                    texts += [row["synthetic_query"] or "", row["generated_answer"] or "", row["document"] or ""]
    return list(dict.fromkeys(texts))


EDGE_CASES = [
    "",
    "   \n\t",
    "0123456789",
    "3.14 + 2 = 5.14",
    "😀👍🎉",
    "I love it 😀😀😀 so much",
    "😀 Où est la gare ? 😀",
    "What does 北京 mean in English?",
    "Python 3.11のリリース日は？",
    "Москва — столица России, London is the capital of the UK",
    "مرحبا hello שלום γειά σου",  # noqa: RUF001 - Greek letters meant
    "WHERE IS THE NEAREST TRAIN STATION?",  # all upper case: classify lower-cases it
    "Cafe\u0301 au lait, s'il vous plai\u0302t",  # decomposed accents: classify composes them (NFC)
    "ﬁle ｆｕｌｌｗｉｄｔｈ Ａ",  # noqa: RUF001 - a ligature and full-width letters: NFC keeps them
    "a",
    "Ab",
    "x" * 600,
    "Where is the capital of Japan? " * 30,  # past MAX_CHARS
    "Wo ist der Bahnhof? " * 20 + "Where is the station?" * 20,
    "Ω" * 501,
    "null\x00byte in the middle of an English question?",
    "\x00\x00\x00",
    "lone \ud800 surrogate in a question about the weather",
    "\udfff\ud83d trailing surrogates, reversed pair",
    "mixed \ud83d\ude00 escaped pair and text",
    "\U0010ffff private use and Latin text",
    "Ottawa",
    "iPhone 15",
]


@pytest.mark.slow
def test_the_batched_model_gives_py3langids_own_tag_for_every_text() -> None:
    """The batch's vectorised scores pick the tag py3langid's ``classify`` picks for each text alone, on real
    questions, answers and passages and on texts a byte walk could get wrong (surrogates, NUL, emoji, long)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    from ragpulse.tasks.ingest import language

    reference = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    hidden = language._NOT_LANGUAGES | language._CJK_LABELS
    reference.set_languages([label for label in reference.labels if label not in hidden])

    def classified(text: str) -> str | None:
        text = text[: language.MAX_CHARS]
        if not any(map(str.isalpha, text)):
            return None
        if tag := language._cjk_language(text):
            return tag
        label, confidence = reference.classify(text)
        return None if confidence < language.MIN_CONFIDENCE else language._MACROLANGUAGE.get(label, label)

    texts = EDGE_CASES + _bench_texts()
    print(f"{len(texts)} texts compared")
    expected = [classified(text) for text in texts]
    language._remembered.clear()
    assert identify_languages(texts) == expected
    assert [identify_language(text) for text in EDGE_CASES] == expected[: len(EDGE_CASES)]


def test_a_tag_within_rounding_of_the_threshold_is_left_to_classify(monkeypatch: pytest.MonkeyPatch) -> None:
    """A text whose confidence is the threshold itself is the one case where scores summed in another order could
    fall on the other side: classify decides it, as it would alone."""
    from ragpulse.tasks.ingest import language

    text = "How do I reset my password?"
    identifier = language._identifier()
    label, confidence = identifier.classify(text)
    classify = type(identifier).classify
    asked: list[str] = []

    def counted(self: object, text: str) -> tuple[str, float]:
        asked.append(text)
        return classify(self, text)  # type: ignore[no-any-return]

    monkeypatch.setattr(type(identifier), "classify", counted)
    monkeypatch.setattr(language, "MIN_CONFIDENCE", confidence)
    language._remembered.clear()
    assert identify_languages([text, "Where is the nearest train station?"]) == [label, "en"]
    assert asked == [text]
    monkeypatch.setattr(language, "MIN_CONFIDENCE", float(np.nextafter(np.float32(confidence), np.float32(1))))
    language._remembered.clear()
    assert identify_languages([text]) == [None]
    language._remembered.clear()


def test_importing_the_module_does_not_load_the_model() -> None:
    code = "import sys, ragpulse.tasks.ingest.language; sys.exit('py3langid' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


@pytest.mark.parametrize(
    ("tag", "canonical"),
    [
        ("ja", "ja"),
        ("ZH-cn", "zh-CN"),
        ("zh-hant-tw", "zh-Hant-TW"),
        ("EN-gb", "en-GB"),
        ("es-419", "es-419"),
        ("sr-latn-rs", "sr-Latn-RS"),
        ("de-ch-1901", "de-CH-1901"),
        ("zh-YUE-hk", "zh-yue-HK"),  # extended language subtag stays lower case
        ("en-US-u-ca-Gregory", "en-US-u-ca-gregory"),
        ("en-a-bbb-x-A-CCC", "en-a-bbb-x-a-ccc"),  # no script/region casing after a singleton
        ("x-Private", "x-private"),
        ("qaa", "qaa"),
        ("iw", "he"),
        ("in-ID", "id-ID"),
        (" ko ", "ko"),
    ],
)
def test_a_bcp47_tag_is_returned_in_canonical_form(tag: str, canonical: str) -> None:
    assert normalize_language_tag(tag) == canonical


@pytest.mark.parametrize(
    "tag",
    ["", "e", "english", "日本語", "123", "en-", "-en", "en--us", "en-US-US", "de-1901-1901", "en-a-aa-a-bb", "en-x",
     "x", "i-klingon", "toolongtag", "en US"],
)  # fmt: skip
def test_anything_else_is_refused_with_an_example_of_a_tag(tag: str) -> None:
    with pytest.raises(ValueError, match=r"is not a BCP 47 language tag; expected an ISO 639 code such as 'ja'"):
        normalize_language_tag(tag)


def test_an_underscore_locale_is_refused_with_the_tag_it_meant() -> None:
    with pytest.raises(
        ValueError, match=r"'zh_CN' is not a BCP 47 language tag \(subtags are separated by '-': 'zh-CN'\)"
    ):
        normalize_language_tag("zh_CN")


@pytest.mark.parametrize("tag", [None, 7, ["en"]])
def test_a_tag_that_is_not_a_string_is_refused(tag: object) -> None:
    with pytest.raises(ValueError, match="must be a string"):
        normalize_language_tag(tag)  # type: ignore[arg-type]


def test_a_follow_up_too_short_to_tell_takes_its_conversations_language(tmp_path: Path) -> None:
    """A turn whose question and answer name no language ("Ingrid Halvorsen?") takes its earlier user messages',
    and a turn without history takes the language another turn of its conversation was identified in."""
    import datetime as dt
    import json

    from ragpulse.tasks.ingest.batches import read_staged
    from ragpulse.tasks.ingest.staging import select_source_files, stage_records

    day = dt.date(2026, 11, 20)
    folder = tmp_path / "traces" / "dt=2026-11-20"
    folder.mkdir(parents=True)
    turns = [
        {"trace_id": "t1", "question": "さくら精機の創業者は誰ですか？", "conversation_id": "c-ja"},
        {"trace_id": "t2", "question": "Ingrid Halvorsen?", "answer": "Ingrid Halvorsen.", "conversation_id": "c-en",
         "history": [{"role": "user", "content": "Who founded Nordlicht Robotics, the warehouse robot maker?"}]},
        {"trace_id": "t3", "question": "Ingrid Halvorsen?", "conversation_id": "c-ja"},
        {"trace_id": "t4", "question": "Ingrid Halvorsen?"},
    ]  # fmt: skip
    lines = [json.dumps({**turn, "timestamp": "2026-11-20T09:00:00Z"}, ensure_ascii=False) for turn in turns]
    (folder / "turns.jsonl").write_text("\n".join(lines) + "\n")
    files = select_source_files(str(tmp_path / "traces"), day, trace_format="ragpulse", partitioning="dt")
    staged = stage_records(day, files, staged_url=str(tmp_path / "staged"), batch_size=10)

    languages = {row["trace_id"]: row["language"] for b in staged.batches for row in read_staged(b).to_pylist()}
    assert languages == {"t1": "ja", "t2": "en", "t3": "ja", "t4": None}

"""A question's terms for naming topics: words for scripts that space them, character bigrams for Chinese and
Japanese, and no stop words.

Chinese and Japanese do not separate words. Character bigrams need no dictionary and cover most two-character
words of both languages (重置/密码, 返品/配送), which is why CJK retrieval systems index them (Lucene's CJKAnalyzer);
a segmenter that ships its dictionary in a wheel (jieba for Chinese, a MeCab dictionary for Japanese) would add a
package of tens of MB per language for names of three terms. A Han run is cut at Chinese function characters
(的, 了, 吗, pronouns) and question words (什么, 怎么) before its bigrams are taken; a katakana run (a Japanese
loanword: パスワード) is one term; hiragana (Japanese particles and endings) is dropped. Korean Hangul is spaced, so
it is taken as words like Latin script. Stop words of English, German, French, Spanish, Portuguese and Italian
are dropped.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["STOP_WORDS", "terms_of"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KANA = r"\u3040-\u30ff\u31f0-\u31ff"
_TOKEN = re.compile(rf"[{_HAN}]+|[\u30a0-\u30ff\u31f0-\u31ff]{{2,}}|[\u3040-\u309f]+|[^\W\d_{_HAN}{_KANA}]{{2,}}")
_HAN_RUN = re.compile(rf"^[{_HAN}]+$")
_HIRAGANA_RUN = re.compile(r"^[\u3040-\u309f]+$")

# Chinese function characters and question or filler words: a run of Han characters is cut at them before its
# bigrams are taken, so that 如何重置我的密码 gives 重置 and 密码 rather than 何重 or 置我.
_HAN_FUNCTION = "的了吗呢吧啊么呀之我你他她它"
_HAN_STOP = _words(
    "什么 怎么样 怎么办 怎么 怎样 如何 为什么 为何 哪些 哪个 哪里 可以 能否 是否 请问 我们 你们 他们 "
    "这个 那个 一个 没有 自己 需要 时候 还是 或者 因为 所以 如果 但是 就是 想要 应该 方法 教"
)
_HAN_CUT = re.compile(
    "|".join(sorted((re.escape(w) for w in _HAN_STOP), key=len, reverse=True)) + f"|[{_HAN_FUNCTION}]"
)

STOP_WORDS = _words(
    """
    a about above after again against all am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further get got had has have having he her
    here hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or
    other our out over own please same she should so some such than that the their them then there these they
    this those through to too under until up very want was we were what when where which while who whom why will
    with would you your yours can't don't i'm it's what's how's
    aber alle als am an auch auf aus bei bin bis bitte da das dass dem den der des die doch du ein eine einem
    einen einer es für hat habe haben ich ihr im in ist ja kann kein keine mein meine mich mit nach nicht noch
    nur oder sich sie sind so um und uns von vor war was wenn wie wir wo zu zum zur über
    au aux avec ce ces comment dans de des du elle en est et il je la le les leur lui ma mais me mes moi mon ne
    nous on ou par pas pour qu que qui quoi sa se ses son sur ta te tes toi ton tu un une vos votre vous est-ce
    al como cómo con cuál cuando de del el ella en es esta este hay la las lo los me mi mis no para pero por puedo qué
    que se si sin sobre su sus tengo un una uno y yo
    ao aos com da das do dos em eu isso na nas no nos num numa os ou para pelo pela quando sem seu sua um uma você
    ai che chi come con da dei della delle di gli il io la le lo nel nella per più posso quale sono una uno
    """
)


def _han_terms(run: str) -> list[str]:
    """A Han run's bigrams, cut first at function characters and question words. A character left alone is
    dropped: in Japanese it is mostly the stem of a verb written with kana (忘れる, お願い), in Chinese a word too
    short to tell topics apart."""
    terms: list[str] = []
    for piece in _HAN_CUT.split(run):
        terms.extend(piece[i : i + 2] for i in range(len(piece) - 1))
    return terms


def terms_of(text: str) -> list[str]:
    """The terms of ``text``, lower-cased after NFKC (full-width Latin and half-width katakana folded), in order:
    Han runs as bigrams, katakana runs (Japanese loanwords) whole, hiragana dropped, other scripts as words.

    >>> terms_of("How do I reset my password?")
    ['reset', 'password']
    >>> terms_of("如何重置我的密码")
    ['重置', '密码']
    >>> terms_of("パスワードを忘れました")
    ['パスワード']
    """
    terms: list[str] = []
    for token in _TOKEN.findall(unicodedata.normalize("NFKC", text).lower()):
        if _HAN_RUN.match(token):
            terms.extend(_han_terms(token))
        elif not _HIRAGANA_RUN.match(token) and token not in STOP_WORDS:
            terms.append(token)
    return terms

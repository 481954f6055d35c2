#!/usr/bin/env python3
"""Generates the tokenizer goldens under tests/tokenizer/data/ from Hugging Face `tokenizers` and
`transformers` (versions pinned in scripts/tokenizer/requirements.txt).

    python3 -m venv .venv-tok && .venv-tok/bin/pip install -r scripts/tokenizer/requirements.txt
    .venv-tok/bin/python scripts/tokenizer/make_goldens.py

Everything is deterministic (fixed seeds, no clock), so rerunning reproduces the committed files byte for
byte. Outputs:
  encode_corpus.bin   >= 1 MB of varied text with HF ids (format: see write_corpus)
  decode_cases.json   id sequences (including ones that split UTF-8 characters) with HF decode output
  chat_cases.json     conversations rendered by transformers' apply_chat_template, with their ids
  utf8_cases.json     invalid UTF-8 byte strings with Python's errors="replace" repair and its ids
  qwen3c_expected.json  size/FNV-1a hash/sample entries of the qwen3.c .tokenizer file (exporter logic)
"""
import json
import math
import os
import random
import struct
import sys
import unicodedata

from tokenizers import Tokenizer
from transformers import AutoTokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOK_DIR = os.path.join(ROOT, "models", "tokenizers", "qwen3")
OUT = os.path.join(ROOT, "tests", "tokenizer", "data")

SENTENCES = [
    "The quick brown fox jumps over the lazy dog. It's 4:30pm and we'll leave soon; they'd said they're ready.",
    "Don't panic! I'M SURE YOU'LL BE FINE, YOU'VE DONE IT BEFORE, HE'D SAY.",
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. Straße, Maß, Fußgänger.",
    "Voix ambiguë d'un cœur qui, au zéphyr, préfère les jattes de kiwis. L'été où Noël arriva à Paris.",
    "El pingüino Wenceslao hizo kilómetros bajo exhaustiva lluvia y frío, añoraba a su querido cachorro. ¿Qué tal? ¡Olé!",
    "Português: À noite, vovô Kowalsky vê o ímã cair no pé do pinguim queixoso e vovó põe açúcar no chá de tâmaras do jabuti feliz.",
    "Pchnąć w tę łódź jeża lub ośm skrzyń fig. Zażółć gęślą jaźń.",
    "Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Árvíztűrő tükörfúrógép. Türkçe: Pijamalı hasta yağız şoföre çabucak güvendi. İstanbul ılık.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю. Ёлка, ЙОД, ъ, ь.",
    "Україна: Чуєш їх, доцю, га? Кумедна ж ти, прощайся без ґольфів!",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Ἀρχιμήδης ἔφη· δός μοι πᾶ στῶ καὶ τὰν γᾶν κινάσω.",
    "صِف خَلقَ خَودِ كَمِثلِ الشَمسِ إِذ بَزَغَت — يَحظى الضَجيعُ بِها نَجلاءَ مِعطارِ. العربية ١٢٣٤٥٦٧٨٩٠",
    "עטלף אבק נס דרך מזגן שהתפוצץ כי חם. שָׁלוֹם עֲלֵיכֶם",
    "فارسی: به نام خداوند جان و خرد کزین برتر اندیشه برنگذرد ۱۴۰۲",
    "हिन्दी: ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम। क्षत्रिय ज्ञान",
    "বাংলা: আমি তোমাকে ভালোবাসি। কৃষ্ণচূড়া ফুল ফুটেছে।",
    "தமிழ்: யாமறிந்த மொழிகளிலே தமிழ்மொழி போல் இனிதாவது எங்கும் காணோம். கொ கோ கௌ",
    "తెలుగు: దేశ భాషలందు తెలుగు లెస్స. ಕನ್ನಡ: ಎಲ್ಲಾ ಮಾನವರೂ ಸ್ವತಂತ್ರರಾಗಿಯೇ ಜನಿಸಿದ್ದಾರೆ.",
    "മലയാളം: എല്ലാ മനുഷ്യരും തുല്യാവകാശങ്ങളോടും അന്തസ്സോടും സ്വാതന്ത്ര്യത്തോടുംകൂടി ജനിച്ചവരാണ്.",
    "ไทย: เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน ๑๒๓",
    "ລາວ: ມະນຸດທຸກຄົນເກີດມາມີສິດເສລີພາບ. ខ្មែរ: មនុស្សទាំងអស់កើតមកមានសេរីភាព",
    "မြန်မာ: လူတိုင်းသည် တူညီ လွတ်လပ်သော ဂုဏ်သိက္ခါဖြင့်လည်းကောင်း။ བོད་ཡིག་: འགྲོ་བ་མིའི་རིགས་",
    "中文：我能吞下玻璃而不伤身体。人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心。",
    "繁體：我能吞下玻璃而不傷身體。臺灣、香港、澳門。「引號」與『雙引號』——破折號……",
    "日本語：私はガラスを食べられます。それは私を傷つけません。いろはにほへと ちりぬるを カタカナ ｶﾀｶﾅ",
    "한국어: 나는 유리를 먹을 수 있어요. 그래도 아프지 않아요. 다람쥐 헌 쳇바퀴에 타고파.",
    "Tiếng Việt: Tôi có thể ăn thủy tinh mà không hại gì. Những người con của Lạc Long Quân.",
    "ქართული: მინას ვჭამ და არა მტკივა. Հայերեն: Կրնամ ապակի ուտել և ինծի անհանգիստ չըներ։",
    "አማርኛ: ብርጭቆ መብላት እችላለሁ፣ አይጎዳኝም። ᏣᎳᎩ: ᎠᏓᏅᏙ ᎠᏍᏆᏂᏏ. ᐃᓄᒃᑎᑐᑦ: ᐊᓂᔭᒃ",
    "ᚠᛇᚻ᛫ᛒᛦᚦ᛫ᚠᚱᚩᚠᚢᚱ᛫ᚠᛁᚱᚪ᛫ᚷᛖᚻᚹᛦᛚᚳᚢᛗ — 𐌰𐌽𐍃 𐍅𐌹𐌻𐌸 — 𓀀𓀁𓂀 — 𒀭𒂗𒆠",
    "Math: ∀x∈ℝ, ∃y: x²+y²≥0 ⇒ ∑ᵢ aᵢ ≤ ∫₀^∞ e^{-t} dt ≈ 1.0; √2 ≠ π ≅ 3.14159…; ∮ E·da = Q/ε₀",
    "Symbols: ©®™ ±×÷ °C °F µm Å Ω ℃ ℉ № ‰ † ‡ • ‣ ← ↑ → ↓ ↔ ⇐ ⇒ ♠♣♥♦ ★☆ ✓✗ ☺☹ ♪♫",
    "Full-width: ＡＢＣ ａｂｃ １２３ ！？＃＄％＆（）＊＋，－．／：；＜＝＞＠［＼］＾＿｀｛｜｝～ 。、「」",
    "Ligatures and compat: ﬁnance ﬂow ﬀ ﬃ ﬄ Ⅻ ⅻ ① ② ⑩ ㈱ ㎏ ㎞ ㌔ ℡ ㍻ ½ ¼ ¾ ⁰¹²³ ₀₁₂",
    "Emoji: 😀😃😄 👍🏽 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🏴‍☠️ 🇺🇸🇯🇵🇩🇪🇫🇷 🇬🇧 1️⃣ #️⃣ ❤️ ✌🏿 🧑🏻‍🤝‍🧑🏿 🏴󠁧󠁢󠁳󠁣󠁴󠁿",
    "Mixed: Hello世界! 123abc ABC123 a1b2c3 x_y_z CamelCaseWords snake_case_words kebab-case-words",
]

CODE = [
    '''def fibonacci(n: int) -> list[int]:
    """Return the first n Fibonacci numbers."""
    a, b = 0, 1
    out = []
    for _ in range(n):
        out.append(a)
        a, b = b, a + b
    return out


if __name__ == "__main__":
    print(fibonacci(10))  # [0, 1, 1, 2, 3, 5, 8, 13, 21, 34]
''',
    '''#include <vector>
#include <cstdio>

template <typename T>
static T sum(const std::vector<T>& v) {
\tT s{};
\tfor (const auto& x : v) s += x;   // accumulate
\treturn s;
}

int main(int argc, char** argv) {
\tstd::vector<int> v{1, 2, 3, 0x7f, 0b1010, 1'000'000};
\tstd::printf("%d\\n", sum(v));
\treturn argc > 1 ? 1 : 0;
}
''',
    '''{"name": "qtune", "version": "0.1.0", "nested": {"array": [1, 2.5, -3e10, true, false, null],
  "unicode": "caf\\u00e9 \\ud83d\\ude00", "empty": {}, "list": []}}''',
    '''<!DOCTYPE html>\r\n<html lang="en">\r\n<head><meta charset="utf-8"><title>Test &amp; demo</title></head>\r\n<body>\r\n  <div class="a b" id='x'>&lt;tag&gt; &#x1F600; &nbsp;</div>\r\n</body>\r\n</html>\r\n''',
    '''SELECT u.id, COUNT(*) AS n FROM users u LEFT JOIN orders o ON o.user_id = u.id
WHERE u.created_at >= '2024-01-01' AND u.email LIKE '%@example.com' GROUP BY u.id HAVING n > 3 ORDER BY n DESC;''',
    '''fn main() {
    let v: Vec<u32> = (1..=10).filter(|x| x % 2 == 0).map(|x| x * x).collect();
    println!("{:?}", v);
    match v.len() { 0 => {}, n if n > 3 => println!("big {n}"), _ => unreachable!() }
}
''',
    '''#!/usr/bin/env bash\nset -euo pipefail\nfor f in *.txt; do\n  [[ -s "$f" ]] && wc -l "$f" | awk '{print $1}' >> counts.log\ndone\necho "done: $(date -u +%FT%TZ)" 2>&1\n''',
    '''    \t  mixed   indentation\t\t\there\n\n\n\n    trailing spaces    \n\t\n''',
    '''# Title\n\n* item **bold** _it_ `code` [link](https://example.com/path?q=1&r=2#frag)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nx = {'k': [1, 2]}\n```\n''',
    '''x = 3.14159265358979; y = -0.000001; z = 1e-9; w = 6.022e23; big = 123456789012345678901234567890\nhex = 0xDEADBEEF; oct = 0o755; bin = 0b1101; phone = +1 (555) 010-9999; date = 2024-02-29T23:59:59.999Z\n''',
]

SPECIAL_SNIPPETS = [
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
    "<think>\nLet me think about this step by step.\n</think>\n\nThe answer is 42.",
    "text<|endoftext|>more text<|endoftext|><|endoftext|>",
    " <|im_start|> spaced <|im_end|> tokens ",
    "<|im_start<|im_start|>|> <<|im_end|>> <|im_end <|im_end|| <|IM_START|> < think> <think > <Think>",
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    "<tool_response>\n{\"temp\": 21}\n</tool_response>",
    "<|fim_prefix|>def f(x):\n    <|fim_suffix|>\n    return y<|fim_middle|>y = x * 2<|fim_pad|>",
    "<|repo_name|>qtune<|file_sep|>src/main.cpp\nint main() {}",
    "<|object_ref_start|>the cat<|object_ref_end|><|box_start|>(10,20),(30,40)<|box_end|>",
    "<|vision_start|><|image_pad|><|image_pad|><|vision_end|><|video_pad|><|vision_pad|><|quad_start|><|quad_end|>",
    "<think></think><think>\n\n</think>\n\n</think></think>",
    "e\u0301<think>\u0301 x<|im_end|>\u0308a",
]

WHITESPACE = ["\u0009", "\u000a", "\u000b", "\u000c", "\u000d", "\u0020", "\u0085", "\u00a0", "\u1680", "\u180e",
              "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006", "\u2007", "\u2008", "\u2009",
              "\u200a", "\u200b", "\u200c", "\u200d", "\u2028", "\u2029", "\u202f", "\u205f", "\u2060", "\u3000",
              "\ufeff", "\u001c", "\u001d", "\u001e", "\u001f", "\u0000", "\u0001", "\u007f"]

# Unicode blocks sampled for letters / marks / digits (start, end inclusive).
BLOCKS = [(0x0041, 0x024F), (0x0250, 0x02FF), (0x0370, 0x03FF), (0x0400, 0x052F), (0x0530, 0x058F),
          (0x0590, 0x05FF), (0x0600, 0x06FF), (0x0700, 0x074F), (0x0780, 0x07BF), (0x0900, 0x097F),
          (0x0980, 0x09FF), (0x0A00, 0x0A7F), (0x0A80, 0x0AFF), (0x0B00, 0x0B7F), (0x0B80, 0x0BFF),
          (0x0C00, 0x0C7F), (0x0C80, 0x0CFF), (0x0D00, 0x0D7F), (0x0D80, 0x0DFF), (0x0E00, 0x0E7F),
          (0x0E80, 0x0EFF), (0x0F00, 0x0FFF), (0x1000, 0x109F), (0x10A0, 0x10FF), (0x1100, 0x11FF),
          (0x1200, 0x139F), (0x13A0, 0x13FF), (0x1400, 0x167F), (0x1780, 0x17FF), (0x1800, 0x18AF),
          (0x1E00, 0x1EFF), (0x1F00, 0x1FFF), (0x2000, 0x206F), (0x20A0, 0x20CF), (0x2100, 0x214F),
          (0x2190, 0x23FF), (0x2460, 0x24FF), (0x2500, 0x27BF), (0x2C00, 0x2E7F), (0x3000, 0x30FF),
          (0x3100, 0x31FF), (0x3200, 0x33FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA000, 0xA4CF),
          (0xA4D0, 0xA82F), (0xAC00, 0xD7A3), (0xF900, 0xFAFF), (0xFB00, 0xFDFF), (0xFE00, 0xFE6F),
          (0xFF00, 0xFFEF), (0x10000, 0x1007F), (0x10300, 0x1034F), (0x10400, 0x1047F), (0x11000, 0x1107F),
          (0x12000, 0x123FF), (0x13000, 0x1342F), (0x16800, 0x16A3F), (0x1D400, 0x1D7FF), (0x1F000, 0x1F0FF),
          (0x1F300, 0x1F64F), (0x1F680, 0x1F6FF), (0x1F900, 0x1F9FF), (0x20000, 0x2A6DF), (0x2F800, 0x2FA1F),
          (0xE0000, 0xE007F), (0xE000, 0xE0FF), (0xF0000, 0xF00FF)]


def assigned(cp):
    c = chr(cp)
    cat = unicodedata.category(c)
    return cat not in ("Cn", "Cs")


def block_chars():
    out = []
    for lo, hi in BLOCKS:
        chars = [chr(cp) for cp in range(lo, hi + 1) if assigned(cp)]
        if chars:
            out.append(chars)
    return out


def rand_word(rng, chars, lo=1, hi=9):
    return "".join(rng.choice(chars) for _ in range(rng.randint(lo, hi)))


def gen_script_text(rng, blocks, n_docs):
    docs = []
    for _ in range(n_docs):
        chars = rng.choice(blocks)
        other = rng.choice(blocks)
        words = []
        for _ in range(rng.randint(5, 60)):
            r = rng.random()
            if r < 0.75:
                words.append(rand_word(rng, chars))
            elif r < 0.85:
                words.append(rand_word(rng, other, 1, 4))
            elif r < 0.92:
                words.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
            else:
                words.append(rng.choice([",", ".", "!", "?", ";", ":", "—", "(", ")", "\"", "'s", "...", "'LL"]))
        seps = [" ", " ", " ", "  ", "\n", "\t", "\r\n", "", " \n ", "\u3000"]
        docs.append("".join(w + rng.choice(seps) for w in words))
    return docs


def gen_random_codepoints(rng, n_docs):
    docs = []
    for _ in range(n_docs):
        s = []
        for _ in range(rng.randint(1, 200)):
            while True:
                cp = rng.choice([rng.randint(0, 0x7F), rng.randint(0, 0x7FF), rng.randint(0, 0xFFFF),
                                 rng.randint(0, 0x10FFFF)])
                if assigned(cp) or rng.random() < 0.02 and not (0xD800 <= cp <= 0xDFFF):
                    break
            s.append(chr(cp))
        docs.append("".join(s))
    return docs


def gen_combining(rng, n_docs):
    marks = [chr(cp) for cp in range(0x0300, 0x0370)] + [chr(cp) for cp in range(0x1AB0, 0x1ACF)] + \
            [chr(cp) for cp in range(0x1DC0, 0x1E00)] + [chr(cp) for cp in range(0x20D0, 0x20F1)] + \
            ["\u093c", "\u094d", "\u05b0", "\u05bc", "\u0e31", "\u3099", "\u309a", "\u0bbe", "\u0cd5", "\u0334"]
    marks = [m for m in marks if assigned(ord(m))]
    bases = list("aeiouAEIOUcnsyzCNSYZ") + ["\u0391", "\u03b1", "\u0415", "\u0435", "\u0915", "\u0b95", "\u304b", "\u30cf"]
    jamo_l = [chr(cp) for cp in range(0x1100, 0x1113)]
    jamo_v = [chr(cp) for cp in range(0x1161, 0x1176)]
    jamo_t = [chr(cp) for cp in range(0x11A8, 0x11C3)]
    singletons = ["\u212b", "\u2126", "\u212a", "\u0340", "\u0341", "\u0343", "\u0374", "\u037e", "\u0387",
                  "\u1f71", "\u2000", "\u2001", "\uf900", "\ufa10", "\u2f800", "\u0958", "\u0f43", "\ufb1d"]
    docs = []
    for _ in range(n_docs):
        parts = []
        for _ in range(rng.randint(3, 40)):
            r = rng.random()
            if r < 0.45:
                parts.append(rng.choice(bases) + "".join(rng.choice(marks) for _ in range(rng.randint(1, 4))))
            elif r < 0.6:
                parts.append(rng.choice(jamo_l) + rng.choice(jamo_v) + (rng.choice(jamo_t) if rng.random() < 0.5 else ""))
            elif r < 0.7:
                parts.append(rng.choice(singletons))
            elif r < 0.85:
                word = rand_word(rng, list("àéîõüçñÅåøæœßÉÈÊËĀāĒēĪīŌōŪū"), 2, 8)
                parts.append(unicodedata.normalize(rng.choice(["NFD", "NFC", "NFKD"]), word))
            else:
                parts.append(rng.choice([" ", "  ", "\n", "-", "'", "\u0301 "]))
        docs.append("".join(parts))
    return docs


def gen_whitespace(rng):
    docs = []
    for c in WHITESPACE:
        for ctx in ["a{c}b", "a{c}{c}b", "a{c} b", "a {c}b", "{c}\n", "\n{c}", "{c}", "{c}{c}{c}", "x{c}\r\ny",
                    "1{c}2", ".{c}.", "{c}'s", "'{c}s", "a {c}{c} ", "\t{c}\t"]:
            docs.append(ctx.replace("{c}", c))
    for _ in range(150):
        docs.append("".join(rng.choice(WHITESPACE[:8] + ["a", "b", ".", "1", " ", "  ", "\r\n"])
                            for _ in range(rng.randint(1, 80))))
    docs.append(" " * 5000 + "x" + " " * 3000)
    docs.append("\n" * 1000 + "\r\n" * 500 + "\t" * 700)
    docs.append("a" * 20000)
    docs.append("ab" * 5000 + " " + "xyz" * 3000)
    docs.append("1234567890" * 500)
    docs.append("=" * 3000 + "-" * 3000 + "#" * 2000)
    docs.append("\u00e9" * 3000 + "\u4e2d" * 2000 + "\U0001F600" * 1000)
    docs.append("e\u0301" * 2000)
    return docs


def gen_numbers(rng, n_docs):
    docs = []
    for _ in range(n_docs):
        parts = []
        for _ in range(rng.randint(5, 40)):
            k = rng.randint(0, 7)
            if k == 0:
                parts.append(str(rng.randint(-10 ** 18, 10 ** 18)))
            elif k == 1:
                parts.append(f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 9)}f}")
            elif k == 2:
                parts.append(f"{rng.random():e}")
            elif k == 3:
                parts.append(f"{rng.randint(1, 28):02d}/{rng.randint(1, 12):02d}/{rng.randint(1900, 2100)}")
            elif k == 4:
                parts.append(f"{rng.randint(0, 10 ** 9):,}")
            elif k == 5:
                parts.append("".join(rng.choice("٠١٢٣٤٥٦٧٨٩०१२३४५६७८९０１２３４５６７８９①②③ⅠⅡⅢ½²³") for _ in range(rng.randint(1, 8))))
            elif k == 6:
                parts.append(hex(rng.randint(0, 2 ** 64)))
            else:
                parts.append(f"v{rng.randint(0, 20)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}-rc{rng.randint(1, 9)}")
        docs.append(rng.choice([" ", ", ", "\n", "; ", "\t"]).join(parts))
    return docs


def gen_emoji(rng, n_docs):
    base = [chr(cp) for cp in range(0x1F600, 0x1F64F)] + [chr(cp) for cp in range(0x1F900, 0x1F9FF) if assigned(cp)]
    tones = [chr(cp) for cp in range(0x1F3FB, 0x1F400)]
    people = ["\U0001F468", "\U0001F469", "\U0001F467", "\U0001F466", "\U0001F9D1"]
    flags = [chr(0x1F1E6 + i) for i in range(26)]
    docs = []
    for _ in range(n_docs):
        parts = []
        for _ in range(rng.randint(3, 30)):
            k = rng.randint(0, 6)
            if k == 0:
                parts.append(rng.choice(base))
            elif k == 1:
                parts.append(rng.choice(base) + rng.choice(tones))
            elif k == 2:
                parts.append("\u200d".join(rng.choice(people) for _ in range(rng.randint(2, 4))))
            elif k == 3:
                parts.append(rng.choice(flags) + rng.choice(flags))
            elif k == 4:
                parts.append(rng.choice("0123456789#*") + "\ufe0f\u20e3")
            elif k == 5:
                parts.append(rng.choice(["\u2764\ufe0f", "\u263a\ufe0e", "\U0001F3F3\ufe0f\u200d\U0001F308"]))
            else:
                parts.append(rand_word(rng, list("abcdefghij klmnop"), 1, 6))
        docs.append(rng.choice(["", " ", "  "]).join(parts))
    return docs


def gen_special_mix(rng, n_docs, added):
    docs = list(SPECIAL_SNIPPETS)
    pieces = added + ["<", ">", "|", "<|", "|>", "think", "/think", "im_start", " ", "\n", "hello", "世界",
                      "e\u0301", "\r\n", "  ", "'s"]
    for _ in range(n_docs):
        docs.append("".join(rng.choice(pieces) for _ in range(rng.randint(2, 40))))
    return docs


def fullwidth_and_compat(rng, n_docs):
    pool = [chr(cp) for cp in range(0xFF01, 0xFF5F)] + [chr(cp) for cp in range(0xFF61, 0xFFA0)] + \
           [chr(cp) for cp in range(0xFB00, 0xFB07)] + [chr(cp) for cp in range(0x2460, 0x24FF)] + \
           [chr(cp) for cp in range(0x3300, 0x3400)] + list("abc ABC 123 ")
    return ["".join(rng.choice(pool) for _ in range(rng.randint(5, 100))) for _ in range(n_docs)]


def build_corpus(rng, added):
    blocks = block_chars()
    docs = []
    docs += SENTENCES
    docs += [" ".join(rng.sample(SENTENCES, 5)) for _ in range(200)]
    docs += CODE
    docs += ["\n".join(rng.sample(CODE, 4)) for _ in range(60)]
    docs += gen_whitespace(rng)
    docs += gen_script_text(rng, blocks, 1300)
    docs += gen_random_codepoints(rng, 700)
    docs += gen_combining(rng, 500)
    docs += gen_numbers(rng, 300)
    docs += gen_emoji(rng, 300)
    docs += gen_special_mix(rng, 400, added)
    docs += fullwidth_and_compat(rng, 200)
    docs += [unicodedata.normalize("NFD", s) for s in SENTENCES]
    docs += [unicodedata.normalize("NFKC", s) for s in SENTENCES]
    docs += [s.replace("\n", "\r\n") for s in CODE]
    docs.append("")
    return docs


def uleb(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def write_corpus(path, items):
    """Binary: b"QTKG1\\n", u32 count; per document: u32 flags (bit 0: expected decode differs from the text
    and follows), u32 len + text, [u32 len + decode], u32 id count, ids as unsigned LEB128."""
    with open(path, "wb") as f:
        f.write(b"QTKG1\n")
        f.write(struct.pack("<I", len(items)))
        for text, decoded, ids in items:
            tb = text.encode("utf-8")
            differs = decoded != text
            f.write(struct.pack("<I", 1 if differs else 0))
            f.write(struct.pack("<I", len(tb)))
            f.write(tb)
            if differs:
                db = decoded.encode("utf-8")
                f.write(struct.pack("<I", len(db)))
                f.write(db)
            f.write(struct.pack("<I", len(ids)))
            f.write(b"".join(uleb(i) for i in ids))


CHATS = [
    ("single_user", [{"role": "user", "content": "Hello!"}], {}),
    ("system_user", [{"role": "system", "content": "You are a helpful assistant."},
                     {"role": "user", "content": "What is 2+2?"}], {}),
    ("no_think", [{"role": "user", "content": "Give me a short answer."}], {"enable_thinking": False}),
    ("think_explicit", [{"role": "user", "content": "Think hard."}], {"enable_thinking": True}),
    ("no_gen_prompt", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
     {"add_generation_prompt": False}),
    ("multi_turn", [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a color."},
                    {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another?"}], {}),
    ("multi_turn_reasoning_stripped", [
        {"role": "user", "content": "What is 3*7?"},
        {"role": "assistant", "content": "<think>\n3 times 7 is 21.\n</think>\n\n21."},
        {"role": "user", "content": "And 4*5?"}], {}),
    ("last_assistant_keeps_reasoning", [
        {"role": "user", "content": "What is 3*7?"},
        {"role": "assistant", "content": "<think>\n3 times 7 is 21.\n</think>\n\n21."}],
     {"add_generation_prompt": False}),
    ("reasoning_content_field", [
        {"role": "user", "content": "Solve x+1=2."},
        {"role": "assistant", "content": "x = 1.", "reasoning_content": "Subtract 1 from both sides."}],
     {"add_generation_prompt": False}),
    ("reasoning_content_field_history", [
        {"role": "user", "content": "Solve x+1=2."},
        {"role": "assistant", "content": "x = 1.", "reasoning_content": "Subtract 1."},
        {"role": "user", "content": "Thanks"}], {"enable_thinking": False}),
    ("empty_reasoning", [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>\n\n</think>\n\nA"}],
     {"add_generation_prompt": False}),
    ("unicode_content", [{"role": "system", "content": "Réponds en français 🇫🇷"},
                         {"role": "user", "content": "你好！こんにちは\r\nСпасибо\t👍🏽"}], {}),
    ("system_not_first", [{"role": "user", "content": "a"}, {"role": "system", "content": "late system"},
                          {"role": "user", "content": "b"}], {}),
    ("newlines_around", [{"role": "user", "content": "\n\nleading and trailing\n\n"},
                         {"role": "assistant", "content": "\n\n<think>\n\nr1\n\n</think>\n\n\n\nanswer\n"},
                         {"role": "user", "content": "next"},
                         {"role": "assistant", "content": "\nplain\n"}], {"add_generation_prompt": False}),
    ("think_without_open_tag", [{"role": "user", "content": "q"},
                                {"role": "assistant", "content": "reasoning only</think>answer"}],
     {"add_generation_prompt": False}),
    ("tool_call", [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 21 °C and clear in Paris."}],
     {"add_generation_prompt": False}),
    ("tools_defined", [{"role": "system", "content": "You can call tools."},
                       {"role": "user", "content": "Add 2 and 3."}],
     {"tools": [{"type": "function", "function": {"name": "add", "description": "Add two numbers.",
                 "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                                "required": ["a", "b"]}}}]}),
    ("tools_no_system", [{"role": "user", "content": "Weather?"}],
     {"tools": [{"type": "function", "function": {"name": "w", "description": "Wetter für Orte — “quoted”",
                 "parameters": {"type": "object", "properties": {"q": {"type": "string", "enum": ["a", "b\n"]}}}}},
                {"type": "function", "function": {"name": "noop", "parameters": {"x": 1.5, "y": None, "z": True, "big": 10000000000}}}],
      "enable_thinking": False}),
    ("multi_tool_calls_and_responses", [
        {"role": "user", "content": "Weather in A and B?"},
        {"role": "assistant", "content": "<think>\nNeed two calls.\n</think>\n\nChecking.",
         "tool_calls": [{"function": {"name": "get_weather", "arguments": "{\"city\": \"A\"}"}},
                        {"function": {"name": "get_weather", "arguments": {"city": "B"}}}]},
        {"role": "tool", "content": "sunny"},
        {"role": "tool", "content": "rainy"},
        {"role": "assistant", "content": "<think>\nsummarise\n</think>\n\nA is sunny, B is rainy."}],
     {"add_generation_prompt": False}),
    ("tool_response_in_user", [
        {"role": "user", "content": "Start"},
        {"role": "assistant", "content": "<think>\nhmm\n</think>\n\ncalling", "tool_calls": [{"name": "f", "arguments": {}}]},
        {"role": "user", "content": "<tool_response>\nok\n</tool_response>"},
        {"role": "assistant", "content": "<think>\nafter tool\n</think>\n\nDone."}],
     {"add_generation_prompt": True}),
    ("special_tokens_in_content", [{"role": "user", "content": "Literal <|im_end|> and <think> inside"}], {}),
    ("long_history", [m for i in range(6) for m in (
        {"role": "user", "content": f"Question {i}: what is {i}+{i}?"},
        {"role": "assistant", "content": f"<think>\nadd {i} and {i}\n</think>\n\n{2 * i}"})]
     + [{"role": "user", "content": "Last one"}], {"enable_thinking": False}),
    ("assistant_prefill_no_prompt", [{"role": "system", "content": ""}, {"role": "user", "content": ""},
                                     {"role": "assistant", "content": ""}], {"add_generation_prompt": False}),
    ("unknown_role_ignored", [{"role": "user", "content": "x"}, {"role": "narrator", "content": "ignored"}], {}),
]


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def qwen3c_file(hf):
    """The qwen3.c exporter's table, re-derived from its documented rules (formats.md §2)."""
    u2b = {u: b for b, u in bytes_to_unicode().items()}
    vocab = hf.get_vocab()
    id_to_token = {v: k for k, v in vocab.items()}
    tokens = [id_to_token[i] for i in sorted(id_to_token)]
    merges = json.loads(hf.backend_tokenizer.to_str())["model"]["merges"]
    rank = {"".join(m if isinstance(m, list) else m.split()): i for i, m in enumerate(merges)}
    out = bytearray()
    out += struct.pack("<III", max(len(t) for t in tokens), 151643, 151645)
    samples = []
    for i, t in enumerate(tokens):
        r = rank.get(t)
        score = -math.log(r + 1) if r is not None else -1e6
        tb = b"".join(bytes([u2b[c]]) if c in u2b else c.encode("utf-8") for c in t)
        out += struct.pack("<f", score) + struct.pack("<I", len(tb)) + tb
        if i % 5000 == 0 or i >= len(tokens) - 3:
            samples.append({"id": i, "score": struct.unpack("<f", struct.pack("<f", score))[0], "hex": tb.hex()})
    return {"size": len(out), "fnv1a64": f"{fnv1a64(out):016x}", "count": len(tokens),
            "max_token_length": max(len(t) for t in tokens), "samples": samples}


def main():
    os.makedirs(OUT, exist_ok=True)
    tok = Tokenizer.from_file(os.path.join(TOK_DIR, "tokenizer.json"))
    hf = AutoTokenizer.from_pretrained(TOK_DIR)
    added = [t.content for t in tok.get_added_tokens_decoder().values()]
    rng = random.Random(20251122)

    docs = build_corpus(rng, added)
    items = []
    total = 0
    mismatched_nfc = 0
    for text in docs:
        ids = tok.encode(text, add_special_tokens=True).ids
        assert ids == hf(text)["input_ids"], text[:80]
        decoded = tok.decode(ids, skip_special_tokens=False)
        if decoded != unicodedata.normalize("NFC", text):
            mismatched_nfc += 1
        items.append((text, decoded, ids))
        total += len(text.encode("utf-8"))
    write_corpus(os.path.join(OUT, "encode_corpus.bin"), items)
    print(f"corpus: {len(items)} documents, {total} bytes, {sum(len(i[2]) for i in items)} ids, "
          f"{mismatched_nfc} whose HF decode differs from Python's NFC(text) (HF's NFC tables predate some marks)", file=sys.stderr)

    # Decoding: random id runs (many split multi-byte characters), special-token skipping, out-of-range ids.
    vocab_n = tok.get_vocab_size(with_added_tokens=True)
    dec = []
    for k in range(400):
        ids = [rng.randrange(vocab_n) for _ in range(rng.randint(0, 30))]
        if k % 4 == 0:
            ids = [rng.choice(list(range(124, 260)) + list(range(151643, 151669))) for _ in range(rng.randint(1, 30))]
        dec.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                    "text_skip_special": tok.decode(ids, skip_special_tokens=True)})
    for text in docs[:300:3]:
        ids = tok.encode(text).ids
        dec.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                    "text_skip_special": tok.decode(ids, skip_special_tokens=True)})
    with open(os.path.join(OUT, "decode_cases.json"), "w", encoding="utf-8") as f:
        json.dump(dec, f, ensure_ascii=False, separators=(",", ":"))

    chats = []
    for name, messages, opts in CHATS:
        kwargs = {"add_generation_prompt": opts.get("add_generation_prompt", True)}
        if "enable_thinking" in opts:
            kwargs["enable_thinking"] = opts["enable_thinking"]
        if "tools" in opts:
            kwargs["tools"] = opts["tools"]
        rendered = hf.apply_chat_template(messages, tokenize=False, **kwargs)
        chats.append({"name": name, "messages": messages, "tools": opts.get("tools", []),
                      "add_generation_prompt": kwargs["add_generation_prompt"],
                      "enable_thinking": opts.get("enable_thinking", True),
                      "rendered": rendered, "ids": tok.encode(rendered).ids})
    with open(os.path.join(OUT, "chat_cases.json"), "w", encoding="utf-8") as f:
        json.dump(chats, f, ensure_ascii=False, indent=1)

    bad = [b"\xff", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98", b"\xed\xa0\x80",
           b"\xc0\xaf", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xfe\xff",
           b"ok \xf0\x9f\x98\x80 \xf0\x9f end", b"\xe0\xa0", b"\xf0\x90\x80", b"\xcc\x81\xff\xcc\x81"]
    for _ in range(60):
        raw = bytearray(rng.choice(docs[:300]).encode("utf-8")[:60])
        for _ in range(rng.randint(1, 4)):
            if raw:
                raw[rng.randrange(len(raw))] = rng.randrange(256)
        bad.append(bytes(raw))
    utf8 = []
    for raw in bad:
        repaired = raw.decode("utf-8", "replace")
        utf8.append({"hex": raw.hex(), "valid": repaired.encode("utf-8") == raw, "repaired": repaired,
                     "ids": tok.encode(repaired).ids})
    with open(os.path.join(OUT, "utf8_cases.json"), "w", encoding="utf-8") as f:
        json.dump(utf8, f, ensure_ascii=False, indent=0)

    with open(os.path.join(OUT, "qwen3c_expected.json"), "w", encoding="utf-8") as f:
        json.dump(qwen3c_file(hf), f, indent=1)


if __name__ == "__main__":
    main()

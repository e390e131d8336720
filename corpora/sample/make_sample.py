#!/usr/bin/env python3
# SPDX-License-Identifier: CC0-1.0
"""Generate the spacy-w2ner sample NER corpus: ``train.json`` and ``dev.json``.

Every sentence is synthetic: hand-written templates (below) filled from hand-written
word lists with a fixed random seed. No third-party text is used. The corpus is
released under CC0 1.0 (public domain dedication), like this script.

Usage (standard library only)::

    python corpora/sample/make_sample.py           # write train.json + dev.json next to this file
    python corpora/sample/make_sample.py --check   # write nothing; verify the files on disk

Both modes validate the corpus's format and generation (``validate_records`` /
``validate_corpus``); its annotation (the W2NER grid round trip, the counts and shares in
README.md) is checked with spacy-w2ner's own codec and counts by tests/project/test_sample_corpus.py. Output is byte-identical across runs and independent of
``PYTHONHASHSEED`` (no set or dict-of-str iteration drives generation).

Format (W2NER JSON): a JSON array of ``{"sentence": [tokens], "ner": [{"index": [sorted
0-based token ids], "type": LABEL}]}``. An entity lists every one of its tokens; a
discontinuous entity has gaps in ``index``. English is tokenized on whitespace with
punctuation as separate tokens; Chinese is one token per character (like Resume NER).
"""
import argparse
import json
import random
import re
import sys
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

SEED = 20250611
N_TRAIN = 360
N_DEV = 90
ZH_FRACTION = 0.17
# Probability of drawing a filler from the "rare" part of a word list. The rare fillers
# are mostly seen in dev, so dev tests generalisation to drugs, body parts, names, ... that
# train shows only a few times.
RARE_P = {"train": 0.06, "dev": 0.35}
LABELS = ("DRUG", "ADR", "ORG", "LOC", "PER")
MIN_TOKENS, MAX_TOKENS = 5, 40


# --------------------------------------------------------------------------------------
# Word lists: (common, rare). All hand-written for this corpus. Organisation names are
# fictional, except a few public regulators/agencies; person names are invented
# first-name + surname combinations.
# --------------------------------------------------------------------------------------

class Ctx:
    """Per-sentence state: split, fillers already used, count of rare draws."""

    def __init__(self, split: str):
        self.split = split
        self.used: List[object] = []
        self.rare = 0


class Pool:
    def __init__(self, name: str, common: Sequence, rare: Sequence = ()):
        self.name = name
        self.common = list(common)
        self.rare = list(rare)

    def pick(self, rng: random.Random, ctx: Ctx):
        value, is_rare = None, False
        for _ in range(200):
            is_rare = bool(self.rare) and rng.random() < RARE_P[ctx.split]
            value = rng.choice(self.rare if is_rare else self.common)
            if value not in ctx.used:
                break
        else:
            raise RuntimeError(f"pool {self.name}: could not draw an unused filler")
        ctx.used.append(value)
        ctx.rare += int(is_rare)
        return value

    def pick_n(self, rng: random.Random, ctx: Ctx, n: int) -> list:
        return [self.pick(rng, ctx) for _ in range(n)]


# --- English -----------------------------------------------------------------------------
DRUGS = Pool("drug", [
    "ibuprofen", "naproxen", "aspirin", "metformin", "atorvastatin", "simvastatin",
    "lisinopril", "amlodipine", "omeprazole", "sertraline", "fluoxetine", "citalopram",
    "amoxicillin", "ciprofloxacin", "doxycycline", "prednisone", "warfarin",
    "levothyroxine", "gabapentin", "tramadol", "losartan", "metoprolol", "insulin glargine",
    "paracetamol",
], [
    "celecoxib", "diclofenac", "rosuvastatin", "pregabalin", "duloxetine", "venlafaxine",
    "clopidogrel", "apixaban", "valproic acid", "methotrexate", "hydrochlorothiazide",
    "montelukast", "allopurinol", "isotretinoin",
])
ADRS = Pool("adr", [
    "nausea", "dizziness", "headache", "rash", "insomnia", "fatigue", "diarrhea",
    "constipation", "dry mouth", "blurred vision", "hair loss", "weight gain",
    "loss of appetite", "vomiting", "drowsiness", "palpitations", "shortness of breath",
    "hives", "itching", "tremor", "night sweats", "anxiety", "stomach upset",
    "muscle cramps", "chest tightness",
], [
    "tinnitus", "metallic taste", "photosensitivity", "restless legs", "hot flashes",
    "ankle swelling", "nosebleeds", "heartburn", "vivid dreams", "brain fog",
])
FIRST = Pool("first", [
    "Maria", "John", "Aisha", "Wei", "Carlos", "Emma", "Liam", "Priya", "Olga", "Kenji",
    "Fatima", "Daniel", "Sofia", "Ahmed", "Grace", "Lucas", "Hannah", "Omar", "Chloe",
    "Mateo", "Sarah", "David",
], ["Ingrid", "Tariq", "Mei", "Rafael", "Zoe", "Kwame", "Anika", "Bruno"])
LAST = Pool("last", [
    "Smith", "Garcia", "Patel", "Nguyen", "Kim", "Okafor", "Rossi", "Novak", "Silva",
    "Brown", "Cohen", "Kowalski", "Haddad", "Jensen", "Tanaka", "Murphy", "Dubois",
    "Mensah", "Walker", "Lopez",
], ["Lindqvist", "Oyelaran", "Castellano", "Horvath", "Abiodun", "Varga", "Fitzgerald"])
CITIES = Pool("city", [
    "Toronto", "Boston", "Chicago", "Denver", "Seattle", "Houston", "Atlanta", "Dublin",
    "Manchester", "Leeds", "Glasgow", "Melbourne", "Sydney", "Auckland", "Ottawa",
    "Montreal", "Vancouver", "New York", "San Diego", "Los Angeles", "Cape Town",
], [
    "Winnipeg", "Adelaide", "Cardiff", "Halifax", "Wellington", "Salt Lake City", "Tucson",
    "Nairobi", "Lisbon", "Calgary",
])
COUNTRIES = Pool("country", [
    "Canada", "Australia", "Ireland", "Kenya", "India", "Brazil", "Germany", "Spain",
    "Japan", "Mexico", "Scotland", "New Zealand", "United States",
], ["Portugal", "Chile", "Ghana", "Norway"])
# The country of each city, for "Toronto , Canada".
CITY_COUNTRY = {
    "Toronto": "Canada", "Ottawa": "Canada", "Montreal": "Canada", "Vancouver": "Canada",
    "Winnipeg": "Canada", "Halifax": "Canada", "Calgary": "Canada",
    "Boston": "United States", "Chicago": "United States", "Denver": "United States",
    "Seattle": "United States", "Houston": "United States", "Atlanta": "United States",
    "New York": "United States", "San Diego": "United States", "Los Angeles": "United States",
    "Salt Lake City": "United States", "Tucson": "United States", "Dublin": "Ireland",
    "Manchester": "England", "Leeds": "England", "Glasgow": "Scotland", "Cardiff": "Wales",
    "Melbourne": "Australia", "Sydney": "Australia", "Adelaide": "Australia",
    "Auckland": "New Zealand", "Wellington": "New Zealand", "Cape Town": "South Africa",
    "Nairobi": "Kenya", "Lisbon": "Portugal",
}
# ORG patterns that contain a LOC ({C}) or a PER ({P}).
ORG_LOC_PATTERNS = Pool("org_loc", [
    "University of {C} Hospital", "{C} General Hospital", "{C} University",
    "University of {C}", "{C} Medical Center", "{C} Heart Institute", "{C} Cancer Centre",
], ["{C} Royal Infirmary", "{C} Poison Control Centre"])
ORG_PER_PATTERNS = Pool("org_per", [
    "{P} Memorial Hospital", "{P} Cancer Centre", "{P} Foundation", "{P} Clinic",
], ["{P} Family Health Team"])
# (name, nested label, nested text) -- public agencies and fictional companies.
ORG_AGENCIES = Pool("agency", [
    ("Food and Drug Administration", None, None), ("FDA", None, None),
    ("European Medicines Agency", None, None), ("World Health Organization", None, None),
    ("Health Canada", "LOC", "Canada"), ("Therapeutic Goods Administration", None, None),
    ("MHRA", None, None), ("Meridian Health", None, None),
    ("Northfield Pharmaceuticals", None, None), ("Bluewater Labs", None, None),
], [
    ("Pharmacovigilance Programme of India", "LOC", "India"), ("Swissmedic", None, None),
    ("Medsafe", None, None), ("Redwood Biologics", None, None),
])
ORG_COMPANIES = Pool("company", [
    "Northfield Pharmaceuticals", "Bluewater Labs", "Crestline Pharma", "Harbor Biotech",
    "Silverline Therapeutics", "Oakridge Generics", "Meridian Health",
], ["Lakeside Pharma", "Redwood Biologics", "Pinecrest Medical"])

# Symptom heads, adjectives and body parts for coordinated (discontinuous) ADRs.
HEADS_IN = Pool("head_in", [
    "pain", "aches", "stiffness", "swelling", "cramps", "numbness", "tingling", "weakness",
    "soreness", "burning",
], ["throbbing", "twitching"])
HEADS_ON = Pool("head_on", ["rash", "itching", "hives", "redness", "blisters", "red spots"],
                ["dry patches", "peeling"])
ADJECTIVES = Pool("adj", ["severe", "mild", "persistent", "intermittent", "moderate", "constant"],
                  ["occasional", "excruciating"])
PAIN_ADJECTIVES = ["sharp", "dull", "stabbing"]
PARTS_IN = Pool("part_in", [
    "knees", "ankles", "wrists", "elbows", "shoulders", "hips", "feet", "hands", "legs",
    "arms", "fingers", "toes", "calves", "thighs", "lower back", "neck", "jaw", "back",
], ["forearms", "shins", "heels", "knuckles", "ribs", "upper back"])
PARTS_ON = Pool("part_on", [
    "arms", "legs", "chest", "back", "face", "neck", "hands", "feet", "abdomen", "scalp",
], ["forearms", "shins", "palms", "eyelids"])
# (singular, plural) for "pain and swelling in the left knee / in both knees".
PART_PAIRS = Pool("part_pair", [
    ("knee", "knees"), ("ankle", "ankles"), ("wrist", "wrists"), ("elbow", "elbows"),
    ("shoulder", "shoulders"), ("hip", "hips"), ("foot", "feet"), ("hand", "hands"),
    ("leg", "legs"), ("arm", "arms"),
], [("heel", "heels"), ("thumb", "thumbs")])
SIDE_PARTS = Pool("side_part", [
    "knee", "hip", "shoulder", "ankle", "wrist", "elbow", "foot", "hand", "arm", "leg",
    "eye", "ear", "calf",
], ["heel", "thumb", "groin"])
SIDE_SYMPTOMS = ["pain", "swelling", "stiffness", "weakness", "numbness", "soreness", "discomfort"]
SIDE_SYMPTOMS_BY_PART = {"eye": ["pain", "redness", "irritation"], "ear": ["pain", "discomfort"]}
VERTICAL_PARTS = {"back": ["pain", "stiffness", "soreness"], "abdominal": ["pain", "cramps", "discomfort"],
                  "limb": ["weakness", "numbness", "pain"]}
JOINT_PARTS = Pool("joint", [
    "knee", "hip", "ankle", "shoulder", "wrist", "elbow", "jaw", "neck", "back", "foot",
    "finger",
], ["toe", "heel"])
JOINT_SYMPTOMS = ["pain", "stiffness", "swelling", "soreness", "discomfort"]
TRUNK_PARTS = Pool("trunk", ["chest", "abdominal", "stomach", "back", "pelvic"], ["rib", "flank"])
TRUNK_SYMPTOMS = ["pain", "discomfort"]
# "muscle aches and weakness": modifier + heads.
MODIFIED = {
    "muscle": ["aches", "weakness", "cramps", "stiffness", "pain", "tenderness", "spasms", "twitching"],
    "joint": ["pain", "stiffness", "swelling", "tenderness"],
    "abdominal": ["pain", "cramps", "bloating", "discomfort"],
    "skin": ["rash", "itching", "dryness", "redness", "peeling"],
    "stomach": ["cramps", "pain", "upset"],
    "eye": ["irritation", "redness", "dryness", "pain"],
}
MODIFIERS = Pool("modifier", ["muscle", "joint", "abdominal", "skin", "stomach"], ["eye"])
DOSES = ["5", "10", "20", "25", "40", "50", "100", "200", "250", "400", "500", "850", "1000"]
INDICATIONS = ["high blood pressure", "type 2 diabetes", "an infection", "arthritis",
               "depression", "high cholesterol", "acid reflux", "a chest infection", "gout"]

# --- Chinese (one token per character) ----------------------------------------------------
ZH_DRUGS = Pool("zh_drug", [
    "阿司匹林", "布洛芬", "二甲双胍", "青霉素", "阿莫西林", "奥美拉唑", "华法林", "氯雷他定",
    "辛伐他汀", "氨氯地平", "胰岛素", "对乙酰氨基酚",
], ["地塞米松", "甲硝唑", "头孢克肟", "阿托伐他汀", "舍曲林", "加巴喷丁"])
ZH_ADRS = Pool("zh_adr", [
    "恶心", "呕吐", "头晕", "皮疹", "失眠", "腹泻", "乏力", "心悸", "便秘", "干咳", "食欲不振",
    "嗜睡", "口干", "脱发", "视力模糊", "水肿", "荨麻疹",
], ["耳鸣", "低血糖", "味觉异常", "光敏反应"])
ZH_SURNAMES = Pool("zh_surname", ["张", "王", "李", "刘", "陈", "杨", "赵", "黄", "周", "吴"],
                   ["欧阳", "徐", "孙", "马", "郭"])
ZH_GIVEN = Pool("zh_given", [
    "伟", "芳", "娜", "敏", "静", "磊", "强", "军", "洋", "杰", "丽", "明华", "晓燕", "建国",
    "雪梅", "志强", "海波", "婷婷",
], ["浩然", "思远", "梓萱", "一鸣", "子涵"])
ZH_CITIES = Pool("zh_city", ["北京", "上海", "广州", "杭州", "南京", "武汉", "成都", "西安", "天津", "重庆"],
                 ["长沙", "厦门", "昆明", "青岛", "苏州", "哈尔滨"])
# {C}: city (LOC); "{C}大学" inside a hospital name is itself an ORG.
ZH_ORG_LOC_PATTERNS = Pool("zh_org_loc", [
    "{C}大学", "{C}大学附属医院", "{C}大学第一医院", "{C}人民医院", "{C}儿童医院", "{C}中医院",
], ["{C}大学口腔医院", "{C}妇幼保健院"])
ZH_ORG_FLAT = Pool("zh_org_flat", [
    ("国家药品监督管理局", None, None), ("世界卫生组织", None, None), ("中国红十字会", "LOC", "中国"),
    ("中国药学会", "LOC", "中国"), ("国家卫生健康委员会", None, None),
], [("中华医学会", None, None), ("香港医院管理局", "LOC", "香港")])
# symptom -> body parts it combines with ("头" + "疼" = 头疼).
ZH_PART_SYMPTOMS = {
    "疼": (["头", "腿", "腰", "背", "胃", "牙", "肚子", "膝盖", "嗓子"], ["脖子", "脚后跟"]),
    "痛": (["头", "胸", "腹", "腰", "背", "肩", "关节"], ["颈", "腕"]),
    "麻木": (["手", "脚", "手指", "脚趾", "嘴唇"], ["舌头", "面部"]),
    "肿胀": (["脚踝", "膝盖", "小腿", "眼睑", "手指", "面部"], ["嘴唇", "手背"]),
    "酸痛": (["肌肉", "腰", "背", "肩膀", "小腿", "大腿"], ["颈部"]),
    "瘙痒": (["皮肤", "头皮", "眼睛", "手臂", "后背"], ["耳朵"]),
}
ZH_SYMPTOMS = Pool("zh_symptom", ["疼", "痛", "麻木", "肿胀", "酸痛", "瘙痒"])
ZH_PART_POOLS = {s: Pool("zh_part_" + s, c, r) for s, (c, r) in ZH_PART_SYMPTOMS.items()}
ZH_SIDE_PARTS = Pool("zh_side_part", ["手", "脚", "膝", "肩", "腿", "臂"], ["眼", "耳"])
ZH_SIDE_SYMPTOMS = ["麻木", "疼痛", "肿胀", "无力", "酸痛"]
ZH_SIDE_SYMPTOMS_BY_PART = {"眼": ["疼痛", "红肿"], "耳": ["疼痛", "鸣响"]}


# --------------------------------------------------------------------------------------
# Chunks: the tokens a slot fills in, with entities relative to the chunk.
# --------------------------------------------------------------------------------------

class Chunk:
    def __init__(self):
        self.tokens: List[str] = []
        self.ents: List[Tuple[str, List[int]]] = []

    def add(self, words: Sequence[str]) -> List[int]:
        start = len(self.tokens)
        self.tokens.extend(words)
        return list(range(start, len(self.tokens)))

    def ent(self, label: str, *groups: Sequence[int]) -> None:
        self.ents.append((label, sorted({i for g in groups for i in g})))


def en(text: str) -> List[str]:
    return text.split()


def zh(text: str) -> List[str]:
    assert not any(c.isspace() for c in text), text
    return list(text)


def flat(label: str, pool: Pool, tok: Callable[[str], List[str]]):
    def gen(rng, ctx):
        c = Chunk()
        c.ent(label, c.add(tok(pool.pick(rng, ctx))))
        return c
    return gen


def _pattern_chunk(pattern: str, fill: Dict[str, Tuple[List[str], str]], tok) -> Chunk:
    """Fill an ORG pattern; each placeholder's tokens become a nested entity."""
    c = Chunk()
    for piece in re.split(r"(\{[A-Z]\})", pattern):
        if not piece:
            continue
        if piece in fill:
            words, label = fill[piece]
            c.ent(label, c.add(words))
        else:
            c.add(tok(piece))
    c.ent("ORG", range(len(c.tokens)))
    return c


def _named_chunk(entry, tok) -> Chunk:
    name, nested_label, nested_text = entry
    c = Chunk()
    words = c.add(tok(name))
    c.ent("ORG", words)
    if nested_label:
        sub = tok(nested_text)
        for s in range(len(c.tokens) - len(sub) + 1):
            if c.tokens[s:s + len(sub)] == sub:
                c.ent(nested_label, range(s, s + len(sub)))
                break
        else:
            raise ValueError(f"{nested_text!r} not in {name!r}")
    return c


def _join_list(c: Chunk, items: Sequence[List[str]]) -> List[List[int]]:
    """Add ``a , b and c``; return each item's token ids."""
    groups = []
    for k, words in enumerate(items):
        if k:
            c.add([","] if k < len(items) - 1 else ["and"])
        groups.append(c.add(words))
    return groups


# --- English slots ------------------------------------------------------------------------

def g_per(rng, ctx):
    c = Chunk()
    c.ent("PER", c.add([FIRST.pick(rng, ctx), LAST.pick(rng, ctx)]))
    return c


def g_dr(rng, ctx):
    c = Chunk()
    c.add(["Dr."])
    names = [LAST.pick(rng, ctx)] if rng.random() < 0.6 else [FIRST.pick(rng, ctx), LAST.pick(rng, ctx)]
    c.ent("PER", c.add(names))
    return c


def g_city_country(rng, ctx):
    city = CITIES.pick(rng, ctx)
    c = Chunk()
    c.ent("LOC", c.add(en(city)))
    c.add([","])
    c.ent("LOC", c.add(en(CITY_COUNTRY[city])))
    return c


def g_org_loc(rng, ctx):
    pattern = ORG_LOC_PATTERNS.pick(rng, ctx)
    return _pattern_chunk(pattern, {"{C}": (en(CITIES.pick(rng, ctx)), "LOC")}, en)


def g_org_per(rng, ctx):
    pattern = ORG_PER_PATTERNS.pick(rng, ctx)
    return _pattern_chunk(pattern, {"{P}": ([FIRST.pick(rng, ctx), LAST.pick(rng, ctx)], "PER")}, en)


def g_agency(rng, ctx):
    return _named_chunk(ORG_AGENCIES.pick(rng, ctx), en)


def _adjective(rng, ctx, head: str, p: float) -> List[str]:
    if rng.random() >= p:
        return []
    if head == "pain" and rng.random() < 0.4:
        return [rng.choice(PAIN_ADJECTIVES)]
    return [ADJECTIVES.pick(rng, ctx)]


def coord(n: int):
    """'severe pain in knees , ankles and wrists': one ADR per body part, sharing the head."""
    def gen(rng, ctx):
        if rng.random() < 0.72:
            head, prep, parts = HEADS_IN.pick(rng, ctx), "in", PARTS_IN
        else:
            head, prep, parts = HEADS_ON.pick(rng, ctx), "on", PARTS_ON
        c = Chunk()
        shared = c.add(_adjective(rng, ctx, head, 0.5)) + c.add(en(head)) + c.add([prep])
        for group in _join_list(c, [en(p) for p in parts.pick_n(rng, ctx, n)]):
            c.ent("ADR", shared, group)
        return c
    return gen


def g_side(rng, ctx):
    """'left and right knee pain' -> 'left knee pain' (discontinuous), 'right knee pain'."""
    c = Chunk()
    if rng.random() < 0.8:
        part = SIDE_PARTS.pick(rng, ctx)
        symptom = rng.choice(SIDE_SYMPTOMS_BY_PART.get(part, SIDE_SYMPTOMS))
        sides = rng.choice([("left", "right"), ("right", "left")])
    else:
        part = rng.choice(sorted(VERTICAL_PARTS))
        symptom = rng.choice(VERTICAL_PARTS[part])
        sides = rng.choice([("upper", "lower"), ("lower", "upper")])
    adj = c.add(_adjective(rng, ctx, symptom, 0.3))
    a = c.add([sides[0]])
    c.add(["and"])
    b = c.add([sides[1]])
    tail = c.add([part]) + c.add(en(symptom))
    c.ent("ADR", adj, a, tail)
    c.ent("ADR", adj, b, tail)
    return c


def g_parts(rng, ctx):
    """'knee and hip pain' -> 'knee pain' (discontinuous), 'hip pain'."""
    if rng.random() < 0.7:
        parts, symptom = JOINT_PARTS, rng.choice(JOINT_SYMPTOMS)
    else:
        parts, symptom = TRUNK_PARTS, rng.choice(TRUNK_SYMPTOMS)
    n = 3 if rng.random() < 0.35 else 2
    c = Chunk()
    groups = _join_list(c, [en(p) for p in parts.pick_n(rng, ctx, n)])
    tail = c.add(en(symptom))
    for group in groups:
        c.ent("ADR", group, tail)
    return c


def g_mod(rng, ctx):
    """'muscle aches and weakness' -> 'muscle aches', 'muscle weakness' (discontinuous)."""
    mod = MODIFIERS.pick(rng, ctx)
    n = 3 if rng.random() < 0.4 else 2
    heads = rng.sample(MODIFIED[mod], n)
    c = Chunk()
    shared = c.add([mod])
    for group in _join_list(c, [[h] for h in heads]):
        c.ent("ADR", shared, group)
    return c


def g_heads(rng, ctx):
    """'pain and swelling in the left knee' -> two ADRs sharing the location."""
    h1, h2 = HEADS_IN.pick_n(rng, ctx, 2)
    singular, plural = PART_PAIRS.pick(rng, ctx)
    where = rng.choice([["the", "left", singular], ["the", "right", singular], ["both", plural]])
    c = Chunk()
    a = c.add([h1])
    c.add(["and"])
    b = c.add([h2])
    tail = c.add(["in"]) + c.add(where)
    c.ent("ADR", a, tail)
    c.ent("ADR", b, tail)
    return c


def g_cross(rng, ctx):
    """'pain and swelling in knees and ankles' -> four ADRs (head x body part)."""
    h1, h2 = HEADS_IN.pick_n(rng, ctx, 2)
    p1, p2 = PARTS_IN.pick_n(rng, ctx, 2)
    c = Chunk()
    a = c.add([h1])
    c.add(["and"])
    b = c.add([h2])
    prep = c.add(["in"])
    x = c.add(en(p1))
    c.add(["and"])
    y = c.add(en(p2))
    for head in (a, b):
        for part in (x, y):
            c.ent("ADR", head, prep, part)
    return c


def plain(values: Sequence[str]):
    def gen(rng, ctx):
        c = Chunk()
        c.add(en(rng.choice(values)))
        return c
    return gen


# --- Chinese slots ------------------------------------------------------------------------

def z_per(rng, ctx):
    c = Chunk()
    c.ent("PER", c.add(zh(ZH_SURNAMES.pick(rng, ctx) + ZH_GIVEN.pick(rng, ctx))))
    return c


def z_org_loc(rng, ctx):
    pattern = ZH_ORG_LOC_PATTERNS.pick(rng, ctx)
    city = zh(ZH_CITIES.pick(rng, ctx))
    c = _pattern_chunk(pattern, {"{C}": (city, "LOC")}, zh)
    if "{C}大学" in pattern and pattern != "{C}大学":
        c.ent("ORG", range(len(city) + 2))  # 北京大学 inside 北京大学附属医院
    return c


def z_org_flat(rng, ctx):
    return _named_chunk(ZH_ORG_FLAT.pick(rng, ctx), zh)


def z_coord(n: int):
    """'头和腿疼' -> 头疼 (discontinuous), 腿疼; '手、脚和嘴唇麻木' -> three ADRs."""
    def gen(rng, ctx):
        symptom = ZH_SYMPTOMS.pick(rng, ctx)
        parts = ZH_PART_POOLS[symptom].pick_n(rng, ctx, n)
        c = Chunk()
        groups = []
        for k, part in enumerate(parts):
            if k:
                c.add(["、"] if k < n - 1 else ["和"])
            groups.append(c.add(zh(part)))
        tail = c.add(zh(symptom))
        for group in groups:
            c.ent("ADR", group, tail)
        return c
    return gen


def z_side(rng, ctx):
    """'左右手麻木' -> 左手麻木 (discontinuous), 右手麻木."""
    part = ZH_SIDE_PARTS.pick(rng, ctx)
    symptom = rng.choice(ZH_SIDE_SYMPTOMS_BY_PART.get(part, ZH_SIDE_SYMPTOMS))
    c = Chunk()
    a = c.add(["左"])
    b = c.add(["右"])
    tail = c.add(zh(part)) + c.add(zh(symptom))
    c.ent("ADR", a, tail)
    c.ent("ADR", b, tail)
    return c


SLOTS = {
    # English
    "DRUG": flat("DRUG", DRUGS, en), "ADR": flat("ADR", ADRS, en), "PER": g_per, "DR": g_dr,
    "FIRST": flat("PER", FIRST, en), "CITY": flat("LOC", CITIES, en),
    "COUNTRY": flat("LOC", COUNTRIES, en), "CITYC": g_city_country, "ORG_LOC": g_org_loc, "ORG_PER": g_org_per,
    "AGENCY": g_agency, "COMPANY": flat("ORG", ORG_COMPANIES, en), "COORD": coord(2),
    "COORDTHREE": coord(3), "SIDE": g_side, "PARTS": g_parts, "MOD": g_mod, "HEADS": g_heads,
    "CROSS": g_cross, "DOSE": plain(DOSES), "INDICATION": plain(INDICATIONS),
    # Chinese
    "ZDRUG": flat("DRUG", ZH_DRUGS, zh), "ZADR": flat("ADR", ZH_ADRS, zh), "ZPER": z_per,
    "ZCITY": flat("LOC", ZH_CITIES, zh), "ZORG_LOC": z_org_loc, "ZORG_FLAT": z_org_flat,
    "ZCOORD": z_coord(2), "ZCOORDTHREE": z_coord(3), "ZSIDE": z_side,
}

# Templates: {SLOT} or {SLOT2}/{SLOT3} for a second/third distinct filler of the same kind.
EN_TEMPLATES = [
    "The patient developed {ADR} two days after starting {DRUG} .",
    "{PER} reported {COORD} after taking {DRUG} for a week .",
    "Since switching to {DRUG} , she complains of {COORDTHREE} .",
    "Examination revealed {SIDE} , which began after the first dose of {DRUG} .",
    "{DRUG} was stopped at {ORG_LOC} because of {ADR} .",
    "He was referred to {ORG_LOC} for assessment of {COORD} .",
    "On {DRUG} {DOSE} mg daily , the patient noted {MOD} .",
    "She has had {PARTS} since the dose of {DRUG} was increased .",
    "{HEADS} started within hours of the {DRUG} injection .",
    "{PER} , a pharmacist in {CITY} , reported the case to {AGENCY} .",
    "{DR} of {ORG_PER} prescribed {DRUG} {DOSE} mg twice daily .",
    "{AGENCY} received reports of {ADR} and {ADR2} linked to {DRUG} .",
    "No {ADR} was observed with {DRUG} in the {CITY} cohort .",
    "{DRUG} and {DRUG2} were both discontinued because of {MOD} .",
    "After two weeks of {DRUG} , she had {ADR} , {ADR2} and {ADR3} .",
    "Patient seen at {ORG_LOC} with {COORD} .",
    "A trial at {ORG_LOC} found that {DRUG} caused {ADR} in some patients .",
    "Her child {FIRST} has had {ADR} since starting {DRUG} last month .",
    "Denies {ADR} or {ADR2} ; reports {COORD} on {DRUG} .",
    "{ADR} resolved after {DRUG} was replaced by {DRUG2} .",
    "Seen by {DR} at {ORG_LOC} ; {DRUG} continued despite {ADR} .",
    "{COMPANY} , based in {CITY} , recalled a batch of {DRUG} after reports of {ADR} .",
    "Complains of {COORD} , worse at night , and {ADR} since taking {DRUG} .",
    "{DRUG} ( {DOSE} mg ) can cause {ADR} and {MOD} , especially in older adults .",
    "Took {DRUG} for {INDICATION} and woke up with {SIDE} .",
    "{PER} , visiting from {COUNTRY} , was treated at {ORG_LOC} for {CROSS} .",
    "Within a day of starting {DRUG} I had {CROSS} .",
    "{DRUG} gave me {MOD} and {ADR} , so my doctor in {CITY} switched me to {DRUG2} .",
    "Follow-up with {DR} : {SIDE} improved after stopping {DRUG} .",
    "The {ORG_LOC} pharmacy team flagged {ADR} in patients taking {DRUG} with {DRUG2} .",
    "Nurse {FIRST} noted {COORD} after the {DRUG} infusion .",
    "{PER} from {CITYC} , wrote that {DRUG} caused {PARTS} .",
    "{DR} at {ORG_PER} reviewed the {DRUG} dose after {SIDE} was reported .",
    "I stopped {DRUG} because of {COORDTHREE} and {ADR} .",
    "{FIRST} says {DRUG} causes {MOD} every morning .",
    "Reactions reported for {DRUG} : {SIDE} and {PARTS} .",
    "Three days into {DRUG} , {FIRST} noticed {CROSS} .",
    "Stopped {DRUG} after {HEADS} and {MOD} .",
]
ZH_TEMPLATES = [
    "患者服用{ZDRUG}后出现{ZCOORD}。",
    "{ZPER}在{ZORG_LOC}就诊，诊断为{ZADR}。",
    "{ZORG_LOC}的研究发现{ZDRUG}可能引起{ZADR}和{ZADR2}。",
    "{ZPER}医生建议停用{ZDRUG}，因为患者出现{ZCOORD}。",
    "服用{ZDRUG}三天后，患者感到{ZCOORDTHREE}。",
    "{ZDRUG}的常见不良反应包括{ZADR}、{ZADR2}和{ZADR3}。",
    "患者来自{ZCITY}，既往使用{ZDRUG}无{ZADR}。",
    "{ZPER}在{ZORG_LOC}开具了{ZDRUG}。",
    "患者主诉{ZADR}，已将{ZDRUG}减量。",
    "{ZORG_FLAT}提醒，{ZDRUG}可能导致{ZCOORD}。",
    "用药后患者出现{ZSIDE}，{ZPER}医生已停用{ZDRUG}。",
    "{ZPER}在{ZCITY}工作，服用{ZDRUG}后{ZCOORD}。",
    "{ZPER}服用{ZDRUG}一周后出现{ZSIDE}和{ZADR}。",
    "{ZPER}服用{ZDRUG}后{ZCOORDTHREE}，已到{ZORG_LOC}复诊。",
]
SLOT_RE = re.compile(r"(\{[A-Z_]+\d?\})")


def realise(template: str, lang: str, rng: random.Random, ctx: Ctx) -> dict:
    tokens: List[str] = []
    ents: List[Tuple[str, Tuple[int, ...]]] = []
    for piece in SLOT_RE.split(template):
        if not piece:
            continue
        if SLOT_RE.fullmatch(piece):
            chunk = SLOTS[piece[1:-1].rstrip("0123456789")](rng, ctx)
            offset = len(tokens)
            tokens.extend(chunk.tokens)
            ents.extend((label, tuple(offset + i for i in idx)) for label, idx in chunk.ents)
        else:
            tokens.extend(en(piece) if lang == "en" else zh(piece))
    if lang == "en" and tokens[0][0].islower():
        tokens[0] = tokens[0][0].upper() + tokens[0][1:]  # sentence-initial capital
    ents = sorted(set(ents), key=lambda e: (e[1], e[0]))
    return {"sentence": tokens, "ner": [{"index": list(idx), "type": label} for label, idx in ents]}


def _plan(templates: Sequence[str], n: int, rng: random.Random) -> List[str]:
    """Round-robin over shuffled templates, so every template is used about n/T times."""
    order: List[str] = []
    while len(order) < n:
        batch = list(templates)
        rng.shuffle(batch)
        order.extend(batch)
    return order[:n]


def generate(seed: int = SEED):
    """Return ({split: records}, {split: meta}) where meta has template ids and rare draws."""
    rng = random.Random(seed)
    seen = set()
    splits, meta = {}, {}
    for split, n in (("train", N_TRAIN), ("dev", N_DEV)):
        n_zh = round(n * ZH_FRACTION)
        plan = [(t, "en") for t in _plan(EN_TEMPLATES, n - n_zh, rng)]
        plan += [(t, "zh") for t in _plan(ZH_TEMPLATES, n_zh, rng)]
        rng.shuffle(plan)
        records, templates, rare = [], [], []
        for template, lang in plan:
            for _ in range(200):
                ctx = Ctx(split)
                record = realise(template, lang, rng, ctx)
                key = tuple(record["sentence"])
                if key not in seen and MIN_TOKENS <= len(key) <= MAX_TOKENS:
                    break
            else:
                raise RuntimeError(f"could not realise a new sentence from {template!r}")
            seen.add(key)
            records.append(record)
            templates.append(template)
            rare.append(ctx.rare)
        splits[split] = records
        meta[split] = {"templates": templates, "rare": rare}
    return splits, meta


# --------------------------------------------------------------------------------------
# Validation and counts
# --------------------------------------------------------------------------------------

def is_zh(record: dict) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for tok in record["sentence"] for ch in tok)


def validate_records(records: List[dict], split: str) -> None:
    """Per-record format and annotation constraints."""
    assert isinstance(records, list) and records, f"{split}: empty or not a list"
    for n, record in enumerate(records):
        where = f"{split}[{n}]"
        assert set(record) == {"sentence", "ner"}, f"{where}: keys {sorted(record)}"
        toks = record["sentence"]
        assert MIN_TOKENS <= len(toks) <= MAX_TOKENS, f"{where}: {len(toks)} tokens"
        for t in toks:
            assert isinstance(t, str) and t, f"{where}: empty token"
            assert not any(c.isspace() for c in t), f"{where}: whitespace in token {t!r}"
        if is_zh(record):
            assert all(len(t) == 1 for t in toks), f"{where}: Chinese tokens must be characters"
        keys, bounds = set(), {}
        for ent in record["ner"]:
            idx, label = ent["index"], ent["type"]
            assert label in LABELS, f"{where}: label {label!r}"
            assert idx and all(isinstance(i, int) for i in idx), f"{where}: index {idx}"
            assert idx == sorted(set(idx)), f"{where}: index not sorted/unique {idx}"
            assert 0 <= idx[0] and idx[-1] < len(toks), f"{where}: index out of range {idx}"
            key = (label, tuple(idx))
            assert key not in keys, f"{where}: duplicate entity {key}"
            keys.add(key)
            other = bounds.setdefault((idx[0], idx[-1]), label)
            assert other == label, (
                f"{where}: entities with same first/last token and different types {other}/{label}: {idx}")


def validate_corpus(splits: Dict[str, List[dict]], meta: Dict[str, dict] = None) -> None:
    """Corpus-level constraints of the generation: sizes, no duplicate sentence, templates and
    rare fillers. The annotation counts and shares are checked with spacy-w2ner's own codec and
    counts in tests/project/test_sample_corpus.py."""
    for split, records in splits.items():
        validate_records(records, split)
    assert (len(splits["train"]), len(splits["dev"])) == (N_TRAIN, N_DEV)
    sentences = [tuple(r["sentence"]) for r in splits["train"] + splits["dev"]]
    assert len(set(sentences)) == len(sentences), "duplicate sentence"
    if meta is not None:
        assert len(EN_TEMPLATES) + len(ZH_TEMPLATES) >= 25
        for split in splits:
            used = set(meta[split]["templates"])
            assert used == set(EN_TEMPLATES) | set(ZH_TEMPLATES), f"{split}: not every template used"
        rare_rate = {s: sum(1 for r in meta[s]["rare"] if r) / len(meta[s]["rare"]) for s in splits}
        assert rare_rate["dev"] > 2 * rare_rate["train"], rare_rate


def dumps(records: List[dict]) -> str:
    return "[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n]\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; check the files on disk equal a fresh generation")
    args = parser.parse_args(argv)

    splits, meta = generate()
    validate_corpus(splits, meta)
    for split, records in splits.items():
        path = args.out_dir / f"{split}.json"
        text = dumps(records)
        if args.check:
            assert path.read_text(encoding="utf-8") == text, f"{path} differs from a fresh generation"
        else:
            path.write_text(text, encoding="utf-8")
        assert json.loads(path.read_text(encoding="utf-8")) == records, f"{path}: round trip"
        print(f"{'checked' if args.check else 'wrote'} {path} ({len(records)} sentences)")
    validate_corpus({s: json.loads((args.out_dir / f"{s}.json").read_text(encoding="utf-8"))
                     for s in ("train", "dev")})
    return 0


if __name__ == "__main__":
    sys.exit(main())

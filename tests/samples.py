"""Small corpus files in every input format, shared by the format, CLI and reader tests."""
DAI = (
    "I did take my blood pressure today though , and it was slightly elevated from the norm .\n"
    "4,5,12,13 ADR|6,6 DATE\n"
    "\n"
    "Nothing to report\n"
    "\n"
    "\n"
    "Muscle aches in arms and legs\n"
    "0,1,5,5 ADR|0,3 ADR\n"
    "\n"
)

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
"""

IOB1 = "Peter I-PER\nBlackburn I-PER\nSmith B-PER\nand O\nParis I-LOC\nLondon B-LOC\nOntario I-LOC\n"

BMES = """张 B-NAME
三 E-NAME
在 O
北 B-LOC
京 M-LOC
市 E-LOC
工 O
作 O
。 S-PUNCT

学 M-ORG
院 E-ORG
的 O
人 S-NAME
"""

BRAT_TEXT = "I had pain in knees and ankles.\nNo fever."
BRAT_ANN = (
    "T1\tADR 6 19;24 30\tpain in knees ankles\n"
    "T2\tSYM 35 40\tfever\n"
    "R1\tCause Arg1:T1 Arg2:T2\n"
    "#1\tAnnotatorNotes T1\tsevere\n"
    "A1\tNegated T2\n"
)

RECORDS = [
    {"sentence": ["Muscle", "aches", "in", "arms", "and", "legs", "."],
     "ner": [{"index": [0, 1, 2, 3], "type": "ADR"}, {"index": [0, 1, 2, 5], "type": "ADR"}]},
    {"sentence": ["東京", "大学"], "ner": [{"index": [0], "type": "LOC"}, {"index": [0, 1], "type": "ORG"}]},
    {"sentence": ["Nothing", "here"], "ner": []},
]

"""Write tests/data/hub/: small synthetic stand-ins for the Hub datasets of config/config.yaml.

Each folder is laid out like the dataset repo (``tests/data/hub/<repo id>/<file>``) with that file's
real name pattern and columns (as on the dataset cards); the text is synthetic. Run from the checkout:
``python tests/data/make_hub_fixtures.py`` (deterministic; the files are committed).
"""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HUB = Path(__file__).parent / "hub"


def moderation(flagged: bool) -> dict:
    """One OpenAI moderation result, shaped like LMSYS / WildChat's (categories shortened)."""
    return {
        "categories": {"harassment": flagged, "violence": False},
        "category_scores": {"harassment": 0.9 if flagged else 0.01, "violence": 0.0},
        "flagged": flagged,
    }


def write(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def wildchat() -> None:
    def turn(role, content, toxic=False, redacted=False):
        return {
            "content": content,
            "country": "Narnia",
            "hashed_ip": "0" * 8,
            "header": {"accept-language": "en", "user-agent": "test"},
            "language": "English",
            "redacted": redacted,
            "role": role,
            "state": None,
            "toxic": toxic,
            "turn_identifier": 1,
        }

    def row(h, conv, toxic=False, redacted=False, flagged=False):
        return {
            "conversation_hash": h,
            "model": "gpt-4-0314",
            "conversation": conv,
            "turn": len(conv) // 2,
            "language": "English",
            "openai_moderation": [moderation(flagged) for _ in conv],
            "toxic": toxic,
            "redacted": redacted,
        }

    rows = [
        row(
            "wc01",
            [
                turn("user", "Write a haiku about a lighthouse keeper who collects sea glass."),
                turn("assistant", "Glass in the lamp light..."),
            ],
        ),
        row(
            "wc02", [turn("user", "Name three rivers in a made-up country."), turn("assistant", "Ardel, Brisk, Calm.")]
        ),
        row("wc03", [turn("user", "Something rude.", toxic=True), turn("assistant", "No.")], toxic=True, flagged=True),
        row(
            "wc04",
            [
                turn("user", "My email is NAME_1 at example dot org, fix my letter.", redacted=True),
                turn("assistant", "Sure."),
            ],
            redacted=True,
        ),
        row("wc05", [turn("assistant", "Hello! How can I help?"), turn("user", "Hi.")]),
        row(
            "wc06",
            [
                turn("user", "Explain tides to a child."),
                turn("user", "In two sentences."),
                turn("assistant", "The moon pulls..."),
            ],
        ),
        row("wc07", []),
        row("wc08", [turn("user", "   "), turn("assistant", "?")]),
        row("wc09", [turn("user", "Name three rivers in a made-up country."), turn("assistant", "Dorn, Eel, Fray.")]),
        row("wc10", [turn("user", "List four colours of sea glass."), turn("assistant", "Green, brown, white, blue.")]),
    ]
    write(rows, HUB / "allenai/WildChat-1M/data/train-00000-of-00014.parquet")
    write(
        [
            row(
                "wc11",
                [turn("user", "Translate 'good morning' into a made-up language."), turn("assistant", "Zorb mel.")],
            )
        ],
        HUB / "allenai/WildChat-1M/data/train-00001-of-00014.parquet",
    )


def lmsys() -> None:
    def row(cid, conv, flagged=(), redacted=False):
        return {
            "conversation_id": cid,
            "model": "vicuna-13b",
            "conversation": [{"content": c, "role": r} for r, c in conv],
            "turn": len(conv) // 2,
            "language": "English",
            "openai_moderation": [moderation(i in flagged) for i in range(len(conv))],
            "redacted": redacted,
        }

    rows = [
        row("lm01", [("user", "What is the capital of the imaginary land of Zembla?"), ("assistant", "Onhava.")]),
        row("lm02", [("user", "Say something hateful."), ("assistant", "I won't.")], flagged=(0,)),
        row("lm03", [("user", "Summarize this: NAME_1 met NAME_2."), ("assistant", "Two people met.")], redacted=True),
        row("lm04", [("user", "Fine question."), ("assistant", "A flagged answer.")], flagged=(1,)),
        row(
            "lm05",
            [("user", "Write a limerick about a cat who codes in Python."), ("assistant", "There once was a cat...")],
        ),
        row("lm06", [("system", "You are helpful."), ("user", "Hi")]),
        row("lm07", [("user", "Write a limerick about a cat who codes in Python."), ("assistant", "Another one.")]),
    ]
    write(rows, HUB / "lmsys/lmsys-chat-1m/data/train-00000-of-00006-4feeb3f83346a0e9.parquet")


def humaneval() -> None:
    rows = [
        {
            "task_id": "HumanEval/0",
            "prompt": (
                'def add(a: int, b: int) -> int:\n    """Return the sum of a and b.\n'
                '    >>> add(2, 3)\n    5\n    """\n'
            ),
            "canonical_solution": "    return a + b\n",
            "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
            "entry_point": "add",
        },
        {
            "task_id": "HumanEval/1",
            "prompt": 'def neg(x: int) -> int:\n    """Return -x.\n    >>> neg(4)\n    -4\n    """\n',
            "canonical_solution": "    return -x\n",
            "test": "def check(candidate):\n    assert candidate(4) == -4\n",
            "entry_point": "neg",
        },
    ]
    write(rows, HUB / "openai/openai_humaneval/openai_humaneval/test-00000-of-00001.parquet")


def mbpp() -> None:
    def row(tid, text, tests):
        return {
            "task_id": tid,
            "text": text,
            "code": "def f():\n    pass",
            "test_list": tests,
            "test_setup_code": "",
            "challenge_test_list": [],
        }

    write(
        [
            row(
                11,
                "Write a python function to remove first and last occurrence of a given character from the string.",
                [
                    'assert remove_Occ("hello","l") == "heo"',
                    'assert remove_Occ("abcda","a") == "bcd"',
                    'assert remove_Occ("PHP","P") == "H"',
                ],
            )
        ],
        HUB / "google-research-datasets/mbpp/full/test-00000-of-00001.parquet",
    )
    write(
        [
            row(
                601,
                "Write a function to find the longest chain which can be formed from the given set of pairs.",
                ["assert max_chain_length([Pair(5, 24), Pair(15, 25)], 2) == 1"],
            ),
            row(602, "Write a python function to find the first repeated character in a given string.", []),
        ],
        HUB / "google-research-datasets/mbpp/full/train-00000-of-00001.parquet",
    )


def swebench() -> None:
    def row(iid, statement):
        return {
            "repo": iid.rsplit("-", 1)[0].replace("__", "/"),
            "instance_id": iid,
            "base_commit": "0" * 40,
            "patch": "diff --git a/x b/x\n",
            "test_patch": "diff --git a/t b/t\n",
            "problem_statement": statement,
            "hints_text": "",
            "created_at": "2023-01-01T00:00:00Z",
            "version": "1.0",
            "FAIL_TO_PASS": '["test_x"]',
            "PASS_TO_PASS": "[]",
            "environment_setup_commit": "0" * 40,
        }

    write(
        [
            row(
                "example__widgets-1234",
                "Widget.resize() ignores the aspect ratio\n\n"
                "Calling `Widget.resize(10, 20)` on a locked widget\nstretches it.\r\n",
            ),
            row("example__widgets-1300", ""),
        ],
        HUB / "princeton-nlp/SWE-bench/data/test-00000-of-00001.parquet",
    )
    write(
        [row("example__widgets-0001", "A dev-split issue that the config's files glob leaves out.")],
        HUB / "princeton-nlp/SWE-bench/data/dev-00000-of-00001.parquet",
    )


def sharegpt() -> None:
    recs = [
        {
            "id": "sg01_0",
            "conversations": [
                {"from": "human", "value": "How do I boil an egg so the yolk stays soft?"},
                {"from": "gpt", "value": "Six minutes."},
            ],
        },
        {
            "id": "sg01_1",
            "conversations": [{"from": "gpt", "value": "Continued answer."}, {"from": "human", "value": "Thanks"}],
        },
        {"id": "sg02_0", "conversations": [{"from": "human", "value": "Name a prime above 100."}]},
    ]
    path = HUB / "anon8231489123/ShareGPT_Vicuna_unfiltered/ShareGPT_V3_unfiltered_cleaned_split.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recs, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    for make in (wildchat, lmsys, humaneval, mbpp, swebench, sharegpt):
        make()
    print(sorted(str(p.relative_to(HUB)) for p in HUB.rglob("*") if p.is_file()))

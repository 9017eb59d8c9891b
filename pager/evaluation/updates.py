"""A knowledge-update workload in LongMemEval's JSON format, generated from a seed.

Each question is about one slot of the user's life (where they live, their coffee order, the
deadline that matters most), asked in the first person as LongMemEval asks ("Where do I live these
days?"). Two to four *fact sessions* state different values of that slot at
different times, among six to ten distractor sessions of unrelated chat, every session dated and
in date order. Three question types, in turn, so every prefix of the list is balanced:

- ``knowledge-update``: a fact is superseded ("where does the user live now?"); the answer session
  is the newest statement, the older ones are listed in ``superseded_session_ids``.
- ``preference-update``: a preference changes over time; the same shape.
- ``marked-important``: several candidates of the same kind, one of them marked important (its
  statement turn carries ``"importance": 1.0``, as an agent marks a memory it was told matters); it
  is never the newest, so recency alone gets it wrong. The unmarked ones are listed in
  ``superseded_session_ids``.

Statements are worded neutrally (no "important", no "now" cue that only the answer has): each fact
session draws a different phrasing of the same slot, so content matching alone ranks the fact
sessions about equally, and only recency or importance can pick the one that must win. Distractor
sessions carry importance markers too (about other things), so importance alone does not answer.

Two fields extend the published format and are read only by the harness: ``"importance"`` on a
turn (its memory's importance) and ``superseded_session_ids`` on a question (for the "newest
wins" metric). Session ids follow LongMemEval's style, answer sessions included (``answer_…``):
that is exactly why the harness never shows them to the retriever.

``python -m mempager.evaluation.updates OUT.json [--n N] [--seed S]`` writes the file.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

QUESTION_TYPES = ("knowledge-update", "preference-update", "marked-important")
DEFAULT_N = 120
START = datetime(2023, 1, 2, 9, 0)


@dataclass(frozen=True, slots=True)
class Slot:
    question: str
    values: tuple[str, ...]
    statements: tuple[str, ...]  # each holds {v}; one per fact session, never reused within a question
    replies: tuple[str, ...] = (
        "Got it, thanks for letting me know about {v}.",
        "Noted: {v}. I'll keep that in mind.",
        "Thanks, I've made a note of {v}.",
        "Understood, {v} it is.",
    )


UPDATE_SLOTS = (
    Slot(
        "Where do I live these days?",
        ("Lisbon", "Osaka", "Denver", "Tallinn", "Montreal", "Nairobi", "Leeds", "Hobart", "Bilbao", "Quito"),
        (
            "We finally finished moving, our apartment in {v} is full of boxes.",
            "Living in {v} means my commute is a short tram ride.",
            "I signed a lease on a flat in {v} last week.",
            "The neighbours here in {v} are friendly, the move went well.",
            "My home address is in {v} since the relocation.",
        ),
    ),
    Slot(
        "Which company do I work for at the moment?",
        ("Arcadia Labs", "Brightwater", "Copperline", "Dunmore Freight", "Everpine", "Fernway Health", "Gridstone"),
        (
            "I accepted the offer from {v} and started on Monday.",
            "My team at {v} ships the mobile app.",
            "Payroll at {v} runs on the 25th, which suits me.",
            "I've been onboarding at {v}, lots of new faces at work.",
            "My employer is {v}; the office is close to the station.",
        ),
    ),
    Slot(
        "What car do I drive?",
        ("a Volvo estate", "a Honda Civic", "a Tesla Model 3", "a Fiat Panda", "a Subaru Outback", "a Mazda MX-5"),
        (
            "I picked up {v} from the dealer this morning.",
            "The insurance for {v} was cheaper than I expected.",
            "Drove {v} to the coast at the weekend, it handles well.",
            "Our garage barely fits {v}, but it works.",
            "I'm getting used to driving {v} every day.",
        ),
    ),
    Slot(
        "Which gym do I go to?",
        ("Ironworks Gym", "Pulse Fitness", "Summit Climbing Hall", "the YMCA on Elm Street", "Core Studio"),
        (
            "I joined {v} and went three times this week.",
            "My membership at {v} includes the sauna.",
            "The trainers at {v} set me a new routine.",
            "Workouts at {v} fit before my shift starts.",
        ),
    ),
    Slot(
        "What phone do I have?",
        ("a Pixel 8", "an iPhone 15", "a Galaxy S23", "a Fairphone 5", "a OnePlus 12", "a Nothing Phone"),
        (
            "My new handset is {v}, the camera is great.",
            "I switched to {v} after the old one broke.",
            "Setting up {v} took all evening, transferring photos.",
            "The battery on {v} lasts the whole day.",
        ),
    ),
)

PREFERENCE_SLOTS = (
    Slot(
        "How do I take my coffee?",
        ("a flat white", "black filter coffee", "an oat latte", "a double espresso", "a cortado", "iced americano"),
        (
            "My morning order is {v}, nothing else.",
            "These days I only drink {v} at the cafe.",
            "I've got hooked on {v} before work.",
            "Honestly {v} is the coffee I enjoy most.",
        ),
    ),
    Slot(
        "What kind of food do I prefer for dinner?",
        ("Thai curries", "vegan bowls", "Neapolitan pizza", "sushi", "Georgian dumplings", "Mexican tacos"),
        (
            "For dinner I keep choosing {v}.",
            "My favourite evening meal is {v}.",
            "I could eat {v} every night of the week.",
            "We ordered {v} again, it's what I like best.",
        ),
    ),
    Slot(
        "What music do I like to work to?",
        ("lo-fi beats", "baroque harpsichord", "Detroit techno", "film scores", "bossa nova", "ambient drone"),
        (
            "When I focus I put on {v}.",
            "My work playlist is all {v}.",
            "Nothing helps me concentrate like {v}.",
            "I've been listening to {v} while coding.",
        ),
    ),
    Slot(
        "Which seat do I prefer on flights?",
        ("a window seat", "an aisle seat", "an exit-row seat", "a seat near the front", "a bulkhead seat"),
        (
            "When I book flights I always pick {v}.",
            "On planes I'm happiest in {v}.",
            "Please remember I want {v} when flying.",
            "For the next trip I'd like {v} on the plane.",
        ),
    ),
    Slot(
        "Which genre do I like to read?",
        ("science fiction", "Nordic crime novels", "narrative history", "poetry", "graphic novels", "cosy mysteries"),
        (
            "My reading pile is mostly {v}.",
            "I can't put down {v} lately.",
            "At bedtime I read {v}.",
            "The book club voted for {v}, which I love.",
        ),
    ),
)

IMPORTANT_SLOTS = (
    Slot(
        "Which deadline should you remind me about?",
        ("the tax return", "the grant renewal", "the visa application", "the insurance claim", "the thesis draft"),
        (
            "By the end of the month {v} has to be submitted.",
            "I still need to finish {v} before the cut-off date.",
            "The due date for {v} is coming up.",
            "Don't let me forget that {v} is due soon.",
        ),
    ),
    Slot(
        "Who should be contacted if I have an emergency?",
        ("my sister Maria", "my neighbour Tom", "my friend Aiko", "my colleague Ravi", "my dad Peter"),
        (
            "If anything happens to me, call {v}.",
            "In an emergency please reach {v}.",
            "The person to phone if I'm in trouble is {v}.",
            "Should something go wrong, contact {v}.",
        ),
    ),
    Slot(
        "Which health issue should be kept in mind when planning my meals?",
        ("a peanut allergy", "lactose intolerance", "coeliac disease", "a shellfish allergy", "a soy allergy"),
        (
            "The doctor confirmed I have {v}, so meals need care.",
            "Planning food around {v} is tricky for me.",
            "Restaurants must know about {v} when I eat out.",
            "I found out about {v} after a bad reaction at dinner.",
        ),
    ),
    Slot(
        "Which gift idea for my partner did I want to remember?",
        ("a pottery class", "concert tickets", "a vintage camera", "a weekend in Porto", "a cashmere scarf"),
        (
            "For my partner's birthday I was thinking of {v}.",
            "A present idea for my partner: {v}.",
            "My partner mentioned liking {v}, could be a gift.",
            "Maybe I'll surprise my partner with {v}.",
        ),
    ),
)

SLOTS = {"knowledge-update": UPDATE_SLOTS, "preference-update": PREFERENCE_SLOTS, "marked-important": IMPORTANT_SLOTS}

OPENERS = (
    "Hi again, quick one before my meeting.",
    "Morning! Hope you're well.",
    "Hey, I have a few minutes to chat.",
    "Hello, back with another question.",
)
FILLER = (
    ("Can you suggest a quick stretch for my back?", "Try a cat-cow stretch for a minute, slow and steady."),
    ("What's a good name for a houseplant?", "How about Fernando for a fern, or Spike for a cactus?"),
    ("Remind me how many grams are in an ounce?", "One ounce is about 28.35 grams."),
    ("Any tip for sleeping better?", "Keep a regular bedtime and avoid screens for the last hour."),
    ("Is it going to be a busy week, do you think?", "Mid-month weeks often are; plan a buffer on Thursday."),
)
TOPICS = (
    ("I'm baking {x} for a party, how long should it rest?", "Let {x} rest about 20 minutes before serving.", "bread"),
    ("Can you explain how {x} works in Python?", "Sure: {x} lets you handle that case cleanly, for example...", "x"),
    ("I'm planning a hike near {x}, what should I pack?", "Bring layers, water and a map of {x}.", "hike"),
    ("Recommend a podcast about {x}?", "There's a well-reviewed series on {x} you might enjoy.", "podcast"),
    ("How do I get a stain of {x} out of a shirt?", "Blot the {x} stain, then use cold water and soap.", "stain"),
    ("What's a fun fact about {x}?", "Here is one about {x}: it surprises most people.", "fact"),
)
TOPIC_WORDS = {
    "bread": ("sourdough", "focaccia", "brioche", "rye loaves"),
    "x": ("list comprehensions", "decorators", "context managers", "generators"),
    "hike": ("the Dolomites", "Snowdon", "Mount Rainier", "the Lake District"),
    "podcast": ("astronomy", "economics", "medieval history", "jazz"),
    "stain": ("red wine", "coffee", "ink", "grass"),
    "fact": ("octopuses", "volcanoes", "honeybees", "the Moon"),
}
NOTES = (  # the important markers of distractor sessions: memories that matter, about something else
    "Please remember my dentist appointment is on the 14th.",
    "The spare key is with the concierge, keep that in mind.",
    "My passport number ends in 4471, I'll need it for bookings.",
    "The wifi password at the cabin is on the fridge note.",
)


def generate(n: int = DEFAULT_N, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` questions in LongMemEval's JSON format; question ``i`` depends only on (seed, i), so
    ``generate(m, s)`` is a prefix of ``generate(n, s)`` for m <= n."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return [_question(i, random.Random(f"updates-{seed}-{i}")) for i in range(n)]


def write(path: str | Path, n: int = DEFAULT_N, seed: int = 0) -> Path:
    out = Path(path)
    out.write_text(json.dumps(generate(n, seed), indent=1) + "\n", encoding="utf-8")
    return out


def _stamp(when: datetime) -> str:
    return when.strftime("%Y/%m/%d (%a) %H:%M")  # LongMemEval's date format


def _question(i: int, rng: random.Random) -> dict[str, Any]:
    qtype = QUESTION_TYPES[i % len(QUESTION_TYPES)]
    slot = rng.choice(SLOTS[qtype])
    n_facts = rng.randint(2, 4)
    n_noise = rng.randint(6, 10)
    values = rng.sample(slot.values, n_facts)
    phrasings = rng.sample(slot.statements, n_facts)
    # fact sessions go into random places among the distractors; everything in date order
    kinds = ["fact"] * n_facts + ["noise"] * n_noise
    rng.shuffle(kinds)
    start = START + timedelta(days=rng.randint(0, 200))
    dates: list[datetime] = []
    when = start
    for _ in kinds:
        when += timedelta(days=rng.randint(3, 40), hours=rng.randint(0, 10), minutes=rng.randint(0, 59))
        dates.append(when)
    if qtype == "marked-important":
        winner = rng.randrange(n_facts - 1)  # never the newest: recency alone must get it wrong
    else:
        winner = n_facts - 1
    tag = f"{rng.getrandbits(32):08x}"
    sessions: list[list[dict[str, Any]]] = []
    ids: list[str] = []
    answer_ids: list[str] = []
    superseded: list[str] = []
    fact_index = 0
    for position, kind in enumerate(kinds):
        if kind == "fact":
            f = fact_index
            fact_index += 1
            turns = _fact_session(
                rng, slot, values[f], phrasings[f], important=qtype == "marked-important" and f == winner
            )
            sid = f"answer_{tag}_{f + 1}"
            (answer_ids if f == winner else superseded).append(sid)
        else:
            turns = _noise_session(rng, important=rng.random() < 0.3)
            sid = f"{rng.choice(('sharegpt', 'ultrachat'))}_{rng.getrandbits(40):010x}_{position}"
        sessions.append(turns)
        ids.append(sid)
    return {
        "question_id": f"upd_{tag}_{i}",
        "question_type": qtype,
        "question": slot.question,
        "answer": values[winner],
        "question_date": _stamp(dates[-1] + timedelta(days=rng.randint(1, 20))),
        "haystack_dates": [_stamp(d) for d in dates],
        "haystack_session_ids": ids,
        "haystack_sessions": sessions,
        "answer_session_ids": answer_ids,
        "superseded_session_ids": superseded,
    }


def _fact_session(rng: random.Random, slot: Slot, value: str, phrasing: str, important: bool) -> list[dict[str, Any]]:
    statement: dict[str, Any] = {"role": "user", "content": phrasing.format(v=value), "has_answer": True}
    if important:
        statement["importance"] = 1.0
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": rng.choice(OPENERS)},
        {"role": "assistant", "content": "Hi! What can I do for you today?"},
        statement,
        {"role": "assistant", "content": rng.choice(slot.replies).format(v=value)},
    ]
    ask, answer = rng.choice(FILLER)
    turns += [{"role": "user", "content": ask}, {"role": "assistant", "content": answer}]
    return turns


def _noise_session(rng: random.Random, important: bool) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": rng.choice(OPENERS)},
        {"role": "assistant", "content": "Hello! Happy to help."},
    ]
    for ask, answer, words in rng.sample(TOPICS, rng.randint(2, 3)):
        x = rng.choice(TOPIC_WORDS[words])
        turns += [{"role": "user", "content": ask.format(x=x)}, {"role": "assistant", "content": answer.format(x=x)}]
    if important:
        turns.append({"role": "user", "content": rng.choice(NOTES), "importance": 1.0})
        turns.append({"role": "assistant", "content": "I'll remember that."})
    return turns


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mempager.evaluation.updates",
        description="Write the generated knowledge-update workload as a LongMemEval JSON file.",
    )
    parser.add_argument("out", help="the JSON file to write")
    parser.add_argument("--n", type=int, default=DEFAULT_N, help=f"how many questions (default {DEFAULT_N})")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path = write(args.out, args.n, args.seed)
    print(f"{args.n} questions (seed {args.seed}) written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

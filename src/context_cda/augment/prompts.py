"""Versioned prompts for context augmentation, and the feedback a retry adds.

A prompt version is frozen once released: changing its text changes every cache key and the ``prompt_version``
column, so edit by adding a new version. The conversation is system prompt, optional worked examples (as
user/assistant turns), then the instruction with the sentence on its last line. Backends apply the model's chat
template (``hf``/``vllm``) or the server's (``openai``).

A retry (:mod:`context_cda.augment.retry`) tells the generator what was wrong with its previous answer: one
sentence per failed check (:data:`FEEDBACK`) goes into the last user turn, just above the sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..errors import ConfigError
from ..generation.base import Conversation
from ..io import json_hash


@dataclass(frozen=True)
class PromptSpec:
    version: str
    system: str
    instruction: str  # must contain "{sentence}"
    examples: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def hash(self, few_shot: bool = True) -> str:
        return json_hash([self.version, self.system, self.instruction, self.examples if few_shot else []])


_SYSTEM_V1 = (
    "You are a careful writing assistant. You rewrite single sentences so that they read naturally and carry "
    "richer context, without changing what they say. You never change the gender of any person: every "
    "pronoun, title and gendered noun keeps exactly the gender it has in the input. You answer with the "
    "rewritten sentence only: no introduction, no quotes, no explanation."
)

_INSTRUCTION_V1 = (
    "Rephrase the sentence below as one fluent sentence that adds a little natural context (a setting, a "
    "reason or a detail) while keeping its meaning. Keep every person's gender exactly as in the sentence "
    "(same pronouns and gendered words). Do not add commentary.\n\nSentence: {sentence}"
)

_EXAMPLES_V1 = (
    (
        "She thanked her father for the advice.",
        "After the long evening they spent talking in the kitchen, she thanked her father for his patient "
        "advice.",
    ),
    (
        "The king said he would return in spring.",
        "Standing before the crowded court, the king said he would return to the capital in the spring.",
    ),
)

_SYSTEM_V2 = (
    "You rewrite one sentence at a time. You keep every name, number, date and fact of the sentence, and every "
    "person's gender (the same pronouns and gendered words). You add one short, natural detail: a setting, a "
    "time or a reason. You answer with the rewritten sentence only, in the language of the sentence."
)

_INSTRUCTION_V2 = (
    "Rewrite the sentence with one short added detail. Keep all of its names, numbers and facts and the same "
    "pronouns. Answer with one sentence only.\n\nSentence: {sentence}"
)

_EXAMPLES_V2 = (
    (
        "In 1998 she moved to Berlin with her brother.",
        "In 1998 she moved to Berlin with her brother, who had found work at a bakery there.",
    ),
    (
        "His uncle sold the farm in Ohio.",
        "After the drought ruined the harvest, his uncle sold the farm in Ohio.",
    ),
)

PROMPTS: dict[str, PromptSpec] = {
    "v1": PromptSpec("v1", _SYSTEM_V1, _INSTRUCTION_V1, _EXAMPLES_V1),
    "v2": PromptSpec("v2", _SYSTEM_V2, _INSTRUCTION_V2, _EXAMPLES_V2),
}

# ---- race and religion: the same versions, asking to keep the attribute's words instead of the genders

_ATTR_SYSTEM_V1 = (
    "You are a careful writing assistant. You rewrite single sentences so that they read naturally and carry "
    "richer context, without changing what they say. You never change any person's {described}: every word for "
    "it ({words}) stays exactly as in the input, and you add no such word. You answer with the rewritten sentence "
    "only: no introduction, no quotes, no explanation."
)
_ATTR_INSTRUCTION_V1 = (
    "Rephrase the sentence below as one fluent sentence that adds a little natural context (a setting, a "
    "reason or a detail) while keeping its meaning. Keep every word for {described} exactly as in the sentence "
    "and add none. Do not add commentary.\n\nSentence: {{sentence}}"
)
_ATTR_SYSTEM_V2 = (
    "You rewrite one sentence at a time. You keep every name, number, date and fact of the sentence, and every "
    "word for {described} ({words}) exactly as it is; you add no such word. You add one short, natural detail: a "
    "setting, a time or a reason. You answer with the rewritten sentence only, in the language of the sentence."
)
_ATTR_INSTRUCTION_V2 = (
    "Rewrite the sentence with one short added detail. Keep all of its names, numbers and facts and the same "
    "words for {described}. Answer with one sentence only.\n\nSentence: {{sentence}}"
)
_ATTR_EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "race": (
        ("In 1998 the Asian family moved to Berlin.",
         "In 1998 the Asian family moved to Berlin, where a cousin had found work at a bakery."),
        ("Hispanic voters waited in line in Ohio.",
         "On a cold November morning, Hispanic voters waited in line in Ohio to cast their ballots."),
    ),
    "religion": (
        ("In 1998 the Jewish family moved to Berlin.",
         "In 1998 the Jewish family moved to Berlin, where a cousin had found work at a bakery."),
        ("The mosque in Ohio opened a food bank.",
         "After the floods ruined the harvest, the mosque in Ohio opened a food bank."),
    ),
}


def _attribute_prompts() -> dict[str, dict[str, PromptSpec]]:
    from ..attributes import ATTRIBUTES

    out: dict[str, dict[str, PromptSpec]] = {}
    for name, examples in _ATTR_EXAMPLES.items():
        a = ATTRIBUTES[name]
        fill = {"described": a.described, "words": a.words}
        out[name] = {
            "v1": PromptSpec("v1", _ATTR_SYSTEM_V1.format(**fill), _ATTR_INSTRUCTION_V1.format(**fill), examples),
            "v2": PromptSpec("v2", _ATTR_SYSTEM_V2.format(**fill), _ATTR_INSTRUCTION_V2.format(**fill), examples),
        }
    return out


#: attribute -> version -> prompt (gender: :data:`PROMPTS`)
ATTRIBUTE_PROMPTS: dict[str, dict[str, PromptSpec]] = {"gender": PROMPTS, **_attribute_prompts()}

# ---- the neutral rewrite (the context-neutral arm): singular they and neutral nouns, nothing else changed

_NEUTRAL_SYSTEM_N1 = (
    "You rewrite one sentence at a time into gender-neutral English. Every gendered word becomes a neutral one: "
    "he and she become they, him becomes them, his and her become their, himself and herself become themselves, "
    "man and woman become person, mother and father become parent, sister and brother become sibling, chairman "
    "becomes chairperson; the verbs agree (they are, they were, they have). You change nothing else: every name, "
    "number, date and fact stays. You answer with the rewritten sentence only."
)
_NEUTRAL_INSTRUCTION_N1 = (
    "Rewrite the sentence in gender-neutral language (singular they, neutral nouns), keeping its meaning and "
    "every other word. Answer with one sentence only.\n\nSentence: {sentence}"
)
_NEUTRAL_EXAMPLES_N1 = (
    ("In 1998 she moved to Berlin with her brother.", "In 1998 they moved to Berlin with their sibling."),
    ("The chairman said his mother was proud of him.", "The chairperson said their parent was proud of them."),
)
NEUTRAL_PROMPTS: dict[str, PromptSpec] = {
    "n1": PromptSpec("n1", _NEUTRAL_SYSTEM_N1, _NEUTRAL_INSTRUCTION_N1, _NEUTRAL_EXAMPLES_N1),
}

#: what a retry tells the generator, per failed check (``{language}``, ``{detail}`` filled in)
FEEDBACK: dict[str, str] = {
    "empty": "Your previous answer was empty. Answer with the rewritten sentence.",
    "refusal": "This is a harmless writing exercise. Answer with the rewritten sentence.",
    "identical": "Your previous answer repeated the sentence unchanged. Add a short detail.",
    "script": "Your previous answer was not written in {language}. Write in {language} only.",
    "language": "Your previous answer was not written in {language}. Write in {language} only.",
    "number-missing": "Your previous answer changed or dropped a number or date. Keep exactly: {detail}.",
    "number-added": "Your previous answer added a number or date the sentence does not have ({detail}). Do not "
                    "invent dates or figures.",
    "entity-missing": "Your previous answer changed or dropped a name. Keep exactly: {detail}.",
    "content-missing": "Your previous answer changed what the sentence is about. Keep: {detail}.",
    "negation-added": "Your previous answer added a negation. Do not add not, never or no.",
    "negation-removed": "Your previous answer dropped a negation. Keep the negation of the sentence.",
    "gender-contradiction": "Your previous answer changed a person's gender. Use the same pronouns and gendered "
    "words as the sentence.",
    "gender-missing": "Your previous answer dropped the gendered words. Keep: {detail}.",
    "group-contradiction": "Your previous answer changed a word for race, ethnicity or religion. Keep those words "
    "exactly as in the sentence.",
    "group-added": "Your previous answer added a word for race, ethnicity or religion that the sentence does not "
    "have ({detail}). Do not add any.",
    "group-missing": "Your previous answer dropped the words for race, ethnicity or religion. Keep: {detail}.",
    "gendered-word-left": "Your previous answer still has gendered words ({detail}). Use they, them, their and "
    "neutral words such as person, parent or sibling.",
    "list": "Your previous answer gave several versions. Give one sentence only.",
    "prompt-echo": "Your previous answer copied the instructions or an example. Write your own detail for this "
    "sentence.",
    "meta": "Your previous answer talked about the sentence. Answer with the rewritten sentence only.",
    "special-token": "Answer with plain text only.",
    "truncated": "Your previous answer was cut off. Write one complete, shorter sentence.",
    "too-short": "Your previous answer was too short. Keep the whole sentence and add a short detail.",
    "too-long": "Your previous answer was too long. Add only one short detail.",
    "meaning": "Your previous answer changed the meaning. Keep what the sentence says.",
}


def get_prompt(version: str, attribute: str = "gender", task: str = "rephrase") -> PromptSpec:
    """The prompt of ``version``: the augment prompt for ``attribute`` (``task`` rephrase), or the neutral
    rewrite's (``task`` neutral: versions of :data:`NEUTRAL_PROMPTS`)."""
    table = NEUTRAL_PROMPTS if task == "neutral" else ATTRIBUTE_PROMPTS.get(attribute, PROMPTS)
    key = "neutral.prompt_version" if task == "neutral" else "augment.prompt_version"
    try:
        return table[version]
    except KeyError:
        raise ConfigError(f"{key}: unknown prompt version {version!r}; known: {', '.join(table)}.") from None


def build_messages(sentence: str, version: str = "v1", few_shot: bool = True,
                   feedback: str | None = None, attribute: str = "gender", task: str = "rephrase") -> Conversation:
    """The chat conversation asking for one contextual rephrasing of ``sentence`` (``task`` neutral: its
    gender-neutral rewrite), with the prompt for the run's ``attribute``.

    ``feedback`` (a retry's note on the previous answer) goes into the last user turn, right above the
    sentence's line, so the sentence stays the turn's last line.
    """
    spec = get_prompt(version, attribute, task)
    msgs: Conversation = [{"role": "system", "content": spec.system}]
    if few_shot:
        for src, out in spec.examples:
            msgs.append({"role": "user", "content": spec.instruction.format(sentence=src)})
            msgs.append({"role": "assistant", "content": out})
    last = spec.instruction.format(sentence=sentence.strip())
    if feedback:
        head, sep, tail = last.rpartition("\n")
        last = f"{head}\n{feedback.strip()}{sep}{tail}" if sep else f"{feedback.strip()}\n{last}"
    msgs.append({"role": "user", "content": last})
    return msgs


@lru_cache(maxsize=1)
def prompt_texts() -> tuple[str, ...]:
    """Every instruction text the augment prompts show the model (system prompts, instructions, retry feedback):
    what an output must not echo."""
    out: list[str] = []
    for spec in _all_specs():
        out += [spec.system, spec.instruction]
    out += list(FEEDBACK.values())
    return tuple(out)


def _all_specs() -> list[PromptSpec]:
    return [*(spec for table in ATTRIBUTE_PROMPTS.values() for spec in table.values()), *NEUTRAL_PROMPTS.values()]


@lru_cache(maxsize=1)
def prompt_examples() -> tuple[tuple[str, str], ...]:
    """Every worked example (sentence, answer) of every prompt version."""
    return tuple(dict.fromkeys(ex for spec in _all_specs() for ex in spec.examples))

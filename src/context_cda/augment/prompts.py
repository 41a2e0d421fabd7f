"""Versioned prompts for context augmentation.

A prompt version is frozen once released: changing its text changes every cache key and the ``prompt_version``
column, so edit by adding a new version. The conversation is system prompt, optional worked examples (as
user/assistant turns), then the instruction with the sentence on its last line. Backends apply the model's chat
template (``hf``/``vllm``) or the server's (``openai``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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

PROMPTS: dict[str, PromptSpec] = {
    "v1": PromptSpec("v1", _SYSTEM_V1, _INSTRUCTION_V1, _EXAMPLES_V1),
}


def get_prompt(version: str) -> PromptSpec:
    try:
        return PROMPTS[version]
    except KeyError:
        raise ConfigError(
            f"augment.prompt_version: unknown prompt version {version!r}; known: {', '.join(PROMPTS)}."
        ) from None


def build_messages(sentence: str, version: str = "v1", few_shot: bool = True) -> Conversation:
    """The chat conversation asking for one contextual rephrasing of ``sentence``."""
    spec = get_prompt(version)
    msgs: Conversation = [{"role": "system", "content": spec.system}]
    if few_shot:
        for src, out in spec.examples:
            msgs.append({"role": "user", "content": spec.instruction.format(sentence=src)})
            msgs.append({"role": "assistant", "content": out})
    msgs.append({"role": "user", "content": spec.instruction.format(sentence=sentence.strip())})
    return msgs

"""The automatic session wrap: ``prepare_wrap`` -> the configured LLM -> ``save_continuity``.

The LLM only writes the text the agent would have written; the save goes through the same
immune system as any other (consolidation/validator.py), and its ``SaveResult`` is returned
unchanged. A continuity the immune system refuses (``ContinuityInvalid``, ``ShrinkRefused``) is
an invalid LLM answer: the step is skipped with the reason, the refusal is audited
(``wrap.refused``) and the wrap stays open for the next try, as after any refused save. An LLM
failure leaves the wrap open too: the next ``prepare_wrap`` hands the same one back.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from mempager.consolidation.report import SaveResult
from mempager.consolidation.steps import LLMProvider, StepLock, run_step
from mempager.consolidation.wrap import Consolidator
from mempager.errors import ContinuityInvalid, LLMReplyInvalid, ShrinkRefused

log = logging.getLogger("mempager.consolidation")
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*)\n\s*```\s*$", re.DOTALL)
SYSTEM = (
    "You are the agent whose session is ending. Follow the instructions in the package exactly and answer "
    "with the new continuity document only (markdown, its sections in order), nothing before or after it."
)


@dataclass(frozen=True, slots=True)
class AutoWrapResult:
    skipped: str | None  # why nothing was saved (empty wrap, LLM failure, refusal, lock); None when saved
    wrap: int = 0  # the wrap's number (0: none was open)
    save: SaveResult | None = None  # the immune system's verdicts, unchanged
    refused: bool = False  # the immune system refused the LLM's continuity (the wrap stays open)

    def to_dict(self) -> dict[str, Any]:
        return {
            "skipped": self.skipped,
            "wrap": self.wrap,
            "refused": self.refused,
            "save": None if self.save is None else self.save.to_dict(),
        }


class AutoWrapper:
    def __init__(self, consolidation: Consolidator, *, llm: LLMProvider, lock: StepLock) -> None:
        self.consolidation = consolidation
        self.llm = llm
        self.lock = lock

    def auto_wrap(
        self, *, session_id: str | None = None, affect: object = None, allow_shrink: object = False
    ) -> AutoWrapResult:
        return run_step("wrap auto", self.lock, lambda: self._run(session_id, affect, allow_shrink), AutoWrapResult)

    def _run(self, session_id: str | None, affect: object, allow_shrink: object) -> AutoWrapResult:
        wrap = self.consolidation.prepare_wrap(session_id=session_id)
        if wrap.status == "empty":
            return AutoWrapResult("nothing written since the last wrap: no wrap needed")
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": wrap.package}]
        text = self.llm().complete(messages)
        fenced = _FENCE.match(text)
        text = fenced.group(1) if fenced else text
        if not text.strip():
            raise LLMReplyInvalid("the LLM's continuity was empty")
        try:
            saved = self.consolidation.save_continuity(
                text, affect=affect, allow_shrink=allow_shrink, session_id=session_id
            )
        except (ContinuityInvalid, ShrinkRefused) as exc:  # the immune system's verdict on the LLM's text
            log.warning(
                "wrap auto: the immune system refused the LLM's continuity (wrap %d stays open): %s", wrap.number, exc
            )
            return AutoWrapResult(f"refused by the immune system: {exc}", wrap.number, None, refused=True)
        return AutoWrapResult(None, wrap.number, saved)

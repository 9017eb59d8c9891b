"""``mempager ui``: a local web inspector. See what the agent will see, and why.

A small server-rendered Starlette + Jinja2 app (htmx, vendored, for the live parts; no build
step) over the public ``Pager`` API: memories, the page simulator, procedures and the review
queue, continuity and the association graph, the audit chain. ``app`` builds it, ``security``
guards it, ``serving`` runs it on 127.0.0.1.
"""

from __future__ import annotations

from mempager.ui.app import create_app
from mempager.ui.pagers import Pagers
from mempager.ui.security import UiSettings

__all__ = ["Pagers", "UiSettings", "create_app"]

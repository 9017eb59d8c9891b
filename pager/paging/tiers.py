"""``Tiers``: the crystallized tier and spores as one collaborator of the ``Pager``.

It holds ``Crystals`` (consolidation/crystal.py) and ``Spores`` (paging/spores.py) and does what
touches both or the rest of the pager: accepting a ``crystal`` review item before the review
queue's own kinds, and forgetting a ``crystal://`` / ``spore://`` uri (or all of an actor's
crystals and spores, with a forget of all its memories).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mempager.consolidation.crystal import CrystalHit, Crystals
from mempager.errors import InvalidInput, MemoryNotFound
from mempager.paging.spores import Spores
from mempager.procedural.review import ReviewQueue
from mempager.protocols import Store

SCHEMES = ("crystal://", "spore://")


class Tiers:
    def __init__(
        self,
        store: Store,
        actor: str,
        *,
        crystals: Crystals,
        spores: Spores,
        review: ReviewQueue,
        matched: Callable[[str], Sequence[int]],
        erase_now: Callable[[], None],
    ) -> None:
        self.store = store
        self.actor = actor
        self.crystals = crystals
        self.spores = spores
        self.review = review
        self.matched = matched  # labels of the memories a query retrieves (the evidence-edge cue)
        self.erase_now = erase_now

    def recall(self, query: str, k: int = 3) -> list[CrystalHit]:
        """Crystals ``query`` cues: by their words, or an evidence edge to a memory the query retrieves."""
        return self.crystals.recall(query, k, self.matched(query))

    def decide(self, review_id: str, accept: bool) -> str | None:
        """``ReviewQueue.decide``, with accepted ``crystal`` proposals written to the tier."""
        if accept:
            item = self.store.review_get(self.actor, review_id)
            if item.kind == "crystal":
                if item.status != "pending":
                    raise InvalidInput(f"review item {review_id!r} was already {item.status}")
                return self.crystals.accept(review_id, item.payload)
        return self.review.decide(review_id, accept)

    def forget(self, uri: str, *, wait: bool = False) -> int:
        """Forget the crystal or spore at ``uri`` (another actor's uri is ``MemoryNotFound``); with
        ``wait``, its bytes are erased from the files before this returns."""
        scheme, _, rest = uri.partition("://")
        actor, _, item = rest.rpartition("/")
        if actor != self.actor or not item:
            raise MemoryNotFound(f"no {scheme} {uri!r} for actor {self.actor!r}")
        if scheme == "crystal":
            gone = len(self.crystals.forget(item))
        else:
            self.spores.drop(item)
            gone = 1
        if wait:
            self.erase_now()
        return gone

    def forget_all(self, *, wait: bool = False) -> int:
        """Every crystal and spore of the actor (a forget of all its memories takes these too)."""
        if not self.crystals.all() and not self.spores.find("all"):
            return 0
        gone = len(self.crystals.forget(None)) + len(self.spores.delete(None))
        if wait:
            self.erase_now()
        return gone

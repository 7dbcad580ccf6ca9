"""bench/kopf's peer: a kopf operator with a no-op ConfigMap handler, in one process.

    WQS_BENCH_STAMPS=FILE WQS_BENCH_KOPF_HANDLERS=cause|event \\
        kopf run --standalone --namespace NS --quiet kopf_noop.py

The handler records the call (stamps.py, as the sidecar's worker does) and
returns. Which handler (bench/kopf's header says why each):

  cause  @kopf.on.resume + @kopf.on.create + @kopf.on.update on one function:
         kopf's state-changing handlers, stacked as kopf's docs show for "no
         object left unattended"; kopf retries them and stores their state on
         the object (an annotation patched after the handler: an API write per
         object, and the watch event that write causes)
  event  @kopf.on.event: called for every watch event, no state stored, no
         retries (an error is logged and dropped)

Settings (on.startup below): posting off (no Kubernetes Events), peering off
(standalone); everything else kopf's defaults. `--quiet` keeps kopf's log at
WARNING, so it does not print a line per handled object (the worker prints
nothing either).
"""

from __future__ import annotations

import os
from typing import Any

import kopf

from stamps import Stamps

STAMPS = Stamps(os.environ["WQS_BENCH_STAMPS"])
HANDLERS = os.environ.get("WQS_BENCH_KOPF_HANDLERS", "cause")


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.enabled = False
    settings.peering.standalone = True


if HANDLERS == "cause":

    @kopf.on.resume("v1", "configmaps")
    @kopf.on.create("v1", "configmaps")
    @kopf.on.update("v1", "configmaps")
    async def reconcile(name: str, **_: Any) -> None:
        STAMPS.reconciled(name)

elif HANDLERS == "event":

    @kopf.on.event("v1", "configmaps")
    async def reconcile_event(name: str, **_: Any) -> None:
        STAMPS.reconciled(name)

else:
    raise SystemExit(f"WQS_BENCH_KOPF_HANDLERS must be cause or event, not {HANDLERS!r}")

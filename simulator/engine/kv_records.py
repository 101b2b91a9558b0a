"""What the KV hand-overs of a disaggregated run did (see :mod:`simulator.engine.kv_transfer`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransferRecord:
    """One KV transfer, for the run's outputs.

    Attributes:
        request_id: The request whose KV moved.
        prefill_replica: Where it was prefilled.
        decode_replica: Where it decodes.
        nbytes: Bytes sent.
        wait_s: Time it waited on its prefill replica for a decode replica.
        transfer_s: From the start of the transfer to the arrival of its last byte.
    """

    request_id: int
    prefill_replica: int
    decode_replica: int
    nbytes: float
    wait_s: float
    transfer_s: float


@dataclass(frozen=True)
class DisaggregationOutput:
    """What the KV hand-overs of a disaggregated run did (in the engine's output).

    Attributes:
        transfers: Every transfer, in the order they started.
        replica_roles: Each target replica's role (``prefill``, ``decode``), by index.
        waiting_at_end: Requests still waiting for a decode replica when the run ended.
    """

    transfers: tuple[TransferRecord, ...]
    replica_roles: tuple[str, ...]
    waiting_at_end: int

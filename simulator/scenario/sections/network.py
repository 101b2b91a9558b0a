"""``network``: the links between device classes, jitter and payload sizes.

Checks each link joins two declared classes of different types once (or a
prefill and a decode target class), and that every client class is linked
to a target pool.
"""

from __future__ import annotations

from collections.abc import Mapping

from simulator.scenario.model import DeviceClass, JitterSpec, Link, NetworkSpec, PayloadSpec
from simulator.scenario.sections.context import BuildContext


def target_roles(doc: Mapping[str, object]) -> dict[str, str]:
    """The role of every target class of a scenario document, by id."""
    entries = doc["hardware_profiles"]
    assert isinstance(entries, list)
    return {e["id"]: e["role"] for e in entries if e["type"] == "target"}


def joins_prefill_and_decode(roles: Mapping[str, str], a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are a prefill and a decode target class (a KV link may join them)."""
    return {roles.get(a), roles.get(b)} == {"prefill", "decode"}


def build_network(ctx: BuildContext, device_ids: Mapping[str, str]) -> NetworkSpec:
    """Build the links (between declared, different device classes), jitter and payload sizes.

    Two target classes may be linked only when one is a prefill and the
    other a decode class (the link carries KV between them).
    """
    net = ctx.doc["network"]
    roles = target_roles(ctx.doc)
    links: list[Link] = []
    seen: set[frozenset[str]] = set()
    for index, raw in enumerate(net["links"]):
        key = f"network.links[{index}]"
        for end in ("src", "dst"):
            if raw[end] not in device_ids:
                ctx.issue(
                    f"{key}.{end}",
                    raw[end],
                    "a hardware_profiles id: " + ", ".join(device_ids),
                    "unknown device",
                )
        pair = frozenset((raw["src"], raw["dst"]))
        src_type, dst_type = device_ids.get(raw["src"]), device_ids.get(raw["dst"])
        if raw["src"] == raw["dst"]:
            ctx.issue(f"{key}.dst", raw["dst"], "a different device than src", "link to itself")
        elif (
            src_type is not None
            and src_type == dst_type
            and not joins_prefill_and_decode(roles, raw["src"], raw["dst"])
        ):
            other = "target" if src_type == "draft" else "draft"
            ctx.issue(
                f"{key}.dst",
                raw["dst"],
                f"a {other} class: a link joins client devices (draft) to a target pool"
                + (", or a prefill class to a decode class" if src_type == "target" else ""),
                f"link between two {src_type} classes ({raw['src']} and {raw['dst']}): "
                "no work moves between them in this version",
            )
        elif pair in seen:
            ctx.issue(key, f"{raw['src']} <-> {raw['dst']}", "one link per pair", "duplicate link")
        seen.add(pair)
        links.append(
            Link(
                raw["src"],
                raw["dst"],
                float(raw["rtt_ms"]),
                float(raw["bw_mbps"]),
                float(raw["loss_pct"]),
            )
        )
    jitter = net["jitter"]
    payload = net["payload"]
    return NetworkSpec(
        links=tuple(links),
        jitter=JitterSpec(
            bool(jitter["enabled"]),
            float(jitter["rtt_sigma_ms"]),
            float(jitter["bw_sigma_pct"]),
        ),
        payload=PayloadSpec(
            float(payload["bytes_per_prompt_token"]),
            float(payload["bytes_per_draft_token"]),
            float(payload["bytes_per_result_token"]),
        ),
    )


def check_client_links(ctx: BuildContext, classes: list[DeviceClass], network: NetworkSpec) -> None:
    """Refuse a client class with no link to any target pool."""
    targets = [d.id for d in classes if d.type == "target"]
    for index, entry in enumerate(ctx.doc["hardware_profiles"]):
        if entry["type"] != "draft" or not targets:
            continue
        if not any(network.link_between(entry["id"], t) for t in targets):
            ctx.issue(
                f"hardware_profiles[{index}].id",
                entry["id"],
                "a network.links entry joining it to a target: " + ", ".join(targets),
                "client device class has no link to any target",
            )

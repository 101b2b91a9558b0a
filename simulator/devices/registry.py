"""A registry of loaded device profiles, looked up by profile id."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from simulator.devices.load import load_device_profile
from simulator.devices.model import DeviceProfile
from simulator.errors import InputError, Issue, make_issue
from simulator.suggest import did_you_mean

PROFILE_SUFFIXES = (".yaml", ".yml", ".json")
"""File extensions :meth:`DeviceRegistry.from_directory` loads."""


class UnknownDeviceError(LookupError):
    """A profile id that the registry does not hold.

    Attributes:
        device_id: The id asked for.
        known: The ids the registry holds, sorted.
    """

    def __init__(self, device_id: str, known: Iterable[str]) -> None:
        self.device_id = device_id
        self.known: tuple[str, ...] = tuple(sorted(known))
        hint = did_you_mean(device_id, self.known, prefix=" (")
        listing = ", ".join(self.known) if self.known else "(none loaded)"
        super().__init__(f"unknown device profile {device_id!r}; known ids: {listing}{hint}")

    def __str__(self) -> str:
        return str(self.args[0])


class DeviceRegistry:
    """Device profiles by id.

    Args:
        profiles: The profiles; ids must be unique.

    Raises:
        ValueError: Two profiles share an id (use :meth:`from_files` for
            user-supplied files, which reports this as an input error).
    """

    def __init__(self, profiles: Iterable[DeviceProfile]) -> None:
        self._profiles: dict[str, DeviceProfile] = {}
        for profile in profiles:
            if profile.id in self._profiles:
                raise ValueError(f"duplicate device profile id {profile.id!r}")
            self._profiles[profile.id] = profile

    @classmethod
    def from_files(cls, paths: Iterable[Path]) -> DeviceRegistry:
        """Load every file in ``paths`` into a registry.

        Raises:
            InputError: With every problem of every file, and any id used twice.
        """
        profiles: list[DeviceProfile] = []
        issues: list[Issue] = []
        first_file: dict[str, str] = {}
        for path in paths:
            try:
                profile = load_device_profile(path)
            except InputError as error:
                issues.extend(error.issues)
                continue
            if profile.id in first_file:
                issues.append(
                    make_issue(
                        path,
                        "id",
                        profile.id,
                        "an id no other loaded profile uses",
                        f"id already used by {first_file[profile.id]}",
                    )
                )
                continue
            first_file[profile.id] = str(path)
            profiles.append(profile)
        if issues:
            raise InputError(issues)
        return cls(profiles)

    @classmethod
    def from_directory(cls, directory: Path) -> DeviceRegistry:
        """Load every profile file (``.yaml``, ``.yml``, ``.json``) directly inside ``directory``.

        Files whose name ends in ``.schema.json`` are skipped.

        Raises:
            InputError: The directory is missing, or any file has problems.
        """
        directory = Path(directory)
        if not directory.is_dir():
            raise InputError(
                [
                    make_issue(
                        directory,
                        "",
                        str(directory),
                        "an existing directory of device profiles",
                        "not found",
                    )
                ]
            )
        paths = sorted(
            p
            for p in directory.iterdir()
            if p.is_file()
            and p.suffix.lower() in PROFILE_SUFFIXES
            and not p.name.endswith(".schema.json")
        )
        return cls.from_files(paths)

    def get(self, device_id: str) -> DeviceProfile:
        """Return the profile ``device_id``.

        Raises:
            UnknownDeviceError: No such id; the message lists the known ids.
        """
        try:
            return self._profiles[device_id]
        except KeyError:
            raise UnknownDeviceError(device_id, self._profiles) from None

    @property
    def ids(self) -> tuple[str, ...]:
        """The profile ids, in insertion order."""
        return tuple(self._profiles)

    def drafts(self) -> tuple[DeviceProfile, ...]:
        """The profiles of role ``draft``."""
        return tuple(p for p in self._profiles.values() if p.is_draft)

    def targets(self) -> tuple[DeviceProfile, ...]:
        """The profiles of role ``target``."""
        return tuple(p for p in self._profiles.values() if p.is_target)

    def with_hardware(self, hardware: str) -> tuple[DeviceProfile, ...]:
        """The profiles whose LUT ``hardware`` id is ``hardware``."""
        return tuple(p for p in self._profiles.values() if p.hardware == hardware)

    def __contains__(self, device_id: object) -> bool:
        return device_id in self._profiles

    def __iter__(self) -> Iterator[DeviceProfile]:
        return iter(self._profiles.values())

    def __len__(self) -> int:
        return len(self._profiles)
